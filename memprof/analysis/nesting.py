"""Op nesting: which op contains which, with torch's rule, in O(M) memory.

torch's ``EventList._populate_cpu_children``: per thread, ops sorted by (start, -end) (ties in
recorded order) go through a stack; each op first pops every op it does not fit in
(``start >= top.end or end > top.end``), then takes the op left on top as its parent and is
pushed. Async ops take no part.

Here the stack is described by when each op leaves it. Op ``j`` is popped by the first later op
``k`` (sorted order, same thread) with ``start_k >= end_j or end_k > end_j``: every op above
``j`` fits in ``j``, so ``k`` pops those too. Call that position ``close(j)``. Then ``j`` is on
the stack exactly while ``j < i < close(j)``; the ops on the stack when ``i`` arrives are its
ancestors, its parent is the latest of them, its depth their count, and its descendants are the
positions ``(i, close(i))``. Since the ``[j, close(j))`` ranges come from a stack, they nest, and
the parent of ``i`` is the last op before it whose depth is one less: both are counts and a
binary search, not a per-op loop.

``close(j)`` is usually the first later op that starts at or after ``j``'s end (a binary search
over the sorted starts). It is earlier only where a later op starts inside ``j`` and ends after
it (a partial overlap). Those are found exactly: with the usual ``close``, every op must end no
later than its parent; the first op of an overlap breaks that (see :func:`_overlaps`). The
stretches holding one (between two ops that start with an empty stack) are redone with the
plain stack loop.
"""

from __future__ import annotations

import numpy as np

from memprof.analysis.codes import factorize
from memprof.core.records import RawProfile


def _parents(raw: RawProfile) -> tuple[np.ndarray, np.ndarray]:
    """Parent index of each op (-1 for none) and whether an ancestor has the same name.

    Same results as torch's ``EventList._populate_cpu_children`` (module docstring), in
    O(M log M) time for the sort and O(M) memory.
    """
    count = len(raw.op_name)
    parent = np.full(count, -1, dtype=np.int64)
    nested_same = np.zeros(count, dtype=bool)
    sync = np.flatnonzero(~raw.op_async)
    if not len(sync):
        return parent, nested_same
    order = sync[_sorted_order(raw.op_start[sync], raw.op_end[sync], raw.op_thread[sync])]
    starts, ends, threads = raw.op_start[order], raw.op_end[order], raw.op_thread[order]
    size = len(order)
    # Thread segments [first, last) of the sorted positions.
    boundary = np.flatnonzero(threads[1:] != threads[:-1]) + 1
    seg_first = np.concatenate(([0], boundary)).tolist()
    seg_last = np.concatenate((boundary, [size])).tolist()

    close = _usual_close(starts, ends, seg_first, seg_last)
    depth = _depth(close)
    sorted_parent = _last_shallower(depth)
    overlapping = _overlaps(ends, sorted_parent, depth)
    if len(overlapping):
        for lo, hi in overlapping:
            close[lo:hi] = lo + _stack_close(starts[lo:hi].tolist(), ends[lo:hi].tolist())
        depth = _depth(close)
        sorted_parent = _last_shallower(depth)
    has = sorted_parent >= 0
    parent[order[has]] = order[sorted_parent[has]]

    codes = _name_codes(raw, order)
    nested_same[order[_inside_same_name(codes, close, seg_first, seg_last)]] = True
    return parent, nested_same


def _inside_same_name(
    codes: np.ndarray, close: np.ndarray, seg_first: list[int], seg_last: list[int]
) -> np.ndarray:
    """Positions lying inside ``(j, close(j))`` of an earlier op ``j`` of the same name and
    thread (an ancestor of that name): a running maximum of ``close`` per (thread, name) group,
    exclusive of the op itself."""
    size = len(codes)
    seg_id = np.repeat(np.arange(len(seg_first)), np.subtract(seg_last, seg_first))
    key = seg_id * (int(codes.max()) + 1) + codes
    group_order = np.argsort(key.astype(_smallest_int(int(key.max()))), kind="stable")
    key = key[group_order]
    new_group = np.concatenate(([True], key[1:] != key[:-1]))
    # Offset each group so a plain running max cannot leak across groups.
    offset = np.cumsum(new_group) * (size + 1)
    reach = np.maximum.accumulate(close[group_order] + offset)
    earlier = np.concatenate(([0], reach[:-1]))
    return group_order[~new_group & (earlier > group_order + offset)]


