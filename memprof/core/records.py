"""The records stage: what every source (a live profile, a trace file, fake execution)
produces and the analysis consumes. Plain arrays, no torch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CALL_MARKER = "memprof.call"
"""Name of the ``record_function`` range that memprof puts around each measured call."""

MAPPED_RANGE = "[memory-mapped file]"
"""Name of the range memprof puts around a memory-mapped load (``torch.load(mmap=True)``):
the profiler counts a mapping as an allocation of the file's size."""

DISPATCH_RANGE = "PythonDispatchMode"
"""The profiler's range around a ``TorchDispatchMode``'s handling of an op (the op tracker's)."""

AUTOGRAD_NODE = "autograd::engine::evaluate_function"
"""Prefix of the range autograd's engine puts around each backward node it runs. The threads
that run them work for the call: on CUDA, autograd runs backward on a thread of its own per
device, whose allocations are the call's."""


def other_thread_bytes(
    mem_thread: np.ndarray,
    mem_bytes: np.ndarray,
    call_threads: np.ndarray,
    op_thread: np.ndarray,
    op_name: Sequence[str] | np.ndarray,
    op_code: np.ndarray | None = None,
) -> int:
    """Bytes allocated on threads that do not work for the calls: neither a call marker's nor
    one that ran autograd's backward nodes. 0 without call markers (nothing to tell them by).
    With ``op_code``, ``op_name`` holds one name per code (names interned)."""
    if not len(call_threads) or not len(mem_bytes):
        return 0
    calling = np.asarray(call_threads, dtype=np.int64)
    if not np.isin(mem_thread, calling).all():  # the op names are looked at only then
        if op_code is None:
            count = len(op_name)
            autograd = np.fromiter((n.startswith(AUTOGRAD_NODE) for n in op_name), dtype=bool, count=count)
        else:
            codes = [code for code, n in enumerate(op_name) if n.startswith(AUTOGRAD_NODE)]
            autograd = np.isin(op_code, codes)
        calling = np.union1d(calling, op_thread[autograd]).astype(np.int64)
    return int(mem_bytes[~np.isin(mem_thread, calling) & (mem_bytes > 0)].sum())


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
    op_code: np.ndarray | None = None
    """Optional: each op's name as an int code into ``op_code_names`` (names interned while
    reading); lets the analysis group ops without hashing every name again."""
    op_code_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A profile whose ops were filtered or renamed (``dataclasses.replace``) must filter its
        # codes alike or drop them: codes that no longer match the names would group ops wrongly.
        if self.op_code is not None and len(self.op_code) != len(self.op_name):
            raise ValueError(f"{len(self.op_code)} op codes for {len(self.op_name)} ops")

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


# ---- What a tracker saw during the profiled calls (issue 11) ------------------------------------
# Produced by memprof.sources.tracking, consumed by memprof.analysis.attribution. Times are on the
# profiler's clock (Unix nanoseconds), so they order against the allocator records exactly.

PHASES = ("forward", "backward", "optimizer", "recompute")
"""Phase codes of :class:`TrackedOps`: index into this tuple. ``recompute``: forward work done
again during backward (activation checkpointing re-runs a block's forward to rebuild the
tensors it did not keep)."""
FORWARD, BACKWARD, OPTIMIZER, RECOMPUTE = range(len(PHASES))


@dataclass(frozen=True)
class Allocations:
    """The measured device's allocator records with their addresses: ``bytes`` > 0 allocates at
    ``ptr``, < 0 frees the block at ``ptr``. Sorted by time (stable)."""

    time: np.ndarray
    bytes: np.ndarray
    ptr: np.ndarray

    @staticmethod
    def from_lists(records: Sequence[tuple[int, int, int]]) -> Allocations:
        """From (time, bytes, ptr) triples, sorted by time (ties keep their order)."""
        array = np.array(records, dtype=np.int64).reshape(-1, 3)
        order = np.argsort(array[:, 0], kind="stable")
        array = array[order]
        return Allocations(time=array[:, 0].copy(), bytes=array[:, 1].copy(), ptr=array[:, 2].copy())


@dataclass(frozen=True)
class Site:
    """A statement in the user's code: ``file`` as given to the user (relative to the working
    directory when inside it), the statement's first ``line`` and its ``text`` on one line."""

    file: str
    line: int
    text: str

    @property
    def source(self) -> str:
        """``file.py:LINE``."""
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class TrackedStorage:
    """A storage the tracker recognised as state of the program: a parameter, a gradient,
    optimizer state, an input (reachable from the arguments) or other (a module buffer, a
    tensor held by a module global). ``seen_ns`` is when it was seen live; ``died_ns`` when its
    storage was freed, if that happened while tracking (the profiler does not record frees of
    blocks allocated before it started)."""

    ptr: int
    nbytes: int
    seen_ns: int
    died_ns: int | None
    kind: str
    name: str
    module: str
    shape: str
    dtype: str
    role: str = ""  # what the distributed machinery holds it as (memprof.model.explanation.ROLES)


