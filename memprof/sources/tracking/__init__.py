"""What happens during a profiled call, seen from inside torch: which op made each tensor, on
which line (of the user's code, and of the library it called), in which module, in which phase
(forward, backward, optimizer, recompute), and what each storage is (parameter, gradient,
optimizer state, input, saved for backward).

The profiler's allocator records say how many bytes were live when; this package says what
they were, and :func:`memprof.analysis.attribution.attribute` turns both into numbers. A run
is explained in two passes::

    # 1. The measured calls: program state only. Their allocations are exactly an untracked
    #    run's; the exact peak (frees of tensors made before the call included) comes from here.
    light = Tracker(args, kwargs, func=func, module=target_module, device="cpu", ops=False)
    with light, profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(repeat):
            with record_function(CALL_MARKER):
                func(*args, **kwargs)
    measured = attribute(raw_from_profiler(prof), light.facts(prof), warm=warmup > 0)
    # 2. One attribution call with ops, lines and saved tensors tracked.
    full = Tracker(args, kwargs, func=func, module=target_module, device="cpu")
    with full, profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function(CALL_MARKER):
            func(*args, **kwargs)
    explained = combine(measured, attribute(raw_from_profiler(prof), full.facts(prof)))

Compiled functions are explained in one pass: :class:`CompileTracking` is entered around the
compiling call and the measured calls, ``Tracker(..., compiled=True)`` around the profile, and
``tracker.facts(prof, compiled=tracking)`` reads the kernels and their lines.

The jobs, one module each: :mod:`.state` (program state), :mod:`.modules` (module calls,
optimizer steps, recompute), :mod:`.ops` (the dispatch mode and each op), :mod:`.lines` (whose
code a frame is, the statement of a line), :mod:`.compiled` (Inductor's provenance),
:mod:`.tracker` (all of them around one call). The profile's event tree is read by
:mod:`memprof.sources.tree`. Why this way: ``shared/ATTRIBUTION_FACTS.md``.
"""

from memprof.sources.tracking.compiled import CompileTracking
from memprof.sources.tracking.lines import frame_kind, is_source_file, is_user_file
from memprof.sources.tracking.tracker import FakeClock, Tracker, storage_key
from memprof.sources.tree import read_calls

__all__ = [
    "CompileTracking",
    "FakeClock",
    "Tracker",
    "frame_kind",
    "is_source_file",
    "is_user_file",
    "read_calls",
    "storage_key",
]
