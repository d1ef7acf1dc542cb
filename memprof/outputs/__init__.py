"""Reports for people and for machines. A report's document (:mod:`memprof.outputs.build`: its
sections of blocks, in one order, by :attr:`memprof.model.Report.kind`) is rendered by each
format's module: :mod:`.terminal`, :mod:`.markdown`, :mod:`.html`; JSON and the CSVs write the
data. Each renderer is ``render(report, ...) -> str``; no numbers are computed here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

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


def renderer(
    fmt: str, *, rank: int | None = None, gate: GateResult | None = None, exact_csv: bool = False
) -> Callable[[Report], str]:
    """The render function of a format: json, csv (per op), at_peak_csv (what is live at each
    peak), markdown, html, table (torch's tables).
    ``rank``: which rank of a report of several ranks Markdown and HTML detail (default: the
    highest peak's); ``gate``: the memory gate's result, which Markdown shows first;
    ``exact_csv``: CSV text exactly as it is, even a cell a spreadsheet would evaluate as a
    formula (by default it gets a leading ``'``)."""
    if fmt == "json":
        return lambda report: report.to_json()
    if fmt == "table":
        return render_torch_tables
    if fmt == "csv":
        from memprof.outputs.csv import render_csv

        return lambda report: render_csv(report, exact=exact_csv)
    if fmt == "at_peak_csv":
        from memprof.outputs.csv import render_at_peak_csv

        return lambda report: render_at_peak_csv(report, exact=exact_csv)
    if fmt == "sweep_csv":
        from memprof.outputs.csv import render_sweep_csv

        return lambda report: render_sweep_csv(report, exact=exact_csv)
    if fmt == "markdown":
        from memprof.outputs.markdown import render_markdown

        return lambda report: render_markdown(report, rank=rank, gate=gate)
    if fmt == "html":
        from memprof.outputs.html import render_html

        return lambda report: render_html(report, rank=rank)
    raise ValueError(f"unknown format {fmt!r}")