@dataclass(frozen=True)
class TrackedOps:
    """Every op the tracker saw run, in order, as arrays: its window ``[t0, t1]``, name (index
    into ``names``), the statement that ran it (index into ``sites``, -1 when unknown: the
    innermost frame of the user's code or of a library's), the module call
    it ran in (index into :class:`ModuleCalls`, -1 outside modules; in backward, the call whose
    forward made the autograd node), and its phase (index into :data:`PHASES`)."""

    t0: np.ndarray
    t1: np.ndarray
    name: np.ndarray
    site: np.ndarray
    module_call: np.ndarray
    phase: np.ndarray
    names: tuple[str, ...]
    user_site: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """The innermost statement of the user's own code (index into ``sites``, -1 when unknown
    or the same as ``site``): the user's line that called the library line ``site``. Empty:
    -1 for every op."""

    @staticmethod
    def empty() -> TrackedOps:
        """No ops (program state only was tracked)."""
        none = np.zeros(0, dtype=np.int64)
        return TrackedOps(t0=none, t1=none, name=none, site=none, module_call=none, phase=none, names=())

    def user_sites(self) -> np.ndarray:
        """``user_site`` with one value per op (-1 where not given)."""
        if len(self.user_site) == len(self.t0):
            return self.user_site
        return np.full(len(self.t0), -1, dtype=np.int64)


@dataclass(frozen=True)
class Statements:
    """The statements of the profiled code that called into C between ops (Python's ``c_call``
    events, e.g. ``torch.get_rng_state()`` in ``torch.utils.checkpoint``), each from when it
    first called: its ``time``, statement (index into ``sites``), the user's line that called it
    (``user_site``, -1 when unknown or the same), module call and phase. What is allocated
    outside any op was made by the last statement before it."""

    time: np.ndarray
    site: np.ndarray
    user_site: np.ndarray
    module_call: np.ndarray
    phase: np.ndarray
    end: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Compiled runs: when each statement's last event came (it ran from ``time`` to ``end``);
    empty otherwise."""
    follows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """Compiled runs: whether what ran after the statement before ended and before this one
    started ran on this one (no statement of its file starts between the two); empty otherwise."""

    @staticmethod
    def empty() -> Statements:
        none = np.zeros(0, dtype=np.int64)
        return Statements(time=none, site=none, user_site=none, module_call=none, phase=none)


@dataclass(frozen=True)
class ModuleCalls:
    """Forward calls of ``nn.Module``s, in the order they started: the module's dotted path
    (index into ``paths``), the enclosing call (-1 for none) and the forward's window (a
    checkpointed block's forward run again in backward is a call of its own, phase
    ``recompute``)."""

    path: np.ndarray
    parent: np.ndarray
    start: np.ndarray
    end: np.ndarray
    paths: tuple[str, ...]
    classes: tuple[str, ...] = ()
    """The class of the module at each path (parallel to ``paths``; empty: unknown)."""
    phase: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Per call, :data:`PHASES` code ``forward`` or ``recompute`` (a forward re-run during
    backward by activation checkpointing). Empty: every call is forward."""

    def phases(self) -> np.ndarray:
        """``phase`` with one value per call (forward where not given)."""
        if len(self.phase) == len(self.path):
            return self.phase
        return np.full(len(self.path), FORWARD, dtype=np.int64)


