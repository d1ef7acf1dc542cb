"""Read the measured calls' profile of a CPU session (or a block's: :mod:`memprof.sources.block`)
in one walk of its event tree: the ops and allocator records the analysis counts (what
:mod:`memprof.sources.live.kineto` reads from the flat event list) together with each record's
address and, where asked, backward's ops (what :mod:`memprof.sources.live.tree` reads).

Reading both the flat list and the tree paid for every event twice: torch builds a C++ copy of
each event for ``events()`` and a Python object for each tree node, and most of either read is
those per-event calls. The tree holds every event the flat list holds, with the same name,
start, end and thread, in the same order (a node's children come in the order torch sorted the
events in, so a depth-first walk meets them in that order). What a tree node does not say is
whether its op ended on another thread than it started on, or is asynchronous: ops of another
thread, TorchScript functions (resumed on a worker thread after ``torch.jit.wait``), RPC ranges
(``rpc_async#...``, ended when their future completes) and ops still open when profiling
stopped (the flat list gives them the end thread 0). So the tree is read for the ops only where
it can prove none of that: one thread, ops and allocator records only, no op of another kind
than a torch op, a backward node or a ``record_function`` range other than RPC's, and every op
inside a measured call (whose ``CALL_MARKER`` range ended). Otherwise the ops are read from the
flat list, as before, and the tree still gives the records' addresses. (The flat list also
leaves out events a profiler marked hidden: torch marks none, only custom profilers do.)
"""

from __future__ import annotations

from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import torch  # noqa: TID253 - reads torch's profiler objects

from memprof.core.gcpause import gc_paused
from memprof.core.records import AUTOGRAD_NODE, RawProfile
from memprof.sources.live.kineto import (
    CALL_CODE,
    FIRST_OP_CODE,
    MEMORY_NAME,
    Columns,
    NameCodes,
    assemble_raw,
    kineto_results,
    raw_from_profiler,
    return_freed_memory,
)
from memprof.sources.live.tree import MemoryRecords, ProfileRead, allocations_of, walk_with_context

if TYPE_CHECKING:
    from memprof.sources.tracking.tracker import Tracker

# The kinds of op range that start and end on one thread, in one piece: torch's ops (FUNCTION),
# autograd's nodes (BACKWARD_FUNCTION) and ``record_function`` ranges (USER_SCOPE; RPC's are
# told by their names).
_SYNCHRONOUS_SCOPES = frozenset({"FUNCTION", "BACKWARD_FUNCTION", "USER_SCOPE"})
_RPC_PREFIX = "rpc_"
_BLOCK = 4096
_TORCH_OP = torch._C._profiler._EventType.TorchOp

_start = attrgetter("start_time_ns")
_end = attrgetter("end_time_ns")
_thread = attrgetter("start_tid")
_scope_name = attrgetter("extra_fields.scope.name")


def read_session(
    prof: Any, device: str, tracker: Tracker | None, *, compiled: bool = False
) -> tuple[RawProfile, ProfileRead | None]:
    """The raw profile of a finished session of ``device`` (measured calls or a block) and,
    where one walk of its event tree gives them too, what its ``tracker`` reads from the
    profile (:meth:`Tracker.facts` takes it as ``read``): an eager, tracked session on the CPU.
    CUDA sessions, untracked ones and compiled runs (whose tree is read with its kernels) read
    torch's flat event list, the tracker its tree."""
    if device.startswith("cuda"):
        index = torch.device(device).index
        return raw_from_profiler(prof, device_type="CUDA", device_index=index), None
    if tracker is None or compiled:
        return raw_from_profiler(prof, device_type="CPU"), None
    return read_measured(prof, backward_ops=tracker.backward_from_profile)


