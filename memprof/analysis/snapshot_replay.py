"""A snapshot's trace, replayed through the allocator model.

:func:`trace_start` reconstructs what the device held when the trace (a ring buffer that may
have wrapped) began; :func:`replay_snapshot` replays the trace from there with the snapshot's
own settings and checks every placement and segment against the recorded ones;
:func:`what_if` replays the same allocations under other settings. Pure: no torch, no I/O.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from memprof.analysis.allocator import (
    _GROWS,
    SMALL_BUFFER,
    SMALL_SIZE,
    AllocatorSettings,
    CachingAllocator,
    Simulation,
    _simulation,
    round_size,
)
from memprof.core.records import ACTION_CODE, AllocatorTrace, SnapshotRecords

ALLOC = ACTION_CODE["alloc"]
FREE_REQUESTED = ACTION_CODE["free_requested"]
FREE_COMPLETED = ACTION_CODE["free_completed"]
SEGMENT_ALLOC = ACTION_CODE["segment_alloc"]
SEGMENT_FREE = ACTION_CODE["segment_free"]
SEGMENT_MAP = ACTION_CODE["segment_map"]
SEGMENT_UNMAP = ACTION_CODE["segment_unmap"]
OOM = ACTION_CODE["oom"]
_BLOCK_ACTIONS = (ALLOC, FREE_REQUESTED, FREE_COMPLETED)
_SEGMENT_ACTIONS = (SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP)
_ACTIVE_STATES = ("active_allocated", "active_pending_free")


def empty_trace() -> AllocatorTrace:
    """A trace with no events (a snapshot recorded without history)."""
    nothing = np.zeros(0, dtype=np.int64)
    return AllocatorTrace(
        action=np.zeros(0, dtype=np.int8),
        addr=nothing,
        size=nothing,
        stream=nothing,
        time_us=nothing,
        stack=np.zeros(0, dtype=np.int32),
    )


@dataclass(frozen=True)
class TraceStart:
    """What one device held when its trace began, reconstructed from the trace and the dump.

    ``segments``: (address, size, small pool, stream) of the segments that existed;
    ``live``: (address, block size, requested bytes, stack) of the blocks allocated then —
    those the trace frees without having allocated them (the ring buffer wrapped) and those
    still allocated at dump time that the trace never allocated. A block known only from its
    free has the size torch rounds its request to.
    """

    segments: tuple[tuple[int, int, bool, int], ...]
    live: tuple[tuple[int, int, int, int], ...]
    frees_without_alloc: int
    first_free_index: dict[int, int] = field(default_factory=dict)
    """address -> index of the free of each block live at the start that the trace frees."""

    @property
    def live_requested_bytes(self) -> int:
        return sum(requested for _, _, requested, _ in self.live)


def trace_start(records: SnapshotRecords, device: int) -> TraceStart:
    """Reconstruct the segments and allocated blocks of ``device`` when its trace began."""
    trace = records.traces.get(device) or empty_trace()
    action, addr = trace.action, trace.addr
    first_block = _first_index(addr, np.isin(action, _BLOCK_ACTIONS))
    first_segment = _first_index(addr, np.isin(action, _SEGMENT_ACTIONS))
    live: dict[int, tuple[int, int, int, int]] = {}
    first_free: dict[int, int] = {}
    requested_first: dict[int, int] = {}  # address -> its free_requested, first of its events
    for address, index in first_block.items():
        if action[index] != ALLOC:
            requested = int(trace.size[index])
            live[address] = (address, round_size(requested), requested, int(trace.stack[index]))
            first_free[address] = index
            if action[index] == FREE_REQUESTED:
                requested_first[address] = index
    # Each such free completes at the first free_completed of its address after it: one pass
    # over the completions, not a scan of the trace per address (quadratic in the frees).
    if requested_first:
        completed = np.flatnonzero(action == FREE_COMPLETED)
        for index, address in zip(completed.tolist(), addr[completed].tolist(), strict=True):
            start = requested_first.get(address)
            if start is not None and index > start:
                first_free[address] = index
                del requested_first[address]
    frees_without_alloc = len(live)
    segments: dict[int, tuple[int, int, bool, int]] = {}
    for segment in records.segments:
        if segment.device != device:
            continue
        if segment.address not in first_segment:
            segments[segment.address] = (
                segment.address,
                segment.total_size,
                segment.segment_type == "small",
                segment.stream,
            )
        for block in segment.blocks:
            if block.state in _ACTIVE_STATES and block.address not in first_block:
                live[block.address] = (block.address, block.size, block.requested_size, block.stack)
    for address, index in first_segment.items():
        if action[index] in (SEGMENT_FREE, SEGMENT_UNMAP):
            size = int(trace.size[index])
            segments[address] = (address, size, size == SMALL_BUFFER, int(trace.stream[index]))
    return TraceStart(
        segments=tuple(sorted(segments.values())),
        live=tuple(sorted(live.values())),
        frees_without_alloc=frees_without_alloc,
        first_free_index=first_free,
    )


def _first_index(addr: np.ndarray, mask: np.ndarray) -> dict[int, int]:
    positions = np.flatnonzero(mask)
    unique, first = np.unique(addr[positions], return_index=True)
    return dict(zip(unique.tolist(), positions[first].tolist(), strict=True))


# --------------------------------------------------------------------------------------------
# Checking the model against the recorded trace


@dataclass(frozen=True)
class AllocatorCheck:
    """How the allocator model's replay of a snapshot's trace compares with what was recorded.

    ``placements``: allocations in the trace; ``placements_matched``: those the model put at
    the recorded address. ``segments``: segments (or expandable mappings) the trace records
    being asked of the device; ``segments_matched``: those the model asked for at the same
    allocation with the same size (and address); ``segments_unexpected``: segments the model
    asked for that the trace does not have. ``reserved_matched``/``allocated_matched``: the
    model's reserved and allocated bytes after the trace equal the snapshot's; ``blocks`` /
    ``blocks_matched``: the snapshot's blocks at dump time and those the model has identically
    (address, size, allocated or not). ``settings``: the settings the model ran with;
    ``settings_differ``: the snapshot's settings the model does not follow (its figures may
    then differ).
    """

    placements_matched: int
    placements: int
    segments_matched: int
    segments: int
    segments_unexpected: int
    reserved_matched: bool
    allocated_matched: bool
    blocks_matched: int
    blocks: int
    settings: str
    settings_differ: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def exact(self) -> bool:
        """Every placement, segment and final block as recorded."""
        return (
            self.placements_matched == self.placements
            and self.segments_matched == self.segments
            and not self.segments_unexpected
            and self.reserved_matched
            and self.allocated_matched
            and self.blocks_matched == self.blocks
        )


@dataclass(frozen=True)
class OomState:
    """The model's state where the trace records an out-of-memory."""

    index: int
    allocated_bytes: int
    reserved_bytes: int
    largest_free_block_bytes: int
    """Largest cached block of the pool and stream the failed request would have used."""


