"""A block of the user's code profiled where it runs: :func:`memprof.track`, the training
callbacks (:mod:`memprof.integrations`) and the notebook magic start a :class:`Block` before
the code and stop it after, from wherever the code's own hooks allow.

A block runs once. A function profiled by :mod:`memprof.sources.live.run` is measured by calls
that track program state only, then explained by one more call with ops tracked; a block has
no second call, so it is measured and explained in the same pass, with the op tracker
(:class:`memprof.sources.tracking.Tracker`, ``ops=True``) entered around it. What the tracker
adds to the profiler's records is taken out before the analysis (:func:`untracked`), so the
numbers and every op's calls and bytes are those of an untracked pass:

- the allocations of rewrapped numbers (a Python number given for a Tensor argument becomes a
  new 8-byte tensor when the dispatch mode calls the op again), as the attribution leaves them
  out of the explanation;
- the dispatch mode's ranges (``PythonDispatchMode``) and the outer copy of each op called
  under it (the op is recorded twice: once as called, around the mode's range, and once as the
  mode calls it).

Backward runs without the dispatch mode (the tracker takes it off while autograd runs), so
autograd allocates what it does untracked. ``tests/test_track.py`` checks the numbers, and
every op's calls and bytes, against untracked profiles of the same code. Without ``explain``
the tracker follows program state only, as live runs' measured calls do.

The recording is made by :func:`memprof.sources.live.run.block_run`, the way live runs' are;
the assembler (:func:`memprof.pipeline.assemble.run_of`) takes what the tracker added out of
the records (:func:`memprof.analysis.untracked.untracked`) and explains the peak.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from torch.profiler import record_function  # noqa: TID253

from memprof.core.errors import UsageError, first_line
from memprof.core.recording import Recording
from memprof.core.records import CALL_MARKER, TrackedFacts
from memprof.sources.live.allocator_history import History, recorded
from memprof.sources.live.explaining import completion
from memprof.sources.live.mapped import mapped_files
from memprof.sources.live.measured import read_session
from memprof.sources.live.noise import hidden_torch_messages
from memprof.sources.live.profiling import (
    cuda_counters_after,
    cuda_counters_before,
    memory_profile,
    quiet_profiler_stderr,
    sync,
    thread_starts,
)
from memprof.sources.live.run import block_run
from memprof.sources.live.settle import settle_other_threads
from memprof.sources.live.tree import ProfileRead
from memprof.sources.options import RunOptions
from memprof.sources.targets.target import Inputs
from memprof.sources.tracking.tracker import Tracker

_active: list[Block] = []  # the block being profiled (one at a time: profilers do not nest)
_claim = threading.Lock()
"""Held while a block checks :data:`_active` and claims it: two threads starting blocks at once
get one block and one "blocks do not nest" error, never two profilers (a crash in torch)."""


_at_exit: list[bool] = []


def _abort_at_exit() -> None:
    """Have every block still running stopped when the interpreter exits: a block left open
    (a training step that raised, caught by a script that never called ``callback.stop()``, a
    second callback's failed start leaving the first's step open) would otherwise leave torch's
    profiler and the op tracker on while torch tears down, which crashes the process."""
    if not _at_exit:
        import atexit

        atexit.register(_abort_all)
        _at_exit.append(True)


def _abort_all() -> None:
    for block in list(_active):
        with contextlib.suppress(Exception):
            block.abort()


class Block:
    """One pass of the user's code, profiled between :meth:`start` and :meth:`stop` (called on
    the same thread, by any code: a ``with`` statement or two hooks of a training loop).

    ``options``: the device (resolved: "cpu", "cuda:0"), ``explain`` and ``verbose`` of
    :class:`RunOptions` (the rest is for functions). ``roots`` name what the code works on (the
    model, the optimizer, the caller's locals): tensors reachable from them when the block
    starts are its inputs and program state, and their frees during the block are counted.
    ``func``/``args``/``module``: a function's call (a decorated function): its arguments, and
    its module's globals, are roots too, named by its parameters.
    """

    def __init__(
        self,
        options: RunOptions,
        *,
        label: str,
        roots: Mapping[str, Any] | None = None,
        func: Any = None,
        args: tuple[Any, ...] = (),
        module: ModuleType | None = None,
    ) -> None:
        self.options = options
        self.label = label
        self.inputs = Inputs(args=tuple(args), kwargs=dict(roots or {}), source="python")
        self._func = func
        self._module = module
        self._stack = contextlib.ExitStack()
        self._marker: Any = None
        self._tracker: Tracker | None = None
        self._prof: Any = None
        self._history = History()
        self._notes: list[str] = []
        self._threads: list[str] = []
        self._mapped: list[tuple[str, int]] = []
        self._counters: dict[str, int] = {}
        self._heard: Any = None
        self._started = 0.0
        self._thread = 0

    @property
    def running(self) -> bool:
        return self._marker is not None

    def start(self) -> None:
        """Start profiling (and tracking, when the tracker can start; else a note says why)."""
        with _claim:
            if _active:
                other = "" if _active[0]._thread == threading.get_ident() else " on another thread"
                raise UsageError(
                    f"memprof is already profiling {_active[0].label!r}{other}: blocks do not nest "
                    "(torch's profiler runs one session at a time, for every thread); profile the outer "
                    "block or the inner one"
                )
            self._thread = threading.get_ident()
            _active.append(self)  # claimed until the profile is read (stop) or dropped (abort)
        try:
            self._start()
        except BaseException:
            self._release()
            raise
        _abort_at_exit()

    def _release(self) -> None:
        with _claim:
            if self in _active:
                _active.remove(self)

    def _start(self) -> None:
        options = self.options
        cuda = options.device.startswith("cuda")
        stack = self._stack
        try:
            self._heard = stack.enter_context(hidden_torch_messages(show=options.verbose))
            # Garbage made before is collected now, not by a collection inside the block.
            gc.collect()
            self._counters = cuda_counters_before(options.device) if cuda else {}
            stack.enter_context(quiet_profiler_stderr(self._notes))
            self._threads = stack.enter_context(thread_starts())
            self._mapped = stack.enter_context(mapped_files())
            self._tracker = self._enter_tracker()
            if cuda and self._tracker is not None and options.explain:
                self._history = stack.enter_context(recorded(options.device))
            self._prof = stack.enter_context(memory_profile(options.device))
            marker = record_function(CALL_MARKER)
            with self._untracked():
                marker.__enter__()
        except BaseException:
            stack.close()
            raise
        self._marker = marker
        self._started = time.perf_counter()

    def _enter_tracker(self) -> Tracker | None:
        options = self.options
        tracker = Tracker(
            self.inputs.args,
            self.inputs.kwargs,
            func=self._func,
            module=self._module,
            device=options.device,
            ops=options.explain,
        )
        try:
            self._stack.enter_context(tracker)
        except Exception as error:
            self._notes.append(f"program state could not be tracked ({first_line(error)})")
            return None
        finally:
            # The roots were looked through when the tracker started (which lets go of them);
            # held longer, they would keep alive what the block's code frees (a local it deletes).
            self.inputs = Inputs(source="python")
        return tracker

    def _untracked(self) -> contextlib.AbstractContextManager[None]:
        """The op tracker's dispatch mode off: the call's range is opened and closed as the
        profiler alone sees it (under the mode, a range of the mode's would straddle its start
        and its end, which the event tree cannot tell from a range still open at the stop)."""
        ops = self._tracker.ops if self._tracker is not None else None
        return contextlib.nullcontext() if ops is None else ops.off()

    def _finish(self) -> float:
        """Stop the profiler and the tracker; the block's wall time (ms)."""
        wall_ms = (time.perf_counter() - self._started) * 1e3
        try:
            with contextlib.suppress(RuntimeError):  # a failed CUDA call is the code's failure
                sync(self.options.device)
            with self._untracked():
                self._marker.__exit__(None, None, None)
            settle_other_threads()
        finally:
            self._marker = None
            self._stack.close()
        return wall_ms

    def abort(self) -> None:
        """Stop profiling and keep nothing (the code left the block in a way that leaves no
        run to report: training stopped between two hooks)."""
        try:
            if self.running:
                self._finish()
        finally:
            self._release()

    def stop(self, failure: BaseException | None = None) -> Recording:
        """Stop profiling and return what the pass recorded (for
        :func:`memprof.pipeline.assemble.run_of`: the numbers of the pass, peak above the
        block's start, footprint, ..., and with ``explain`` what is live at its peak).
        ``failure``: what the block raised (the run then covers it up to the failure, and a
        note says so)."""
        if not self.running:
            raise UsageError(f"block {self.label!r} is not being profiled; start it first")
        try:
            return self._stopped(failure)
        finally:
            self._release()

    def _stopped(self, failure: BaseException | None) -> Recording:
        wall_ms = self._finish()
        options = self.options
        cuda = options.device.startswith("cuda")
        if cuda:
            self._counters.update(cuda_counters_after(options.device))
        raw, read = read_session(self._prof, options.device, self._tracker)
        facts = self._facts(read)
        if failure is not None:
            self._notes.append(
                f"the block raised {first_line(failure)}: the numbers cover it up to the failure"
            )
        return block_run(
            raw,
            facts,
            label=self.label,
            options=options,
            inputs=self.inputs,
            walls=[wall_ms] if failure is None else [],
            counters=self._counters,
            notes=self._notes,
            threads=self._threads,
            mapped=self._mapped,
            heard=self._heard,
        )

    def _facts(self, read: ProfileRead | None) -> TrackedFacts | None:
        """What the tracker saw during the pass (None with a note when it cannot be read: the
        numbers are the records' then). ``read``: what the tracker reads from the profile,
        already read."""
        if self._tracker is None:
            return None
        cuda = self.options.device.startswith("cuda")
        complete = completion(self._prof, self.options.device, self._history) if cuda else None
        try:
            return self._tracker.facts(self._prof, complete=complete, read=read)
        except Exception as error:
            self._notes.append(
                f"memprof could not explain the peak ({first_line(error)}); the numbers are the "
                "allocator records'"
            )
            return None