def read_measured(prof: Any, *, backward_ops: bool = False) -> tuple[RawProfile, ProfileRead | None]:
    """The raw profile and the host allocator's records (with addresses) and calls of a finished
    CPU-only session (``memprof.sources.live.profiling.memory_profile("cpu")``), its event tree
    walked once; the ops are read from the flat event list where the tree cannot prove them
    synchronous, and the records are left to the tree's own reader (None) where a node is not
    what a CPU session's tree holds (a range named like the allocator's records).
    ``backward_ops``: the ops autograd ran are read in the same walk (what the op tracker reads
    from the profile where it does not see backward itself)."""
    try:
        with gc_paused():
            walk = _Walk()
            roots = kineto_results(prof).experimental_event_tree()
            if backward_ops:
                walk.run_with_backward(roots)
            else:
                walk.run(roots)
            del roots
            read = walk.profile_read()
            raw = walk.raw()
            del walk
    except (AttributeError, TypeError):
        return raw_from_profiler(prof, device_type="CPU"), None
    if raw is None:
        return raw_from_profiler(prof, device_type="CPU"), read
    return_freed_memory()
    return raw, read


class _Walk:
    """One depth-first walk, in the tree's order; nodes are read ``_BLOCK`` at a time, one
    accessor over the whole block (``map`` in C)."""

    def __init__(self) -> None:
        self.codes = NameCodes.fresh()
        self.exact = True  # the ops read so far can stand for the flat list's
        self._ops: list[Any] = []
        self._names: list[str] = []
        self._records = MemoryRecords(torch.device("cpu"), threads=True)
        self._op_parts: list[np.ndarray] = []
        self._checked = 0  # codes below this were judged (their kind of node, whether to scope)
        self._scoped = np.zeros(0, dtype=bool)  # by code: its ranges' kinds are to be read
        self.calls: list[tuple[int, int]] = []  # each call marker's (start, end)
        self.backward: list[tuple[str, int, int, int]] | None = None  # read by run_with_backward

    def run(self, roots: list[Any]) -> None:
        stack = roots[::-1]
        pop = stack.pop
        records = self._records
        keep_op, keep_name, keep_record = self._ops.append, self._names.append, records.nodes.append
        memory, block = MEMORY_NAME, _BLOCK
        while stack:
            node = pop()
            name = node.name
            if name == memory:  # another kind of node named so fails at the records' fields
                keep_record(node)
                if len(records.nodes) == block:
                    records.flush()
                    keep_record = records.nodes.append
                continue
            keep_op(node)
            keep_name(name)
            if len(self._ops) == block:
                self._flush_ops()
                keep_op, keep_name = self._ops.append, self._names.append
            children = node.children
            if children:
                children.reverse()  # popped first to last: the tree's order
                stack += children
        records.flush()
        self._flush_ops()
        self.calls.sort()

    def run_with_backward(self, roots: list[Any]) -> None:
        """The walk of :meth:`run`, carrying autograd's context (:func:`tree.walk_with_context`):
        backward's ops are read too."""
        self.backward = []
        walk_with_context(roots, self._records, [], self.backward, None, every=self._keep)
        self._records.flush()
        self._flush_ops()
        self.calls.sort()

    def _keep(self, node: Any, name: str) -> None:
        self._ops.append(node)
        self._names.append(name)
        if len(self._ops) == _BLOCK:
            self._flush_ops()

    def _flush_ops(self) -> None:
        nodes, names = self._ops, self._names
        self._ops, self._names = [], []
        if not nodes:
            return
        codes = np.fromiter(map(self.codes.__getitem__, names), dtype=np.int32, count=len(names))
        calls = list(compress(nodes, (codes == CALL_CODE).tolist()))
        self.calls += zip(map(_start, calls), map(_end, calls), strict=True)
        if not self.exact:
            return
        self._judge_new_codes(nodes, codes)
        # the ops and call markers; the utility names torch's table leaves out are not read
        oplike = (codes >= FIRST_OP_CODE) | (codes == CALL_CODE)
        if not oplike.all():
            nodes, codes = list(compress(nodes, oplike.tolist())), codes[oplike]
        scoped = self._scoped[codes].tolist()
        if any(scoped) and not set(map(_scope_name, compress(nodes, scoped))) <= _SYNCHRONOUS_SCOPES:
            self.exact = False
            return
        count = len(nodes)
        part = np.empty((4, count), dtype=np.int64)
        part[0] = codes
        part[1] = np.fromiter(map(_start, nodes), dtype=np.int64, count=count)
        part[2] = np.fromiter(map(_end, nodes), dtype=np.int64, count=count)
        part[3] = np.fromiter(map(_thread, nodes), dtype=np.int64, count=count)
        self._op_parts.append(part)

    def _judge_new_codes(self, nodes: list[Any], codes: np.ndarray) -> None:
        """Each name met for the first time: its first node must be a torch op (not an
        out-of-memory record, a Python call, a backend or GPU event); the ranges of names that
        are neither torch ops nor backward nodes have their kinds read, RPC's are not synchronous."""
        total = len(self.codes)
        if total == self._checked:
            return
        names = list(self.codes)
        new = np.flatnonzero(codes >= self._checked)
        _, first = np.unique(codes[new], return_index=True)
        if any(nodes[i].tag != _TORCH_OP for i in new[first].tolist()):
            self.exact = False
        scoped = np.zeros(total, dtype=bool)
        scoped[: len(self._scoped)] = self._scoped
        for code in range(self._checked, total):
            name = names[code]
            if name.startswith(_RPC_PREFIX):
                self.exact = False
            scoped[code] = not name.startswith(("aten::", AUTOGRAD_NODE))
        self._scoped, self._checked = scoped, total

    def profile_read(self) -> ProfileRead:
        """The allocator records with addresses and the calls, as :func:`tree.read_profile`
        gives them (that walk meets the records last to first)."""
        allocations = allocations_of(self._records.rows()[:3, ::-1])
        backward, read = self.backward or [], self.backward is not None
        return ProfileRead(allocations, backward, [], list(self.calls), with_backward=read)

    def raw(self) -> RawProfile | None:
        """The raw profile, as the flat list would give it; None when the walk cannot prove
        that (see the module's docstring), or an op lies outside the measured calls."""
        # Only CPU-device events are roots of the tree: an MKLDNN record made outside any op
        # would be in the flat list alone.
        host = [device.type for device, read in self._records.devices.items() if read]
        if not self.exact or any(kind != "cpu" for kind in host):
            return None
        memory = self._records.rows()
        ops = np.concatenate(self._op_parts, axis=1) if self._op_parts else np.zeros((4, 0), dtype=np.int64)
        threads = np.concatenate([ops[3], memory[3]])
        if len(threads) and (threads != threads[0]).any():
            return None
        is_call = ops[0] == CALL_CODE
        if not _inside_calls(ops[1:3, ~is_call], self.calls):
            return None
        columns = Columns(calls=list(self.calls), call_threads=set(ops[3][is_call].tolist()))
        ops = ops[:, ~is_call]
        columns.op_code.append(ops[0].astype(np.int32))
        columns.op_start.append(ops[1])
        columns.op_end.append(ops[2])
        columns.op_thread.append(ops[3])
        columns.op_async.append(np.zeros(ops.shape[1], dtype=bool))
        columns.mem_time.append(memory[0])
        columns.mem_bytes.append(memory[1])
        columns.mem_thread.append(memory[3])
        return assemble_raw(columns, list(self.codes))


def _inside_calls(spans: np.ndarray, calls: list[tuple[int, int]]) -> bool:
    """Whether each (start, end) in ``spans`` (two rows) lies within one of the ``calls``
    (sorted, disjoint). An op still open when profiling stopped does not: the tree gives it no
    end (before the end of time) or the profile's end (after its call's), and only the flat
    list says that it did not end on its thread."""
    if not spans.shape[1]:
        return True
    if not calls:
        return False
    starts, ends = np.array(calls, dtype=np.int64).T
    call = np.searchsorted(starts, spans[0], side="right") - 1
    return bool(((call >= 0) & (spans[1] >= spans[0]) & (spans[1] <= ends[np.maximum(call, 0)])).all())
