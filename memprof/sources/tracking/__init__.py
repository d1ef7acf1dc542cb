"""What happens during a profiled call, seen from inside torch: which op made each tensor, on
which line (of the user's code, and of the library it called), in which module, in which phase
(forward, backward, optimizer, recompute), and what each storage is (parameter, gradient,
optimizer state, input, saved for backward).

The profiler's allocator records say how many bytes were live when; this package says what
they were, and :func:`memprof.analysis.attribution.attribute` turns both into numbers. A live
run is explained in two passes (:mod:`memprof.sources.live.run`): the measured calls track program
state only (``Tracker(..., ops=False)``: their allocations are exactly an untracked run's, and
the exact peak comes from them), then one more call tracks ops, lines and saved tensors
(``Tracker(...)``) and explains the measured peak. Compiled functions are explained in one
pass: :class:`CompileTracking` is entered around the compiling call and the measured calls,
``Tracker(..., compiled=True)`` around the profile, and ``tracker.facts(prof,
compiled=tracking)`` reads the kernels and their lines.

One module per job: :mod:`.state` (program state), :mod:`.modules` (module calls, optimizer
steps, recompute), :mod:`.ops` (the dispatch mode and each op), :mod:`.lines` (whose code a
frame is, the statement of a line), :mod:`.compiled` (Inductor's provenance), :mod:`.tracker`
(all of them around one call). The profile's event tree is read by :mod:`memprof.sources.live.tree`.
Why this way: ``shared/ATTRIBUTION_FACTS.md``.
"""

from memprof.sources.live.tree import read_calls
from memprof.sources.tracking.compiled import CompileTracking
from memprof.sources.tracking.lines import frame_kind, is_source_file, is_user_file
from memprof.sources.tracking.tracker import FakeClock, Tracker, storage_key

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
