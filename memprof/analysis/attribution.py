"""What is live at the peak: every byte by category, module and source line (issue 11).

Pure: the profiler's allocator records (with addresses) and what the tracker saw
(:class:`memprof.records.TrackedFacts`) in, numbers out. No torch.

The method:

1. Lifetimes. Each allocation record is paired with the next record at its address (its
   free). Storages the tracker found live that no record allocated were made before the
   profiler started: they are live from the start until the tracker saw them die (a synthetic
   free: the profiler never records frees of blocks it did not see allocated). A recorded
   free that pairs with nothing frees such a block (CUDA records those frees).
2. Absolute live bytes over time = the sum of the lifetimes' allocations and frees, merged in
   time order. Per call: live at its start, its highest point (the footprint) and the peak
   above the start (``peak_bytes`` = footprint - live at start, exact also when the call frees
   tensors made before it).
3. What each lifetime is: the tracker's observations are (address, time) pairs; the lifetime
   holding that address at that time is the one observed. Categories by precedence:
   parameter > gradient > optimizer_state > input > other state > activation (saved for
   backward) > temporary (returned by an op) > workspace (allocated inside an op, never
   returned: not a tensor of the program) > other (allocated outside any op).
4. The lifetimes live at the peak, grouped, largest first; every byte in exactly one category;
   what cannot be attributed is listed with its reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from memprof.analysis.timeline import downsample, highest_per_bucket
from memprof.model.explanation import (
    CATEGORIES,
    AtPeak,
    AtPeakEntry,
    CallNumbers,
    KernelStats,
    ModuleStats,
    Unattributed,
)
from memprof.records import (
    BACKWARD,
    FORWARD,
    PHASES,
    RECOMPUTE,
    Allocations,
    RawProfile,
    TrackedFacts,
    TrackedOps,
)

__all__ = [
    "CATEGORIES",
    "AtPeak",
    "AtPeakEntry",
    "Attribution",
    "CallNumbers",
    "KernelStats",
    "ModuleStats",
    "Unattributed",
    "attribute",
    "combine",
    "with_device_counters",
]


# Kind bits of a lifetime, from the tracker's observations.
_PARAMETER, _GRADIENT, _OPTIMIZER_STATE, _INPUT, _STATE_OTHER, _SAVED = 1, 2, 4, 8, 16, 32
_KIND_BITS = {
    "parameter": _PARAMETER,
    "gradient": _GRADIENT,
    "optimizer_state": _OPTIMIZER_STATE,
    "input": _INPUT,
    "other": _STATE_OTHER,
}
# Precedence: the first bit set decides the category.
_PRECEDENCE = (
    (_PARAMETER, "parameter"),
    (_GRADIENT, "gradient"),
    (_OPTIMIZER_STATE, "optimizer_state"),
    (_INPUT, "input"),
    (_STATE_OTHER, "other"),
    (_SAVED, "activation"),
)
_NEVER = np.iinfo(np.int64).max
_BEFORE = np.iinfo(np.int64).min // 2

OUTSIDE_OPS = "allocated after the last op the tracker saw"
NOT_TRACKED = "made during the call; its ops were not tracked (eager and Inductor code are)"
UNKNOWN_BEFORE = (
    "made before the call and not reachable from its arguments, model or optimizer; freed during it"
)


@dataclass(frozen=True)
class Attribution:
    """The explained peak of a run: the numbers of the call with the highest peak, what is
    live at its peak (``at_peak``), the module table and each call's numbers.

    ``records_peak_bytes`` is what the allocator records alone say (they never show frees of
    tensors made before profiling); ``peak_bytes`` corrects it with the frees the tracker saw.
    ``freed_before_peak_bytes``: bytes live at the call's start and freed before its peak, so
    that entries made during the call sum to ``peak_bytes + freed_before_peak_bytes``.
    ``timeline``: live bytes by category over the peak call (``t_ns`` from its start)."""

    footprint_bytes: int
    live_at_start_bytes: int
    peak_bytes: int
    records_peak_bytes: int
    freed_before_peak_bytes: int
    peak_call: int
    peak_time_ns: int
    at_peak: AtPeak
    modules: tuple[ModuleStats, ...]
    calls: tuple[CallNumbers, ...]
    timeline_t_ns: tuple[int, ...] = ()
    timeline_by_category: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    kernels: tuple[KernelStats, ...] = ()
    """Compiled runs: the kernels that produced buffers, largest first."""
    fused_kernels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Compiled runs: each fused kernel and the aten ops it replaced."""
    peak_at_ns: int = 0
    """The peak moment on the profiler's clock (of the measured calls)."""
    live_t_ns: tuple[int, ...] = ()
    """Live bytes over all the measured calls: ``live_t_ns`` from the first call's start,
    ``live_bytes`` above live at that start (exact: frees of blocks made before profiling
    included), reduced to at most 4,000 points keeping each bucket's highest."""
    live_bytes: tuple[int, ...] = ()


# ---- lifetimes ----------------------------------------------------------------------------------


@dataclass
class _Lifetimes:
    """Every block as one lifetime (parallel arrays) and the merged event sequence."""

    ptr: np.ndarray
    nbytes: np.ndarray
    start: np.ndarray  # time allocated (_BEFORE for blocks made before profiling)
    end: np.ndarray  # time freed (_NEVER if not freed)
    alloc_pos: np.ndarray  # index of its allocation in the merged events
    free_pos: np.ndarray  # index of its free in the merged events, or len(events)
    recorded: np.ndarray  # allocated in the records (else made before profiling)
    fact: np.ndarray  # index of the TrackedStorage that made a pseudo lifetime, else -1
    times: np.ndarray  # merged events
    deltas: np.ndarray
    owner: np.ndarray  # lifetime of each merged event
    stale_frees: int = 0


def _pair_records(time: np.ndarray, size: np.ndarray, ptr: np.ndarray) -> tuple[np.ndarray, ...]:
    """(allocation index, its free's index or -1) for each allocation record, and the indices of
    frees that pair with no allocation. A free pairs with the record just before it at the same
    address when that is an allocation of the same size."""
    count = len(time)
    order = np.lexsort((np.arange(count), ptr))
    ptr_sorted, size_sorted = ptr[order], size[order]
    paired = np.zeros(count, dtype=bool)
    if count > 1:
        paired[:-1] = (
            (ptr_sorted[1:] == ptr_sorted[:-1])
            & (size_sorted[:-1] > 0)
            & (size_sorted[1:] == -size_sorted[:-1])
        )
    allocs_sorted = np.flatnonzero(size_sorted > 0)
    allocs = order[allocs_sorted]
    frees = np.where(paired[allocs_sorted], order[np.minimum(allocs_sorted + 1, count - 1)], -1)
    free_paired = np.zeros(count, dtype=bool)
    free_paired[order[np.flatnonzero(paired) + 1]] = True
    loose_frees = np.flatnonzero((size < 0) & ~free_paired)
    return allocs, frees, loose_frees


