"""What is live at the peak: every byte by category, module and source line (issue 11).

Pure: the profiler's allocator records (with addresses) and what the tracker saw
(:class:`memprof.core.records.TrackedFacts`) in, numbers out. No torch.

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

Steps 1, 3 and 4 have their own modules (:mod:`memprof.analysis.lifetimes`,
:mod:`memprof.analysis.peak_entries`, :mod:`memprof.analysis.module_table`); this one holds
each call's numbers, the timelines and the whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from memprof.analysis.lifetimes import BEFORE, Backward, Lifetimes, Window, lifetimes_of, prepared
from memprof.analysis.module_table import kernel_stats, module_stats
from memprof.analysis.peak_entries import What, classify, live_at_peak
from memprof.analysis.timeline import downsample, highest_per_bucket
from memprof.core.records import RawProfile, TrackedFacts
from memprof.model.explanation import CATEGORIES, AtPeak, CallNumbers, KernelStats, ModuleStats, Unattributed

__all__ = [
    "Attribution",
    "attribute",
    "combine",
    "with_device_counters",
]


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


# ---- the numbers of each call -------------------------------------------------------------------


def _windows(calls: list[tuple[int, int]], lt: Lifetimes, prefix: np.ndarray) -> list[Window]:
    if calls:
        spans = [(int(s), int(e)) for s, e in calls]
    else:
        recorded = lt.times[lt.times > BEFORE]
        spans = [(int(recorded[0]), int(recorded[-1])) if len(recorded) else (0, 0)]
    windows = []
    for start, end in spans:
        lo = int(np.searchsorted(lt.times, start, side="left"))
        hi = int(np.searchsorted(lt.times, end, side="right"))
        peak = lo + int(np.argmax(prefix[lo : hi + 1]))
        windows.append(Window(start, end, lo, hi, peak))
    return windows


def _call_numbers(windows: list[Window], prefix: np.ndarray) -> tuple[CallNumbers, ...]:
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


# ---- the timeline by category -------------------------------------------------------------------


def _timeline(
    lt: Lifetimes, what: What, window: Window, max_points: int = 2000
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
    facts, backward = prepared(facts)
    lt = lifetimes_of(facts)
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
    lt: Lifetimes,
    window: Window,
    backward: Backward,
    prefix: np.ndarray,
) -> Attribution:
    """``numbers`` with what is live at the peak, the modules, the timeline by category and
    (compiled runs) the kernels."""
    what = classify(facts, lt, backward)
    at_peak, live = live_at_peak(facts, lt, what, window, backward)
    t_ns, by_category = _timeline(lt, what, window)
    return replace(
        numbers,
        at_peak=at_peak,
        modules=module_stats(facts, lt, what, live, window, prefix),
        timeline_t_ns=t_ns,
        timeline_by_category=by_category,
        kernels=kernel_stats(facts, lt, what, live, window) if facts.compiled else (),
    )


def _live_timeline(
    lt: Lifetimes, windows: list[Window], prefix: np.ndarray
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Live bytes from the first call's start to the last call's end, above live at that start."""
    lo, hi = windows[0].lo, windows[-1].hi
    start, end = windows[0].start_ns, windows[-1].end_ns
    base = prefix[lo]
    t = np.concatenate(([start], lt.times[lo:hi], [max(end, start)])) - start
    b = np.concatenate(([0], prefix[lo + 1 : hi + 1] - base, [prefix[hi] - base]))
    t, b = downsample(t, b)
    return tuple(int(v) for v in t), tuple(int(v) for v in b)


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
    return replace(
        measured,  # its numbers; what is live at the peak, the explaining pass's
        peak_time_ns=explained.peak_time_ns,
        at_peak=explained.at_peak,
        modules=explained.modules,
        timeline_t_ns=explained.timeline_t_ns,
        timeline_by_category=explained.timeline_by_category,
        notes=tuple(notes),
        kernels=explained.kernels,
        fused_kernels=explained.fused_kernels,
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