@dataclass(frozen=True)
class SnapshotReplay:
    """The model's replay of one device's trace: the check, and the model's allocated (block
    sizes, as ``max_memory_allocated`` counts them) and reserved bytes before the trace
    (``*_at_start``) and after each event."""

    check: AllocatorCheck | None
    allocated_at_start: int
    reserved_at_start: int
    allocated_bytes: np.ndarray
    reserved_bytes: np.ndarray
    ooms: tuple[OomState, ...]


def snapshot_settings(records: SnapshotRecords) -> tuple[AllocatorSettings, tuple[str, ...]]:
    """The allocator settings a snapshot records, as the model's settings, and the recorded
    settings the model does not follow."""
    raw = records.allocator_settings or {}
    expandable = bool(raw.get("expandable_segments", False))
    max_split = raw.get("max_split_size", -1)
    settings = AllocatorSettings(
        expandable_segments=expandable,
        max_split_size_bytes=max_split if isinstance(max_split, int) and 0 < max_split < (1 << 62) else None,
    )
    differ = []
    divisions = raw.get("roundup_power2_divisions")
    if isinstance(divisions, dict) and any(v for v in divisions.values()):
        differ.append("roundup_power2_divisions (sizes are rounded to powers of 2 divisions)")
    elif isinstance(divisions, int) and divisions:
        differ.append("roundup_power2_divisions (sizes are rounded to powers of 2 divisions)")
    threshold = raw.get("garbage_collection_threshold", 0.0)
    if isinstance(threshold, int | float) and threshold > 0:
        differ.append(f"garbage_collection_threshold:{threshold} (cached blocks freed early)")
    return settings, tuple(differ)


