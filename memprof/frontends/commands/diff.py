"""``memprof diff``: why the peak moved between two saved reports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from memprof.frontends.commands import Command
from memprof.frontends.commands.options import (
    Full,
    HtmlPath,
    JsonPath,
    MarkdownPath,
    OpChains,
    OptionGroup,
    Quiet,
    SortOption,
    Top,
)
from memprof.frontends.commands.options import Sort as SortChoice

BaseReport = Annotated[
    Path,
    typer.Argument(
        metavar="BASE.json",
        help="The first report, the base: any report memprof wrote with --json (run, compare, analyze, "
        "estimate, diff).",
        dir_okay=False,
    ),
]
OtherReport = Annotated[
    Path,
    typer.Argument(metavar="OTHER.json", help="The second report, compared with the first.", dir_okay=False),
]


BaseRun = Annotated[
    str | None,
    typer.Option(
        "--base-run", metavar="LABEL", help="The run of the first report to compare (when it has several)."
    ),
]
OtherRun = Annotated[
    str | None,
    typer.Option("--other-run", metavar="LABEL", help="The run of the second report (when it has several)."),
]
DiffTolerance = Annotated[
    str | None,
    typer.Option(
        "--tolerance",
        help="A gate: exit 1 when the second run's peak exceeds the first's by more than this "
        "(e.g. 5%), explaining what grew.",
    ),
]


@dataclass(frozen=True)
class DiffOutputs(OptionGroup):
    """Where the diff goes (files by format), and how the terminal shows it."""

    json_path: JsonPath = None
    markdown_path: MarkdownPath = None
    html_path: HtmlPath = None
    sort: SortOption = SortChoice.peak
    top: Top = None
    full: Full = False
    op_chains: OpChains = False
    quiet: Quiet = False

    def files(self, reads: list[tuple[str, Path]]) -> dict[str, Path]:
        """Each file to write by format, checked (none of them one of the reports read) and
        made absolute, before anything is read."""
        from memprof.core.writing import absolute, check_output_paths

        files = {"json": self.json_path, "markdown": self.markdown_path, "html": self.html_path}
        check_output_paths(((f"--{fmt}", path) for fmt, path in files.items()), reads)
        return {fmt: absolute(path) for fmt, path in files.items() if path is not None}


def diff(
    base_path: BaseReport,
    other_path: OtherReport,
    *,
    base_run: BaseRun = None,
    other_run: OtherRun = None,
    tolerance: DiffTolerance = None,
    output: DiffOutputs,
) -> None:
    """Why the peak moved: compare a run of one saved report with a run of another.

    Prints both runs, their ops side by side (wrappers folded into the op inside them) and what
    changed at the peak: what is live at each peak by module and phase, line, op and category,
    each table adding up to the difference of the footprints, and a sentence naming what explains
    most of it. Reports of any source compare (runs, traces, snapshots, estimates); what is live
    at the peak needs two explained runs. A report with several runs: the run of the same label
    as the other's, or --base-run / --other-run.

    Exit 0; with --tolerance, 1 when the second peak grew beyond it (the gate's lines say what
    grew); 2 for a bad option or report.

    Example: memprof diff base.json grown.json --tolerance 5%

    Example: memprof diff report.json report.json --base-run eager --other-run compile
    """
    from memprof.frontends.commands.common import err, write_and_gate
    from memprof.library.diffing import diffed
    from memprof.outputs.terminal import diff_lines, print_lines, terminal_width

    files = output.files([("the first report", base_path), ("the second report", other_path)])
    compared = diffed(base_path, other_path, base_run=base_run, other_run=other_run, tolerance=tolerance)
    for line in (compared.chosen, compared.warning and f"warning: {compared.warning}"):
        if line and not output.quiet:
            err(f"memprof: {line}")
    report = compared.report
    lines = diff_lines(
        report,
        sort=output.sort.value,
        top=output.top,
        width=terminal_width(),
        chains=output.op_chains,
        full=output.full,
    )
    show = lambda: print_lines(lines)  # noqa: E731 - the terminal report, after the files
    write_and_gate(report, files, compared.gate, gated=compared.gated, quiet=output.quiet, show=show)


COMMAND = Command(diff, place=70)
