"""Profiler records -> the per-op DataFrame, the run's numbers and the memory timeline.

All numbers come from torch's raw allocator records (``[memory]`` events: +bytes on
allocation, -bytes on free, with a timestamp) and op intervals, not from the printed table.
The analysis is vectorised: records are sorted once, live bytes are a prefix sum, an op's
memory is a difference of prefix sums, and the highest point inside an op is a range-maximum
query on a sparse table — O((N + M) log N) for N records and M ops.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from memprof.gcpause import gc_paused
from memprof.model import OP_COLUMNS, empty_ops
from memprof.names import MEMORY_ROW, normalize_name

CALL_MARKER = "memprof.call"
"""Name of the ``record_function`` range that memprof puts around each measured call."""

# The same utility names torch's own table leaves out (torch/autograd/profiler_util.py _filter_name).
_SKIPPED_NAMES = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)

# Device types whose allocations count as "CPU Mem" / device ("CUDA Mem") in torch's table.
HOST_DEVICE_TYPES = frozenset({"CPU", "MKLDNN", "IDEEP"})
ACCELERATOR_DEVICE_TYPES = frozenset({"CUDA", "PrivateUse1", "HIP", "XPU", "MTIA"})


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


def raw_from_profiler(prof: Any, device_type: str = "CPU", device_index: int | None = None) -> RawProfile:
    """:func:`raw_from_kineto` of a finished ``torch.profiler.profile``'s events."""
    with gc_paused():
        return raw_from_kineto(prof.profiler.kineto_results.events(), device_type, device_index)


def raw_from_kineto(
    events: Iterable[Any], device_type: str = "CPU", device_index: int | None = None
) -> RawProfile:
    """Read ``prof.profiler.kineto_results.events()`` into a :class:`RawProfile`.

    Memory records are kept for one device: ``device_type`` "CPU" keeps host allocations
    (CPU/MKLDNN/IDEEP, as torch's "CPU Mem"); "CUDA" keeps that accelerator's, optionally
    only ``device_index``'s.
    """
    # This loop is the one per-event cost memprof cannot vectorise: every accessor is a C++
    # call (~0.2 us). Compare device types as enum members (``.name`` costs ~1 us per event),
    # call the unbound accessors (no bound-method objects) and fill flat lists, not tuples.
    events = events if isinstance(events, list) else list(events)
    wanted_names = HOST_DEVICE_TYPES if device_type == "CPU" else ACCELERATOR_DEVICE_TYPES
    op_names: list[str] = []
    op_start: list[int] = []
    op_end: list[int] = []
    op_thread: list[int] = []
    op_async: list[bool] = []
    mem_time: list[int] = []
    mem_bytes: list[int] = []
    mem_threads: list[int] = []
    calls: list[tuple[int, int]] = []
    call_threads: set[int] = set()
    if events:
        kind = type(events[0])
        name_of, device_of, index_of = kind.name, kind.device_type, kind.device_index
        start_of, end_of, nbytes_of = kind.start_ns, kind.end_ns, kind.nbytes
        thread_of, end_thread_of = kind.start_thread_id, kind.end_thread_id
        async_of, hidden_of = kind.is_async, kind.is_hidden_event
        device_types = type(device_of(events[0]))
        cpu = device_types.CPU
        kinds = {member for member in device_types.__members__.values() if member.name in wanted_names}
        check_index = device_index is not None and device_type != "CPU"
        skipped = _SKIPPED_NAMES
        for event in events:
            name = name_of(event)
            if name == "[memory]":
                if device_of(event) not in kinds:
                    continue
                if check_index and index_of(event) != device_index:
                    continue
                mem_time.append(start_of(event))
                mem_bytes.append(nbytes_of(event))
                mem_threads.append(thread_of(event))
                continue
            if name in skipped or device_of(event) != cpu or hidden_of(event):
                continue
            thread = thread_of(event)
            if name == CALL_MARKER:
                calls.append((start_of(event), end_of(event)))
                call_threads.add(thread)
                continue
            op_names.append(name)
            op_start.append(start_of(event))
            op_end.append(end_of(event))
            op_thread.append(thread)
            op_async.append(async_of(event) or thread != end_thread_of(event))
    names = np.empty(len(op_names), dtype=object)
    names[:] = op_names
    other_thread_bytes = 0
    if call_threads and mem_threads:
        threads = np.array(mem_threads, dtype=np.int64)
        sizes = np.array(mem_bytes, dtype=np.int64)
        other = ~np.isin(threads, np.array(sorted(call_threads), dtype=np.int64))
        other_thread_bytes = int(sizes[other & (sizes > 0)].sum())
    return RawProfile(
        op_name=names,
        op_start=np.array(op_start, dtype=np.int64),
        op_end=np.array(op_end, dtype=np.int64),
        op_thread=np.array(op_thread, dtype=np.int64),
        op_async=np.array(op_async, dtype=bool),
        mem_time=np.array(mem_time, dtype=np.int64),
        mem_bytes=np.array(mem_bytes, dtype=np.int64),
        calls=sorted(calls),
        other_thread_bytes=other_thread_bytes,
    )


