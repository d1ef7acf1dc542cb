"""The tracker: program state, module calls and (for one explaining call) every op, around a
profiled call; :meth:`Tracker.facts` joins what it saw with the finished profile's records."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from types import ModuleType
from typing import Any

import numpy as np
import torch  # noqa: TID253 - the torch side of tracking

from memprof.core.records import Allocations, TrackedFacts, TrackedOps
from memprof.sources.live.tree import ProfileRead, backward_table, int_array, read_profile
from memprof.sources.tracking.compiled import CompileTracking
from memprof.sources.tracking.fsdp import follow_fsdp
from memprof.sources.tracking.lines import nothing_between, resolve_sites
from memprof.sources.tracking.modules import Calls
from memprof.sources.tracking.ops import Ops
from memprof.sources.tracking.state import ProgramState, call_roots


class Tracker:
    """Tracks tensors, modules and source lines while entered; see :mod:`memprof.sources.tracking`.

    ``args``/``kwargs`` are the call's arguments, ``func`` the target (names the arguments and,
    for a bound method or a module, adds its object), ``module`` the target's module (its
    globals may hold the model and the optimizer), ``device`` the measured device ("cpu",
    "cuda:0"), ``roots`` more (label, value) pairs to find state in (a block's named objects).
    Enter it before the profiler starts and leave it after the profiler stops.

    ``ops=False`` tracks program state only (parameters, gradients, optimizer state, inputs,
    module calls): the measured calls' allocations stay exactly those of an untracked run.
    ``ops=True`` also tracks ops, lines and saved tensors, for one attribution call.
    ``compiled=True``: for a ``torch.compile``d function, state found by scanning only (no
    hooks: Dynamo guards on the global module and optimizer hooks and traces what they do);
    gradients are seen when backward returns; lines and modules come from
    :class:`CompileTracking`, and eager code at a graph break from the statements that ran
    (``statements=False``: not noted; that code's allocations have no line).
    ``fake``: the call runs on fake tensors (:mod:`memprof.sources.fake.run`), which have no
    addresses and allocate nothing: storages are told apart by their ``StorageImpl``
    (:func:`storage_key`), time is ``fake.clock`` (the clock of the allocations it records),
    and backward ops are seen by the dispatch mode itself (there is no profile to read them
    from, and no allocation of a fake run to disturb). Read the result with :meth:`fake_facts`.
    """

    def __init__(
        self,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        func: Callable[..., Any] | None = None,
        module: ModuleType | None = None,
        device: str = "cpu",
        ops: bool = True,
        compiled: bool = False,
        fake: FakeClock | None = None,
        roots: Iterable[tuple[str, Any]] = (),
        statements: bool = True,
    ) -> None:
        self._fake = fake is not None
        clock: Callable[[], int] = fake.clock if fake is not None else time.time_ns
        self._clock = clock
        key: Callable[[Any], int] = storage_key if fake is not None else _data_ptr
        device_obj = torch.device(device)
        self._device = "cpu" if device_obj.type == "cpu" else f"{device_obj.type}:{device_obj.index}"
        self._hooks = not compiled
        self._stack = contextlib.ExitStack()
        self.state = ProgramState(
            [*call_roots(args, dict(kwargs or {}), func, module), *roots],
            clock=clock,
            storage_key=key,
            device_type=device_obj.type,
            device_index=device_obj.index if device_obj.type != "cpu" else None,
        )
        self.calls = Calls(self.state, clock)
        self.ops = Ops(self.calls, clock, key, fake=self._fake) if ops and not compiled else None
        if self.ops is not None:
            self.calls.on_recompute = self.ops.recompute
        # A compiled run: its statements alone (no op is tracked), for the lines of what eager
        # code at a graph break allocates. Noting them costs about 0.6 us per Python event of
        # the call (Dynamo's and AOTAutograd's wrappers run in Python): ``statements=False``
        # where the profiled calls are also the timing.
        self._statements = (
            Ops(self.calls, clock, key, fake=False) if compiled and statements and fake is None else None
        )
        self._notes: list[str] = []

    # ---- entering and leaving -----------------------------------------------------------------

    def __enter__(self) -> Tracker:
        self.state.start()
        stack = self._stack
        if not self._hooks:
            self._see_gradients_after_backward(stack)
            if self._statements is not None:
                self._statements.note_statements(stack, compiled=True)
            return self
        self.calls.hook(stack)
        self.state.hook_gradients(stack)
        follow_fsdp(self.state, self._clock, stack)
        self.calls.watch_recompute(stack)
        if self.ops is not None:
            self.ops.enter(stack)
        return self

    def _see_gradients_after_backward(self, stack: contextlib.ExitStack) -> None:
        """Compiled code: no hooks (Dynamo would trace or guard on them), but ``backward()``
        breaks the graph and runs eagerly: when it returns, each parameter's gradient is seen
        (the optimizer step and ``zero_grad`` of a compiled step may free it before the end)."""
        import torch.autograd as autograd

        original = autograd.backward
        # Called where Dynamo resumes the user's frame after its graph break at backward():
        # Dynamo would compile every frame of memprof's called from there. Only the user's code
        # is compiled: memprof's frames are kept out of it, those of backward itself (the
        # user's hooks in it) are not.
        seen = torch.compiler.disable(self.state.gradients_made, reason="memprof's own bookkeeping")

        def backward(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            finally:
                seen()

        wrapper = torch.compiler.disable(backward, recursive=False, reason="memprof's own bookkeeping")
        autograd.backward = wrapper  # type: ignore[assignment]
        stack.callback(setattr, autograd, "backward", original)

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()
        self.state.finish(self._clock())
        self._notes += [note for note in self.state.notes if note not in self._notes]

    # ---- the result ---------------------------------------------------------------------------

    @property
    def backward_from_profile(self) -> bool:
        """Whether backward's ops are to be read from the profile (the op tracker does not see
        them: :meth:`memprof.sources.tracking.ops.Ops.enter`)."""
        return self.ops is not None and self.ops.backward_from_profile

    def facts(
        self,
        prof: Any,
        compiled: CompileTracking | None = None,
        complete: Callable[[Allocations], Allocations | None] | None = None,
        read: ProfileRead | None = None,
    ) -> TrackedFacts:
        """What was seen, with the finished profile's allocator records (and their addresses).
        For a compiled run, ``compiled`` (entered around the compiling call) says which source
        lines and modules each kernel computes. ``complete`` is given the records read from the
        event tree and may return all of them (:mod:`memprof.sources.live.allocator_history`: on
        CUDA the tree lacks some); None keeps the tree's. ``read``: the profile's records and
        calls already read (:func:`memprof.sources.live.measured.read_measured`), used unless compiled
        kernels, or backward's ops it did not read, are to be read from the profile."""
        from_profile = self.backward_from_profile
        if read is None or (from_profile and not read.with_backward) or compiled is not None:
            read = read_profile(prof, self._device, backward_ops=from_profile, kernels=compiled is not None)
        completed = complete(read.allocations) if complete is not None else None
        if completed is not None:
            read = replace(read, allocations=completed)
        if compiled is not None:
            state = self.state
            root = state.module_paths.get(id(state.modules[0]), "") if len(state.modules) == 1 else ""
            classes = {path: state.module_classes.get(key, "") for key, path in state.module_paths.items()}
            facts = compiled.facts(
                read, state.storages(), self._device, self._notes, state.module_paths, root, classes
            )
            return self._with_statements(facts)
        return self._facts(read)

    def _with_statements(self, facts: TrackedFacts) -> TrackedFacts:
        """A compiled run's facts with the statements noted during the call (their lines
        added after the kernels')."""
        noted = self._statements
        if noted is None:
            return facts
        statements = noted.statements()
        lines = [noted.site_lines[site] for site in statements.site.tolist()]
        follows = np.array([False, *nothing_between(zip(lines, lines[1:], strict=False))], dtype=bool)
        base = len(facts.sites)
        return replace(
            facts,
            sites=(*facts.sites, *resolve_sites(noted.site_lines)),
            statements=replace(
                statements,
                site=np.where(statements.site >= 0, statements.site + base, -1),
                user_site=np.where(statements.user_site >= 0, statements.user_site + base, -1),
                follows=follows[: len(lines)],
            ),
        )

    def fake_facts(self, allocations: Allocations, calls: Iterable[tuple[int, int]]) -> TrackedFacts:
        """What was seen in a fake run, with the ``allocations`` its storages made and died on the
        tracker's clock (from :class:`memprof.sources.fake.run.Recorder`) and the (start, end) of
        each measured call."""
        return self._facts(ProfileRead(allocations, [], [], sorted(calls)))

    def _facts(self, read: ProfileRead) -> TrackedFacts:
        empty = np.zeros(0, dtype=np.int64)
        calls = self.calls
        base = TrackedFacts(
            calls=tuple(read.calls),
            allocations=read.allocations,
            ops=TrackedOps.empty(),
            module_calls=calls.facts(),
            sites=(),
            outputs_ptr=empty,
            outputs_op=empty,
            outputs_shape=empty,
            outputs_dtype=empty,
            shapes=(),
            dtypes=(),
            saved_ptr=empty,
            saved_time=empty,
            storages=self.state.storages(),
            optimizer_steps=tuple(calls.optimizer_steps),
            notes=tuple(self._notes),
            device=self._device,
            ops_tracked=False,
            recompute=tuple(calls.recompute_windows),
        )
        ops = self.ops
        if ops is None:
            return base
        backward_ops, backward_sequence = (
            backward_table(read.backward) if ops.backward_from_profile else (None, empty)
        )
        sequence, sequence_op = ops.sequence()
        return replace(
            base,
            ops=ops.table(),
            sites=resolve_sites(ops.site_lines),
            outputs_ptr=int_array(ops.out_ptr),
            outputs_op=int_array(ops.out_op),
            outputs_shape=int_array(ops.out_shape),
            outputs_dtype=int_array(ops.out_dtype),
            shapes=tuple(str(tuple(s)) for s in ops.shapes),
            dtypes=tuple(str(d).replace("torch.", "") for d in ops.dtypes),
            saved_ptr=int_array(ops.saved_ptr),
            saved_time=int_array(ops.saved_time),
            notes=(*self._notes, *ops.notes),
            ops_tracked=True,
            sequence=sequence,
            sequence_op=sequence_op,
            backward_ops=backward_ops,
            backward_sequence=backward_sequence,
            rewrap_op=int_array(ops.rewrap_op),
            rewrap_bytes=int_array(ops.rewrap_bytes),
            statements=ops.statements(),
            inputs_op=int_array(ops.in_op),
            inputs_shape=int_array(ops.in_shape),
            inputs_dtype=int_array(ops.in_dtype),
            shape_numel=tuple(math.prod(s) for s in ops.shapes),
            dtype_bytes=tuple(d.itemsize for d in ops.dtypes),
        )


def _data_ptr(storage: Any) -> int:
    return int(storage.data_ptr())


def storage_key(storage: Any) -> int:
    """A storage's identity while it lives, also for fake and meta storages (whose data pointer
    is 0): the address of its ``StorageImpl``. Reused after the storage dies, as addresses are."""
    return int(storage._cdata)


class FakeClock:
    """A clock that never repeats a reading: ``clock()`` returns Unix nanoseconds, or one more
    than the previous reading when the system clock has not advanced. A fake run's ops,
    allocations and frees are ordered by it, so that no two of them tie."""

    def __init__(self) -> None:
        self._last = 0

    def clock(self) -> int:
        now = time.time_ns()
        self._last = now if now > self._last else self._last + 1
        return self._last
