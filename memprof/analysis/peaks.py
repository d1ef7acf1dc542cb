"""Profiler records -> the run's numbers, per-op statistics and the memory timeline.

All numbers come from torch's raw allocator records (``[memory]`` events: +bytes on
allocation, -bytes on free, with a timestamp) and op intervals, not from the printed table.
The analysis is vectorised: records are sorted once, live bytes are a prefix sum, an op's
memory is a difference of prefix sums, and the highest point inside an op is a range-maximum
query on a sparse table — O((N + M) log N) for N records and M ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memprof.analysis.codes import factorize, name_codes
from memprof.analysis.compiled import compiled_view
from memprof.analysis.nesting import _parents
from memprof.analysis.running import ops_at
from memprof.analysis.timeline import downsample
from memprof.core.names import MEMORY_ROW, normalize_name
from memprof.core.records import RawProfile
from memprof.core.units import format_bytes
from memprof.model.ops import OpStats
from memprof.model.timeline import MAX_POINTS, Timeline


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


@dataclass(frozen=True)
class RunNumbers:
    """The numbers of one run (docs/concepts/numbers.md says what each means)."""

    peak_bytes: int
    allocated_bytes: int
    net_bytes: int
    peak_op: str | None
    peak_op_stack: tuple[str, ...]
    calls: int
    records: int
    region_peak_bytes: int = 0
    """Highest live bytes over the whole profile above its start (between calls included):
    what a device allocator's global high-water mark sees."""


@dataclass(frozen=True)
class Analysis:
    """Everything :func:`analyze` derives: the run's numbers, one :class:`OpStats` per op name
    (in order of first appearance, ``[memory]`` last), the timeline, and notes on what the
    records leave out."""

    numbers: RunNumbers
    ops: tuple[OpStats, ...]
    timeline: Timeline
    notes: tuple[str, ...] = ()


def analyze(raw: RawProfile) -> Analysis:
    """Compute the run's numbers, per-op numbers and the live-bytes timeline of ``raw``.

    Per op (one row per normalised name, summed over calls like torch's ``key_averages``):
    ``calls``; ``total_bytes`` (torch's "Mem": net bytes inside the op's calls, children
    included); ``self_bytes`` (torch's "Self Mem": total minus the children's);
    ``allocated_bytes`` (bytes allocated inside the op's calls, counting an op nested in an op
    of the same name once); ``peak_bytes`` (largest rise of live bytes during one call above
    live at its start); ``self_us``/``total_us`` (CPU time). Records outside every op form the
    ``[memory]`` row, as in torch's table. Compiled code is seen through
    :func:`memprof.analysis.compiled.compiled_view`: its wrapper ranges are one row, and each
    kernel owns the buffers it produces.
    """
    raw = compiled_view(raw)
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
    stack: tuple[str, ...] = ()
    if peak_bytes > 0:
        index = int(lo[worst] + np.argmax(live[lo[worst] : hi[worst]]))
        thread = None if raw.mem_thread is None else int(raw.mem_thread[order][index])
        stack = tuple(op_stack_at(raw, int(times[index]), thread))
        peak_op = responsible_op(stack)
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
    op_names, op_at = ops_at(raw, timeline_ns + (int(call_start.min()) if len(call_start) else 0))
    timeline = Timeline(
        t_ns=tuple(timeline_ns.tolist()),
        bytes=tuple(timeline_bytes.tolist()),
        op_names=op_names,
        op_at=tuple(op_at.tolist()),
    )
    return Analysis(numbers=numbers, ops=ops, timeline=timeline, notes=_notes(raw, numbers))


def _notes(raw: RawProfile, numbers: RunNumbers) -> tuple[str, ...]:
    """What the records themselves say is missing from the numbers."""
    notes = []
    if raw.other_thread_bytes:
        notes.append(
            f"{format_bytes(raw.other_thread_bytes)} were allocated on threads other than the call's "
            "and autograd's; those made while a call ran count in its peak, whoever made them"
        )
    if numbers.records == 0:
        notes.append(
            "no allocations were recorded: the function allocates nothing through torch's allocator "
            "(or does its work on other threads, which torch's profiler does not record)"
        )
    return tuple(notes)