def replay_snapshot(records: SnapshotRecords, device: int) -> SnapshotReplay:
    """Replay ``device``'s trace through the model from the reconstructed start, with the
    snapshot's settings, comparing every placement and segment with the recorded ones."""
    trace = records.traces.get(device) or empty_trace()
    settings, differ = snapshot_settings(records)
    notes: list[str] = []
    if any(s.device == device and s.pool_id != (0, 0) for s in records.segments):
        notes.append("CUDA graph private pools are not modelled; their allocations may be placed differently")
    start = trace_start(records, device)
    if settings.expandable_segments or any(s.device == device and s.is_expandable for s in records.segments):
        notes.append("expandable segments: their state before the trace cannot be rebuilt; no check was run")
        empty = np.zeros(len(trace), dtype=np.int64)
        return SnapshotReplay(None, 0, 0, empty, empty, ())
    pending: list[tuple[str, int, int]] = []
    known_top = max([a + s for a, s, _, _ in start.segments] + [0])
    fake = [max(known_top, 1 << 48)]

    def segment_address(size: int, expandable: bool) -> int:
        if pending:
            return pending[0][1]
        fake[0] += size + SMALL_BUFFER  # the model wants a segment the trace did not get
        return fake[0] - size - SMALL_BUFFER

    model = CachingAllocator(settings, segment_address)
    starts = [a for a, _, _, _ in start.live]  # sorted: TraceStart.live is
    try:
        for address, size, small, stream in start.segments:
            # The blocks inside the segment, found by bisection (a scan per segment is quadratic).
            first, last = bisect_left(starts, address), bisect_left(starts, address + size)
            inside = [(a, s, r) for a, s, r, _ in start.live[first:last]]
            model.seed_segment(address, size, small, inside, stream)
    except ValueError as error:
        notes.append(f"the state before the trace could not be rebuilt ({error}); the check was not run")
        empty = np.zeros(len(trace), dtype=np.int64)
        return SnapshotReplay(None, 0, 0, empty, empty, ())
    allocated_at_start, reserved_at_start = model.allocated_bytes, model.reserved_bytes
    counts, ooms, allocated, reserved = _replay(model, trace, pending)
    check = _final_check(records, device, model, counts, settings, differ, notes)
    return SnapshotReplay(check, allocated_at_start, reserved_at_start, allocated, reserved, tuple(ooms))


