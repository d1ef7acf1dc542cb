"""What every format says of an estimate (``memprof estimate``), decided once: the one-line
answer (how much, and whether it fits), the sweep's table and verdict, the measured workspaces,
and the notes (said once when every run of a sweep has them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memprof.model.run import amount
from memprof.units import format_bytes

if TYPE_CHECKING:
    from memprof.model import Fits, Report, RunResult
    from memprof.model.sweep import Sweep


def is_estimate(report: Report) -> bool:
    return report.source is not None and report.source.kind == "estimate"


def title(report: Report) -> str:
    """``estimate of pkg.mod:step on cuda (fake tensors; torch 2.13.0+cpu)``."""
    torch_version = report.environment.get("torch", "?")
    device = report.environment.get("device_name") if report.device == "cuda" else report.device
    return f"estimate of {report.target} for {device} (fake tensors; torch {torch_version})"


def where(fits: Fits) -> str:
    """``the NVIDIA H100 80GB HBM3 (79.2 GiB less a 1.0 GiB reserve)`` or ``16.0 GiB``."""
    capacity = format_bytes(fits.capacity_bytes)
    if fits.reserve_bytes:
        capacity += f" less a {format_bytes(fits.reserve_bytes)} reserve"
    return f"the {fits.gpu} ({capacity})" if fits.gpu else capacity


UNRELIABLE = "NOT RELIABLE (values fake tensors cannot know steered the code)"


def is_reliable(report: Report) -> bool:
    """No estimated run of the report guessed a value that steered its code."""
    return all(run.estimate is None or run.estimate.reliable for run in report.ok_runs())


def unreliable_fit(report: Report) -> str | None:
    """What ``memprof estimate`` says (exit 2) when asked whether an estimate fits and the
    estimate cannot be relied on; None otherwise."""
    sweep = report.sweep
    capacity = report.fits is not None or (sweep is not None and sweep.capacity_bytes is not None)
    if not capacity or is_reliable(report):
        return None
    guesses = [g for run in report.ok_runs() if run.estimate for g in run.estimate.guesses if g.steers]
    at = f" (first at {guesses[0].steered_at or guesses[0].source})" if guesses else ""
    return (
        f"cannot say whether it fits: the code branched or sized memory on values fake "
        f"tensors cannot know{at}; measure it with memprof run (at a size that fits this machine), or make "
        "its control flow independent of tensor values"
    )


def answer(report: Report) -> str | None:
    """The one line: ``estimated peak 52.2 MiB allocated, 76.0 MiB reserved: fits the NVIDIA
    H100 80GB HBM3 (79.2 GiB) with 79.1 GiB to spare`` (or ``does not fit ...: short by ...``).
    None for a sweep (its verdict says it) or a failed run."""
    if report.sweep is not None or len(report.runs) != 1:
        return None
    run = next(iter(report.runs.values()))
    if run.failed:
        return None
    line = amount(run)
    if run.estimate is not None and not run.estimate.reliable:
        line = f"{UNRELIABLE}: {line}"
    fits = report.fits
    if fits is None:
        return line
    if not fits.reliable:
        return f"{line}: whether it fits {where(fits)} cannot be said"
    if fits.fits:
        return f"{line}: fits {where(fits)} with {format_bytes(fits.headroom_bytes)} to spare"
    if fits.headroom_bytes >= 0:
        return (
            f"{line}: does not fit {where(fits)}: the caching-allocator model finds no room for a "
            "request (fragmentation)"
        )
    return f"{line}: does not fit {where(fits)}: short by {format_bytes(-fits.headroom_bytes)}"


def conclusions(report: Report) -> tuple[tuple[str, ...], ...]:
    """What every format says last of an estimate, as :func:`memprof.report.rows.conclusions`
    does of a run: the one-line answer, or the sweep's verdict, or that no estimate succeeded."""
    said = answer(report) or (report.sweep.verdict if report.sweep is not None else None)
    if said:
        return ((said,),)
    return (("no estimate succeeded",),) if not report.ok_runs() else ()


