"""A small driver that profiles a call the way ``memprof run`` does (warm-up calls, then each
measured call inside ``record_function(CALL_MARKER)`` under ``profile(profile_memory=True)``),
with the trackers around it, and checks the reconciliation every explained run satisfies.

Two passes, as ``memprof run`` will make them: the measured calls with program state tracked
(their allocations are exactly an untracked run's), then one attribution call with ops, lines
and saved tensors tracked."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable
from types import ModuleType
from typing import Any

from reconcile import assert_at_peak_adds_up
from torch.profiler import ProfilerActivity, profile, record_function

from memprof.analysis.attribution import Attribution, attribute, combine
from memprof.analysis.peaks import analyze
from memprof.core.records import CALL_MARKER, RawProfile
from memprof.sources.live.kineto import raw_from_profiler
from memprof.sources.tracking import CompileTracking, Tracker


def _profiled(
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    calls: int,
    tracker: Tracker | None,
    *,
    unprofiled: bool = False,
) -> tuple[RawProfile, Any]:
    """Profile ``calls`` calls, each in a CALL_MARKER range, inside ``tracker`` when given;
    ``unprofiled``: the profiler records no op but backward's inside the range, as in
    ``memprof run``'s explaining call (the tracker's ops see them)."""
    result: Any = None
    gc.collect()  # as memprof run does: garbage of earlier tests is not freed inside the calls
    with tracker if tracker is not None else contextlib.nullcontext():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            for _ in range(calls):
                result = None  # the previous call's result is freed between calls
                ops = tracker.ops if tracker is not None and unprofiled else None
                with record_function(CALL_MARKER), ops.unprofiled() if ops else contextlib.nullcontext():
                    result = func(*args, **kwargs)
    del result
    return raw_from_profiler(prof), prof


def profile_calls(
    func: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    warmup: int = 1,
    repeat: int = 1,
    module: ModuleType | None = None,
    track: bool = True,
    explain: bool = True,
) -> tuple[RawProfile, Attribution | None]:
    """Profile ``repeat`` calls after ``warmup`` calls. With ``track`` the measured calls track
    program state (exact numbers); with ``explain`` one more call is profiled with everything
    tracked, and explains the peak."""
    kwargs = kwargs or {}
    for _ in range(warmup):
        func(*args, **kwargs)
    if not track:
        return _profiled(func, args, kwargs, repeat, None)[0], None
    light = Tracker(args, kwargs, func=func, module=module, ops=False)
    raw, prof = _profiled(func, args, kwargs, repeat, light)
    measured = attribute(raw, light.facts(prof), warm=warmup > 0)
    if not explain:
        return raw, measured
    full = Tracker(args, kwargs, func=func, module=module)
    raw_explained, prof = _profiled(func, args, kwargs, 1, full)
    explained = attribute(raw_explained, full.facts(prof))
    reconcile(raw_explained, explained)
    return raw, combine(measured, explained)


def explain(func: Callable[..., Any], *args: Any, **options: Any) -> Attribution:
    """Explain ``func(*args)``; assert the reconciliation and that the attribution pass
    reproduced the measured peak."""
    raw, explained = profile_calls(func, args, **options)
    assert explained is not None
    reconcile(raw, explained)
    assert explained.at_peak.footprint_bytes == explained.footprint_bytes, explained.notes
    assert explained.at_peak.peak_bytes == explained.peak_bytes
    return explained


def reconcile(raw: RawProfile, explained: Attribution) -> None:
    """Every byte in exactly one category; entries and unattributed lines add up to the
    footprint; what was made during the call, less what was freed from before it, is the peak;
    the records' own peak is what peaks.analyze says."""
    assert_at_peak_adds_up(explained.at_peak)
    assert explained.footprint_bytes - explained.live_at_start_bytes == explained.peak_bytes
    assert explained.records_peak_bytes == analyze(raw).numbers.peak_bytes
    worst = explained.calls[explained.peak_call - 1]
    assert (worst.peak_bytes, worst.footprint_bytes) == (explained.peak_bytes, explained.footprint_bytes)
    assert explained.peak_bytes == max(c.peak_bytes for c in explained.calls)
    columns = len(explained.timeline_t_ns)
    assert all(len(values) == columns for values in explained.timeline_by_category.values())
    if columns:
        peak = explained.timeline_t_ns.index(explained.peak_time_ns)
        highest = sum(v[peak] for v in explained.timeline_by_category.values())
        assert highest == explained.at_peak.footprint_bytes


def profile_compiled(
    func: Callable[..., Any],
    args: tuple[Any, ...] = (),
    *,
    repeat: int = 1,
    module: ModuleType | None = None,
) -> tuple[RawProfile, Attribution]:
    """Compile ``func`` with Inductor (its first call, under CompileTracking, is the warm-up)
    and profile ``repeat`` calls with program state tracked by scanning: one pass explains it."""
    import torch
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()
    compiled = torch.compile(func)
    tracking = CompileTracking()
    markers = {"profiler_mark_wrapper_call": True}
    with inductor_config.patch(markers), tracking:
        compiled(*args)
        tracker = Tracker(args, {}, func=func, module=module, compiled=True)
        raw, prof = _profiled(compiled, args, {}, repeat, tracker)
    explained = attribute(raw, tracker.facts(prof, compiled=tracking))
    reconcile(raw, explained)
    return raw, explained
