"""Two saved reports compared, the Python API's door to it: :func:`diff` says why the peak moved
between a run of one report and a run of another. ``memprof diff`` calls :func:`diffed`, which
also says which runs it chose and sets up the gate of ``--tolerance``."""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memprof.core.errors import InputError, UsageError, brief, param

if TYPE_CHECKING:
    from memprof.analysis.gate import GateConfig
    from memprof.model.report import Report
    from memprof.model.run import RunResult


@dataclass(frozen=True)
class Diffed:
    """Two saved reports compared: what ``memprof diff`` shows, says and gates."""

    report: Report
    """One report of the two runs, the first the base (``report.diff``: what changed)."""
    chosen: str | None
    """Which runs were compared, when a report had several and none was named; else None."""
    warning: str | None
    """Why the comparison may mislead (the runs ran on different devices); else None."""
    gate: GateConfig
    """With a tolerance, the second run checked against the first as its baseline; else inactive."""
    gated: Report | None
    """What the gate checks: the second run alone (None without a tolerance)."""


def diff(
    base: str | os.PathLike[str],
    other: str | os.PathLike[str],
    *,
    base_run: str | None = None,
    other_run: str | None = None,
) -> Report:
    """Why the peak moved: a run of the saved report ``base`` compared with a run of ``other``
    (files memprof wrote with ``--json``, or :meth:`memprof.Report.to_json`), into one
    :class:`memprof.Report` of the two runs, the same report ``memprof diff`` prints and writes.

    ``report.diff`` holds the verdict, the ops side by side and, of two explained runs, what is
    live at each peak (``report.diff.at_peak``). Reports of any source compare (runs, traces,
    snapshots, estimates). A report with several runs: the run named by ``base_run`` /
    ``other_run``, else the run of the same label as the other's, else the first label both
    have. Runs of one label are named after their files (``base``, ``grown``). Runs on different
    devices are compared with a warning (:class:`UserWarning`). A missing run, a failed one or a
    file that is not a report raises :class:`memprof.core.errors.MemprofError`.

    >>> import memprof
    >>> report = memprof.diff("base.json", "grown.json")  # doctest: +SKIP
    >>> report.diff.verdict  # doctest: +SKIP
    """
    compared = diffed(base, other, base_run=base_run, other_run=other_run)
    if compared.warning is not None:
        warnings.warn(compared.warning, UserWarning, stacklevel=2)
    return compared.report


def diffed(
    base: str | os.PathLike[str],
    other: str | os.PathLike[str],
    *,
    base_run: str | None = None,
    other_run: str | None = None,
    tolerance: str | None = None,
) -> Diffed:
    """:func:`diff`, with what a front end says and gates: which runs were chosen, the
    warning, and with ``tolerance`` (``"5%"``) the gate that fails when the second run's peak
    exceeds the first's by more than it. Bad arguments raise before any report is read."""
    from memprof.analysis.gate import GateConfig
    from memprof.core.units import parse_percent
    from memprof.pipeline import load_report

    try:
        fraction = parse_percent(tolerance) if tolerance is not None else None
    except UsageError as error:
        raise UsageError(f"{param('tolerance')}: {error.message}") from None
    paths = (Path(base), Path(other))
    base_report, other_report = load_report(paths[0]), load_report(paths[1])
    first, second, chosen = pick_runs(base_report, other_report, base_run, other_run)
    report, warning = paired(base_report, first, other_report, second, paths)
    if fraction is None:
        return Diffed(report=report, chosen=chosen, warning=warning, gate=GateConfig(), gated=None)
    # The gate compares the second run with the first as with a baseline of the same label.
    label = list(report.runs)[1]
    config = GateConfig(baseline=_alone(base_report, first, label), tolerance=fraction)
    return Diffed(
        report=report, chosen=chosen, warning=warning, gate=config, gated=_alone(other_report, second, label)
    )


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


def _chosen(report: Report, label: str | None, name: str, which: str) -> RunResult:
    if label not in report.runs:
        raise UsageError(
            f"{param(name)} {brief(label)}: the {which} report has no such run; "
            f"its runs are {_listed(report)}"
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
    for label, report, name, which in (
        (base_label, base, "base_run", "first"),
        (other_label, other, "other_run", "second"),
    ):
        if label is None:
            raise UsageError(
                f"the {which} report has {len(report.runs)} runs ({_listed(report)}) and none matches a "
                f"run of the other; choose one with {param(name, 'LABEL')}"
            )
    a = _chosen(base, base_label, "base_run", "first")
    b = _chosen(other, other_label, "other_run", "second")
    for run, which in ((a, "first"), (b, "second")):
        if run.failed:
            raise InputError(
                f"the {which} report's run {brief(run.label)} failed ({brief(run.failed)}): it has no "
                "memory to compare; choose another run"
            )
    if not guessed:
        return a, b, None
    return (
        a,
        b,
        f"comparing run {brief(a.label)} of the first report with run {brief(b.label)} of the second; "
        f"{param('base_run')} and {param('other_run')} choose others",
    )


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
        warning = f"the runs ran on different devices ({shown}); compared anyway"
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
