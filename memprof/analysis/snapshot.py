"""A CUDA memory snapshot's records -> per-device numbers: the reserve and what is allocated at
dump time, the trace's peak (requested bytes, and blocks as ``max_memory_allocated`` counts
them), live at the trace's start, the allocation sites live at the peak, fragmentation, each
out-of-memory explained, and the allocator model's check. Pure: no torch, no I/O.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from memprof.analysis.allocator import SMALL_SIZE, round_size
from memprof.analysis.snapshot_replay import (
    ALLOC,
    FREE_COMPLETED,
    OOM,
    AllocatorCheck,
    SnapshotReplay,
    TraceStart,
    empty_trace,
    replay_snapshot,
    trace_start,
)
from memprof.analysis.timeline import downsample_max
from memprof.core.records import OTHER_ACTION, SNAPSHOT_ACTIONS, AllocatorTrace, Frame, SnapshotRecords

BEFORE_TRACE = "(allocated before the trace began)"
NO_PYTHON_FRAME = "(no Python frame recorded)"
_CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cu", ".cuh", ".o", ".so")
_BACKWARD_NODE = re.compile(r"(\w+Backward\w*)::apply")


@dataclass(frozen=True)
class Site:
    """Bytes live at the peak that were allocated at one place (``file:line function``, the
    innermost Python frame of the allocation's stack)."""

    site: str
    bytes: int
    count: int


@dataclass(frozen=True)
class Fragmentation:
    """The reserve at dump time: ``cached_bytes`` = reserved - allocated (held by the cache,
    free), the largest free block, and of the cached bytes those that could not hold the
    largest request of the trace (``unusable_bytes``: blocks too small, or of the other pool or
    another stream). ``largest_request_bytes`` is None without a trace."""

    reserved_bytes: int
    allocated_bytes: int
    cached_bytes: int
    largest_free_block_bytes: int
    largest_request_bytes: int | None
    unusable_bytes: int | None


@dataclass(frozen=True)
class OomExplained:
    """An ``oom`` event of the trace: the request (rounded, as recorded), what the device had
    free, and what the allocator held then (from the model's replay). ``cause`` is
    ``fragmentation`` when the cache held enough free bytes in total but no block that fits,
    else ``capacity``."""

    index: int
    time_us: int | None
    requested_bytes: int
    free_on_device_bytes: int
    reserved_bytes: int
    allocated_bytes: int
    largest_free_block_bytes: int
    cause: str


@dataclass(frozen=True)
class SnapshotDevice:
    """One device of a snapshot.

    At dump time: ``segments`` (``small_segments``, ``large_segments``,
    ``expandable_segments``), ``reserved_bytes``, ``allocated_bytes`` (block sizes of active
    blocks), ``requested_bytes``. From the trace (requested bytes, as recorded):
    ``live_at_start_bytes``, ``peak_requested_bytes`` (highest live), ``peak_bytes`` (that
    above the start); ``footprint_bytes`` and ``reserved_peak_bytes`` are the highest
    allocated (block sizes) and reserved bytes of the model's replay, exact when
    ``allocator_model.exact``. ``capacity_bytes`` (reserved + free on device at the first
    out-of-memory) is the memory the allocator could have had, for :func:`what_if`.
    The timeline is absolute: ``timeline_bytes`` live requested bytes, ``timeline_reserved``
    the model's reserve, ``timeline_t_ns`` from the first event (event numbers when the
    snapshot has no times).
    """

    device: str
    device_index: int
    segments: int
    small_segments: int
    large_segments: int
    expandable_segments: int
    reserved_bytes: int
    allocated_bytes: int
    requested_bytes: int
    trace_events: int
    trace_actions: dict[str, int]
    frees_without_alloc: int
    live_at_start_bytes: int
    peak_requested_bytes: int
    peak_bytes: int
    footprint_bytes: int | None
    reserved_peak_bytes: int | None
    peak_index: int | None
    peak_time_us: int | None
    sites_at_peak: tuple[Site, ...]
    fragmentation: Fragmentation
    ooms: tuple[OomExplained, ...]
    capacity_bytes: int | None
    allocator_model: AllocatorCheck | None
    timeline_t_ns: np.ndarray
    timeline_bytes: np.ndarray
    timeline_reserved: np.ndarray
    notes: tuple[str, ...] = ()


def analyze_snapshot(records: SnapshotRecords) -> tuple[SnapshotDevice, ...]:
    """Analyse every device of a snapshot (see :class:`SnapshotDevice`)."""
    return tuple(analyze_device(records, device) for device in records.devices())


def analyze_device(records: SnapshotRecords, device: int) -> SnapshotDevice:
    """Analyse one device of a snapshot."""
    trace = records.traces.get(device) or empty_trace()
    segments = [s for s in records.segments if s.device == device]
    active = [b for s in segments for b in s.blocks if b.state.startswith("active")]
    requested_at_dump = sum(b.requested_size for b in active)
    start = trace_start(records, device)
    replay = replay_snapshot(records, device)
    notes = list(replay.check.notes) if replay.check else []
    deltas = _requested_deltas(trace)
    # Live at the start = live at the dump minus what the trace added (exact when the trace
    # holds every event since it began; the ring buffer keeps the latest ones).
    live_at_start = requested_at_dump - int(deltas.sum())
    if live_at_start != start.live_requested_bytes:
        notes.append(
            f"live at the trace's start is {live_at_start} bytes from the dump minus the trace, "
            f"{start.live_requested_bytes} from the blocks the trace frees unseen or never allocates"
        )
    live = live_at_start + np.cumsum(deltas)
    peak_index = int(np.argmax(live)) if len(live) else None
    peak_requested = max(int(live.max()) if len(live) else live_at_start, live_at_start)
    rises = peak_index is not None and peak_requested > live_at_start
    footprint: int | None = None
    reserved_peak: int | None = None
    if replay.check is not None:
        footprint = max(replay.allocated_at_start, int(replay.allocated_bytes.max()) if len(trace) else 0)
        reserved_peak = max(replay.reserved_at_start, int(replay.reserved_bytes.max()) if len(trace) else 0)
    else:
        notes.append("footprint and reserved peak unknown: the allocator model could not replay this trace")
    if replay.check is not None and not replay.check.exact:
        notes.append("the allocator model did not reproduce every placement: footprint, reserve modelled")
    ooms = _ooms(trace, replay)
    t_ns, t_bytes, t_reserved = _timeline(trace, live, replay)
    actions = Counter(
        SNAPSHOT_ACTIONS[code] if code < OTHER_ACTION else "other" for code in trace.action.tolist()
    )
    return SnapshotDevice(
        device=f"cuda:{device}",
        device_index=device,
        segments=len(segments),
        small_segments=sum(1 for s in segments if s.segment_type == "small"),
        large_segments=sum(1 for s in segments if s.segment_type != "small"),
        expandable_segments=sum(1 for s in segments if s.is_expandable),
        reserved_bytes=sum(s.total_size for s in segments),
        allocated_bytes=sum(b.size for b in active),
        requested_bytes=requested_at_dump,
        trace_events=len(trace),
        trace_actions=dict(actions),
        frees_without_alloc=start.frees_without_alloc,
        live_at_start_bytes=live_at_start,
        peak_requested_bytes=peak_requested,
        peak_bytes=peak_requested - live_at_start,
        footprint_bytes=footprint,
        reserved_peak_bytes=reserved_peak,
        peak_index=peak_index if rises else None,
        peak_time_us=_time(trace, peak_index) if rises and peak_index is not None else None,
        sites_at_peak=_sites(records, trace, start, peak_index if rises else None),
        fragmentation=_fragmentation(records, device, trace),
        ooms=ooms,
        capacity_bytes=ooms[0].reserved_bytes + ooms[0].free_on_device_bytes if ooms else None,
        allocator_model=replay.check,
        timeline_t_ns=t_ns,
        timeline_bytes=t_bytes,
        timeline_reserved=t_reserved,
        notes=tuple(notes),
    )


def _requested_deltas(trace: AllocatorTrace) -> np.ndarray:
    """+requested bytes at each ``alloc``, -requested at each ``free_completed`` (when the
    allocator takes the block back), 0 elsewhere."""
    deltas = np.zeros(len(trace), dtype=np.int64)
    alloc = trace.action == ALLOC
    freed = trace.action == FREE_COMPLETED
    deltas[alloc] = trace.size[alloc]
    deltas[freed] = -trace.size[freed]
    return deltas


def _time(trace: AllocatorTrace, index: int) -> int | None:
    value = int(trace.time_us[index])
    return value if value >= 0 else None


def site_of(stack: tuple[Frame, ...]) -> str:
    """``file:line function`` of the innermost Python frame of ``stack`` (torch's C++ frames,
    such as ``torch::unwind`` and ``CapturedTraceback``, skipped); for an allocation with no
    Python frame (the autograd engine's thread), the backward node that made it."""
    for frame in stack:
        if _is_python(frame):
            return f"{frame.filename}:{frame.line} {frame.name}"
    for frame in stack:
        match = _BACKWARD_NODE.search(frame.name)
        if match:
            return f"(C++) {match.group(1)}"
    return NO_PYTHON_FRAME


def python_frames(stack: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """The Python frames of ``stack`` (torch's C++ frames left out), in its order."""
    return tuple(frame for frame in stack if _is_python(frame))


def _is_python(frame: Frame) -> bool:
    name = frame.filename
    if name.endswith(".py"):
        return True
    return frame.line > 0 and not _native_file(name)


@functools.lru_cache(maxsize=4096)
def _native_file(name: str) -> bool:
    # Once per file name, not per frame: lowering a 1,000-character name 100,000 times was
    # most of a snapshot's analysis.
    return name in ("", "??") or name.lower().endswith(_CPP_SUFFIXES)


def _sites(
    records: SnapshotRecords, trace: AllocatorTrace, start: TraceStart, peak_index: int | None
) -> tuple[Site, ...]:
    """Bytes live at the peak grouped by allocation site, largest first."""
    if peak_index is None:
        return ()
    action, addr = trace.action[: peak_index + 1].tolist(), trace.addr[: peak_index + 1].tolist()
    size, stack = trace.size.tolist(), trace.stack.tolist()
    live: dict[int, tuple[int, int]] = {}  # address -> (requested, stack) of trace allocations
    freed_before_peak: set[int] = set()
    for i, code in enumerate(action):
        if code == ALLOC:
            live[addr[i]] = (size[i], stack[i])
        elif code == FREE_COMPLETED:
            if live.pop(addr[i], None) is None:
                freed_before_peak.add(addr[i])
    totals: dict[str, list[int]] = {}
    cache: dict[int, str] = {-1: NO_PYTHON_FRAME}

    def add(where: str, nbytes: int) -> None:
        entry = totals.setdefault(where, [0, 0])
        entry[0] += nbytes
        entry[1] += 1

    for requested, stack_id in live.values():
        if stack_id not in cache:
            cache[stack_id] = site_of(records.stacks[stack_id])
        add(cache[stack_id], requested)
    for address, _, requested, stack_id in start.live:
        if address in freed_before_peak:
            continue
        # Blocks live at the start: the dump's frames are where they were allocated; a block
        # known only from its free carries the free's frames, so it is not given a site.
        known = address not in start.first_free_index and stack_id >= 0
        add(site_of(records.stacks[stack_id]) if known else BEFORE_TRACE, requested)
    ordered = sorted(totals.items(), key=lambda item: (-item[1][0], item[0]))
    return tuple(Site(site=where, bytes=nbytes, count=count) for where, (nbytes, count) in ordered)


def _fragmentation(records: SnapshotRecords, device: int, trace: AllocatorTrace) -> Fragmentation:
    segments = [s for s in records.segments if s.device == device]
    reserved = sum(s.total_size for s in segments)
    allocated = sum(b.size for s in segments for b in s.blocks if b.state.startswith("active"))
    free = [
        (b.size, s.segment_type == "small", s.stream)
        for s in segments
        for b in s.blocks
        if b.state == "inactive"
    ]
    requests = np.flatnonzero((trace.action == ALLOC) | (trace.action == OOM))
    largest = unusable = None
    if len(requests):
        biggest = int(requests[np.argmax(trace.size[requests])])
        largest = int(trace.size[biggest])
        rounded, stream = round_size(largest), int(trace.stream[biggest])
        small = rounded <= SMALL_SIZE
        unusable = sum(
            size for size, is_small, on in free if is_small != small or on != stream or size < rounded
        )
    return Fragmentation(
        reserved_bytes=reserved,
        allocated_bytes=allocated,
        cached_bytes=reserved - allocated,
        largest_free_block_bytes=max((size for size, _, _ in free), default=0),
        largest_request_bytes=largest,
        unusable_bytes=unusable,
    )


def _ooms(trace: AllocatorTrace, replay: SnapshotReplay) -> tuple[OomExplained, ...]:
    explained = []
    for state in replay.ooms:
        requested = int(trace.size[state.index])
        cached = state.reserved_bytes - state.allocated_bytes
        fits_in_cache = cached >= requested and state.largest_free_block_bytes < requested
        explained.append(
            OomExplained(
                index=state.index,
                time_us=_time(trace, state.index),
                requested_bytes=requested,
                free_on_device_bytes=int(trace.addr[state.index]),
                reserved_bytes=state.reserved_bytes,
                allocated_bytes=state.allocated_bytes,
                largest_free_block_bytes=state.largest_free_block_bytes,
                cause="fragmentation" if fits_in_cache else "capacity",
            )
        )
    return tuple(explained)


def _timeline(
    trace: AllocatorTrace, live: np.ndarray, replay: SnapshotReplay
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not len(trace):
        nothing = np.zeros(0, dtype=np.int64)
        return nothing, nothing, nothing
    times = trace.time_us
    if (times >= 0).all():
        t = (times - times[0]) * 1000
    else:
        t = np.arange(len(trace), dtype=np.int64)
    reserved = replay.reserved_bytes if replay.check is not None else None
    t_ns, t_bytes, t_reserved = downsample_max(t, live, reserved)
    return t_ns, t_bytes, t_reserved if t_reserved is not None else np.zeros(0, dtype=np.int64)