def _cover(
    l_ptr: np.ndarray, l_start: np.ndarray, l_end: np.ndarray, q_ptr: np.ndarray, q_time: np.ndarray
) -> np.ndarray:
    """For each query (address, time), the lifetime holding that address at that time, or -1."""
    if not len(l_ptr) or not len(q_ptr):
        return np.full(len(q_ptr), -1, dtype=np.int64)
    ptr_values, ptr_codes = np.unique(np.concatenate([l_ptr, q_ptr]), return_inverse=True)
    time_values, time_ranks = np.unique(np.concatenate([l_start, q_time]), return_inverse=True)
    scale = np.int64(len(time_values) + 1)
    l_key = ptr_codes[: len(l_ptr)].astype(np.int64) * scale + time_ranks[: len(l_ptr)]
    q_key = ptr_codes[len(l_ptr) :].astype(np.int64) * scale + time_ranks[len(l_ptr) :]
    order = np.argsort(l_key, kind="stable")
    found = np.searchsorted(l_key[order], q_key, side="right") - 1
    candidate = order[np.maximum(found, 0)]
    ok = (found >= 0) & (l_ptr[candidate] == q_ptr) & (l_end[candidate] > q_time)
    return np.where(ok, candidate, -1)


def _lifetimes(facts: TrackedFacts) -> _Lifetimes:
    records = facts.allocations
    keep = records.bytes != 0
    time, size, ptr = records.time[keep], records.bytes[keep], records.ptr[keep]
    allocs, frees, loose_frees = _pair_records(time, size, ptr)
    rec_end = np.where(frees >= 0, time[np.maximum(frees, 0)], _NEVER)

    # Storages seen live that no record covers were made before profiling.
    storages = facts.storages
    s_ptr = np.array([s.ptr for s in storages], dtype=np.int64)
    s_seen = np.array([s.seen_ns for s in storages], dtype=np.int64)
    covered = _cover(ptr[allocs], time[allocs], rec_end, s_ptr, s_seen)
    pseudo: dict[tuple[int, int], int] = {}  # (ptr, died) -> first storage row
    for uncovered in np.flatnonzero(covered < 0):
        storage = storages[int(uncovered)]
        end = _NEVER if storage.died_ns is None else storage.died_ns
        pseudo.setdefault((storage.ptr, end), int(uncovered))
    # A free in the records that pairs with no allocation frees one of those (CUDA records
    # them), or a block the tracker did not know about.
    loose_by_ptr: dict[int, list[int]] = {}
    for index in loose_frees:
        loose_by_ptr.setdefault(int(ptr[index]), []).append(int(index))
    made_before = _MadeBefore()
    size = size.copy()
    for (address, died), row in pseudo.items():
        storage = storages[row]
        claimed = next((i for i in loose_by_ptr.get(address, []) if time[i] >= storage.seen_ns), None)
        if claimed is None:
            made_before.add(address, storage.nbytes, died, -1, row)
            continue
        loose_by_ptr[address].remove(claimed)
        if facts.device == "cpu" and -size[claimed] != storage.nbytes:
            # torch's CPU reporter keeps the sizes of blocks seen in earlier profiles: a free it
            # records for a block made before this one may carry an older block's size.
            made_before.stale += 1
            size[claimed] = -storage.nbytes
        made_before.add(address, -int(size[claimed]), int(time[claimed]), claimed, row)
    for address, indices in loose_by_ptr.items():
        for index in indices:
            made_before.add(address, -int(size[index]), int(time[index]), index, -1)
    return _merge(time, size, ptr, allocs, frees, rec_end, made_before)


class _MadeBefore:
    """Blocks live before profiling: address, bytes, when freed (_NEVER if not), the record of
    that free (-1 if none: a synthetic free) and the TrackedStorage row that found it (-1)."""

    def __init__(self) -> None:
        self.ptr: list[int] = []
        self.nbytes: list[int] = []
        self.end: list[int] = []
        self.free_record: list[int] = []
        self.fact: list[int] = []
        self.stale = 0  # recorded frees whose size was replaced by the storage's

    def add(self, ptr: int, nbytes: int, end: int, free_record: int, fact: int) -> None:
        self.ptr.append(ptr)
        self.nbytes.append(nbytes)
        self.end.append(end)
        self.free_record.append(free_record)
        self.fact.append(fact)


def _merge(
    time: np.ndarray,
    size: np.ndarray,
    ptr: np.ndarray,
    allocs: np.ndarray,
    frees: np.ndarray,
    rec_end: np.ndarray,
    before: _MadeBefore,
) -> _Lifetimes:
    """One event sequence: blocks made before profiling (allocated at the very start), the
    records, and synthetic frees of those blocks, in time order."""
    n_rec, n_alloc, n_before = len(time), len(allocs), len(before.ptr)
    b_bytes = np.array(before.nbytes, dtype=np.int64)
    b_end = np.array(before.end, dtype=np.int64)
    free_record = np.array(before.free_record, dtype=np.int64)
    synthetic = np.flatnonzero((free_record < 0) & (b_end != _NEVER))
    times = np.concatenate([np.full(n_before, _BEFORE, dtype=np.int64), time, b_end[synthetic]])
    deltas = np.concatenate([b_bytes, size, -b_bytes[synthetic]])
    order = np.argsort(times, kind="stable")
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    total = len(order)
    # Lifetimes: the recorded allocations first, then the blocks made before profiling.
    rec_free_pos = np.where(frees >= 0, position[n_before + np.maximum(frees, 0)], total)
    b_free_pos = np.full(n_before, total, dtype=np.int64)
    has_record = free_record >= 0
    b_free_pos[has_record] = position[n_before + free_record[has_record]]
    b_free_pos[synthetic] = position[n_before + n_rec + np.arange(len(synthetic))]
    alloc_pos = np.concatenate([position[n_before + allocs], position[:n_before]])
    free_pos = np.concatenate([rec_free_pos, b_free_pos])
    owner = np.full(total, -1, dtype=np.int64)
    lifetimes = np.arange(n_alloc + n_before)
    owner[alloc_pos] = lifetimes
    freed = free_pos < total
    owner[free_pos[freed]] = lifetimes[freed]
    return _Lifetimes(
        ptr=np.concatenate([ptr[allocs], np.array(before.ptr, dtype=np.int64)]),
        nbytes=np.concatenate([size[allocs], b_bytes]),
        start=np.concatenate([time[allocs], np.full(n_before, _BEFORE, dtype=np.int64)]),
        end=np.concatenate([rec_end, b_end]),
        alloc_pos=alloc_pos,
        free_pos=free_pos,
        recorded=np.concatenate([np.ones(n_alloc, dtype=bool), np.zeros(n_before, dtype=bool)]),
        fact=np.concatenate([np.full(n_alloc, -1, dtype=np.int64), np.array(before.fact, dtype=np.int64)]),
        times=times[order],
        deltas=deltas[order],
        owner=owner,
        stale_frees=before.stale,
    )


