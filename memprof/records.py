"""The records stage: what every source (a live profile, a trace file, fake execution)
produces and the analysis consumes. Plain arrays, no torch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

CALL_MARKER = "memprof.call"
"""Name of the ``record_function`` range that memprof puts around each measured call."""

@dataclass(frozen=True)
class RawProfile:
    """The profiler's records, as arrays. Times are nanoseconds on the profiler's clock.

    ``op_*`` describe op intervals (CPU-side ops and ``record_function`` ranges);
    ``mem_*`` the allocator records of the measured device (``mem_bytes`` > 0 allocates,
    < 0 frees); ``calls`` the (start, end) of each measured call.
    """

    op_name: np.ndarray
    op_start: np.ndarray
    op_end: np.ndarray
    op_thread: np.ndarray
    op_async: np.ndarray
    mem_time: np.ndarray
    mem_bytes: np.ndarray
    calls: list[tuple[int, int]] = field(default_factory=list)
    other_thread_bytes: int = 0
    mem_thread: np.ndarray | None = None
    """Thread of each allocator record (same numbering as ``op_thread``), when the source knows
    it: the op at the peak is then looked for on the thread that allocated."""

    @staticmethod
    def from_lists(
        ops: Sequence[tuple[str, int, int, int]] | Sequence[tuple[str, int, int, int, bool]],
        mem: Sequence[tuple[int, int]],
        calls: Sequence[tuple[int, int]] = (),
    ) -> RawProfile:
        """Build from plain lists: ``ops`` of (name, start, end, thread[, is_async]) and
        ``mem`` of (time, bytes). Used by tests and benchmarks to state exact cases."""
        names = np.array([o[0] for o in ops], dtype=object)
        return RawProfile(
            op_name=names,
            op_start=np.array([o[1] for o in ops], dtype=np.int64),
            op_end=np.array([o[2] for o in ops], dtype=np.int64),
            op_thread=np.array([o[3] for o in ops], dtype=np.int64),
            op_async=np.array([bool(o[4]) if len(o) > 4 else False for o in ops], dtype=bool),
            mem_time=np.array([m[0] for m in mem], dtype=np.int64),
            mem_bytes=np.array([m[1] for m in mem], dtype=np.int64),
            calls=list(calls),
        )


# --- CUDA memory snapshots (``torch.cuda.memory._snapshot()`` / ``_dump_snapshot``) ---------------

SNAPSHOT_ACTIONS: tuple[str, ...] = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "oom",
    "snapshot",
    "user_defined",
)
"""The allocator's trace actions; :attr:`AllocatorTrace.action` holds indices into this tuple
(an action this tuple does not name is stored as ``len(SNAPSHOT_ACTIONS)``, "other")."""

ACTION_CODE: dict[str, int] = {name: code for code, name in enumerate(SNAPSHOT_ACTIONS)}
OTHER_ACTION = len(SNAPSHOT_ACTIONS)


@dataclass(frozen=True)
class Frame:
    """One frame of a recorded stack: Python (``file.py``, line > 0) or C++ (line 0)."""

    filename: str
    line: int
    name: str


@dataclass(frozen=True)
class SnapshotBlock:
    """A block of a segment at dump time. ``stack`` indexes :attr:`SnapshotRecords.stacks`
    (-1: none recorded). ``state`` is torch's: ``active_allocated``, ``active_pending_free``,
    ``inactive``."""

    address: int
    size: int
    requested_size: int
    state: str
    stack: int = -1


@dataclass(frozen=True)
class SnapshotSegment:
    """A segment (one ``cudaMalloc``, or a mapped range of an expandable segment) at dump time."""

    device: int
    address: int
    total_size: int
    stream: int
    segment_type: str
    is_expandable: bool
    pool_id: tuple[int, int]
    blocks: tuple[SnapshotBlock, ...]


@dataclass(frozen=True)
class AllocatorTrace:
    """One device's allocator trace (the ring buffer of ``_record_memory_history``), in order.

    ``action`` codes index :data:`SNAPSHOT_ACTIONS`; ``addr``/``size`` as torch records them
    (``alloc`` and ``free_*`` sizes are the requested bytes; ``segment_*`` the segment's;
    ``oom``: ``addr`` is the device's free bytes and ``size`` the rounded request);
    ``time_us`` is -1 where the snapshot has no times; ``stack`` indexes
    :attr:`SnapshotRecords.stacks` (-1: none).
    """

    action: np.ndarray
    addr: np.ndarray
    size: np.ndarray
    stream: np.ndarray
    time_us: np.ndarray
    stack: np.ndarray

    def __len__(self) -> int:
        return len(self.action)


@dataclass(frozen=True)
class SnapshotRecords:
    """A whole snapshot: segments of every device, each device's trace, and the stacks they
    refer to (deduplicated). ``allocator_settings`` is None for snapshots older than the field."""

    segments: tuple[SnapshotSegment, ...]
    traces: dict[int, AllocatorTrace]
    stacks: tuple[tuple[Frame, ...], ...]
    allocator_settings: dict[str, object] | None = None

    def devices(self) -> list[int]:
        """Device indices with segments or trace events, ascending."""
        found = {segment.device for segment in self.segments}
        found.update(device for device, trace in self.traces.items() if len(trace))
        return sorted(found)