def _op_frame(
    raw: RawProfile, times: np.ndarray, deltas: np.ndarray, window_stats: Any
) -> tuple[OpStats, ...]:
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
        raw_codes, raw_names = name_codes(raw.op_name, raw.op_code, raw.op_code_names)
        normalized = np.array([normalize_name(str(n)) for n in raw_names], dtype=object)
        group_of_raw, names = factorize(normalized)
        group = group_of_raw[raw_codes]
        groups = len(names)
        peak = np.zeros(groups, dtype=np.int64)
        np.maximum.at(peak, group, rise)
        start_live = np.concatenate(([0], np.cumsum(deltas, dtype=np.int64)))[
            np.searchsorted(times, raw.op_start, side="left")
        ]
        wraps = _wraps(parent, rise, start_live, group, [str(name) for name in names])
        columns = zip(
            [str(name) for name in names],
            np.bincount(group, minlength=groups).tolist(),
            _int_sums(group, self_bytes, groups).tolist(),
            _int_sums(group, total, groups).tolist(),
            _int_sums(group, np.where(nested_same, 0, allocated), groups).tolist(),
            peak.tolist(),
            np.bincount(group, weights=duration - child_time, minlength=groups).tolist(),
            np.bincount(group, weights=duration, minlength=groups).tolist(),
            wraps,
            strict=True,
        )
        ops = [OpStats(*row) for row in columns]
    else:
        ops = []

    # Records outside every op: torch's `[memory]` row.
    if len(times):
        outside = _outside_ops(raw, times)
        if outside.any():
            loose = deltas[outside]
            ops.append(
                OpStats(
                    name=MEMORY_ROW,
                    calls=int(outside.sum()),
                    self_bytes=int(loose.sum()),
                    total_bytes=int(loose.sum()),
                    allocated_bytes=int(np.maximum(loose, 0).sum()),
                    peak_bytes=int(max(loose.max(), 0)),
                    self_us=0.0,
                    total_us=0.0,
                )
            )
    return tuple(ops)


_CHAIN_LIMIT = 16


def _wraps(
    parent: np.ndarray, rise: np.ndarray, start_live: np.ndarray, group: np.ndarray, names: list[str]
) -> list[tuple[str, ...]]:
    """For each op name, the ops its call of highest peak only wraps: a child that started
    with the same bytes live and rose as high holds all of that peak, and so on inward (at
    most :data:`_CHAIN_LIMIT`). Empty when the peak is the op's own."""
    count = len(parent)
    inner = np.full(count, -1, dtype=np.int64)
    kids = np.flatnonzero((parent >= 0) & (rise > 0))
    if len(kids):
        outer = parent[kids]
        same = (rise[kids] == rise[outer]) & (start_live[kids] == start_live[outer])
        inner[outer[same]] = kids[same]
    # Each name's first call of highest peak: sorted by name, then highest peak, then order.
    order = np.lexsort((np.arange(count), -rise, group))
    firsts = order[np.concatenate(([True], group[order][1:] != group[order][:-1]))]
    chains: list[tuple[str, ...]] = [() for _ in names]
    for call in firsts[inner[firsts] >= 0].tolist():
        chain: list[str] = []
        at = call
        while inner[at] >= 0 and len(chain) < _CHAIN_LIMIT:
            at = int(inner[at])
            chain.append(names[group[at]])
        chains[group[call]] = tuple(chain)
    return chains


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


def responsible_op(stack: Sequence[str]) -> str:
    """The op to name for the peak: the outermost aten op running (the one the user's code
    called, e.g. ``aten::sum`` rather than the ``aten::empty_strided`` inside it), else the
    innermost range (a fused kernel or a ``record_function`` label), else ``[memory]``."""
    for name in stack:
        if name.startswith("aten::"):
            return name
    return stack[-1] if stack else MEMORY_ROW


def stack_at(raw: RawProfile, time_ns: int) -> tuple[str, ...]:
    """The op stack (outermost first) at ``time_ns`` as :func:`analyze` names ops (compiled
    code collapsed), on the thread of the allocator record at that moment when known."""
    view = compiled_view(raw)
    thread = None
    if view.mem_thread is not None and len(view.mem_time):
        at = np.flatnonzero(view.mem_time == time_ns)
        thread = int(view.mem_thread[at[0]]) if len(at) else None
    return tuple(op_stack_at(view, time_ns, thread))


def op_stack_at(raw: RawProfile, time_ns: int, thread: int | None = None) -> list[str]:
    """Names of the ops running at ``time_ns`` (on ``thread`` when given), outermost first."""
    running = (raw.op_start <= time_ns) & (raw.op_end >= time_ns) & ~raw.op_async
    if thread is not None:
        running &= raw.op_thread == thread
    active = np.flatnonzero(running)
    active = active[np.lexsort((-raw.op_end[active], raw.op_start[active]))]
    return [normalize_name(str(raw.op_name[i])) for i in active]


def _timeline(
    times: np.ndarray,
    live: np.ndarray,
    call_start: np.ndarray,
    call_end: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    max_points: int = MAX_POINTS,
) -> tuple[np.ndarray, np.ndarray]:
    """Live bytes over time from the first measured call's start, relative to live there.

    Long timelines are reduced to ``max_points`` by :func:`memprof.analysis.timeline.downsample`
    (each bucket's highest point: the peak survives).
    """
    if not len(times):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    first, last = int(lo.min()), int(hi.max())
    base = int(live[first - 1]) if first > 0 else 0
    t = np.concatenate(([call_start.min()], times[first:last], [call_end.max()])) - call_start.min()
    b = np.concatenate(([0], live[first:last] - base, [live[last - 1] - base if last > 0 else 0]))
    t, b = downsample(t, b, max_points)
    return t.astype(np.int64), b.astype(np.int64)
