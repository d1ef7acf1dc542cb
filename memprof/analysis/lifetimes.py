"""Every allocator block as one lifetime, and the facts prepared for it (issue 11, step 1).

Pure: :class:`memprof.core.records.TrackedFacts` in, parallel arrays out. Each allocation record is
paired with the next record at its address (its free); storages the tracker found live that no
record allocated were made before the profiler started (a synthetic lifetime from the start).
Before that, the facts get one op table (forward ops and the backward ops read from the
profile, recomputed ones left out) and lose the tracker's own allocations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from memprof.core.records import Allocations, TrackedFacts, TrackedOps

NEVER = np.iinfo(np.int64).max
BEFORE = np.iinfo(np.int64).min // 2


# ---- lifetimes ----------------------------------------------------------------------------------


@dataclass
class Lifetimes:
    """Every block as one lifetime (parallel arrays) and the merged event sequence."""

    ptr: np.ndarray
    nbytes: np.ndarray
    start: np.ndarray  # time allocated (BEFORE for blocks made before profiling)
    end: np.ndarray  # time freed (NEVER if not freed)
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


def cover(
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


def lifetimes_of(facts: TrackedFacts) -> Lifetimes:
    records = facts.allocations
    keep = records.bytes != 0
    time, size, ptr = records.time[keep], records.bytes[keep], records.ptr[keep]
    allocs, frees, loose_frees = _pair_records(time, size, ptr)
    rec_end = np.where(frees >= 0, time[np.maximum(frees, 0)], NEVER)

    # Storages seen live that no record covers were made before profiling.
    storages = facts.storages
    s_ptr = np.array([s.ptr for s in storages], dtype=np.int64)
    s_seen = np.array([s.seen_ns for s in storages], dtype=np.int64)
    covered = cover(ptr[allocs], time[allocs], rec_end, s_ptr, s_seen)
    pseudo: dict[tuple[int, int], int] = {}  # (ptr, died) -> first storage row
    for uncovered in np.flatnonzero(covered < 0):
        storage = storages[int(uncovered)]
        end = NEVER if storage.died_ns is None else storage.died_ns
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
    """Blocks live before profiling: address, bytes, when freed (NEVER if not), the record of
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
) -> Lifetimes:
    """One event sequence: blocks made before profiling (allocated at the very start), the
    records, and synthetic frees of those blocks, in time order."""
    n_rec, n_alloc, n_before = len(time), len(allocs), len(before.ptr)
    b_bytes = np.array(before.nbytes, dtype=np.int64)
    b_end = np.array(before.end, dtype=np.int64)
    free_record = np.array(before.free_record, dtype=np.int64)
    synthetic = np.flatnonzero((free_record < 0) & (b_end != NEVER))
    times = np.concatenate([np.full(n_before, BEFORE, dtype=np.int64), time, b_end[synthetic]])
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
    return Lifetimes(
        ptr=np.concatenate([ptr[allocs], np.array(before.ptr, dtype=np.int64)]),
        nbytes=np.concatenate([size[allocs], b_bytes]),
        start=np.concatenate([time[allocs], np.full(n_before, BEFORE, dtype=np.int64)]),
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
class Backward:
    """Per op of the prepared table: read from the profile (no outputs known), and the forward
    op whose autograd node ran it (-1 if none or unknown)."""

    from_profile: np.ndarray
    forward_op: np.ndarray


def prepared(facts: TrackedFacts) -> tuple[TrackedFacts, Backward]:
    """The facts with one op table (forward ops and the backward ops read from the profile, in
    order of end) and without the tracker's own allocations."""
    facts, backward = _with_backward_ops(facts)
    return replace(facts, allocations=without_rewrapped(facts)), backward


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


def _with_backward_ops(facts: TrackedFacts) -> tuple[TrackedFacts, Backward]:
    forward, backward = facts.ops, facts.backward_ops
    backward_sequence = facts.backward_sequence
    if backward is not None:
        backward, backward_sequence = _without_recomputed(backward, backward_sequence, facts.recompute)
    if backward is None or not len(backward.t0):
        count = len(forward.t0)
        if facts.compiled:
            # A compiled run's ops are its kernels, read from the profile; the shapes of what
            # each kernel's nodes produce are listed under the kernel itself.
            return facts, Backward(np.ones(count, dtype=bool), np.arange(count, dtype=np.int64))
        return facts, Backward(np.zeros(count, dtype=bool), np.full(count, -1, dtype=np.int64))
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
    return prepared, Backward(from_profile, forward_op)


def without_rewrapped(facts: TrackedFacts) -> Allocations:
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


# ---- a call's window on the merged events ------------------------------------------------------


@dataclass
class Window:
    start_ns: int
    end_ns: int
    lo: int  # first merged event inside the call
    hi: int  # one past the last
    peak: int  # live bytes at the peak are prefix[peak]: events [0, peak) have happened
