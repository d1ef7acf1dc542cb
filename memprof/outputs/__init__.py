"""Reports for people and for machines. A report's document (:mod:`memprof.outputs.build`: the
sections its kind declares, :mod:`memprof.outputs.kinds`) is rendered by each format's module:
:mod:`.terminal`, :mod:`.markdown`, :mod:`.html`, :mod:`.notebook`; JSON and the CSVs write the
data. Every format is a :class:`Renderer` in one table (:data:`RENDERERS`, through
:func:`renderer`); no numbers are computed here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from memprof.analysis.gate import GateResult
    from memprof.model.report import Report

# The file names of every format when a folder is given for all of them.
STANDARD_NAMES = {
    "json": "memprof.json",
    "csv": "memprof-ops.csv",
    "at_peak_csv": "memprof-at-peak.csv",
    "markdown": "memprof.md",
    "html": "memprof.html",
}

SWEEP_CSV_NAME = "memprof-sweep.csv"
"""The sweep's CSV in a folder given for every format (an estimate's sweep)."""


def render_torch_tables(report: Report) -> str:
    """torch.profiler's own printed table of each run that kept one, each under a line naming
    the run and the target."""
    return "\n".join(
        f"memprof run {label}: {report.target}\n{run.torch_table}"
        for label, run in report.runs.items()
        if run.torch_table
    )


@dataclass(frozen=True)
class RenderOptions:
    """What a format may be told besides the report: ``rank``, which rank of a report of several
    ranks to detail (default: the highest peak's); ``gate``, the memory gate's result (Markdown
    shows it first); ``exact_csv``, CSV text exactly as it is, even a cell a spreadsheet would
    evaluate as a formula (by default it gets a leading ``'``); ``width``, the terminal's
    (default :data:`memprof.outputs.layout.DEFAULT_WIDTH`); ``full``, the terminal's whole
    report, else its short one."""

    rank: int | None = None
    gate: GateResult | None = None
    exact_csv: bool = False
    width: int | None = None
    full: bool = True


class Renderer(Protocol):
    """A format: the report as text (every format draws the report's one document, or writes
    its data)."""

    def __call__(self, report: Report, options: RenderOptions, /) -> str: ...


def _json(report: Report, options: RenderOptions) -> str:
    return report.to_json()


def _csv(report: Report, options: RenderOptions) -> str:
    from memprof.outputs.csv import render_csv

    return render_csv(report, exact=options.exact_csv)


def _at_peak_csv(report: Report, options: RenderOptions) -> str:
    from memprof.outputs.csv import render_at_peak_csv

    return render_at_peak_csv(report, exact=options.exact_csv)


def _sweep_csv(report: Report, options: RenderOptions) -> str:
    from memprof.outputs.csv import render_sweep_csv

    return render_sweep_csv(report, exact=options.exact_csv)


def _markdown(report: Report, options: RenderOptions) -> str:
    from memprof.outputs.markdown import render_markdown

    return render_markdown(report, rank=options.rank, gate=options.gate)


def _html(report: Report, options: RenderOptions) -> str:
    from memprof.outputs.html import render_html

    return render_html(report, rank=options.rank)


def _notebook(report: Report, options: RenderOptions) -> str:
    from memprof.outputs.notebook import notebook_html

    return notebook_html(report)


def _terminal(report: Report, options: RenderOptions) -> str:
    from memprof.outputs.terminal import render_terminal

    return render_terminal(report, rank=options.rank, width=options.width, full=options.full)


RENDERERS: dict[str, Renderer] = {
    "json": _json,
    "csv": _csv,
    "at_peak_csv": _at_peak_csv,
    "sweep_csv": _sweep_csv,
    "markdown": _markdown,
    "html": _html,
    "notebook": _notebook,
    "terminal": _terminal,
    "table": lambda report, options: render_torch_tables(report),
}
"""Every format, by name: json, csv (per op), at_peak_csv (what is live at each peak),
sweep_csv (an estimate's sweep), markdown, html, notebook (an HTML fragment), terminal (plain
text), table (torch's own tables). Each imports its module when it renders."""


def renderer(
    fmt: str,
    *,
    rank: int | None = None,
    gate: GateResult | None = None,
    exact_csv: bool = False,
    width: int | None = None,
    full: bool = True,
) -> Callable[[Report], str]:
    """The render function of a format of :data:`RENDERERS`, with its options (see
    :class:`RenderOptions`)."""
    render = RENDERERS.get(fmt)
    if render is None:
        raise ValueError(f"unknown format {fmt!r}")
    options = RenderOptions(rank=rank, gate=gate, exact_csv=exact_csv, width=width, full=full)
    return lambda report: render(report, options)
