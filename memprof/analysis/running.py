"""Which op was running at given moments, for many moments at once (the timeline's points).

The op named is the one :func:`memprof.analysis.peaks.responsible_op` names at the peak: the
outermost aten op running (the call the user's code made), else the innermost range (a fused
kernel, a ``record_function`` label), else none. Vectorised: O((M + Q) log M) for M op
intervals and Q moments, with no Python loop over either.
"""

from __future__ import annotations

import numpy as np

from memprof.core.names import normalize_name
from memprof.core.records import CALL_MARKER, RawProfile, string_codes


def ops_at(raw: RawProfile, times: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """For each of ``times`` (ns, the profiler's clock): the index of the op running there in
    the returned names, or -1 when none is."""
    times = np.asarray(times, dtype=np.int64)
    out = np.full(len(times), -1, dtype=np.int64)
    starts, ends = raw.op_start.astype(np.int64), raw.op_end.astype(np.int64)
    # Only ops that contain one of the moments matter (a few per moment): the names of the
    # others are never looked at.
    order = np.sort(times)
    first = np.searchsorted(order, starts, side="left")
    keep = ~np.asarray(raw.op_async, dtype=bool) & (first < len(order))
    keep[keep] &= order[first[keep]] <= ends[keep]
    if not len(times) or not keep.any():
        return (), out
    distinct, code = string_codes(raw.op_name[keep])
    names = [normalize_name(n) for n in distinct]
    aten = np.array([n.startswith("aten::") for n in names], dtype=bool)
    marker = np.array([n == CALL_MARKER for n in names], dtype=bool)
    starts, ends = starts[keep], ends[keep]

    is_aten = aten[code]
    hit = _outermost(starts[is_aten], ends[is_aten], code[is_aten], times)
    ranges = ~is_aten & ~marker[code]
    inner = _innermost(starts[ranges], ends[ranges], code[ranges], times)
    out = np.where(hit >= 0, hit, inner)
    used = np.unique(out[out >= 0])
    remap = np.full(len(names), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    return tuple(names[i] for i in used), np.where(out >= 0, remap[np.maximum(out, 0)], -1)


def _outermost(starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The name code of the outermost interval containing each time (-1: none). Intervals
    contained in an earlier one are dropped; the rest are disjoint or chained, with rising ends."""
    result = np.full(len(times), -1, dtype=np.int64)
    if not len(starts):
        return result
    order = np.lexsort((-ends, starts))
    starts, ends, codes = starts[order], ends[order], codes[order]
    reach = np.maximum.accumulate(ends)
    outer = np.ones(len(ends), dtype=bool)
    outer[1:] = ends[1:] > reach[:-1]
    starts, ends, codes = starts[outer], ends[outer], codes[outer]
    k = np.searchsorted(starts, times, side="right") - 1
    inside = (k >= 0) & (ends[np.maximum(k, 0)] >= times)
    result[inside] = codes[k[inside]]
    return result


def _innermost(starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The name code of the innermost interval containing each time (-1: none): among the
    intervals started by then, the last one still running (nested intervals: the innermost)."""
    result = np.full(len(times), -1, dtype=np.int64)
    if not len(starts):
        return result
    # Started earlier first; of two started together, the longer (the caller) first.
    order = np.lexsort((-ends, starts))
    starts, ends, codes = starts[order], ends[order], codes[order]
    # levels[k][i] = max(ends[i : i + 2**k]): binary lifting finds, left of the last interval
    # started, the nearest one whose end reaches the time.
    levels = [ends]
    while 2 ** len(levels) <= len(ends):
        step = 2 ** (len(levels) - 1)
        levels.append(np.maximum(levels[-1][:-step], levels[-1][step:]))
    position = np.searchsorted(starts, times, side="right")  # candidates are [0, position)
    for k in range(len(levels) - 1, -1, -1):
        width = 2**k
        block = position - width
        movable = block >= 0
        idx = np.flatnonzero(movable)
        short = levels[k][block[idx]] < times[idx]
        position[idx[short]] = block[idx[short]]
    found = position - 1
    inside = (found >= 0) & (ends[np.maximum(found, 0)] >= times)
    result[inside] = codes[found[inside]]
    return result
