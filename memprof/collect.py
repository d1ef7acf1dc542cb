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

OP_COLUMNS = [
    "name",
    "calls",
    "self_bytes",
    "total_bytes",
    "allocated_bytes",
    "peak_bytes",
    "self_us",
    "total_us",
]


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


def raw_from_kineto(
    events: Iterable[Any], device_type: str = "CPU", device_index: int | None = None
) -> RawProfile:
    """Read ``prof.profiler.kineto_results.events()`` into a :class:`RawProfile`.

    Memory records are kept for one device: ``device_type`` "CPU" keeps host allocations
    (CPU/MKLDNN/IDEEP, as torch's "CPU Mem"); "CUDA" keeps that accelerator's, optionally
    only ``device_index``'s.
    """
    kinds = HOST_DEVICE_TYPES if device_type == "CPU" else ACCELERATOR_DEVICE_TYPES
    op_rows: list[tuple[str, int, int, int, bool]] = []
    mem_time: list[int] = []
    mem_bytes: list[int] = []
    call_threads: set[int] = set()
    calls: list[tuple[int, int]] = []
    mem_threads: list[int] = []
    for event in events:
        name = event.name()
        if name == "[memory]":
            if event.device_type().name not in kinds:
                continue
            if device_index is not None and device_type != "CPU" and event.device_index() != device_index:
                continue
            mem_time.append(event.start_ns())
            mem_bytes.append(event.nbytes())
            mem_threads.append(event.start_thread_id())
            continue
        if name in _SKIPPED_NAMES or event.device_type().name != "CPU":
            continue
        if event.is_hidden_event():
            continue
        start, end = event.start_ns(), event.end_ns()
        thread = event.start_thread_id()
        if name == CALL_MARKER:
            calls.append((start, end))
            call_threads.add(thread)
            continue
        is_async = bool(event.is_async()) or thread != event.end_thread_id()
        op_rows.append((name, start, end, thread, is_async))
    raw = RawProfile.from_lists(op_rows, list(zip(mem_time, mem_bytes, strict=True)), sorted(calls))
    if call_threads and mem_threads:
        threads = np.array(mem_threads, dtype=np.int64)
        other = ~np.isin(threads, np.array(sorted(call_threads), dtype=np.int64))
        positive = raw.mem_bytes > 0
        object.__setattr__(raw, "other_thread_bytes", int(raw.mem_bytes[other & positive].sum()))
    return raw


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
    """Sparse table: max of ``values[lo:hi]`` in O(1) after O(N log N) preparation."""

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
        out = np.empty(len(lo), dtype=np.int64)
        for k in np.unique(level):
            sel = level == k
            table = self.levels[int(k)]
            out[sel] = np.maximum(table[lo[sel]], table[hi[sel] - (1 << int(k))])
        return out


def _parents(raw: RawProfile) -> tuple[np.ndarray, np.ndarray]:
    """Parent index of each op (-1 for none) and whether an ancestor has the same name.

    Same rule as torch's ``EventList._populate_cpu_children``: per thread, sorted by
    (start, -end), a child lies inside its parent's [start, end]. Async ops take no part.
    """
    count = len(raw.op_name)
    parent = np.full(count, -1, dtype=np.int64)
    nested_same = np.zeros(count, dtype=bool)
    order = np.lexsort((-raw.op_end, raw.op_start, raw.op_thread))
    names = raw.op_name
    starts = raw.op_start.tolist()
    ends = raw.op_end.tolist()
    threads = raw.op_thread.tolist()
    asyncs = raw.op_async.tolist()
    stack: list[int] = []
    open_names: dict[str, int] = {}
    current_thread = None
    for idx in order.tolist():
        if asyncs[idx]:
            continue
        if threads[idx] != current_thread:
            stack.clear()
            open_names.clear()
            current_thread = threads[idx]
        while stack:
            top = stack[-1]
            if starts[idx] >= ends[top] or ends[idx] > ends[top]:
                stack.pop()
                top_name = names[top]
                if open_names[top_name] == 1:
                    del open_names[top_name]
                else:
                    open_names[top_name] -= 1
            else:
                break
        if stack:
            parent[idx] = stack[-1]
        name = names[idx]
        if name in open_names:
            nested_same[idx] = True
            open_names[name] += 1
        else:
            open_names[name] = 1
        stack.append(idx)
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
        child_total = np.bincount(parent[has_parent], weights=total[has_parent], minlength=count)
        self_bytes = total - child_total.astype(np.int64)
        self_bytes[raw.op_async] = 0
        duration = (raw.op_end - raw.op_start).astype(np.float64) / 1e3
        child_time = np.bincount(parent[has_parent], weights=duration[has_parent], minlength=count)
        frame = pd.DataFrame(
            {
                "name": [normalize_name(n) for n in raw.op_name],
                "self_bytes": self_bytes,
                "total_bytes": total,
                "allocated_bytes": np.where(nested_same, 0, allocated),
                "peak_bytes": rise,
                "self_us": duration - child_time,
                "total_us": duration,
            }
        )
        grouped = frame.groupby("name", sort=False)
        ops = grouped.agg(
            calls=("name", "size"),
            self_bytes=("self_bytes", "sum"),
            total_bytes=("total_bytes", "sum"),
            allocated_bytes=("allocated_bytes", "sum"),
            peak_bytes=("peak_bytes", "max"),
            self_us=("self_us", "sum"),
            total_us=("total_us", "sum"),
        ).reset_index()
    else:
        ops = pd.DataFrame({c: pd.Series(dtype="int64") for c in OP_COLUMNS})
        ops["name"] = ops["name"].astype(object)
        ops["self_us"] = ops["self_us"].astype(float)
        ops["total_us"] = ops["total_us"].astype(float)

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
    return ops[OP_COLUMNS]


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
        buckets = np.linspace(0, len(t), max_points + 1).astype(np.int64)
        keep = np.array(
            [s + int(np.argmax(b[s:e])) for s, e in zip(buckets[:-1], buckets[1:], strict=True) if e > s]
        )
        t, b = t[keep], b[keep]
    return t.astype(np.int64), b.astype(np.int64)
