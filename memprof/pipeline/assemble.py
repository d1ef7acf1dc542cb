"""The assembler of recordings read from files: a :class:`~memprof.core.recording.RecordedFile`
(whatever reader made it) -> one :class:`~memprof.model.RunResult` per device, the numbers
worked out here from what the file recorded. Every format goes through :func:`file_runs`."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from memprof.analysis.allocator import AllocatorSettings
from memprof.analysis.peaks import analyze
from memprof.analysis.recorded import recorded_peak
from memprof.analysis.snapshot import SnapshotDevice, analyze_device, python_frames, site_of
from memprof.analysis.snapshot_replay import ALLOC, empty_trace, what_if
from memprof.core.fields import copied
from memprof.core.recording import RecordedDevice, RecordedFile
from memprof.core.records import SNAPSHOT_ACTIONS, SnapshotRecords
from memprof.model import (
    AllocatorModel,
    Fragmentation,
    OomEvent,
    RunResult,
    SnapshotSection,
    SnapshotSite,
    WhatIf,
)
from memprof.model.timeline import Timeline
from memprof.pipeline import build_run

if TYPE_CHECKING:
    import numpy as np


def file_runs(recorded: RecordedFile, what_if_settings: AllocatorSettings | None = None) -> list[RunResult]:
    """The runs of a file read: one per device, labelled by device, with the file's rank.
    ``what_if_settings``: also replay a snapshot's allocations under these settings."""
    runs = []
    for device in recorded.devices:
        if device.snapshot is not None:
            runs.append(_snapshot_run(recorded, device, device.snapshot, what_if_settings))
        else:
            runs.append(_records_run(recorded, device))
    return runs


# --------------------------------------------------------------------------------------------
# Memory records (chrome traces)


def _records_run(recorded: RecordedFile, device: RecordedDevice) -> RunResult:
    """One device's memory records: the numbers read off them, the per-op table of the
    analysis. Records that memprof's own ``memprof.call`` ranges mark (a trace exported from a
    memprof-style profile) have their peak measured as ``memprof run`` does, above each call's
    start."""
    raw = device.raw
    assert raw is not None
    analysis = analyze(raw)
    numbers = analysis.numbers
    read = recorded_peak(device)
    peak, peak_op, stack = read.peak_bytes, read.peak_op, read.peak_op_stack
    notes = [*recorded.notes, *device.notes, *read.notes]
    if raw.calls:
        peak, peak_op, stack = numbers.peak_bytes, numbers.peak_op, numbers.peak_op_stack
        notes.append("peak above the start of each memprof.call range, as memprof run measures it")
    live_at_start = device.live_at_start_bytes
    timeline = _timeline(read.timeline_t_ns, read.timeline_bytes, read.timeline_reserved, live_at_start)
    return build_run(
        label=device.device,
        mode=None,
        source=recorded.source,
        rank=recorded.rank,
        device=device.device,
        device_name=device.device_name,
        device_total_bytes=device.device_total_bytes,
        peak_bytes=peak,
        footprint_bytes=read.footprint_bytes,
        live_at_start_bytes=live_at_start,
        # The host's allocator reserves nothing: its Total Reserved is always 0.
        reserved_peak_bytes=read.reserved_peak_bytes if device.device != "cpu" else None,
        allocated_bytes=numbers.allocated_bytes,
        net_bytes=numbers.net_bytes,
        peak_op=peak_op,
        peak_op_stack=stack,
        records=device.records if device.records is not None else len(raw.mem_time),
        op_stats=analysis.ops,
        timeline=timeline,
        notes=(*notes, *analysis.notes),
    )


def _timeline(t_ns: np.ndarray, live: np.ndarray, reserved: np.ndarray, live_at_start: int) -> Timeline:
    """A recording's timeline, its live bytes counted above those live at its start."""
    return Timeline(
        t_ns=tuple(t_ns.tolist()),
        bytes=tuple((live - live_at_start).tolist()),
        reserved=tuple(reserved.tolist()),
    )


