"""A pass profiled with the op tracker on, as an untracked pass would have recorded it
(:func:`untracked`): a block of code is measured and explained in one pass
(:mod:`memprof.sources.block`), and what the tracker adds to the profiler's records is taken
out before the analysis."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from memprof.analysis.lifetimes import without_rewrapped
from memprof.analysis.nesting import _parents
from memprof.core.records import DISPATCH_RANGE, RawProfile, TrackedFacts


def untracked(raw: RawProfile, facts: TrackedFacts | None) -> RawProfile:
    """The profile of an op-tracked pass as an untracked pass would have recorded it: without
    the dispatch mode's ranges, the outer copy of each op the mode handled, and (given the
    tracker's ``facts``) the allocations of rewrapped numbers."""
    keep_ops = _without_dispatch(raw)
    keep_records = _without_records(raw, facts) if facts is not None else None
    if keep_ops is None and keep_records is None:
        return raw
    ops = keep_ops if keep_ops is not None else np.ones(len(raw.op_name), dtype=bool)
    records = keep_records if keep_records is not None else np.ones(len(raw.mem_time), dtype=bool)
    return replace(
        raw,
        op_name=raw.op_name[ops],
        op_start=raw.op_start[ops],
        op_end=raw.op_end[ops],
        op_thread=raw.op_thread[ops],
        op_async=raw.op_async[ops],
        mem_time=raw.mem_time[records],
        mem_bytes=raw.mem_bytes[records],
        mem_thread=raw.mem_thread[records] if raw.mem_thread is not None else None,
        op_code=raw.op_code[ops] if raw.op_code is not None else None,
    )


def _without_dispatch(raw: RawProfile) -> np.ndarray | None:
    """Which ops to keep: not the dispatch mode's ranges, nor the op around each that has the
    name of the first op inside it (the op as called, re-dispatched by the mode). None: all."""
    names = raw.op_name
    dispatch = np.flatnonzero(names == DISPATCH_RANGE)
    if not len(dispatch):
        return None
    parent, _ = _parents(raw)
    keep = np.ones(len(names), dtype=bool)
    keep[dispatch] = False
    # The first op inside each range: the child with the smallest start.
    children = np.flatnonzero(np.isin(parent, dispatch))
    first: dict[int, int] = {}
    for child in children[np.argsort(raw.op_start[children], kind="stable")].tolist():
        first.setdefault(int(parent[child]), child)
    for mode_range in dispatch.tolist():
        outer, inner = int(parent[mode_range]), first.get(mode_range)
        if outer >= 0 and inner is not None and names[outer] == names[inner]:
            keep[outer] = False
    return keep


def _without_records(raw: RawProfile, facts: TrackedFacts) -> np.ndarray | None:
    """Which allocator records to keep: not those the attribution leaves out as rewrapped
    numbers (matched by time and size: the flat records and the tracker's are the same
    records, with and without addresses). None: all."""
    tracked = facts.allocations
    kept = without_rewrapped(facts)
    if len(kept.time) == len(tracked.time):
        return None
    dropped = Counter(zip(tracked.time.tolist(), tracked.bytes.tolist(), strict=True))
    dropped.subtract(zip(kept.time.tolist(), kept.bytes.tolist(), strict=True))
    keep = np.ones(len(raw.mem_time), dtype=bool)
    for index, record in enumerate(zip(raw.mem_time.tolist(), raw.mem_bytes.tolist(), strict=True)):
        if dropped[record] > 0:
            dropped[record] -= 1
            keep[index] = False
    return keep