# ---- preparing the facts ------------------------------------------------------------------------


@dataclass
class _Backward:
    """Per op of the prepared table: read from the profile (no outputs known), and the forward
    op whose autograd node ran it (-1 if none or unknown)."""

    from_profile: np.ndarray
    forward_op: np.ndarray


def _prepared(facts: TrackedFacts) -> tuple[TrackedFacts, _Backward]:
    """The facts with one op table (forward ops and the backward ops read from the profile, in
    order of end) and without the tracker's own allocations."""
    facts, backward = _with_backward_ops(facts)
    return replace(facts, allocations=_without_rewrapped(facts)), backward


def _without_recomputed(
    backward: TrackedOps, sequence: np.ndarray, windows: tuple[tuple[int, int], ...]
) -> tuple[TrackedOps, np.ndarray]:
    """The backward ops read from the profile less those run inside a recompute (forward work
    done again in backward: the tracker recorded it as such)."""
    if not windows or not len(backward.t0):
        return backward, sequence
    starts = np.array([w[0] for w in windows], dtype=np.int64)
    ends = np.array([w[1] for w in windows], dtype=np.int64)
    at = np.searchsorted(starts, backward.t0, side="right") - 1
    inside = (at >= 0) & (backward.t1 <= ends[np.maximum(at, 0)])
    if not inside.any():
        return backward, sequence
    keep = ~inside
    kept = TrackedOps(
        t0=backward.t0[keep],
        t1=backward.t1[keep],
        name=backward.name[keep],
        site=backward.site[keep],
        module_call=backward.module_call[keep],
        phase=backward.phase[keep],
        names=backward.names,
        user_site=backward.user_sites()[keep],
    )
    return kept, sequence[keep]


def _with_backward_ops(facts: TrackedFacts) -> tuple[TrackedFacts, _Backward]:
    forward, backward = facts.ops, facts.backward_ops
    backward_sequence = facts.backward_sequence
    if backward is not None:
        backward, backward_sequence = _without_recomputed(backward, backward_sequence, facts.recompute)
    if backward is None or not len(backward.t0):
        count = len(forward.t0)
        if facts.compiled:
            # A compiled run's ops are its kernels, read from the profile; the shapes of what
            # each kernel's nodes produce are listed under the kernel itself.
            return facts, _Backward(np.ones(count, dtype=bool), np.arange(count, dtype=np.int64))
        return facts, _Backward(np.zeros(count, dtype=bool), np.full(count, -1, dtype=np.int64))
    # The forward op behind each autograd node: the first op seen under its number + 1.
    wanted = backward_sequence + 1
    position = np.minimum(np.searchsorted(facts.sequence, wanted), max(len(facts.sequence) - 1, 0))
    found = (backward_sequence >= 0) & (len(facts.sequence) > 0)
    if len(facts.sequence):
        found &= facts.sequence[position] == wanted
    origin = np.where(found, facts.sequence_op[position] if len(facts.sequence) else -1, -1)
    names = forward.names + tuple(n for n in backward.names if n not in forward.names)
    code = np.array([names.index(n) for n in backward.names], dtype=np.int64)
    t1 = np.concatenate([forward.t1, backward.t1])
    order = np.argsort(t1, kind="stable")
    new_index = np.empty(len(order), dtype=np.int64)
    new_index[order] = np.arange(len(order))

    def merged(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.concatenate([a, b])[order]

    ops = TrackedOps(
        t0=merged(forward.t0, backward.t0),
        t1=t1[order],
        name=merged(forward.name, code[backward.name]),
        site=merged(forward.site, np.where(origin >= 0, forward.site[np.maximum(origin, 0)], -1)),
        module_call=merged(
            forward.module_call, np.where(origin >= 0, forward.module_call[np.maximum(origin, 0)], -1)
        ),
        phase=merged(forward.phase, backward.phase),
        names=names,
        user_site=merged(
            forward.user_sites(), np.where(origin >= 0, forward.user_sites()[np.maximum(origin, 0)], -1)
        ),
    )
    from_profile = merged(np.zeros(len(forward.t0), dtype=bool), np.ones(len(backward.t0), dtype=bool))
    forward_op = merged(np.full(len(forward.t0), -1, dtype=np.int64), origin)
    forward_op = np.where(forward_op >= 0, new_index[np.maximum(forward_op, 0)], -1)
    prepared = replace(
        facts,
        ops=ops,
        outputs_op=new_index[facts.outputs_op],
        inputs_op=new_index[facts.inputs_op],
        rewrap_op=new_index[facts.rewrap_op],
        sequence_op=new_index[facts.sequence_op],
        backward_ops=None,
        backward_sequence=np.zeros(0, dtype=np.int64),
    )
    return prepared, _Backward(from_profile, forward_op)


def _without_rewrapped(facts: TrackedFacts) -> Allocations:
    """The allocations less those the tracker caused: a Python number passed for a Tensor
    argument becomes a new tensor when the dispatch mode calls the op (the first allocation of
    that size in the op's window, freed inside it)."""
    records = facts.allocations
    if not len(facts.rewrap_op):
        return records
    ops = facts.ops
    # Each op's records: [lo, hi), found for all the ops at once.
    los = np.searchsorted(records.time, ops.t0[facts.rewrap_op], side="left").tolist()
    his = np.searchsorted(records.time, ops.t1[facts.rewrap_op], side="right").tolist()
    dropped: set[int] = set()
    for lo, hi, size in zip(los, his, facts.rewrap_bytes.tolist(), strict=True):
        sizes = records.bytes[lo:hi].tolist()
        for i, nbytes in enumerate(sizes):
            if nbytes == size and lo + i not in dropped:
                ptrs = records.ptr[lo:hi].tolist()
                free = next((k for k in range(i + 1, len(ptrs)) if ptrs[k] == ptrs[i]), None)
                if free is not None and lo + free not in dropped and sizes[free] == -size:
                    dropped.update((lo + i, lo + free))
                break
    if not dropped:
        return records
    keep = np.ones(len(records.time), dtype=bool)
    keep[np.fromiter(dropped, dtype=np.int64, count=len(dropped))] = False
    return Allocations(time=records.time[keep], bytes=records.bytes[keep], ptr=records.ptr[keep])


# ---- what each lifetime is ----------------------------------------------------------------------


@dataclass
class _What:
    """Per lifetime: its category code, the op that made it (or inside which it was allocated),
    the output that made it, and the TrackedStorage row that describes it best."""

    category: np.ndarray
    origin_op: np.ndarray
    maker: np.ndarray
    fact: np.ndarray


def _classify(facts: TrackedFacts, lt: _Lifetimes, backward: _Backward) -> _What:
    count = len(lt.ptr)
    bits = np.zeros(count, dtype=np.int64)
    best_fact = lt.fact.copy()
    storages = facts.storages
    if storages:
        s_ptr = np.array([s.ptr for s in storages], dtype=np.int64)
        s_seen = np.array([s.seen_ns for s in storages], dtype=np.int64)
        s_bit = np.array([_KIND_BITS.get(s.kind, _STATE_OTHER) for s in storages], dtype=np.int64)
        hit = _cover(lt.ptr, lt.start, lt.end, s_ptr, s_seen)
        found = hit >= 0
        np.bitwise_or.at(bits, hit[found], s_bit[found])
        # The describing row: the one of the highest-precedence kind (the lowest bit).
        for row in np.flatnonzero(found)[np.argsort(-s_bit[found], kind="stable")]:
            best_fact[hit[row]] = row
    saved = _cover(lt.ptr, lt.start, lt.end, facts.saved_ptr, facts.saved_time)
    np.bitwise_or.at(bits, saved[saved >= 0], _SAVED)
    ops = facts.ops
    if facts.compiled and len(ops.t1):
        # Compiled forward graphs return what backward needs: a buffer made in forward and
        # freed by a backward kernel was saved for backward.
        made_in = _op_slot(ops.t1, lt.start)
        freed_in = _op_slot(ops.t1, np.minimum(lt.end, _NEVER - 1))
        saved_for_backward = (
            lt.recorded
            & (made_in >= 0)
            & (freed_in >= 0)
            & (ops.phase[np.maximum(made_in, 0)] == 0)
            & (ops.phase[np.maximum(freed_in, 0)] == 1)
            & (lt.end != _NEVER)
        )
        bits[saved_for_backward] |= _SAVED

    # Each allocation belongs to the op in whose slot it happened: after the previous op ended,
    # until this one ended (arguments are prepared, e.g. torch.tensor's data, just before).
    slot = _op_slot(ops.t1, lt.start)
    slot[~lt.recorded] = -1
    maker = np.full(count, -1, dtype=np.int64)
    if len(facts.outputs_ptr):
        out_op = facts.outputs_op
        made = _cover(lt.ptr, lt.start, lt.end, facts.outputs_ptr, ops.t1[out_op])
        # Made by the op only if allocated in its slot (else it existed before: a view, in place).
        ok = made >= 0
        ok[ok] &= slot[made[ok]] == out_op[ok]
        first = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, made[ok], np.flatnonzero(ok))
        maker = np.where(first == np.iinfo(np.int64).max, -1, first)
    origin = slot
    bits[_kept_from_recompute(facts, lt, maker)] |= _SAVED

    category = np.full(count, CATEGORIES.index("other"), dtype=np.int64)
    no_bits = bits == 0
    category[no_bits & (maker >= 0)] = CATEGORIES.index("temporary")
    category[no_bits & (maker < 0) & (origin >= 0)] = CATEGORIES.index("workspace")
    # Ops read from the profile (backward) have no known outputs: what outlives the op is
    # taken for its output, what it freed before returning for its workspace.
    if backward.from_profile.any():
        op = np.maximum(origin, 0)
        outlives = (origin >= 0) & backward.from_profile[op] & (lt.end > ops.t1[op])
        category[no_bits & (maker < 0) & outlives] = CATEGORIES.index("temporary")
    for bit, name in reversed(_PRECEDENCE):
        category[(bits & bit) != 0] = CATEGORIES.index(name)
    return _What(category=category, origin_op=origin, maker=maker, fact=best_fact)


