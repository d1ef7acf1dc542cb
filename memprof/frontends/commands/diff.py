"""``memprof diff``: why the peak moved between two saved reports."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memprof.core.errors import InputError, UsageError, brief
from memprof.frontends.commands.options import (
    REPORTS_PANEL,
    Full,
    HtmlPath,
    JsonPath,
    MarkdownPath,
    OpChains,
    OptionGroup,
    SortOption,
    Top,
)
from memprof.frontends.commands.options import Sort as SortChoice

if TYPE_CHECKING:
    from memprof.model.report import Report
    from memprof.model.run import RunResult

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
Quiet = Annotated[
    bool, typer.Option("-q", "--quiet", help="No status lines on stderr.", rich_help_panel=REPORTS_PANEL)
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
        from memprof.core.fileio import absolute, check_output_paths

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
    from memprof.analysis.gate import GateConfig
    from memprof.core.units import parse_percent
    from memprof.frontends.commands.common import err, write_and_gate
    from memprof.outputs.terminal import diff_lines, print_lines, terminal_width
    from memprof.pipeline import load_report

    files = output.files([("the first report", base_path), ("the second report", other_path)])
    try:
        fraction = parse_percent(tolerance) if tolerance is not None else None
    except UsageError as error:
        raise UsageError(f"--tolerance: {error.message}") from None
    base_report, other_report = load_report(base_path), load_report(other_path)
    base, other, chosen = pick_runs(base_report, other_report, base_run, other_run)
    report, warning = paired(base_report, base, other_report, other, (base_path, other_path))
    for line in (
        f"comparing {chosen}; --base-run and --other-run choose others" if chosen else None,
        warning,
    ):
        if line and not output.quiet:
            err(f"memprof: {line}")
    width = terminal_width()
    lines = diff_lines(
        report, sort=output.sort.value, top=output.top, width=width, chains=output.op_chains, full=output.full
    )
    if fraction is None:
        write_and_gate(report, files, GateConfig(), quiet=output.quiet, show=lambda: print_lines(lines))
        return
    # The gate compares the second run with the first as with a baseline of the same label.
    label = list(report.runs)[1]
    config = GateConfig(baseline=_alone(base_report, base, label), tolerance=fraction)
    gated = _alone(other_report, other, label)
    write_and_gate(report, files, config, gated=gated, quiet=output.quiet, show=lambda: print_lines(lines))


def _alone(source: Report, run: RunResult, label: str) -> Report:
    """A report of ``run`` alone, labelled ``label``, on its report's device and environment."""
    from memprof.pipeline import build_report

    return build_report(
        target=source.target,
        device=source.device,
        environment=source.environment,
        runs={label: dataclasses.replace(run, label=label)},
    )


def _listed(report: Report) -> str:
    shown = ", ".join(brief(label) for label in list(report.runs)[:10])
    return shown + (f" (and {len(report.runs) - 10} more)" if len(report.runs) > 10 else "")


def _chosen(report: Report, label: str | None, flag: str, which: str) -> RunResult:
    if label not in report.runs:
        raise UsageError(
            f"{flag} {brief(label)}: the {which} report has no such run; its runs are {_listed(report)}"
        )
    return report.runs[label]


def pick_runs(
    base: Report, other: Report, base_label: str | None, other_label: str | None
) -> tuple[RunResult, RunResult, str | None]:
    """The run of each report to compare: the one named, the only one, else the run with the
    label chosen on the other side, else the first label both reports have. The third value
    says which runs were chosen when a report had several and none was named."""
    if base_label is None and len(base.runs) == 1:
        base_label = next(iter(base.runs))
    if other_label is None and len(other.runs) == 1:
        other_label = next(iter(other.runs))
    guessed = base_label is None or other_label is None
    if base_label is None and other_label in base.runs:
        base_label = other_label
    if other_label is None and base_label in other.runs:
        other_label = base_label
    if base_label is None and other_label is None:
        base_label = other_label = next((label for label in base.runs if label in other.runs), None)
    for label, report, flag, which in (
        (base_label, base, "--base-run", "first"),
        (other_label, other, "--other-run", "second"),
    ):
        if label is None:
            raise UsageError(
                f"the {which} report has {len(report.runs)} runs ({_listed(report)}) and none matches a "
                "run of "
                f"the other; choose one with {flag} LABEL"
            )
    a = _chosen(base, base_label, "--base-run", "first")
    b = _chosen(other, other_label, "--other-run", "second")
    for run, which in ((a, "first"), (b, "second")):
        if run.failed:
            raise InputError(
                f"the {which} report's run {brief(run.label)} failed ({brief(run.failed)}): it has no "
                "memory to "
                "compare; choose another run"
            )
    chosen = (
        f"run {brief(a.label)} of the first report with run {brief(b.label)} of the second"
        if guessed
        else None
    )
    return a, b, chosen


def paired(
    base_report: Report, base: RunResult, other_report: Report, other: RunResult, paths: tuple[Path, Path]
) -> tuple[Report, str | None]:
    """One report of the two runs, the first the base, and a warning when they ran on different
    devices. Runs of one label are named after their files (``base``, ``grown``), or ``eager
    (first)`` and ``eager (second)`` when the files have one name."""
    from memprof.pipeline import build_report

    labels = (base.label, other.label)
    if labels[0] == labels[1]:
        stems = (paths[0].stem, paths[1].stem)
        labels = stems if stems[0] != stems[1] else (f"{labels[0]} (first)", f"{labels[1]} (second)")
    warning = None
    devices = (base.device or base_report.device, other.device or other_report.device)
    if devices[0] != devices[1]:
        shown = f"{brief(devices[0])} and {brief(devices[1])}"
        warning = f"warning: the runs ran on different devices ({shown}); compared anyway"
    # No rank, and one device, on both sides: a diff always compares the two runs it was given.
    runs = {
        label: dataclasses.replace(run, label=label, rank=None, device=None if warning else devices[0])
        for label, run in zip(labels, (base, other), strict=True)
    }
    targets = dict.fromkeys((base_report.target, other_report.target))
    report = build_report(
        target=" vs ".join(targets),
        device=other_report.device if not warning else f"{base_report.device} and {other_report.device}",
        environment=other_report.environment,
        runs=runs,
        diff_of=(paths[0].name, paths[1].name),
    )
    return report, warning
