"""What every format says of an estimate (``memprof estimate``), decided once: the header
(nothing ran: the device is modelled), the one-line answer (how much, and whether it fits), the
runs, the sweep's chart, table and verdict (the searched values in one line), the measured
workspaces, and the notes (said once when every run has them). A sweep details one run (its
ops, what is live at its peak): :func:`chosen_run`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memprof.core.units import format_bytes
from memprof.model.run import amount
from memprof.outputs import document as doc

if TYPE_CHECKING:
    from memprof.model.estimate import Fits
    from memprof.model.report import Report
    from memprof.model.run import RunResult
    from memprof.model.sweep import Sweep, SweepPoint


def title(report: Report) -> str:
    """``estimate of pkg.mod:step for NVIDIA H100 80GB HBM3, modelled on fake tensors (torch
    2.13.0+cpu)``."""
    torch_version = report.environment.get("torch", "?")
    device = report.environment.get("device_name") if report.device == "cuda" else report.device
    return f"estimate of {report.target} for {device}, modelled on fake tensors (torch {torch_version})"


def facts(report: Report) -> list[tuple[str, str]]:
    """The header of an estimate: that nothing ran, what was modelled, what it was worked out on."""
    env = report.environment
    modelled = report.device
    if report.device == "cuda" and env.get("device_name"):
        modelled += f": {env['device_name']}"
    items = [
        ("estimate", "on fake tensors: nothing ran on the device, its memory is modelled"),
        ("target", report.target),
        ("modelled device", modelled),
    ]
    if report.fits is not None:
        items.append(("capacity", where(report.fits)))
    torch_version, python = env.get("torch", "?"), env.get("python", "?")
    items += [("worked out with", f"torch {torch_version}, python {python}")]
    return [*items, ("on", env.get("platform", "?")), ("date", report.created or "?")]


def chosen_run(report: Report) -> RunResult | None:
    """The run an estimate details (its ops, what is live at its peak): the one estimated, or
    of a sweep the largest value that fits, else the largest value estimated."""
    runs = report.ok_runs()
    if not runs:
        return None
    sweep = report.sweep
    if sweep is not None and sweep.largest_fitting_label in report.runs:
        chosen = report.runs[sweep.largest_fitting_label]
        return chosen if not chosen.failed else runs[-1]
    return runs[-1]


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

# The runs table drops, when narrow, live at start first, then net, allocated, reserved peak;
# never the footprint (the one-line answer's figure).
_DROPS = {"live at start": 4, "net": 3, "allocated": 2, "reserved peak": 1}

RUNS_HELP = (
    "estimated on fake tensors: peak: most live bytes above the call's start; footprint: every live "
    "byte then, what was live before the call included; live at start: live when the call began; "
    "reserved peak (CUDA): the most the caching-allocator model holds from the device; allocated: all "
    "bytes allocated; net: left allocated at the end."
)
LEGEND = (
    "estimated on fake tensors; peak: most live bytes above the call's start; footprint: all live "
    "bytes then; sizes are 1024-based."
)


def runs_table(report: Report) -> doc.Table:
    """One row per estimated run (of a sweep, the listed values and the largest that fits),
    without times: nothing real ran."""
    sizes = (
        doc.Column(
            header, doc.SIZE, signed=header == "net", delta=header == "net", drop=_DROPS.get(header, 0)
        )
        for header in RUN_HEADERS[2:7]
    )
    columns = (
        doc.Column("run", doc.LABEL, width=12),
        doc.Column("peak", doc.SIZE, strong=True),
        *sizes,
        doc.Column("peak during", doc.NAME, width=32),
    )
    shown = {p.label for p in shown_points(report.sweep)} if report.sweep is not None else None
    rows = []
    for run in report.runs.values():
        if shown is not None and run.label not in shown:
            continue
        if run.failed:
            rows.append(doc.Row((run.label,), failure=run.failed))
            continue
        figures = (run.footprint_bytes, run.live_at_start_bytes, run.reserved_peak_bytes, run.allocated_bytes)
        rows.append(
            doc.Row((run.label, run.peak_bytes, *figures, run.net_bytes, doc.name(run.peak_op or "-")))
        )
    return doc.Table(columns, tuple(rows), name="runs")


# ---- a sweep -------------------------------------------------------------------------------------


def shown_points(sweep: Sweep) -> tuple[SweepPoint, ...]:
    """The points a sweep's tables list: the listed values and the largest that fits (the
    other searched values are said in one line: :func:`searched_line`)."""
    return tuple(p for p in sweep.points if not p.searched or p.label == sweep.largest_fitting_label)


def searched_line(sweep: Sweep) -> str | None:
    """``searched batch: 4429 fits, 4430 fits (the largest that fits), 4431 does not fit``: the
    values the search estimated beyond the listed ones, in order; None without a search."""
    searched = [p for p in sweep.points if p.searched]
    if not searched:
        return None
    said = {True: "fits", False: "does not fit", None: "-"}
    parts = [
        f"{p.value} {said[p.fits]}"
        + (" (the largest that fits)" if p.label == sweep.largest_fitting_label else "")
        for p in searched
    ]
    return f"searched {sweep.parameter}: " + ", ".join(parts)


def sweep_table(sweep: Sweep) -> doc.Table:
    """The sweep's values in order (:func:`shown_points`): each with its footprint, the line's
    there, (CUDA) the reserve, whether it fits."""
    reserved = sweep.needed == "reserved_peak_bytes"
    columns = (
        doc.Column("run", doc.LABEL, width=12),
        doc.Column("value", doc.NUMBER),
        doc.Column("footprint", doc.SIZE),
        doc.Column("line", doc.SIZE, drop=1),
        *([doc.Column("reserved", doc.SIZE)] if reserved else []),
        doc.Column("fits", doc.TEXT),
        doc.Column("", doc.NOTE),
    )
    rows = []
    for point in shown_points(sweep):
        fits = "-" if point.fits is None else "yes" if point.fits else "no"
        how = "largest that fits" if point.label == sweep.largest_fitting_label else ""
        needed = (point.needed_bytes,) if reserved else ()
        value = doc.Value(point.value, _number(point.value))
        rows.append(
            doc.Row((point.label, value, point.footprint_bytes, point.fitted_bytes, *needed, fits, how))
        )
    return doc.Table(columns, tuple(rows), name="sweep")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def section(report: Report) -> doc.Section | None:
    """An estimate's own section: a sweep's chart, table and searched values; what ops allocate
    inside (measured on real tensors)."""
    blocks: list = []
    sweep = report.sweep
    if sweep is not None:
        blocks += [
            doc.SweepChart(sweep),
            doc.Heading(doc.words(f"Sweep of {sweep.parameter}")),
            sweep_table(sweep),
        ]
        if (line := searched_line(sweep)) is not None:
            blocks.append(doc.Paragraph(doc.words(line), "help"))
    run = chosen_run(report)
    if run is not None and (line := workspace_line(run)):
        blocks.append(doc.Items((doc.words(line),)))
    return (
        doc.Section("estimate", "Sweep" if sweep is not None else "Estimate", tuple(blocks))
        if blocks
        else None
    )


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
    # A note some runs share (the ranks alike rank 0) is said once, for them all.
    whose: dict[str, list[str]] = {}
    for run in runs:
        for note in run.notes:
            if note not in shared:
                whose.setdefault(note, []).append(run.label)
    return out + [(_labels(labels), note) for note, labels in whose.items()]


def _labels(labels: list[str]) -> str:
    """``rank1-rank6`` for consecutive ranks' runs, else the labels listed."""
    numbers = [int(label[4:]) for label in labels if label.startswith("rank") and label[4:].isdigit()]
    consecutive = len(numbers) == len(labels) and numbers == list(range(numbers[0], numbers[-1] + 1))
    if len(labels) > 2 and consecutive:
        return f"{labels[0]}-{labels[-1]}"
    return ", ".join(labels)


def failed(report: Report) -> str | None:
    """The gate line when a capacity was given and the estimate does not fit (None when it
    fits or no capacity was given): exit 1."""
    if report.fits is not None and not report.fits.fits:
        return f"memprof estimate: {answer(report)}"
    sweep = report.sweep
    if sweep is not None and sweep.capacity_bytes is not None and not any(p.fits for p in sweep.points):
        return f"memprof estimate: {sweep.verdict}"
    return None