RUN_HEADERS = (
    "run",
    "peak",
    "footprint",
    "live at start",
    "reserved peak",
    "allocated",
    "net",
    "peak during",
)


def run_cells(run: RunResult) -> list[str]:
    """An estimated run's row (no times: nothing real ran): peak above the start, footprint,
    live at the start, reserved peak (CUDA; else -), allocated, net, the op at the peak."""
    if run.failed:
        return [run.label, "failed", "", "", "", "", "", run.failed]
    return [
        run.label,
        format_bytes(run.peak_bytes),
        format_bytes(run.footprint_bytes),
        format_bytes(run.live_at_start_bytes),
        format_bytes(run.reserved_peak_bytes),
        format_bytes(run.allocated_bytes),
        format_bytes(run.net_bytes, signed=True),
        run.peak_op or "-",
    ]


@dataclass(frozen=True)
class SweepRow:
    """One value of a sweep, as every format shows it."""

    label: str
    value: str
    footprint: str
    line: str
    needed: str
    fits: str
    how: str


def sweep_headers(sweep: Sweep) -> tuple[str, ...]:
    """The sweep table's columns: the footprint and the line's, then (CUDA) the reserve."""
    needed = ("reserved",) if sweep.needed == "reserved_peak_bytes" else ()
    return ("run", "value", "footprint", "line", *needed, "fits", "")


def sweep_cells(row: SweepRow, sweep: Sweep) -> list[str]:
    needed = [row.needed] if sweep.needed == "reserved_peak_bytes" else []
    return [row.label, row.value, row.footprint, row.line, *needed, row.fits, row.how]


def sweep_title(sweep: Sweep) -> str:
    return f"Sweep of {sweep.parameter}:"


def sweep_rows(sweep: Sweep) -> tuple[SweepRow, ...]:
    """The listed values in order, then the search's, each with its bytes, the line's bytes,
    whether it fits, and ``searched``/``largest that fits``."""
    rows = []
    for point in sweep.points:
        how = []
        if point.searched:
            how.append("searched")
        if point.label == sweep.largest_fitting_label:
            how.append("largest that fits")
        rows.append(
            SweepRow(
                label=point.label,
                value=point.value,
                footprint=format_bytes(point.footprint_bytes),
                line=format_bytes(point.fitted_bytes),
                needed=format_bytes(point.needed_bytes),
                fits="-" if point.fits is None else "yes" if point.fits else "no",
                how=", ".join(how),
            )
        )
    return tuple(rows)


def workspace_line(run: RunResult) -> str | None:
    """``measured inside ops: aten::sum up to 488.3 MiB, aten::convolution up to 8.1 MiB``."""
    if run.estimate is None or not run.estimate.workspace_ops:
        return None
    parts = [f"{op} up to {format_bytes(nbytes)}" for op, nbytes in run.estimate.workspace_ops.items()]
    return "allocated inside ops (measured on real tensors): " + ", ".join(parts)


def notes(report: Report) -> list[tuple[str, str]]:
    """(whose, note) pairs: a note every run has is said once, for ``all runs``."""
    runs = list(report.runs.values())
    if len(runs) < 2:
        return [(run.label, note) for run in runs for note in run.notes]
    shared = [note for note in runs[0].notes if all(note in run.notes for run in runs[1:])]
    out = [("all runs", note) for note in shared]
    for run in runs:
        out += [(run.label, note) for note in run.notes if note not in shared]
    return out


def failed(report: Report) -> str | None:
    """The gate line when a capacity was given and the estimate does not fit (None when it
    fits or no capacity was given): exit 1."""
    if report.fits is not None and not report.fits.fits:
        return f"memprof estimate: {answer(report)}"
    sweep = report.sweep
    if sweep is not None and sweep.capacity_bytes is not None and not any(p.fits for p in sweep.points):
        return f"memprof estimate: {sweep.verdict}"
    return None
