"""Explaining a live run's peak: what is live at it, by category, module and line.

The measured calls track program state only (their allocations are exactly an untracked
run's); then, in eager mode, one more call is profiled with ops, lines, modules and saved
tensors tracked (:func:`explaining_call`), whose program state explains the measured peak
(the assembler, :func:`memprof.pipeline.assemble.run_of`, works the explanation out). Compiled runs are
explained from the measured calls, with Inductor's provenance of each kernel
(:class:`Explaining` enters it around the compiling call). Tracking that fails to start leaves
a note and the run unexplained, never failed.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np
import torch  # noqa: TID253 - a live source, like sources/live.py
from torch.profiler import record_function  # noqa: TID253

from memprof.core.errors import first_line
from memprof.core.gcpause import hold_to_end
from memprof.core.records import CALL_MARKER, Allocations, TrackedFacts
from memprof.sources.live.allocator_history import History, recorded, with_addresses
from memprof.sources.live.kineto import raw_from_profiler
from memprof.sources.live.profiling import (
    cuda_counters_after,
    cuda_counters_before,
    memory_profile,
    quiet_profiler_stderr,
    sync,
)
from memprof.sources.live.settle import settle_other_threads
from memprof.sources.live.tree import ProfileRead
from memprof.sources.options import RunOptions
from memprof.sources.targets.target import Inputs
from memprof.sources.tracking.compiled import CompileTracking
from memprof.sources.tracking.tracker import Tracker


class Explaining:
    """What explaining a run needs besides the call: the target (its parameters name the
    arguments; a bound method adds its object), its module, and in compile mode Inductor's
    provenance (:class:`CompileTracking`, entered around the compiling call and the measured
    calls). Tracking that fails to start leaves a note and the run unexplained, never failed."""

    def __init__(self, func: Callable[..., Any], module: ModuleType | None) -> None:
        self.func = func
        self.module = module
        self.tracking: CompileTracking | None = None
        self.notes: list[str] = []

    @contextlib.contextmanager
    def compiling(self, options: RunOptions) -> Iterator[None]:
        """In compile mode with Inductor and ``explain``: Inductor's provenance tracking."""
        if not (options.explain and options.mode == "compile" and options.backend == "inductor"):
            yield
            return
        tracking = CompileTracking()
        try:
            tracking.__enter__()
        except Exception as error:  # private Inductor settings moved: explain by kernel only
            self.notes.append(f"Inductor's provenance is not available ({first_line(error)})")
            yield
            return
        self.tracking = tracking
        try:
            yield
        finally:
            tracking.__exit__(None, None, None)

    def tracker(self, inputs: Inputs, options: RunOptions, *, ops: bool) -> Tracker:
        return Tracker(
            inputs.args,
            inputs.kwargs,
            func=self.func,
            module=self.module,
            device=options.device,
            ops=ops,
            compiled=options.mode == "compile",
            # With no time budget the profiled calls are the timing: nothing slows them.
            statements=options.time_budget > 0,
        )

    @contextlib.contextmanager
    def tracked(self, tracker: Tracker | None) -> Iterator[Tracker | None]:
        """``tracker`` entered (None when it could not start: a note says why)."""
        if tracker is not None:
            try:
                tracker.__enter__()
            except Exception as error:
                self.notes.append(f"program state could not be tracked ({first_line(error)})")
                tracker = None
        try:
            yield tracker
        finally:
            if tracker is not None:
                tracker.__exit__(None, None, None)

    def facts(
        self,
        tracker: Tracker,
        prof: Any,
        *,
        complete: Callable[[Allocations], Allocations | None] | None = None,
        read: ProfileRead | None = None,
    ) -> TrackedFacts | None:
        """What ``tracker`` saw during the profiled calls (the assembler explains their peak
        with it); None (with a note) when it cannot be read. ``read``: the profile's records
        already read, as :meth:`Tracker.facts` takes them."""
        try:
            return tracker.facts(prof, compiled=self.tracking, complete=complete, read=read)
        except Exception as error:
            self.notes.append(
                f"memprof could not explain the peak ({first_line(error)}); the numbers are the "
                "allocator records'"
            )
            return None


def explaining_call(
    fn: Callable[..., Any], inputs: Inputs, options: RunOptions, explaining: Explaining
) -> tuple[TrackedFacts | None, dict[str, int]]:
    """One more eager call, profiled with ops, lines, modules and saved tensors tracked: what
    it tracked (to explain what is live at the measured calls' peak) and, on CUDA, the device's
    counters around it. (None, {}) with a note when it tracked nothing usable: the measured
    calls' own state explains the peak then."""
    cuda = options.device.startswith("cuda")
    ignored: list[str] = []  # torch's lines about this call repeat the measured calls'
    gc.collect()  # as before the measured calls
    counters = cuda_counters_before(options.device) if cuda else {}
    with explaining.tracked(explaining.tracker(inputs, options, ops=True)) as tracker:
        if tracker is None:
            # The call is still made: every rank of a distributed job makes as many calls
            # (their collectives must meet), whether or not its tracking started.
            try:
                fn(*inputs.args, **inputs.kwargs)
            except KeyboardInterrupt:
                raise
            except BaseException:  # sys.exit() included: the measured calls are what counts
                pass
            return None, {}
        history = recorded(options.device) if cuda else contextlib.nullcontext(History())
        try:
            with (
                quiet_profiler_stderr(ignored),
                history as allocator,
                memory_profile(options.device) as prof,
            ):
                with record_function(CALL_MARKER), _unprofiled_ops(tracker):
                    # Its result is dropped at once, inside the profile: only the peak matters here.
                    fn(*inputs.args, **inputs.kwargs)
                    sync(options.device)
                settle_other_threads()
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # sys.exit() included
            explaining.notes.append(
                f"the explaining call raised {first_line(error)}: only program state (parameters, "
                "gradients, optimizer state, inputs) is explained"
            )
            return None, {}
    complete = completion(prof, options.device, allocator) if cuda else None
    facts = explaining.facts(tracker, prof, complete=complete)
    hold_to_end(prof)
    if facts is None:
        return None, {}
    if cuda:
        counters.update(cuda_counters_after(options.device))
    return facts, counters


def completion(
    prof: Any, device: str, history: History
) -> Callable[[Allocations], Allocations | None] | None:
    """What completes the explaining call's records of ``device`` read from the event tree
    (which lacks some frees on CUDA): the flat list's records, each with its address from the
    allocator's history, checked against the tree's. None when no history was recorded."""
    if history.sign is None:
        return None
    raw = raw_from_profiler(prof, device_type="CUDA", device_index=torch.device(device).index or 0)
    order = np.argsort(raw.mem_time, kind="stable")
    time, nbytes = raw.mem_time[order], raw.mem_bytes[order]
    return lambda tree: with_addresses(tree, time, nbytes, history)


def _unprofiled_ops(tracker: Tracker) -> contextlib.AbstractContextManager[None]:
    """Inside the call marker: the profiler records the allocator alone (and backward's ops),
    as the tracker's dispatch mode sees the ops (:meth:`memprof.sources.tracking.ops.Ops.unprofiled`)."""
    return contextlib.nullcontext() if tracker.ops is None else tracker.ops.unprofiled()