def _replay(
    model: CachingAllocator, trace: AllocatorTrace, pending: list[tuple[str, int, int]]
) -> tuple[dict[str, int], list[OomState], np.ndarray, np.ndarray]:
    action = trace.action.tolist()
    addr, size, stream = trace.addr.tolist(), trace.size.tolist(), trace.stream.tolist()
    allocated = np.empty(len(action), dtype=np.int64)
    reserved = np.empty(len(action), dtype=np.int64)
    counts = dict.fromkeys(("placements", "placed", "segments", "segments_matched", "unexpected"), 0)
    where: dict[int, int] = {}  # recorded address -> the model's address of the same block
    ooms: list[OomState] = []
    for i, code in enumerate(action):
        if code == ALLOC:
            logged = len(model.segment_log)
            placed = model.malloc(size[i], stream[i])
            asked = [entry for entry in model.segment_log[logged:] if entry[0] in _GROWS]
            matched = sum(1 for a, b in zip(asked, pending, strict=False) if a == b)
            counts["segments_matched"] += matched
            counts["unexpected"] += max(0, len(asked) - len(pending))
            pending.clear()
            counts["placements"] += 1
            if placed is not None:
                where[addr[i]] = placed[0]
                counts["placed"] += placed[0] == addr[i]
        elif code == FREE_COMPLETED:
            mine = where.pop(addr[i], addr[i])
            if model.holds(mine):
                model.free(mine)
        elif code in (SEGMENT_ALLOC, SEGMENT_MAP):
            pending.append(("segment_alloc" if code == SEGMENT_ALLOC else "segment_map", addr[i], size[i]))
            counts["segments"] += 1
        elif code == SEGMENT_FREE:
            model.release_segment(addr[i])
        elif code == OOM:
            largest = model.largest_free_block(round_size(size[i]) <= SMALL_SIZE, stream[i])
            ooms.append(OomState(i, model.allocated_bytes, model.reserved_bytes, largest))
        allocated[i] = model.allocated_bytes
        reserved[i] = model.reserved_bytes
    return counts, ooms, allocated, reserved


def _final_check(
    records: SnapshotRecords,
    device: int,
    model: CachingAllocator,
    counts: dict[str, int],
    settings: AllocatorSettings,
    differ: tuple[str, ...],
    notes: list[str],
) -> AllocatorCheck:
    segments = [s for s in records.segments if s.device == device]
    dump_blocks = {(b.address, b.size, b.state in _ACTIVE_STATES) for s in segments for b in s.blocks}
    layout = model.layout()
    return AllocatorCheck(
        placements_matched=counts["placed"],
        placements=counts["placements"],
        segments_matched=counts["segments_matched"],
        segments=counts["segments"],
        segments_unexpected=counts["unexpected"],
        reserved_matched=model.reserved_bytes == sum(s.total_size for s in segments),
        allocated_matched=model.allocated_bytes
        == sum(b.size for s in segments for b in s.blocks if b.state in _ACTIVE_STATES),
        blocks_matched=len(dump_blocks & layout),
        blocks=len(dump_blocks),
        settings=settings.describe(),
        settings_differ=differ,
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------------------------
# What if the settings were different


def what_if(records: SnapshotRecords, device: int, settings: AllocatorSettings) -> Simulation:
    """Replay ``device``'s allocations under ``settings`` from an empty allocator: the blocks
    live when the trace began are allocated first (in address order), then the trace's
    allocations and frees, and each request the trace records failing (``oom``) is asked
    again: ``Simulation.ooms`` says whether it would still fail (give ``capacity_bytes``, e.g.
    :attr:`SnapshotDevice.capacity_bytes`). Compare with the same call under default
    settings: the recorded reserve also holds segments cached before the trace, which a
    replay from empty does not."""
    trace = records.traces.get(device) or empty_trace()
    start = trace_start(records, device)
    model = CachingAllocator(settings)
    held: dict[Hashable, int] = {}
    for address, _, requested, _ in start.live:
        placed = model.malloc(requested)
        if placed is not None:
            held[address] = placed[0]
    action = trace.action.tolist()
    addr, size, stream = trace.addr.tolist(), trace.size.tolist(), trace.stream.tolist()
    for i, code in enumerate(action):
        if code == ALLOC:
            placed = model.malloc(size[i], stream[i])
            if placed is not None:
                held[addr[i]] = placed[0]
        elif code == FREE_COMPLETED:
            mine = held.pop(addr[i], None)
            if mine is not None:
                model.free(mine)
        elif code == OOM:
            # The request that failed is asked again; if it fits now it stays allocated (the
            # trace cannot say when the program would have freed it).
            model.malloc(size[i], stream[i])
    return _simulation(model)