def _kept_from_recompute(facts: TrackedFacts, lt: _Lifetimes, maker: np.ndarray) -> np.ndarray:
    """Lifetimes made by a forward run again in backward (activation checkpointing) that outlive
    that recompute: tensors rebuilt for backward, as a forward's saved activations are."""
    kept = np.zeros(len(lt.ptr), dtype=bool)
    if not facts.recompute or not len(facts.outputs_op):
        return kept
    made = maker >= 0
    op = facts.outputs_op[maker[made]]
    recomputed = facts.ops.phase[op] == RECOMPUTE
    starts = np.array([w[0] for w in facts.recompute], dtype=np.int64)
    ends = np.array([w[1] for w in facts.recompute], dtype=np.int64)
    at = np.maximum(np.searchsorted(starts, lt.start[made], side="right") - 1, 0)
    kept[np.flatnonzero(made)] = recomputed & (lt.end[made] > ends[at])
    return kept


def _op_slot(t1: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The op in whose slot each time falls (after the previous op's end, up to its own), or -1
    after the last op. Ops are recorded as they end, so ``t1`` is in order."""
    found = np.searchsorted(t1, times, side="left")
    return np.where(found < len(t1), found, -1).astype(np.int64)


# ---- the numbers of each call -------------------------------------------------------------------


@dataclass
class _Window:
    start_ns: int
    end_ns: int
    lo: int  # first merged event inside the call
    hi: int  # one past the last
    peak: int  # live bytes at the peak are prefix[peak]: events [0, peak) have happened


def _windows(calls: list[tuple[int, int]], lt: _Lifetimes, prefix: np.ndarray) -> list[_Window]:
    if calls:
        spans = [(int(s), int(e)) for s, e in calls]
    else:
        recorded = lt.times[lt.times > _BEFORE]
        spans = [(int(recorded[0]), int(recorded[-1])) if len(recorded) else (0, 0)]
    windows = []
    for start, end in spans:
        lo = int(np.searchsorted(lt.times, start, side="left"))
        hi = int(np.searchsorted(lt.times, end, side="right"))
        peak = lo + int(np.argmax(prefix[lo : hi + 1]))
        windows.append(_Window(start, end, lo, hi, peak))
    return windows


def _call_numbers(windows: list[_Window], prefix: np.ndarray) -> tuple[CallNumbers, ...]:
    calls = []
    for index, window in enumerate(windows):
        start = int(prefix[window.lo])
        growth = int(prefix[windows[index + 1].lo]) - start if index + 1 < len(windows) else None
        calls.append(
            CallNumbers(
                call=index + 1,
                live_at_start_bytes=start,
                footprint_bytes=int(prefix[window.peak]),
                peak_bytes=int(prefix[window.peak]) - start,
                live_at_end_bytes=int(prefix[window.hi]),
                growth_bytes=growth,
            )
        )
    return tuple(calls)


def _records_peak(times: np.ndarray, deltas: np.ndarray, windows: list[tuple[int, int]]) -> int:
    """Highest rise above the start over the calls, from allocator records alone."""
    order = np.argsort(times, kind="stable")
    times, prefix = times[order], np.concatenate(([0], np.cumsum(deltas[order], dtype=np.int64)))
    best = 0
    for start, end in windows:
        lo = int(np.searchsorted(times, start, side="left"))
        hi = int(np.searchsorted(times, end, side="right"))
        best = max(best, int(prefix[lo : hi + 1].max()) - int(prefix[lo]))
    return best


def _leak_note(calls: tuple[CallNumbers, ...], warm: bool) -> str | None:
    """Say so when live bytes grew from every call to the next (the first call may make lazily
    created state, e.g. optimizer state, when no warm-up call ran)."""
    growths = [c.growth_bytes for c in calls if c.growth_bytes is not None]
    if not warm:
        growths = growths[1:]
    if not growths or min(growths) <= 0:
        return None
    figures = ", ".join(f"+{g:,} B" for g in growths)
    return (
        f"live bytes grew from one call to the next ({figures}): tensors made in a call are "
        "kept after it (a leak?)"
    )


# ---- what is live at the peak -------------------------------------------------------------------


def _at_peak(
    facts: TrackedFacts, lt: _Lifetimes, what: _What, window: _Window, backward: _Backward
) -> tuple[AtPeak, np.ndarray]:
    """Entries grouped by (category, module, phase, source, op, shape, dtype, before_call) and
    the unattributed lines; also the mask of lifetimes live at the peak."""
    live = (lt.alloc_pos < window.peak) & (lt.free_pos >= window.peak)
    sums = np.zeros(len(CATEGORIES), dtype=np.int64)  # exact: np.add.at, not bincount's float64
    np.add.at(sums, what.category[live], lt.nbytes[live])
    by_category = dict(zip(CATEGORIES, sums.tolist(), strict=True))
    describe = _Describer(facts, backward.forward_op)
    groups: dict[tuple[str | bool, ...], list[int]] = {}
    loose: dict[tuple[str, bool], list[int]] = {}
    for index in np.flatnonzero(live):
        before = bool(lt.alloc_pos[index] < window.lo)
        nbytes = int(lt.nbytes[index])
        category = CATEGORIES[what.category[index]]
        origin = int(what.origin_op[index])
        if category == "other" and origin < 0 and what.fact[index] < 0:
            reason = (
                UNKNOWN_BEFORE
                if not lt.recorded[index]
                else OUTSIDE_OPS
                if facts.ops_tracked
                else NOT_TRACKED
            )
            _add(loose, (reason, before), nbytes)
            continue
        described = describe(origin, int(what.maker[index]), int(what.fact[index]), nbytes)
        key = (category, *described, before)
        _add(groups, key, nbytes)
    entries = sorted(
        (
            AtPeakEntry(
                bytes=total,
                count=count,
                category=str(key[0]),
                module=str(key[1]),
                phase=str(key[2]),
                source=str(key[3]),
                source_text=str(key[4]),
                op=str(key[5]),
                shape=str(key[6]),
                dtype=str(key[7]),
                user_source=str(key[8]),
                user_source_text=str(key[9]),
                before_call=bool(key[10]),
            )
            for key, (total, count) in groups.items()
        ),
        key=lambda e: (-e.bytes, CATEGORIES.index(e.category), e.module, e.source, e.op, e.shape),
    )
    unattributed = sorted(
        (
            Unattributed(bytes=total, count=count, reason=reason, before_call=before)
            for (reason, before), (total, count) in loose.items()
        ),
        key=lambda u: -u.bytes,
    )
    freed = (lt.alloc_pos < window.lo) & (lt.free_pos >= window.lo) & (lt.free_pos < window.peak)
    footprint = int(lt.nbytes[live].sum())
    start = int(lt.nbytes[(lt.alloc_pos < window.lo) & (lt.free_pos >= window.lo)].sum())
    return (
        AtPeak(
            by_category=by_category,
            entries=tuple(entries),
            unattributed=tuple(unattributed),
            footprint_bytes=footprint,
            peak_bytes=footprint - start,
            freed_before_peak_bytes=int(lt.nbytes[freed].sum()),
        ),
        live,
    )


def _add(groups: dict, key: tuple, nbytes: int) -> None:  # type: ignore[type-arg]
    slot = groups.get(key)
    if slot is None:
        groups[key] = [nbytes, 1]
    else:
        slot[0] += nbytes
        slot[1] += 1


_STATE_KINDS = frozenset({"parameter", "gradient", "optimizer_state"})


class _Describer:
    """(module, phase, source, source_text, op, shape, dtype, user_source, user_source_text) of
    a lifetime from the op that made it, the output it is, and the storage row that names it.
    Tensors made by backward ops read from the profile take the shape of the forward op's
    argument or result of their size (a gradient has its variable's shape)."""

    def __init__(self, facts: TrackedFacts, forward_op: np.ndarray) -> None:
        self.facts = facts
        self.forward_op = forward_op
        calls = facts.module_calls
        self.call_paths = [calls.paths[p] for p in calls.path]
        self.user_site = facts.ops.user_sites()
        self._by_op: tuple[tuple[np.ndarray, np.ndarray], ...] | None = None

    def __call__(self, origin: int, maker: int, fact: int, nbytes: int) -> tuple[str, ...]:
        facts, ops = self.facts, self.facts.ops
        module = phase = source = text = op = shape = dtype = user_source = user_text = ""
        if origin >= 0:
            call = int(ops.module_call[origin])
            module = self.call_paths[call] if call >= 0 else ""
            phase = PHASES[int(ops.phase[origin])]
            site = int(ops.site[origin])
            if site >= 0:
                source, text = facts.sites[site].source, facts.sites[site].text
            user = int(self.user_site[origin])
            if user >= 0:
                user_source, user_text = facts.sites[user].source, facts.sites[user].text
            op = ops.names[int(ops.name[origin])]
        if maker >= 0:
            shape = facts.shapes[int(facts.outputs_shape[maker])]
            dtype = facts.dtypes[int(facts.outputs_dtype[maker])]
        elif origin >= 0 and self.forward_op[origin] >= 0:
            shape, dtype, site = self._shape_of_size(int(self.forward_op[origin]), nbytes)
            if site >= 0:  # compiled: the line of the node whose result this buffer is
                source, text = facts.sites[site].source, facts.sites[site].text
        if fact >= 0:
            storage = facts.storages[fact]
            if storage.kind in _STATE_KINDS:
                # A parameter's, its gradient's or its optimizer state's module and shape are
                # the parameter's: the op that made the storage (a compiled backward kernel
                # writing a weight's gradient) may name another module, and its buffer the
                # shape of whatever tensor of that size the op touched.
                module = storage.module or module
                shape, dtype = storage.shape or shape, storage.dtype or dtype
            else:
                module = module or storage.module
                shape, dtype = shape or storage.shape, dtype or storage.dtype
        if user_source == source:
            user_source = user_text = ""
        return module, phase, source, text, op, shape, dtype, user_source, user_text

    def _shape_of_size(self, forward: int, nbytes: int) -> tuple[str, str, int]:
        """(shape, dtype, site or -1) of the first argument or result of ``forward`` with
        ``nbytes`` bytes; ("", "", -1) if none."""
        facts = self.facts
        if self._by_op is None:
            # The arguments' and results' rows by op, each op's in the order recorded (a few
            # lookups among many rows: sorted once, searched each time).
            self._by_op = tuple(
                (ops[order], order)
                for ops in (facts.inputs_op, facts.outputs_op)
                for order in [np.argsort(ops, kind="stable")]
            )
        sites = facts.inputs_site if len(facts.inputs_site) else None
        for which, (ops, order) in enumerate(self._by_op):
            lo, hi = np.searchsorted(ops, [forward, forward + 1], side="left").tolist()
            for row in order[lo:hi].tolist():
                shape, dtype = (
                    (facts.inputs_shape[row], facts.inputs_dtype[row])
                    if which == 0
                    else (facts.outputs_shape[row], facts.outputs_dtype[row])
                )
                if facts.shape_numel[shape] * facts.dtype_bytes[dtype] == nbytes:
                    site = int(sites[row]) if which == 0 and sites is not None else -1
                    return facts.shapes[shape], facts.dtypes[dtype], site
        return "", "", -1


# ---- modules ------------------------------------------------------------------------------------


def _up(parent: np.ndarray, ids: np.ndarray, values: np.ndarray, ufunc: np.ufunc, init: int) -> np.ndarray:
    """Reduce ``values`` into each id and all its ancestors (parent -1 ends a chain)."""
    out = np.full(len(parent), init, dtype=np.int64)
    while len(ids):
        ufunc.at(out, ids, values)
        ids = parent[ids]
        keep = ids >= 0
        ids, values = ids[keep], values[keep]
    return out


def _modules(
    facts: TrackedFacts, lt: _Lifetimes, what: _What, live: np.ndarray, window: _Window, prefix: np.ndarray
) -> tuple[ModuleStats, ...]:
    """One row per module and phase: its calls, the highest rise inside them, what it allocated
    and what it made that is live at the peak (submodules included)."""
    calls, ops = facts.module_calls, facts.ops
    if not len(calls.path):
        return ()
    in_call = (calls.start >= window.start_ns) & (calls.start <= window.end_ns)
    alloc_prefix = np.concatenate(([0], np.cumsum(np.maximum(lt.deltas, 0) * (lt.times > _BEFORE))))
    # Bytes live at the peak, by the module call (and its ancestors) and phase that made them.
    origin = what.origin_op
    made_live = live & (origin >= 0)
    grouped: dict[tuple[str, int], list[int]] = {}  # (path, phase) -> first call, calls, peak, alloc, at peak
    for phase_code in (FORWARD, BACKWARD, RECOMPUTE):
        chosen = made_live.copy()
        chosen[made_live] = ops.phase[origin[made_live]] == phase_code
        owners = ops.module_call[origin[chosen]]
        has = owners >= 0
        at_peak = _up(calls.parent, owners[has], lt.nbytes[chosen][has], np.add, 0)
        spans, allocated = _phase_spans(facts, lt, what, window, phase_code)
        for call in np.flatnonzero(in_call):
            start, end = int(spans[call][0]), int(spans[call][1])
            if start < 0:
                continue  # no work of this phase for this call
            lo = int(np.searchsorted(lt.times, start, side="left"))
            hi = int(np.searchsorted(lt.times, end, side="right"))
            peak = int(prefix[lo : hi + 1].max()) - int(prefix[lo])
            alloc = int(alloc_prefix[hi] - alloc_prefix[lo]) if allocated is None else int(allocated[call])
            slot = grouped.setdefault((calls.paths[calls.path[call]], phase_code), [int(call), 0, 0, 0, 0])
            slot[1] += 1
            slot[2] = max(slot[2], peak)
            slot[3] += alloc
            slot[4] += int(at_peak[call])
    classes = calls.classes
    ordered = sorted(grouped.items(), key=lambda item: (item[0][1], item[1][0]))
    return tuple(
        ModuleStats(
            module=path,
            phase=PHASES[phase_code],
            calls=slot[1],
            peak_bytes=slot[2],
            allocated_bytes=slot[3],
            at_peak_bytes=slot[4],
            module_class=classes[calls.path[slot[0]]] if classes else "",
            parent=calls.paths[calls.path[calls.parent[slot[0]]]] if calls.parent[slot[0]] >= 0 else "",
        )
        for (path, phase_code), slot in ordered
    )


def _phase_spans(
    facts: TrackedFacts, lt: _Lifetimes, what: _What, window: _Window, phase: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per module call, the (start, end) of its work in ``phase`` (-1 when none), and the bytes
    allocated by that work (None: all that was allocated within the span). Forward: the calls'
    own windows; a recompute call (a checkpointed forward run again in backward): its window;
    backward, and the recompute work of compiled code: the first and last op of that phase made
    by its autograd nodes (its submodules' included)."""
    calls = facts.module_calls
    ends = np.where(calls.end >= 0, calls.end, window.end_ns)
    windows = np.stack([calls.start, ends], axis=1)
    own = calls.phases() == phase
    if phase == FORWARD:
        return np.where(own[:, None], windows, -1), None
    spans, allocated = _op_spans(facts, lt, what, window, phase)
    if phase == RECOMPUTE and own.any():
        return np.where(own[:, None], windows, spans), None
    return spans, allocated


def _op_spans(
    facts: TrackedFacts, lt: _Lifetimes, what: _What, window: _Window, phase: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per module call: (first, last) time of the ops of ``phase`` attributed to it (its
    submodules' included; -1 when none), and the bytes those ops allocated."""
    calls, ops = facts.module_calls, facts.ops
    inside = (ops.t0 >= window.start_ns) & (ops.t1 <= window.end_ns)
    chosen = (ops.phase == phase) & (ops.module_call >= 0) & inside
    owners = ops.module_call[chosen]
    big = np.iinfo(np.int64).max
    first = _up(calls.parent, owners, ops.t0[chosen], np.minimum, big)
    last = _up(calls.parent, owners, ops.t1[chosen], np.maximum, -1)
    spans = np.stack([np.where(first == big, -1, first), last], axis=1)
    made = lt.recorded & (what.origin_op >= 0)
    made[made] = chosen[what.origin_op[made]]
    allocated = _up(calls.parent, ops.module_call[what.origin_op[made]], lt.nbytes[made], np.add, 0)
    return spans, allocated


# ---- the timeline by category -------------------------------------------------------------------


def _timeline(
    lt: _Lifetimes, what: _What, window: _Window, max_points: int = 2000
) -> tuple[tuple[int, ...], dict[str, tuple[int, ...]]]:
    """Live bytes per category over the call (absolute: what was live at its start included),
    reduced to ``max_points`` keeping each bucket's highest total and the peak itself."""
    lo, hi = window.lo, window.hi
    live_start = (lt.alloc_pos < lo) & (lt.free_pos >= lo)
    base = np.zeros(len(CATEGORIES), dtype=np.int64)
    np.add.at(base, what.category[live_start], lt.nbytes[live_start])
    steps = hi - lo
    codes = what.category[lt.owner[lo:hi]]
    matrix = np.zeros((len(CATEGORIES), steps + 1), dtype=np.int64)
    matrix[codes, np.arange(1, steps + 1)] = lt.deltas[lo:hi]
    matrix = np.cumsum(matrix, axis=1) + base[:, None]
    t = np.concatenate(([window.start_ns], lt.times[lo:hi])) - window.start_ns
    keep = np.arange(steps + 1)
    if steps + 1 > max_points:
        highest = highest_per_bucket(matrix.sum(axis=0), max_points)
        keep = np.unique(np.concatenate([highest, [0, window.peak - lo]]))
    return (
        tuple(int(v) for v in t[keep]),
        {name: tuple(int(v) for v in matrix[code, keep]) for code, name in enumerate(CATEGORIES)},
    )


# ---- the whole -----------------------------------------------------------------------------------


def attribute(
    raw: RawProfile | None, facts: TrackedFacts, *, warm: bool = True, explain: bool = True
) -> Attribution:
    """Explain the peak of the profiled calls with what the tracker saw (``facts`` holds the
    allocator records and the calls' ranges). ``raw``, the same profile's flat records, is
    optional: given, they are cross-checked (a note says when they disagree).

    The run's numbers are those of the call with the highest peak above its start. ``warm``:
    warm-up calls ran before the first measured call (then live bytes growing during the first
    call counts towards the leak note). ``explain=False`` gives the numbers, the calls, the
    live-bytes timeline and the notes only: ``at_peak`` is empty (no categories), ``modules``,
    ``kernels`` and the timeline by category too; what each lifetime is is not worked out.
    """
    measured_records = facts.allocations
    facts, backward = _prepared(facts)
    lt = _lifetimes(facts)
    prefix = np.concatenate(([0], np.cumsum(lt.deltas, dtype=np.int64)))
    windows = _windows(list(facts.calls) if facts.calls or raw is None else raw.calls, lt, prefix)
    calls = _call_numbers(windows, prefix)
    worst = max(range(len(calls)), key=lambda i: (calls[i].peak_bytes, -i))
    window, numbers = windows[worst], calls[worst]
    freed = (lt.alloc_pos < window.lo) & (lt.free_pos >= window.lo) & (lt.free_pos < window.peak)
    spans = [(w.start_ns, w.end_ns) for w in windows]
    records_peak = _records_peak(measured_records.time, measured_records.bytes, spans)
    notes = list(facts.notes)
    if raw is None:
        pass
    elif len(raw.mem_time) != len(measured_records.time):
        notes.append(
            f"the profile holds {len(raw.mem_time):,} allocator records and {len(measured_records.time):,} "
            "with addresses: the explanation may miss some"
        )
    elif _records_peak(raw.mem_time, raw.mem_bytes, spans) != records_peak:
        notes.append("the allocator records with addresses disagree with the profiler's event list")
    freed_bytes = int(lt.nbytes[freed].sum())
    if freed_bytes:
        notes.append(
            f"{int(freed.sum())} block(s) live at the call's start ({freed_bytes:,} B) were freed before "
            "its peak; the peak above the start counts those frees, which the profiler does not record"
        )
    if lt.stale_frees:
        notes.append(
            f"{lt.stale_frees} recorded free(s) of blocks made before profiling carried a stale size "
            "(torch's CPU reporter remembers sizes from earlier profiles); the storages' sizes were used"
        )
    leak = _leak_note(calls, warm)
    if leak:
        notes.append(leak)
    live_t_ns, live_bytes = _live_timeline(lt, windows, prefix)
    unexplained = Attribution(
        footprint_bytes=numbers.footprint_bytes,
        live_at_start_bytes=numbers.live_at_start_bytes,
        peak_bytes=numbers.peak_bytes,
        records_peak_bytes=records_peak,
        freed_before_peak_bytes=freed_bytes,
        peak_call=worst + 1,
        peak_time_ns=int(lt.times[window.peak - 1]) - window.start_ns if window.peak > window.lo else 0,
        at_peak=AtPeak(),
        modules=(),
        calls=calls,
        notes=tuple(notes),
        fused_kernels=dict(facts.fused_kernels),
        peak_at_ns=int(lt.times[window.peak - 1]) if window.peak > window.lo else window.start_ns,
        live_t_ns=live_t_ns,
        live_bytes=live_bytes,
    )
    return _explained(unexplained, facts, lt, window, backward, prefix) if explain else unexplained


def _explained(
    numbers: Attribution,
    facts: TrackedFacts,
    lt: _Lifetimes,
    window: _Window,
    backward: _Backward,
    prefix: np.ndarray,
) -> Attribution:
    """``numbers`` with what is live at the peak, the modules, the timeline by category and
    (compiled runs) the kernels."""
    what = _classify(facts, lt, backward)
    at_peak, live = _at_peak(facts, lt, what, window, backward)
    t_ns, by_category = _timeline(lt, what, window)
    return replace(
        numbers,
        at_peak=at_peak,
        modules=_modules(facts, lt, what, live, window, prefix),
        timeline_t_ns=t_ns,
        timeline_by_category=by_category,
        kernels=_kernels(facts, lt, what, live, window) if facts.compiled else (),
    )


def _live_timeline(
    lt: _Lifetimes, windows: list[_Window], prefix: np.ndarray
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Live bytes from the first call's start to the last call's end, above live at that start."""
    lo, hi = windows[0].lo, windows[-1].hi
    start, end = windows[0].start_ns, windows[-1].end_ns
    base = prefix[lo]
    t = np.concatenate(([start], lt.times[lo:hi], [max(end, start)])) - start
    b = np.concatenate(([0], prefix[lo + 1 : hi + 1] - base, [prefix[hi] - base]))
    t, b = downsample(t, b)
    return tuple(int(v) for v in t), tuple(int(v) for v in b)


def _kernels(
    facts: TrackedFacts, lt: _Lifetimes, what: _What, live: np.ndarray, window: _Window
) -> tuple[KernelStats, ...]:
    ops = facts.ops
    in_call = (ops.t1 >= window.start_ns) & (ops.t0 <= window.end_ns)
    made = lt.recorded & (what.origin_op >= 0)
    made[made] = in_call[what.origin_op[made]]
    fused = dict(facts.fused_kernels)
    rows: dict[tuple[str, int], list[int]] = {}
    for op in np.flatnonzero(in_call):
        rows.setdefault((ops.names[ops.name[op]], int(ops.phase[op])), [0, 0, 0])[0] += 1
    origins = what.origin_op[made]
    for lifetime, op in zip(np.flatnonzero(made), origins, strict=True):
        slot = rows[ops.names[ops.name[op]], int(ops.phase[op])]
        slot[1] += int(lt.nbytes[lifetime])
        slot[2] += int(lt.nbytes[lifetime]) if live[lifetime] else 0
    stats = [
        KernelStats(name, PHASES[phase], calls, allocated, at_peak, fused.get(name, ()))
        for (name, phase), (calls, allocated, at_peak) in rows.items()
        if allocated
    ]
    return tuple(sorted(stats, key=lambda k: (-k.at_peak_bytes, -k.allocated_bytes, k.name)))


def combine(measured: Attribution, explained: Attribution) -> Attribution:
    """The measured run's numbers with the attribution pass's explanation of its peak.

    The measured pass tracks program state only (its allocations are exactly those of an
    untracked run); the attribution pass also tracks ops, lines and saved tensors, which gives
    tensors Python objects and so can change what torch allocates (autograd does not steal a
    gradient buffer that has one). A note says when its peak differs from the measured one.
    """
    notes = list(measured.notes)
    if (explained.peak_bytes, explained.footprint_bytes) != (measured.peak_bytes, measured.footprint_bytes):
        notes.append(
            f"the attribution pass peaked at {explained.footprint_bytes:,} B "
            f"({explained.peak_bytes:,} B above its start), the measured run at "
            f"{measured.footprint_bytes:,} B ({measured.peak_bytes:,} B above its start): what is live "
            "at the peak is that of the attribution pass"
        )
    notes.extend(n for n in explained.notes if n not in notes and "grew" not in n)
    return Attribution(
        footprint_bytes=measured.footprint_bytes,
        live_at_start_bytes=measured.live_at_start_bytes,
        peak_bytes=measured.peak_bytes,
        records_peak_bytes=measured.records_peak_bytes,
        freed_before_peak_bytes=measured.freed_before_peak_bytes,
        peak_call=measured.peak_call,
        peak_time_ns=explained.peak_time_ns,
        at_peak=explained.at_peak,
        modules=explained.modules,
        calls=measured.calls,
        timeline_t_ns=explained.timeline_t_ns,
        timeline_by_category=explained.timeline_by_category,
        notes=tuple(notes),
        kernels=explained.kernels,
        fused_kernels=explained.fused_kernels,
        peak_at_ns=measured.peak_at_ns,
        live_t_ns=measured.live_t_ns,
        live_bytes=measured.live_bytes,
    )


def counters_differ(counted: int, recorded: int) -> bool:
    """More than 1% (and 1 MiB) apart: the records missed what the device's own counters saw
    (another thread allocated, the records lack some), or the reverse."""
    return abs(counted - recorded) > max(0.01 * max(counted, recorded), 1 << 20)


DEVICE_BEFORE = (
    "live on the device before the call (torch.cuda.memory_allocated) and not reachable from its "
    "arguments, model or optimizer, or the allocator's rounding of blocks made before profiling"
)


def with_device_counters(
    explained: Attribution, memory_allocated_start_bytes: int, max_memory_allocated_bytes: int
) -> Attribution:
    """CUDA: complete the footprint with what the caching allocator counted live at the start
    (``torch.cuda.memory_allocated()`` before the measured calls) that memprof did not find, as
    an unattributed line (live through every call: each call's numbers count it); say when the
    allocator's own high-water mark (``max_memory_allocated()``, reset before the measured
    calls) disagrees with the footprint."""
    found_at_start = (
        explained.calls[0].live_at_start_bytes if explained.calls else explained.live_at_start_bytes
    )
    unknown = memory_allocated_start_bytes - found_at_start
    notes = list(explained.notes)
    at_peak = explained.at_peak
    calls = explained.calls
    timeline = dict(explained.timeline_by_category)
    if unknown > 0 and not at_peak.by_category:  # not explained: the numbers only
        calls = _with_unknown(calls, unknown)
    elif unknown > 0:
        if timeline:
            # Live through the call: under every point of the stacked timeline.
            timeline["other"] = tuple(
                v + unknown for v in timeline.get("other", (0,) * len(explained.timeline_t_ns))
            )
        by_category = dict(at_peak.by_category)
        by_category["other"] += unknown
        at_peak = replace(
            at_peak,
            by_category=by_category,
            unattributed=(*at_peak.unattributed, Unattributed(unknown, 1, DEVICE_BEFORE, True)),
            footprint_bytes=at_peak.footprint_bytes + unknown,
        )
        calls = _with_unknown(calls, unknown)
    elif unknown < 0:
        notes.append(
            f"memprof found {-unknown:,} B more live at the start than torch.cuda.memory_allocated() "
            "counted (tensors on another device?)"
        )
    footprint = explained.footprint_bytes + max(unknown, 0)
    if counters_differ(max_memory_allocated_bytes, footprint):
        notes.append(
            f"torch.cuda.max_memory_allocated() is {max_memory_allocated_bytes:,} B, the footprint "
            f"{footprint:,} B: memory was allocated where the profiler does not record (another "
            "thread?), or between the measured calls"
        )
    return replace(
        explained,
        footprint_bytes=footprint,
        live_at_start_bytes=explained.live_at_start_bytes + max(unknown, 0),
        at_peak=at_peak,
        calls=calls,
        timeline_by_category=timeline,
        notes=tuple(notes),
    )


def _with_unknown(calls: tuple[CallNumbers, ...], unknown: int) -> tuple[CallNumbers, ...]:
    """Each call's numbers with ``unknown`` bytes live through it."""
    return tuple(
        replace(
            call,
            live_at_start_bytes=call.live_at_start_bytes + unknown,
            footprint_bytes=call.footprint_bytes + unknown,
            live_at_end_bytes=call.live_at_end_bytes + unknown,
        )
        for call in calls
    )