@dataclass(frozen=True)
class RunNumbers:
    """The numbers of one run (see README, "What the numbers mean")."""

    peak_bytes: int
    allocated_bytes: int
    net_bytes: int
    peak_op: str | None
    peak_op_stack: list[str]
    calls: int
    records: int
    region_peak_bytes: int = 0
    """Highest live bytes over the whole profile above its start (between calls included):
    what a device allocator's global high-water mark sees."""


@dataclass(frozen=True)
class Analysis:
    """Everything :func:`analyze` derives: run numbers, per-op frame, timeline."""

    numbers: RunNumbers
    ops: pd.DataFrame
    timeline_ns: np.ndarray
    timeline_bytes: np.ndarray


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


def analyze(raw: RawProfile) -> Analysis:
    """Compute the run's numbers, per-op numbers and the live-bytes timeline of ``raw``.

    Per op (one row per normalised name, summed over calls like torch's ``key_averages``):
    ``calls``; ``total_bytes`` (torch's "Mem": net bytes inside the op's calls, children
    included); ``self_bytes`` (torch's "Self Mem": total minus the children's);
    ``allocated_bytes`` (bytes allocated inside the op's calls, counting an op nested in an op
    of the same name once); ``peak_bytes`` (largest rise of live bytes during one call above
    live at its start); ``self_us``/``total_us`` (CPU time). Records outside every op form the
    ``[memory]`` row, as in torch's table.
    """
    order = np.argsort(raw.mem_time, kind="stable")
    times = raw.mem_time[order]
    deltas = raw.mem_bytes[order]
    live = np.cumsum(deltas, dtype=np.int64)
    # prefix[i] = live bytes before record i; prefix[-1] = after all records.
    prefix = np.concatenate(([0], live))
    alloc_prefix = np.concatenate(([0], np.cumsum(np.maximum(deltas, 0), dtype=np.int64)))
    range_max = _RangeMax(live) if len(live) else None

    def window_stats(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
        lo = np.searchsorted(times, starts, side="left")
        hi = np.searchsorted(times, ends, side="right")
        total = prefix[hi] - prefix[lo]
        allocated = alloc_prefix[hi] - alloc_prefix[lo]
        rise = np.zeros(len(lo), dtype=np.int64)
        nonempty = hi > lo
        if range_max is not None and nonempty.any():
            highest = range_max.query(lo[nonempty], hi[nonempty])
            rise[nonempty] = np.maximum(highest - prefix[lo[nonempty]], 0)
        return total, allocated, rise, lo, hi

    ops = _op_frame(raw, times, deltas, window_stats)

    # Run numbers: per measured call, then the worst call (calls are identical work).
    if raw.calls:
        call_start = np.array([c[0] for c in raw.calls], dtype=np.int64)
        call_end = np.array([c[1] for c in raw.calls], dtype=np.int64)
    else:
        call_start = np.array([times[0] if len(times) else 0], dtype=np.int64)
        call_end = np.array([times[-1] if len(times) else 0], dtype=np.int64)
    net, allocated, rise, lo, hi = window_stats(call_start, call_end)
    worst = int(np.argmax(rise)) if len(rise) else 0
    peak_bytes = int(rise[worst]) if len(rise) else 0
    peak_op: str | None = None
    stack: list[str] = []
    if peak_bytes > 0:
        index = int(lo[worst] + np.argmax(live[lo[worst] : hi[worst]]))
        stack = _ops_at(raw, int(times[index]))
        peak_op = _responsible(stack)
    numbers = RunNumbers(
        peak_bytes=peak_bytes,
        allocated_bytes=int(allocated.max()) if len(allocated) else 0,
        net_bytes=int(net[-1]) if len(net) else 0,
        peak_op=peak_op,
        peak_op_stack=stack,
        calls=len(raw.calls),
        records=len(times),
        region_peak_bytes=int(max(live.max(), 0)) if len(live) else 0,
    )
    timeline_ns, timeline_bytes = _timeline(times, live, call_start, call_end, lo, hi)
    return Analysis(numbers=numbers, ops=ops, timeline_ns=timeline_ns, timeline_bytes=timeline_bytes)


def _op_frame(raw: RawProfile, times: np.ndarray, deltas: np.ndarray, window_stats: Any) -> pd.DataFrame:
    count = len(raw.op_name)
    if count:
        total, allocated, rise, _, _ = window_stats(raw.op_start, raw.op_end)
        parent, nested_same = _parents(raw)
        has_parent = parent >= 0
        self_bytes = total - _int_sums(parent[has_parent], total[has_parent], count)
        self_bytes[raw.op_async] = 0
        duration = (raw.op_end - raw.op_start).astype(np.float64) / 1e3
        child_time = np.bincount(parent[has_parent], weights=duration[has_parent], minlength=count)
        # Normalise each distinct name once (not once per op), then group by integer codes.
        raw_codes, raw_names = pd.factorize(raw.op_name)
        normalized = np.array([normalize_name(str(n)) for n in raw_names], dtype=object)
        group_of_raw, names = pd.factorize(normalized)
        group = group_of_raw[raw_codes]
        groups = len(names)
        peak = np.zeros(groups, dtype=np.int64)
        np.maximum.at(peak, group, rise)
        ops = pd.DataFrame(
            {
                "name": np.asarray(names, dtype=object),
                "calls": np.bincount(group, minlength=groups),
                "self_bytes": _int_sums(group, self_bytes, groups),
                "total_bytes": _int_sums(group, total, groups),
                "allocated_bytes": _int_sums(group, np.where(nested_same, 0, allocated), groups),
                "peak_bytes": peak,
                "self_us": np.bincount(group, weights=duration - child_time, minlength=groups),
                "total_us": np.bincount(group, weights=duration, minlength=groups),
            }
        )
    else:
        ops = empty_ops()

    # Records outside every op: torch's `[memory]` row.
    if len(times):
        outside = _outside_ops(raw, times)
        if outside.any():
            loose = deltas[outside]
            memory_row = pd.DataFrame(
                [
                    {
                        "name": MEMORY_ROW,
                        "calls": int(outside.sum()),
                        "self_bytes": int(loose.sum()),
                        "total_bytes": int(loose.sum()),
                        "allocated_bytes": int(np.maximum(loose, 0).sum()),
                        "peak_bytes": int(max(loose.max(), 0)),
                        "self_us": 0.0,
                        "total_us": 0.0,
                    }
                ]
            )
            ops = pd.concat([ops, memory_row], ignore_index=True) if len(ops) else memory_row
    for column in ("calls", "self_bytes", "total_bytes", "allocated_bytes", "peak_bytes"):
        ops[column] = ops[column].astype(np.int64)
    return ops[list(OP_COLUMNS)]


def _int_sums(group: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Exact int64 sums per group (``np.bincount`` weights go through float64, which is not
    exact above 2**53 bytes summed)."""
    out = np.zeros(groups, dtype=np.int64)
    np.add.at(out, group, values)
    return out


def _outside_ops(raw: RawProfile, times: np.ndarray) -> np.ndarray:
    """Mask of records that fall inside no op interval (any thread, as torch matches them)."""
    if not len(raw.op_start):
        return np.ones(len(times), dtype=bool)
    order = np.argsort(raw.op_start, kind="stable")
    starts = raw.op_start[order]
    reach = np.maximum.accumulate(raw.op_end[order])
    last = np.searchsorted(starts, times, side="right") - 1
    inside = (last >= 0) & (reach[np.maximum(last, 0)] >= times)
    return ~inside


def _responsible(stack: list[str]) -> str:
    """The op to name for the peak: the outermost aten op running (the one the user's code
    called, e.g. ``aten::sum`` rather than the ``aten::empty_strided`` inside it), else the
    innermost range (a fused kernel or a ``record_function`` label), else ``[memory]``."""
    for name in stack:
        if name.startswith("aten::"):
            return name
    return stack[-1] if stack else MEMORY_ROW


def _ops_at(raw: RawProfile, time_ns: int) -> list[str]:
    """Names of the ops running at ``time_ns``, outermost first."""
    active = np.flatnonzero((raw.op_start <= time_ns) & (raw.op_end >= time_ns) & ~raw.op_async)
    active = active[np.lexsort((-raw.op_end[active], raw.op_start[active]))]
    return [normalize_name(str(raw.op_name[i])) for i in active]


def _timeline(
    times: np.ndarray,
    live: np.ndarray,
    call_start: np.ndarray,
    call_end: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    max_points: int = 4000,
) -> tuple[np.ndarray, np.ndarray]:
    """Live bytes over time from the first measured call's start, relative to live there.

    Long timelines are reduced to ``max_points`` by keeping each bucket's highest point, so
    the peak survives.
    """
    if not len(times):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    first, last = int(lo.min()), int(hi.max())
    base = int(live[first - 1]) if first > 0 else 0
    t = np.concatenate(([call_start.min()], times[first:last], [call_end.max()])) - call_start.min()
    b = np.concatenate(([0], live[first:last] - base, [live[last - 1] - base if last > 0 else 0]))
    if len(t) > max_points:
        edges = np.unique(np.linspace(0, len(t), max_points + 1).astype(np.int64)[:-1])
        # Each bucket's highest point (its first occurrence, as argmax would pick).
        highest = np.maximum.reduceat(b, edges)
        bucket = np.repeat(np.arange(len(edges)), np.diff(np.append(edges, len(t))))
        hits = np.flatnonzero(b == highest[bucket])
        _, first_hit = np.unique(bucket[hits], return_index=True)
        keep = hits[first_hit]
        t, b = t[keep], b[keep]
    return t.astype(np.int64), b.astype(np.int64)
