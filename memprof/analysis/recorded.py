"""The numbers of a device's memory records read from a file (a chrome trace, or any format
that records allocations and frees): the peak above the start, the footprint, the reserved
peak, the ops running at the peak and the timeline. A CUDA memory snapshot's devices are
analysed by :mod:`memprof.analysis.snapshot`."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from memprof.analysis.peaks import op_stack_at, responsible_op
from memprof.analysis.timeline import downsample_max
from memprof.core.recording import RecordedMemory
from memprof.core.records import RawProfile

_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")


@dataclass(frozen=True)
class RecordedPeak:
    """A recorded device's numbers, as the report contract has them: ``footprint_bytes`` is
    the highest live bytes, ``peak_bytes`` = footprint - live at start, ``reserved_peak_bytes``
    the highest reserved (None when not recorded). ``peak_op_stack``: the ops running at the
    peak record on the thread that allocated, outermost first; ``peak_op``: the one memprof
    names (the outermost aten op, else the innermost range, ``[memory]`` outside every op).
    The timeline is absolute (live at start included), ``timeline_t_ns`` from the first
    memory record; ``timeline_reserved`` is empty without reserved bytes."""

    peak_bytes: int
    footprint_bytes: int
    reserved_peak_bytes: int | None
    peak_op: str | None
    peak_op_stack: tuple[str, ...]
    peak_time_ns: int | None
    timeline_t_ns: np.ndarray
    timeline_bytes: np.ndarray
    timeline_reserved: np.ndarray
    notes: tuple[str, ...] = ()


def recorded_peak(raw: RawProfile, device: RecordedMemory) -> RecordedPeak:
    """The numbers of a device's memory records (``raw``, at least one), from the allocator's
    live count when the file has one (``device``), else from the records' running sum."""
    assert len(raw.mem_time), "a recorded device has memory records"
    times, threads = raw.mem_time, raw.mem_thread
    live = device.live
    if live is None:
        live = device.live_at_start_bytes + np.cumsum(raw.mem_bytes, dtype=np.int64)
    live_at_start = device.live_at_start_bytes
    peak_index = int(np.argmax(live))
    footprint = max(int(live[peak_index]), live_at_start)
    peak_bytes = footprint - live_at_start
    notes: list[str] = []
    stack: tuple[str, ...] = ()
    peak_op: str | None = None
    if peak_bytes > 0:
        thread = int(threads[peak_index]) if threads is not None else None
        running = op_stack_at(raw, int(times[peak_index]), thread)
        # ``ProfilerStep#N`` is the profiler's own step marker (prof.step()), not an op.
        stack = tuple(n for n in running if not _PROFILER_STEP.match(n))
        peak_op = responsible_op(list(stack))
        if not stack:
            notes.append("the peak allocation happened outside every recorded op")
    reserved = device.reserved
    t_ns, t_bytes, t_reserved = downsample_max(times - times[0], live, reserved)
    return RecordedPeak(
        peak_bytes=peak_bytes,
        footprint_bytes=footprint,
        reserved_peak_bytes=int(reserved.max()) if reserved is not None and len(reserved) else None,
        peak_op=peak_op,
        peak_op_stack=stack,
        peak_time_ns=int(times[peak_index]) if peak_bytes > 0 else None,
        timeline_t_ns=t_ns,
        timeline_bytes=t_bytes,
        timeline_reserved=t_reserved if t_reserved is not None else np.zeros(0, dtype=np.int64),
        notes=tuple(notes),
    )