# --------------------------------------------------------------------------------------------
# CUDA memory snapshots


def _snapshot_run(
    recorded: RecordedFile,
    recorded_device: RecordedDevice,
    records: SnapshotRecords,
    settings: AllocatorSettings | None,
) -> RunResult:
    """One device of a snapshot. Peak, live at start: requested bytes, as the trace records them;
    footprint and reserved peak: block sizes of the allocator model's replay (what
    ``max_memory_allocated``/``max_memory_reserved`` count). The op at the peak is the site of
    the allocation that reached it, with its Python stack (outermost first)."""
    device = analyze_device(records, recorded_device.index)
    trace = records.traces.get(device.device_index) or empty_trace()
    notes = [*recorded.notes, *recorded_device.notes, *device.notes]
    timeline = Timeline()
    if len(trace) and (trace.time_us >= 0).all():
        timeline = _timeline(
            device.timeline_t_ns, device.timeline_bytes, device.timeline_reserved, device.live_at_start_bytes
        )
    elif len(trace):
        notes.append("this snapshot records no times: no timeline")
    else:
        notes.append("this snapshot has no trace (history was not recorded): the numbers are at dump time")
    peak_op: str | None = None
    stack: tuple[str, ...] = ()
    if device.peak_index is not None:
        stack_id = int(trace.stack[device.peak_index])
        frames = records.stacks[stack_id] if stack_id >= 0 else ()
        peak_op = site_of(frames)
        stack = tuple(f"{f.filename}:{f.line} {f.name}" for f in reversed(python_frames(frames)))
    return build_run(
        label=device.device,
        mode=None,
        source=recorded.source,
        rank=recorded.rank,
        device=device.device,
        peak_bytes=device.peak_bytes,
        footprint_bytes=device.footprint_bytes,
        live_at_start_bytes=device.live_at_start_bytes,
        reserved_peak_bytes=device.reserved_peak_bytes,
        allocated_bytes=int(trace.size[trace.action == ALLOC].sum()),
        net_bytes=device.requested_bytes - device.live_at_start_bytes,
        peak_op=peak_op,
        peak_op_stack=stack,
        records=device.trace_events,
        timeline=timeline,
        notes=tuple(notes),
        snapshot=_section(records, device, settings),
        allocator_model=_model_check(device),
    )


def _section(
    records: SnapshotRecords, device: SnapshotDevice, settings: AllocatorSettings | None
) -> SnapshotSection:
    return copied(
        SnapshotSection,
        device,
        # In the order torch's trace names its actions (alloc, free_requested, free_completed, ...).
        trace_actions={
            a: device.trace_actions[a] for a in (*SNAPSHOT_ACTIONS, "other") if a in device.trace_actions
        },
        sites_at_peak=tuple(copied(SnapshotSite, s) for s in device.sites_at_peak),
        fragmentation=copied(Fragmentation, device.fragmentation),
        ooms=tuple(copied(OomEvent, o) for o in device.ooms),
        what_if=_what_if(records, device, settings) if settings is not None else (),
    )


def _what_if(
    records: SnapshotRecords, device: SnapshotDevice, settings: AllocatorSettings
) -> tuple[WhatIf, ...]:
    """The allocations replayed from an empty allocator with default settings and with
    ``settings``, each within the device's capacity when an out-of-memory recorded it."""
    out = []
    for chosen in (AllocatorSettings(), settings):
        chosen = replace(chosen, capacity_bytes=device.capacity_bytes)
        result = what_if(records, device.device_index, chosen)
        out.append(copied(WhatIf, result, capacity_bytes=device.capacity_bytes, ooms=len(result.ooms)))
    return tuple(out)


def _model_check(device: SnapshotDevice) -> AllocatorModel | None:
    check = device.allocator_model
    if check is None:
        return None
    return copied(AllocatorModel, check)