def _sorted_order(starts: np.ndarray, ends: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """Positions sorted by (thread, start, -end), ties in recorded order. Kineto usually gives
    one thread's ops in exactly that order already: checking that is cheaper than sorting."""
    same_thread = threads[1:] == threads[:-1]
    later = (starts[1:] > starts[:-1]) | ((starts[1:] == starts[:-1]) & (ends[1:] <= ends[:-1]))
    if bool(np.all((threads[1:] > threads[:-1]) | (same_thread & later))):
        return np.arange(len(starts))
    return np.lexsort((-ends, starts, threads))


def _usual_close(
    starts: np.ndarray, ends: np.ndarray, seg_first: list[int], seg_last: list[int]
) -> np.ndarray:
    """``close(j)`` where no later op starts inside ``j`` and ends after it: the first later op
    of its thread that starts at or after its end (the thread's end if none)."""
    close = np.empty(len(starts), dtype=np.int64)
    for first, last in zip(seg_first, seg_last, strict=True):
        found = first + np.searchsorted(starts[first:last], ends[first:last], side="left")
        close[first:last] = np.clip(found, np.arange(first + 1, last + 1), last)
    return close


def _depth(close: np.ndarray) -> np.ndarray:
    """Ops on the stack when each op arrives: those before it, less those closed by then
    (``close(j) <= i``; ops of earlier threads all close by their thread's end)."""
    closed_by = np.cumsum(np.bincount(close, minlength=len(close) + 1))
    return np.arange(len(close)) - closed_by[: len(close)]


def _last_shallower(depth: np.ndarray) -> np.ndarray:
    """For each position, the last earlier position of depth one less (-1 at depth 0): the top
    of the stack when it arrives."""
    size = len(depth)
    by_depth = np.argsort(depth.astype(_smallest_int(int(depth.max()))), kind="stable")
    keys = depth[by_depth] * (size + 1) + by_depth  # ascending: by depth, then position
    # Each position's query key (depth - 1, position) keeps that order: one sorted search.
    found = np.searchsorted(keys, keys - (size + 1), side="left") - 1
    out = np.empty(size, dtype=np.int64)
    out[by_depth] = np.where(depth[by_depth] > 0, by_depth[np.maximum(found, 0)], -1)
    return out


def _overlaps(ends: np.ndarray, sorted_parent: np.ndarray, depth: np.ndarray) -> list[tuple[int, int]]:
    """The stretches ``[lo, hi)`` whose ``close`` is not the usual one.

    Stretches run from one op that arrives with an empty stack (depth 0) to the next: nothing
    before such an op is still open when it arrives, with either ``close``. Inside a stretch, a
    later op that starts within ``j`` and ends after it lies, with the usual ``close``, among
    ``j``'s descendants; the first such op ends after its (usual) parent, which no op does when
    there is none. So the stretches to redo are those holding an op that ends after its parent.
    """
    has = sorted_parent >= 0
    bad = np.flatnonzero(has & (ends > ends[np.maximum(sorted_parent, 0)]))
    if not len(bad):
        return []
    roots = np.flatnonzero(depth == 0)
    which = np.unique(np.searchsorted(roots, bad, side="right") - 1)
    ends_at = np.append(roots[1:], len(depth))
    return list(zip(roots[which].tolist(), ends_at[which].tolist(), strict=True))


def _stack_close(starts: list[int], ends: list[int]) -> np.ndarray:
    """torch's stack loop over one stretch, recording when each op is popped (relative
    positions; ops still on the stack at the end close at the stretch's end)."""
    close = [len(starts)] * len(starts)
    stack: list[int] = []
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
        while stack:
            top_end = ends[stack[-1]]
            if start < top_end and end <= top_end:
                break
            close[stack.pop()] = i
        stack.append(i)
    return np.array(close, dtype=np.int64)


def _name_codes(raw: RawProfile, order: np.ndarray) -> np.ndarray:
    """Int codes of the names of the ops at ``order`` (equal names, equal codes)."""
    if raw.op_code is not None:
        return raw.op_code[order].astype(np.int64)
    return factorize(raw.op_name[order])[0]


def _smallest_int(largest: int) -> type[np.integer]:
    """The narrowest unsigned type holding ``largest``: NumPy sorts 8- and 16-bit integers
    stably with a radix sort, in linear time."""
    for kind in (np.uint8, np.uint16, np.uint32):
        if largest <= np.iinfo(kind).max:
            return kind
    return np.uint64