@dataclass(frozen=True)
class TrackedFacts:
    """What the tracker saw while the profiled calls ran (see memprof.sources.tracking).

    ``outputs_*``: the storage address of each tensor an op returned, the op (index into
    ``ops``), its shape and dtype (indices into ``shapes``/``dtypes``). ``saved_*``: storages
    autograd saved for backward, and when. ``storages``: recognised program state.
    ``optimizer_steps``: (start, end) of each ``Optimizer.step``. ``device``: the measured
    device ("cpu", "cuda:0")."""

    allocations: Allocations
    ops: TrackedOps
    module_calls: ModuleCalls
    sites: tuple[Site, ...]
    outputs_ptr: np.ndarray
    outputs_op: np.ndarray
    outputs_shape: np.ndarray
    outputs_dtype: np.ndarray
    shapes: tuple[str, ...]
    dtypes: tuple[str, ...]
    saved_ptr: np.ndarray
    saved_time: np.ndarray
    storages: tuple[TrackedStorage, ...]
    optimizer_steps: tuple[tuple[int, int], ...] = ()
    notes: tuple[str, ...] = ()
    device: str = "cpu"
    ops_tracked: bool = True
    """False when only program state was tracked (no ops, lines or saved tensors): the cheap
    tracking that leaves the measured run's allocations untouched."""
    sequence: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Autograd sequence numbers seen in forward; ``sequence_op[i]`` is the first op dispatched
    under ``sequence[i]``: an autograd node numbered ``n`` was made by the op seen under ``n + 1``."""
    sequence_op: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    backward_ops: TrackedOps | None = None
    """Ops autograd ran, read from the profile (the tracker stays out of backward): the outermost
    aten op in each autograd node's range; ``backward_sequence`` holds the node's number."""
    backward_sequence: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rewrap_op: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Ops (indices into ``ops``) given a Python number for a Tensor argument, one row per
    number, and the bytes of the tensor it became (``rewrap_bytes``): the tracker's own
    allocations, left out of the explanation."""
    rewrap_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    inputs_op: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Tensor arguments of forward ops: the op, shape and dtype (indices into ``shapes`` and
    ``dtypes``). A gradient made in backward has the shape of one of them."""
    inputs_shape: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    inputs_dtype: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    inputs_site: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Compiled runs: the user's line of each node result listed in ``inputs_*`` (-1 unknown)."""
    shape_numel: tuple[int, ...] = ()
    """Elements of each shape in ``shapes``; ``dtype_bytes``: bytes per element of each dtype."""
    dtype_bytes: tuple[int, ...] = ()
    compiled: bool = False
    """A compiled run: ``ops`` are the kernels Inductor's wrapper called (read from the profile),
    their outputs unknown; ``fused_kernels`` maps each fused kernel to the aten ops it replaced."""
    fused_kernels: tuple[tuple[str, tuple[str, ...]], ...] = ()
    calls: tuple[tuple[int, int], ...] = ()
    """(start, end) of each measured call (the CALL_MARKER ranges), read with the records."""
    recompute: tuple[tuple[int, int], ...] = ()
    """(start, end) of each forward run again in backward (activation checkpointing): its ops
    are forward work, recorded by the tracker, not backward ops read from the profile."""
    statements: Statements = field(default_factory=Statements.empty)
    """The statements that called into C between forward ops: the lines of what is allocated
    outside any op (the RNG state activation checkpointing saves, a storage made in Python);
    in a compiled run, the statements of the call, for the lines of eager code at a graph break."""
    graph_calls: tuple[tuple[int, int, str], ...] = ()
    """Compiled runs: (start, end, graph) of each compiled graph's call, in order of start; the
    graph as Dynamo's id of it and the function it compiled (``0/1 step (train.py:12)``)."""
    graph_callers: tuple[tuple[int, int], ...] = ()
    """Compiled runs: for each of ``graph_calls``, the (site, user site) of its caller, the
    innermost statement of a library's or the user's code on the stack and the user's own
    (indices into ``sites``; -1: none): ``loss.backward()`` for a backward graph."""


def string_codes(values: Sequence[Any] | np.ndarray) -> tuple[list[str], np.ndarray]:
    """The distinct ``str(value)`` of ``values``, sorted, and the index of each value's among
    them (what ``np.unique(array.astype(str), return_inverse=True)`` gives). Interned through a
    dict: a numpy string array gives every string the width of the longest, and one op name of
    50 million characters in a trace asked for 33 GiB."""
    index: dict[str, int] = {}
    first = np.fromiter(
        (index.setdefault(str(v), len(index)) for v in values), dtype=np.int64, count=len(values)
    )
    distinct = sorted(index)
    rank = np.empty(len(distinct), dtype=np.int64)
    rank[[index[text] for text in distinct]] = np.arange(len(distinct))
    return distinct, rank[first]


MIN_BLOCK_SIZE = 512
"""The CUDA caching allocator's smallest block: every request is rounded up to a multiple."""


def round_size(size: int) -> int:
    """The block size torch's allocator gives a request of ``size`` bytes (default settings)."""
    if size < MIN_BLOCK_SIZE:
        return MIN_BLOCK_SIZE
    return MIN_BLOCK_SIZE * ((size + MIN_BLOCK_SIZE - 1) // MIN_BLOCK_SIZE)
