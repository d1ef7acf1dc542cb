"""Where a report's numbers come from (:class:`Source`), and what recordings made elsewhere add
to a run: a CUDA memory snapshot's segments, fragmentation, out-of-memory events and what-if
replays (:class:`SnapshotSection`), the caching-allocator model's check of it
(:class:`AllocatorModel`)."""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core import fields


@dataclass(frozen=True, kw_only=True)
class SourceFile:
    """One file a report was read from: its ``path``, ``kind`` (``trace`` or ``snapshot``), the
    labels of the ``runs`` it gave, and what it records about itself (rank, world size,
    distributed backend, torch version; None where it does not say)."""

    path: str = fields.text(required=True)
    kind: str = fields.text(required=True)
    runs: tuple[str, ...] = fields.items(fields.TEXT)
    rank: int | None = fields.maybe_count()
    world_size: int | None = fields.maybe_count()
    distributed_backend: str | None = fields.optional_text()
    torch_version: str | None = fields.optional_text()


@dataclass(frozen=True, kw_only=True)
class Source:
    """Where a report's numbers come from: ``kind`` ``live`` (profiled here), ``trace`` (chrome
    traces), ``snapshot`` (CUDA memory snapshots), ``trace+snapshot`` (both), ``estimate``;
    ``paths`` as given, ``files`` each file read."""

    kind: str = fields.text(required=True)
    paths: tuple[str, ...] = fields.items(fields.TEXT)
    files: tuple[SourceFile, ...] = fields.items(SourceFile)


@dataclass(frozen=True, kw_only=True)
class SnapshotSite:
    """Requested bytes live at the peak that were allocated at one ``site`` (``file:line
    function`` of the innermost Python frame), in ``count`` blocks."""

    site: str = fields.text(required=True)
    bytes: int = fields.size()
    count: int = fields.count()


@dataclass(frozen=True, kw_only=True)
class Fragmentation:
    """The reserve at dump time: ``cached_bytes`` = reserved - allocated (free, held by the
    cache), the largest free block, the trace's largest request and the cached bytes that could
    not hold it (other pool, other stream, or too small; None without a trace)."""

    cached_bytes: int = fields.size()
    largest_free_block_bytes: int = fields.size()
    largest_request_bytes: int | None = fields.maybe_size()
    unusable_bytes: int | None = fields.maybe_size()


@dataclass(frozen=True, kw_only=True)
class OomEvent:
    """An out-of-memory the trace recorded (``index``: its event number), explained: the request
    (rounded, as recorded), free on the device, and what the allocator held then. ``cause`` is
    ``fragmentation`` when the cache held enough free bytes but no block that fits."""

    index: int = fields.count()
    time_us: int | None = fields.maybe_count()
    requested_bytes: int = fields.size()
    free_on_device_bytes: int = fields.size()
    reserved_bytes: int = fields.size()
    allocated_bytes: int = fields.size()
    largest_free_block_bytes: int = fields.size()
    cause: str = fields.text(default="capacity", choices=("capacity", "fragmentation"))


@dataclass(frozen=True, kw_only=True)
class WhatIf:
    """The snapshot's allocations replayed from an empty allocator under ``settings``: the
    highest reserved and allocated bytes (block sizes), reserved above allocated, segments asked
    of the device, the largest free block at the end, and how many recorded out-of-memory
    requests would still fail within ``capacity_bytes`` (None: capacity unknown, not checked)."""

    settings: str = fields.text(required=True)
    reserved_peak_bytes: int = fields.size()
    allocated_peak_bytes: int = fields.size()
    reserve_overhead_bytes: int = fields.size()
    segment_allocations: int = fields.count()
    largest_free_block_bytes: int = fields.size()
    capacity_bytes: int | None = fields.maybe_size()
    ooms: int = fields.count()


@dataclass(frozen=True, kw_only=True)
class SnapshotSection:
    """What a CUDA memory snapshot says about one device beyond the run's numbers.

    At dump time: segments (small, large, expandable), reserved, allocated (block sizes) and
    requested bytes. Its trace: events, each action's count, frees of blocks allocated before
    it began (the ring buffer wrapped when > 0), the highest live requested bytes and when,
    the sites live then, the memory the allocator could have had (reserved + free at the first
    out-of-memory), fragmentation, each out-of-memory explained, and the what-if replays asked for.
    """

    segments: int = fields.count()
    small_segments: int = fields.count()
    large_segments: int = fields.count()
    expandable_segments: int = fields.count()
    reserved_bytes: int = fields.size()
    allocated_bytes: int = fields.size()
    requested_bytes: int = fields.size()
    trace_events: int = fields.count()
    trace_actions: dict[str, int] = fields.mapping(fields.COUNT)
    frees_without_alloc: int = fields.count()
    peak_requested_bytes: int = fields.size()
    peak_time_us: int | None = fields.maybe_count()
    capacity_bytes: int | None = fields.maybe_size()
    sites_at_peak: tuple[SnapshotSite, ...] = fields.items(SnapshotSite)
    fragmentation: Fragmentation = fields.nested(Fragmentation)
    ooms: tuple[OomEvent, ...] = fields.items(OomEvent)
    what_if: tuple[WhatIf, ...] = fields.items(WhatIf)


@dataclass(frozen=True, kw_only=True)
class AllocatorModel:
    """The caching-allocator model's replay of a snapshot's trace against what was recorded:
    allocations placed at the recorded address, segments asked for at the same event with the
    same size (and those the trace does not have), blocks at dump time reproduced, reserved and
    allocated bytes at the end equal; ``exact`` when all are. ``settings``: the settings it ran
    with; ``settings_differ``: recorded settings it does not follow."""

    placements_matched: int = fields.count()
    placements: int = fields.count()
    segments_matched: int = fields.count()
    segments: int = fields.count()
    segments_unexpected: int = fields.count()
    blocks_matched: int = fields.count()
    blocks: int = fields.count()
    reserved_matched: bool = fields.flag()
    allocated_matched: bool = fields.flag()
    exact: bool = fields.flag(init=False)
    settings: str = fields.text(default="default")
    settings_differ: tuple[str, ...] = fields.items(fields.TEXT)

    def __post_init__(self) -> None:
        exact = (
            self.placements_matched == self.placements
            and self.segments_matched == self.segments
            and not self.segments_unexpected
            and self.blocks_matched == self.blocks
            and self.reserved_matched
            and self.allocated_matched
        )
        object.__setattr__(self, "exact", exact)
