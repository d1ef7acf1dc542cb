"""The program's structure during a profiled call: ``nn.Module`` forward calls (global forward
pre/post hooks keep the stack of calls), ``Optimizer.step`` calls (global step hooks), and
forward work run again in backward (activation checkpointing's recompute).

A checkpointed block's forward runs again inside backward, when autograd first needs a
tensor it did not keep: its module hooks fire again. Such a call is a ``recompute`` call of
the module, not a second forward; it is told apart by running inside an autograd node with
grad mode on (backward itself runs with grad mode off), or by torch's own recompute hook
(:meth:`Calls.watch_recompute`) for checkpointed functions that are not modules.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from types import CodeType
from typing import Any

import torch  # noqa: TID253 - the torch side of tracking

from memprof.core.records import FORWARD, RECOMPUTE, ModuleCalls
from memprof.sources.live.tree import int_array
from memprof.sources.tracking.state import ProgramState


class Calls:
    """Module calls and optimizer steps, on ``clock``; module paths and classes from
    ``state`` (a module outside the found roots is named by its class). ``on_recompute`` is
    told when a recompute starts (True) and ends (False)."""

    def __init__(
        self,
        state: ProgramState,
        clock: Callable[[], int],
        on_recompute: Callable[[bool], None] | None = None,
    ) -> None:
        self._state = state
        self._clock = clock
        self.on_recompute = on_recompute
        self._path_ids: dict[str, int] = {}
        self._path_classes: list[str] = []
        self.path: list[int] = []
        self.parent: list[int] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.phase: list[int] = []
        self.stack: list[int] = []
        # With ``keep_frames()``: by open call, [the call, the frame that ran its pre-hook (torch's
        # ``inner`` in ``Module._call_impl``, running for the whole call), what the op tracker
        # found above that frame, None until it looks (:meth:`memprof.sources.tracking.ops.Ops._sites`)].
        self.frames: list[list[Any]] | None = None
        self._recompute_calls: list[int] = []  # calls that started a recompute (module-detected)
        self.recomputing = 0  # depth of recomputes running now
        self.recompute_windows: list[tuple[int, int]] = []
        self._recompute_starts: list[int] = []
        self.optimizer_depth = 0
        self._optimizer_starts: list[int] = []
        self.optimizer_steps: list[tuple[int, int]] = []

    def hook(self, stack: contextlib.ExitStack) -> None:
        """Register the global module and optimizer hooks until ``stack`` closes."""
        nn_hooks = torch.nn.modules.module
        stack.callback(nn_hooks.register_module_forward_pre_hook(self.module_pre).remove)
        stack.callback(nn_hooks.register_module_forward_hook(self.module_post, always_call=True).remove)
        from torch.optim import optimizer as optim

        stack.callback(optim.register_optimizer_step_pre_hook(self.optimizer_pre).remove)
        stack.callback(optim.register_optimizer_step_post_hook(self.optimizer_post).remove)

    def keep_frames(self, stack: contextlib.ExitStack) -> None:
        """Keep the frame of each open call (:attr:`frames`) until ``stack`` closes. A frame is
        held only while its call runs: popped as the call returns, the rest dropped at close."""
        self.frames = []
        stack.callback(setattr, self, "frames", None)

    def watch_recompute(self, stack: contextlib.ExitStack) -> bool:
        """Mark the recomputes of ``torch.utils.checkpoint`` (non-reentrant) until ``stack``
        closes: its recompute runs inside a saved-tensors hook of its own, entered around the
        forward run again. False when that hook is not where this torch keeps it."""
        import torch.utils.checkpoint as checkpoint

        hook = getattr(checkpoint, "_recomputation_hook", None)
        if hook is None or "__enter__" in vars(hook) or "__exit__" in vars(hook):
            return False
        calls = self

        def enter(self: Any) -> None:
            torch.autograd.graph.saved_tensors_hooks.__enter__(self)
            calls.begin_recompute()

        def exit_(self: Any, *exc: Any) -> Any:
            calls.end_recompute()
            return torch.autograd.graph.saved_tensors_hooks.__exit__(self, *exc)

        hook.__enter__ = enter  # type: ignore[attr-defined]
        hook.__exit__ = exit_  # type: ignore[attr-defined]
        stack.callback(delattr, hook, "__exit__")
        stack.callback(delattr, hook, "__enter__")
        self._watch_checkpointed_forwards(checkpoint, stack)
        return True

    def _watch_checkpointed_forwards(self, checkpoint: Any, stack: contextlib.ExitStack) -> None:
        """A checkpointed module's ``forward`` (not the module itself: Hugging Face's layers
        checkpoint ``partial(forward, self)`` so that module hooks stay outside) fires no module
        hook when it runs again: its recompute is made a call of that module, so the work it
        does itself is the module's, and its submodules' calls nest in it."""
        frame_class = getattr(checkpoint, "_CheckpointFrame", None)
        if not isinstance(frame_class, type):
            return
        calls = self

        class Frame(frame_class):  # type: ignore[misc, valid-type]
            def __init__(self, recompute_fn: Any, *args: Any, **kwargs: Any) -> None:
                super().__init__(recompute_fn, *args, **kwargs)
                module = checkpointed_module(recompute_fn)
                if module is not None:
                    self.recompute_fn = calls._as_call_of(module, recompute_fn)

        checkpoint._CheckpointFrame = Frame
        stack.callback(setattr, checkpoint, "_CheckpointFrame", frame_class)

    def _as_call_of(self, module: torch.nn.Module, run: Callable[..., Any]) -> Callable[..., Any]:
        def recompute(*args: Any) -> Any:  # a frame of memprof's between torch's and the module's
            self.module_pre(module, args)
            try:
                return run(*args)
            finally:
                self.module_post(module, args, None)

        return recompute

    def begin_recompute(self) -> None:
        self.recomputing += 1
        if self.recomputing == 1:
            self._recompute_starts.append(self._clock())
            if self.on_recompute is not None:
                self.on_recompute(True)

    def end_recompute(self) -> None:
        if not self.recomputing:
            return
        self.recomputing -= 1
        if not self.recomputing:
            if self.on_recompute is not None:
                self.on_recompute(False)
            self.recompute_windows.append((self._recompute_starts.pop(), self._clock()))

    def module_pre(self, module: torch.nn.Module, args: Any) -> None:
        if not self.recomputing and torch._C._current_autograd_node() is not None and torch.is_grad_enabled():
            # A forward inside backward with grad mode on: a recompute the checkpoint's own
            # hook did not announce (reentrant checkpointing).
            self.begin_recompute()
            self._recompute_calls.append(len(self.path))
        key = id(module)
        path = self._state.module_paths.get(key)
        if path is None:
            path = self._state.module_paths[key] = type(module).__name__
        path_id = self._path_ids.get(path)
        if path_id is None:
            path_id = self._path_ids[path] = len(self._path_ids)
            self._path_classes.append(self._state.module_classes.get(key, type(module).__name__))
        self.path.append(path_id)
        self.parent.append(self.stack[-1] if self.stack else -1)
        self.start.append(self._clock())
        self.end.append(-1)
        self.phase.append(RECOMPUTE if self.recomputing else FORWARD)
        self.stack.append(len(self.path) - 1)
        if self.frames is not None:
            self.frames.append([self.stack[-1], sys._getframe(1), None])

    def module_post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if not self.stack:
            return
        call = self.stack.pop()
        frames = self.frames
        while frames and frames[-1][0] >= call:  # this call's frame (and any left by a call inside)
            frames.pop()
        self.end[call] = self._clock()
        if self._recompute_calls and self._recompute_calls[-1] == call:
            self._recompute_calls.pop()
            self.end_recompute()

    def optimizer_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self._state.unhooked:  # sharded gradients no hook reports: seen before the step uses them
            self._state.see_optimizer(optimizer, self._clock())
        if not self.optimizer_depth:
            self._optimizer_starts.append(self._clock())
        self.optimizer_depth += 1

    def optimizer_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self.optimizer_depth = max(self.optimizer_depth - 1, 0)
        now = self._clock()
        if not self.optimizer_depth and self._optimizer_starts:
            self.optimizer_steps.append((self._optimizer_starts.pop(), now))
        self._state.see_optimizer(optimizer, now)

    def current(self) -> int:
        """The module call running now (-1 outside every module)."""
        return self.stack[-1] if self.stack else -1

    def facts(self) -> ModuleCalls:
        return ModuleCalls(
            path=int_array(self.path),
            parent=int_array(self.parent),
            start=int_array(self.start),
            end=int_array(self.end),
            paths=tuple(self._path_ids),
            classes=tuple(self._path_classes),
            phase=int_array(self.phase),
        )


_MODULE_CALLS = {torch.nn.Module.__call__, torch.nn.Module._call_impl, torch.nn.Module._wrapped_call_impl}


def checkpointed_module(recompute_fn: Callable[..., Any]) -> torch.nn.Module | None:
    """The module whose own method ``torch.utils.checkpoint`` runs again (the ``fn`` its
    recompute closure holds: ``module.forward``, ``partial(Block.forward, module)``), or None:
    a module called as a whole (its hooks fire), a plain function, another torch."""
    code = getattr(recompute_fn, "__code__", None)
    closure = getattr(recompute_fn, "__closure__", None)
    if code is None or not closure or "fn" not in code.co_freevars:
        return None
    try:
        fn: Any = closure[code.co_freevars.index("fn")].cell_contents
    except ValueError:  # an empty cell
        return None
    bound: tuple[Any, ...] = ()
    for _ in range(8):  # partials of partials, bound methods
        if isinstance(fn, functools.partial):
            bound = (*fn.args, *bound)
            fn = fn.func
        elif hasattr(fn, "__self__") and hasattr(fn, "__func__"):
            bound = (fn.__self__, *bound)
            fn = fn.__func__
        else:
            break
    if isinstance(fn, torch.nn.Module) or fn in _MODULE_CALLS or not bound:
        return None
    return bound[0] if isinstance(bound[0], torch.nn.Module) else None


PASS_THROUGH = frozenset(code for code in Calls._as_call_of.__code__.co_consts if isinstance(code, CodeType))
"""memprof's frames that run inside the profiled code (a checkpointed forward run again as a
call of its module): walks up the stack pass them, as if they were not there."""
