"""Op nesting: which op contains which, found without a per-op Python loop."""

from __future__ import annotations

import numpy as np
import pandas as pd

from memprof.records import RawProfile


class _RangeMax:
    """Sparse table: max of ``values[lo:hi]`` in O(1) after O(N log N) preparation.

    ``levels[k][i]`` is the max of ``values[i : i + 2**k]``.
    """

    def __init__(self, values: np.ndarray) -> None:
        self.levels = [values]
        width = 1
        while 2 * width <= len(values):
            prev = self.levels[-1]
            self.levels.append(np.maximum(prev[:-width], prev[width:]))
            width *= 2

    def query(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Max over ``[lo, hi)`` for each pair; callers guarantee ``hi > lo``."""
        length = hi - lo
        level = np.floor(np.log2(np.maximum(length, 1))).astype(np.int64)
        out = np.empty(len(lo), dtype=self.levels[0].dtype)
        for k in np.unique(level):
            sel = level == k
            table = self.levels[int(k)]
            out[sel] = np.maximum(table[lo[sel]], table[hi[sel] - (1 << int(k))])
        return out

    def last_at_least(self, before: np.ndarray, floor: np.ndarray, threshold: np.ndarray) -> np.ndarray:
        """For each query, the largest ``j`` in ``[floor, before)`` with ``values[j] >= threshold``,
        or -1. Binary lifting: step left by 2**k while the whole block stays below threshold."""
        p = before.copy()
        for k in range(len(self.levels) - 1, -1, -1):
            cand = p - (1 << k)
            ok = cand >= floor
            idx = np.flatnonzero(ok)
            below = self.levels[k][cand[idx]] < threshold[idx]
            p[idx[below]] = cand[idx[below]]
        return np.where(p > floor, p - 1, -1)

    def first_above(self, after: np.ndarray, ceiling: np.ndarray, threshold: np.ndarray) -> np.ndarray:
        """For each query, the smallest ``j`` in ``[after, ceiling)`` with ``values[j] > threshold``,
        or ``ceiling``."""
        p = after.copy()
        for k in range(len(self.levels) - 1, -1, -1):
            width = 1 << k
            idx = np.flatnonzero(p + width <= ceiling)
            not_above = self.levels[k][p[idx]] <= threshold[idx]
            p[idx[not_above]] += width
        return p


def _parents(raw: RawProfile) -> tuple[np.ndarray, np.ndarray]:
    """Parent index of each op (-1 for none) and whether an ancestor has the same name.

    Same rule as torch's ``EventList._populate_cpu_children``: per thread, sorted by
    (start, -end), each op is pushed on a stack after popping every op it does not fit in
    (``start >= top.end or end > top.end``); its parent is the op then on top. Async ops take
    no part. An op popped that way fits no later op either, so the parent is simply the
    nearest earlier op (same thread, sorted order) with ``end >= op.end and end > op.start``,
    and an op's descendants are the contiguous run after it that fits in it. Both are found
    with range-maximum binary lifting over the sorted ends: O(M log M), no per-op Python.
    """
    count = len(raw.op_name)
    parent = np.full(count, -1, dtype=np.int64)
    nested_same = np.zeros(count, dtype=bool)
    sync = np.flatnonzero(~raw.op_async)
    if not len(sync):
        return parent, nested_same
    local = np.lexsort((-raw.op_end[sync], raw.op_start[sync], raw.op_thread[sync]))
    order = sync[local]  # original op index of each sorted position
    starts, ends, threads = raw.op_start[order], raw.op_end[order], raw.op_thread[order]
    size = len(order)
    positions = np.arange(size, dtype=np.int64)
    # Thread segments [seg_start, seg_end) of the sorted positions.
    boundary = np.flatnonzero(threads[1:] != threads[:-1]) + 1
    seg_first = np.concatenate(([0], boundary))
    seg_last = np.concatenate((boundary, [size]))
    seg_id = np.repeat(np.arange(len(seg_first)), seg_last - seg_first)
    seg_start, seg_end = seg_first[seg_id], seg_last[seg_id]

    ends_max = _RangeMax(ends)
    # end_j > start_i on integer times: end_j >= start_i + 1.
    threshold = np.maximum(ends, starts + 1)
    sorted_parent = ends_max.last_at_least(positions, seg_start, threshold)
    has = sorted_parent >= 0
    parent[order[has]] = order[sorted_parent[has]]

    # Descendants of j: positions (j, last_j], ending before the first later op that starts at
    # or after j's end, or ends after it.
    # Starts are sorted within each thread segment (few segments: one per thread).
    seg_offsets = np.zeros(size, dtype=np.int64)
    for first, last in zip(seg_first.tolist(), seg_last.tolist(), strict=True):
        seg_offsets[first:last] = first + np.searchsorted(starts[first:last], ends[first:last], side="left")
    starts_after = np.clip(seg_offsets, positions + 1, seg_end)
    ends_after = ends_max.first_above(positions + 1, seg_end, ends)
    last = np.minimum(starts_after, ends_after) - 1

    # An op is nested in a same-name op when an earlier op of its name (same thread) reaches
    # past it: a running maximum of `last` per (thread, name) group, exclusive of itself.
    codes, _ = pd.factorize(raw.op_name[order])
    group_order = np.lexsort((positions, codes, seg_id))
    group_key = seg_id[group_order] * (int(codes.max()) + 1) + codes[group_order]
    new_group = np.concatenate(([True], group_key[1:] != group_key[:-1]))
    # Offset each group so a plain running max cannot leak across groups.
    offset = np.cumsum(new_group) * (size + 1)
    reach = np.maximum.accumulate(last[group_order] + offset)
    earlier = np.concatenate(([0], reach[:-1]))
    inside = ~new_group & (earlier >= positions[group_order] + offset)
    nested_same[order[group_order[inside]]] = True
    return parent, nested_same
