"""A small driver that profiles a call the way ``memprof run`` does (warm-up calls, then each
measured call inside ``record_function(CALL_MARKER)`` under ``profile(profile_memory=True)``),
with the attribution tracker around it, and checks the reconciliation every explained run
must satisfy."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from torch.profiler import ProfilerActivity, profile, record_function

from memprof.analysis.attribution import CATEGORIES, Attribution, attribute
from memprof.analysis.peaks import analyze
from memprof.records import CALL_MARKER, RawProfile
from memprof.sources.kineto import raw_from_profiler
from memprof.sources.tracking import Tracker


def profile_calls(
    func: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    warmup: int = 1,
    repeat: int = 1,
    module: ModuleType | None = None,
    track: bool = True,
) -> tuple[RawProfile, Attribution | None]:
    """Profile ``repeat`` calls after ``warmup`` calls; with ``track`` also explain them."""
    kwargs = kwargs or {}
    for _ in range(warmup):
        func(*args, **kwargs)
    tracker = Tracker(args, kwargs, func=func, module=module)
    result: Any = None
    if track:
        tracker.__enter__()
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            for _ in range(repeat):
                result = None
                with record_function(CALL_MARKER):
                    result = func(*args, **kwargs)
    finally:
        if track:
            tracker.__exit__(None, None, None)
    del result
    raw = raw_from_profiler(prof)
    if not track:
        return raw, None
    return raw, attribute(raw, tracker.facts(prof), warm=warmup > 0)


def explain(func: Callable[..., Any], *args: Any, **options: Any) -> Attribution:
    """Explain ``func(*args)`` and assert the reconciliation (see :func:`reconcile`)."""
    raw, explained = profile_calls(func, args, **options)
    assert explained is not None
    reconcile(raw, explained)
    return explained


def reconcile(raw: RawProfile, explained: Attribution) -> None:
    """Every byte in exactly one category; entries and unattributed lines add up to the
    footprint; what was made during the call, less what was freed from before it, is the peak;
    the peak agrees with the allocator records when nothing made before the call was freed."""
    at_peak = explained.at_peak
    assert set(at_peak.by_category) == set(CATEGORIES)
    assert sum(at_peak.by_category.values()) == explained.footprint_bytes
    listed = sum(e.bytes for e in at_peak.entries) + sum(u.bytes for u in at_peak.unattributed)
    assert listed == explained.footprint_bytes
    assert explained.footprint_bytes - explained.live_at_start_bytes == explained.peak_bytes
    during = sum(e.bytes for e in at_peak.entries if not e.before_call) + sum(
        u.bytes for u in at_peak.unattributed if not u.before_call
    )
    assert during == explained.peak_bytes + explained.freed_before_peak_bytes
    before = explained.footprint_bytes - during
    assert before == explained.live_at_start_bytes - explained.freed_before_peak_bytes
    if explained.freed_before_peak_bytes == 0 and len(explained.calls) == 1:
        assert explained.records_peak_bytes >= explained.peak_bytes
    assert explained.records_peak_bytes == analyze(raw).numbers.peak_bytes
    for category, values in explained.timeline_by_category.items():
        assert len(values) == len(explained.timeline_t_ns), category
    peak_column = explained.timeline_t_ns.index(explained.peak_time_ns) if explained.timeline_t_ns else 0
    if explained.timeline_t_ns and explained.peak_bytes:
        assert (
            sum(v[peak_column] for v in explained.timeline_by_category.values()) >= explained.footprint_bytes
        )
