"""What happens during a profiled call, seen from inside torch: which op made each tensor, on
which line of the user's code, in which module, forward or backward, and what each storage is
(parameter, gradient, optimizer state, input, saved for backward).

The profiler's allocator records say how many bytes were live when; this module says what they
were, and :func:`memprof.analysis.attribution.attribute` turns both into numbers. A run is
explained in two passes::

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

How, and why this way (measured: shared/ATTRIBUTION_FACTS.md):

- A ``TorchDispatchMode`` sees every op below autograd: its window on the profiler's clock,
  the storage address of each tensor it returns, and the innermost frame of the user's code
  (found by walking ``sys._getframe``, not ``traceback``: 1 us instead of 50). It changes what
  torch allocates, hence the second pass: a Python number given for a Tensor argument becomes a
  new 8-byte tensor when the mode calls the op (recorded, and left out of the explanation), and
  in backward, tensors with Python objects are not accumulated into in place (so the mode is
  taken off while autograd runs).
- Backward ops are read from the profile: each runs inside its autograd node's
  ``evaluate_function`` range, whose sequence number is that of the forward op that made the
  node: the backward op takes its line and module, without anomaly mode (1.3-2.5x the step).
- Modules: global forward pre/post hooks keep the stack of module calls.
- Saved tensors: a ``saved_tensors_hooks`` pack hook that returns the tensor unchanged.
- Program state: parameters, gradients (post-accumulate-grad hooks), optimizer state (global
  optimizer step hooks), inputs, found from the arguments, the bound object and the target
  module's globals. Storages live before profiling get a ``weakref.finalize``: the profiler does
  not record their frees (zero_grad(set_to_none=True) in a training step is one).
- Addresses of allocations: ``experimental_event_tree()``'s ``[memory]`` nodes (the flat event
  list has none); one walk of the tree also gives the backward ops and compiled kernels.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import linecache
import math
import os
import re
import sys
import sysconfig
import time
import tokenize
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import compress
from operator import attrgetter
from types import BuiltinFunctionType, FrameType, FunctionType, MethodType, ModuleType
from typing import Any

import numpy as np
import torch  # noqa: TID253 - the torch side of tracking, like sources/live.py
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: TID253

import memprof
from memprof.gcpause import gc_paused
from memprof.records import (
    AUTOGRAD_NODE,
    CALL_MARKER,
    Allocations,
    ModuleCalls,
    Site,
    TrackedFacts,
    TrackedOps,
    TrackedStorage,
)

_FORWARD, _BACKWARD, _OPTIMIZER = 0, 1, 2
_NO_SEQUENCE = 2**64 - 1  # AccumulateGrad nodes have no forward op
_MAX_SCAN_OBJECTS = 200_000  # bound on the objects visited to find the program's state
_HOST_DEVICES = frozenset({"cpu", "mkldnn", "ideep"})
# Bytes of the tensor a Python number becomes when passed for a Tensor argument (double, int64,
# bool, complex128: torch's "wrapped numbers").
_NUMBER_BYTES = {float: 8, int: 8, bool: 1, complex: 16}
# Inductor's wrapper of one compiled graph, as a profiler range (profiler_mark_wrapper_call).
_WRAPPER_CALL = re.compile(r"^graph_\d+_inductor_wrapper_call$")
# Device-side activities (kernels, copies, and the GPU-side copy of every ``record_function``
# range, ``gpu_user_annotation``) are this kind of node in the event tree: on CUDA a call
# marker or an Inductor wrapper call appears twice, once on the host and once as the span of
# its kernels on the GPU, which must not count as a second call.
_DEVICE_SIDE = getattr(torch._C._profiler._EventType, "Kineto", None)
_WRAPPER_SUFFIX = "_inductor_wrapper_call"
_GRAPH_PREFIX = re.compile(r"^graph_\d+_")
# Objects never searched for tensors: code, classes and modules, and scalars.
_NOT_STATE = (type, ModuleType, FunctionType, BuiltinFunctionType, MethodType, str, bytes, int, float, bool)


def _directory(path: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(path)), "")


_TORCH_DIR = _directory(torch.__file__)
_MEMPROF_DIR = _directory(memprof.__file__)
_EXAMPLES_DIR = os.path.join(_MEMPROF_DIR, "examples", "")
_LIBRARY_DIRS = tuple(
    {_TORCH_DIR, _MEMPROF_DIR}
    | {os.path.join(os.path.abspath(p), "") for k, p in sysconfig.get_paths().items() if "stdlib" in k}
)


def is_user_file(filename: str) -> bool:
    """Whether code in ``filename`` is the user's: not torch, not memprof (its examples are
    user code), not the standard library. Exec'd code (``<string>``) counts as the user's."""
    if filename.startswith("<"):
        return not filename.startswith("<frozen")
    path = os.path.abspath(filename)
    if path.startswith(_EXAMPLES_DIR):
        return True
    return not path.startswith(_LIBRARY_DIRS)


class _Mode(TorchDispatchMode):
    """Records each op's window, outputs, user line, module call and phase into the tracker."""

    def __init__(self, tracker: Tracker) -> None:
        super().__init__()
        self.tracker = tracker

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        clock = self.tracker._clock
        t0 = clock()
        out = func(*args, **kwargs) if kwargs else func(*args)
        t1 = clock()
        self.tracker._record_op(func, t0, t1, out, args, kwargs)
        return out


class Tracker:
    """Tracks tensors, modules and source lines while entered; see the module docstring.

    ``args``/``kwargs`` are the call's arguments, ``func`` the target (names the arguments and,
    for a bound method, adds its object), ``module`` the target's module (its globals may hold
    the model and the optimizer), ``device`` the measured device ("cpu", "cuda:0").
    Enter it before the profiler starts and leave it after the profiler stops.

    ``ops=False`` tracks program state only (parameters, gradients, optimizer state, inputs,
    module calls): the measured calls' allocations stay exactly those of an untracked run.
    ``ops=True`` also tracks ops, lines and saved tensors, for one attribution call.
    ``compiled=True``: for a ``torch.compile``d function, state found by scanning only (no
    hooks); lines and modules come from :class:`CompileTracking`.
    ``fake``: the call runs on fake tensors (:mod:`memprof.sources.fake`), which have no
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
    ) -> None:
        self._fake = fake is not None
        self._clock: Callable[[], int] = fake.clock if fake is not None else time.time_ns
        self._storage_key: Callable[[Any], int] = storage_key if fake is not None else _data_ptr
        # A compiled function must see no hooks: Dynamo guards on the global module and optimizer
        # hooks (adding one after compiling would compile again) and traces what they do.
        self._ops = ops and not compiled
        self._hooks = not compiled
        self._args = args
        self._kwargs = dict(kwargs or {})
        self._func = func
        self._module = module
        device_obj = torch.device(device)
        self._device_type = device_obj.type
        self._device_index = device_obj.index if device_obj.type != "cpu" else None
        self._stack = contextlib.ExitStack()
        self._notes: list[str] = []
        # Ops, as parallel lists (appending to lists is the cheapest per-op record).
        self._op_t0: list[int] = []
        self._op_t1: list[int] = []
        self._op_name: list[int] = []
        self._op_site: list[int] = []
        self._op_call: list[int] = []
        self._op_phase: list[int] = []
        self._names: dict[Any, int] = {}
        self._name_list: list[str] = []
        self._tensor_arguments: list[tuple[tuple[int, str], ...]] = []
        self._rewrap_op: list[int] = []
        self._rewrap_bytes: list[int] = []
        self._backward_windows: list[tuple[int, int]] = []
        self._backward_from_profile = False
        self._sites: dict[tuple[Any, int], int] = {}
        self._user_code: dict[Any, bool] = {}
        self._first_op_of_sequence: dict[int, int] = {}
        # Outputs and saved tensors.
        self._out_ptr: list[int] = []
        self._out_op: list[int] = []
        self._out_shape: list[int] = []
        self._out_dtype: list[int] = []
        self._in_op: list[int] = []
        self._in_shape: list[int] = []
        self._in_dtype: list[int] = []
        self._shapes: dict[Any, int] = {}
        self._dtypes: dict[Any, int] = {}
        self._saved_ptr: list[int] = []
        self._saved_time: list[int] = []
        # Module calls.
        self._module_paths: dict[int, str] = {}
        self._path_ids: dict[str, int] = {}
        self._call_path: list[int] = []
        self._call_parent: list[int] = []
        self._call_start: list[int] = []
        self._call_end: list[int] = []
        self._call_stack: list[int] = []
        self._optimizer_depth = 0
        self._optimizer_starts: list[int] = []
        self._optimizer_steps: list[tuple[int, int]] = []
        # Program state.
        self._storages: list[list[Any]] = []
        self._alive: dict[int, list[int]] = {}
        self._finalizers: list[weakref.finalize] = []
        self._hooked: set[int] = set()  # parameters whose gradients a hook reports
        self._state_seen: dict[int, tuple[int, ...]] = {}  # parameter -> its state tensors' ids
        self._param_names: dict[int, str] = {}
        self._buffer_names: dict[int, str] = {}
        self._optimizers: dict[int, torch.optim.Optimizer] = {}
        self._modules: list[torch.nn.Module] = []

    # ---- entering and leaving -----------------------------------------------------------------

    def __enter__(self) -> Tracker:
        self._scan_start()
        if not self._hooks:
            return self
        stack = self._stack
        nn_hooks = torch.nn.modules.module
        stack.callback(nn_hooks.register_module_forward_pre_hook(self._module_pre).remove)
        stack.callback(nn_hooks.register_module_forward_hook(self._module_post, always_call=True).remove)
        from torch.optim import optimizer as optim

        stack.callback(optim.register_optimizer_step_pre_hook(self._optimizer_pre).remove)
        stack.callback(optim.register_optimizer_step_post_hook(self._optimizer_post).remove)
        for module in self._modules:
            for param in module.parameters():
                if param.requires_grad and id(param) not in self._hooked:
                    self._hooked.add(id(param))
                    stack.callback(param.register_post_accumulate_grad_hook(self._grad_ready).remove)
        if self._ops:
            stack.enter_context(torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack))
            mode = _Mode(self)
            stack.enter_context(mode)
            if not self._fake:
                self._run_backward_without(mode)
        return self

    def _run_backward_without(self, mode: _Mode) -> None:
        """Take the dispatch mode off while autograd runs backward. Under a mode every tensor
        gets a Python object, and autograd neither steals a gradient buffer nor accumulates
        into one in place when it has one: backward would allocate more than without the
        tracker. Backward ops are read from the profile instead (their autograd node says which
        forward op, line and module they belong to)."""
        import torch.autograd as autograd
        from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode_temporarily

        original = getattr(autograd, "_engine_run_backward", None)
        if original is None:
            self._notes.append(
                "backward ran under the op tracker (torch.autograd._engine_run_backward is missing in "
                f"torch {torch.__version__}): the attribution pass may allocate more than the measured run"
            )
            return
        windows = self._backward_windows

        def run_backward(*args: Any, **kwargs: Any) -> Any:
            start = self._clock()
            popped = _get_current_dispatch_mode() is mode
            try:
                with _pop_mode_temporarily() if popped else contextlib.nullcontext():
                    return original(*args, **kwargs)
            finally:
                windows.append((start, self._clock()))

        autograd._engine_run_backward = run_backward
        self._stack.callback(setattr, autograd, "_engine_run_backward", original)
        self._backward_from_profile = True

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()
        self._scan_state(self._clock())
        # Deaths after this no longer matter; detached, the storages no longer keep the tracker.
        for finalizer in self._finalizers:
            finalizer.detach()
        self._finalizers.clear()

    # ---- per-op recording (the hot path) ------------------------------------------------------

    def _record_op(self, func: Any, t0: int, t1: int, out: Any, args: Any, kwargs: Any) -> None:
        index = len(self._op_t0)
        name = self._names.get(func)
        if name is None:
            name = self._names[func] = len(self._name_list)
            self._name_list.append(_op_name(func))
            self._tensor_arguments.append(_tensor_arguments(func))
        # A Python number passed for a Tensor argument is wrapped in a new tensor when the mode
        # calls the op again: an allocation the untracked run does not make. Noted, to be left out
        # (a fake run records no allocation for it).
        for position, keyword in () if self._fake else self._tensor_arguments[name]:
            value = args[position] if position < len(args) else kwargs.get(keyword) if kwargs else None
            size = _NUMBER_BYTES.get(type(value))
            if size:
                self._rewrap_op.append(index)
                self._rewrap_bytes.append(size)
        node = torch._C._current_autograd_node()
        if node is not None:
            phase = _BACKWARD
            site, call = self._backward_origin(node)
        else:
            phase = _OPTIMIZER if self._optimizer_depth else _FORWARD
            site = self._site()
            call = self._call_stack[-1] if self._call_stack else -1
            if phase == _FORWARD:
                self._first_op_of_sequence.setdefault(torch._C._autograd._get_sequence_nr(), index)
                for arg in args:
                    if isinstance(arg, torch.Tensor):
                        self._record_tensor(arg, index, self._in_op, self._in_shape, self._in_dtype)
        self._op_t0.append(t0)
        self._op_t1.append(t1)
        self._op_name.append(name)
        self._op_site.append(site)
        self._op_call.append(call)
        self._op_phase.append(phase)
        if isinstance(out, torch.Tensor):
            self._record_output(out, index)
        elif isinstance(out, tuple | list):
            for item in out:
                if isinstance(item, torch.Tensor):
                    self._record_output(item, index)

    def _record_output(self, tensor: torch.Tensor, index: int) -> None:
        try:
            ptr = self._storage_key(tensor.untyped_storage())
        except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested, wrapper subclasses
            return
        if ptr:
            self._out_ptr.append(ptr)
            self._record_tensor(tensor, index, self._out_op, self._out_shape, self._out_dtype)

    def _record_tensor(
        self, tensor: torch.Tensor, index: int, ops: list[int], shapes: list[int], dtypes: list[int]
    ) -> None:
        shape = self._shapes.get(tensor.shape)
        if shape is None:
            shape = self._shapes[tensor.shape] = len(self._shapes)
        dtype = self._dtypes.get(tensor.dtype)
        if dtype is None:
            dtype = self._dtypes[tensor.dtype] = len(self._dtypes)
        ops.append(index)
        shapes.append(shape)
        dtypes.append(dtype)

    def _site(self) -> int:
        """The innermost frame of the user's code, as an interned (code, line) id; -1 if none."""
        frame: FrameType | None = sys._getframe(3)
        user_code = self._user_code
        while frame is not None:
            code = frame.f_code
            user = user_code.get(code)
            if user is None:
                user = user_code[code] = is_user_file(code.co_filename)
            if user:
                key = (code, frame.f_lineno)
                site = self._sites.get(key)
                if site is None:
                    site = self._sites[key] = len(self._sites)
                return site
            frame = frame.f_back
        return -1

    def _backward_origin(self, node: Any) -> tuple[int, int]:
        """(site, module call) of the forward op that made autograd ``node``."""
        sequence = node._sequence_nr()
        if sequence != _NO_SEQUENCE:
            forward = self._first_op_of_sequence.get(sequence + 1)
            if forward is not None:
                return self._op_site[forward], self._op_call[forward]
        # AccumulateGrad and nodes made before tracking: the Python line (e.g. loss.backward()).
        return self._site(), -1

    # ---- hooks --------------------------------------------------------------------------------

    def _module_pre(self, module: torch.nn.Module, args: Any) -> None:
        key = id(module)
        path = self._module_paths.get(key)
        if path is None:
            path = self._module_paths[key] = type(module).__name__
        path_id = self._path_ids.get(path)
        if path_id is None:
            path_id = self._path_ids[path] = len(self._path_ids)
        self._call_path.append(path_id)
        self._call_parent.append(self._call_stack[-1] if self._call_stack else -1)
        self._call_start.append(self._clock())
        self._call_end.append(-1)
        self._call_stack.append(len(self._call_path) - 1)

    def _module_post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if self._call_stack:
            self._call_end[self._call_stack.pop()] = self._clock()

    def _optimizer_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if not self._optimizer_depth:
            self._optimizer_starts.append(self._clock())
        self._optimizer_depth += 1

    def _optimizer_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._optimizer_depth = max(self._optimizer_depth - 1, 0)
        now = self._clock()
        if not self._optimizer_depth and self._optimizer_starts:
            self._optimizer_steps.append((self._optimizer_starts.pop(), now))
        self._optimizers.setdefault(id(optimizer), optimizer)
        self._see_optimizer(optimizer, now)

    def _grad_ready(self, param: torch.Tensor) -> None:
        if param.grad is not None:
            name = self._param_names.get(id(param), "")
            self._see(param.grad, "gradient", name, _owner(name), self._clock())

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        with contextlib.suppress(RuntimeError, NotImplementedError, TypeError):
            ptr = self._storage_key(tensor.untyped_storage())
            if ptr:
                self._saved_ptr.append(ptr)
                self._saved_time.append(self._clock())
        return tensor

    # ---- program state ------------------------------------------------------------------------

    def _on_device(self, tensor: torch.Tensor) -> bool:
        device = tensor.device
        if self._device_type == "cpu":
            return device.type in _HOST_DEVICES
        return device.type == self._device_type and device.index == self._device_index

    def _see(self, tensor: torch.Tensor, kind: str, name: str, module: str, now: int) -> None:
        """Record that ``tensor``'s storage is ``kind`` state, live at ``now``; follow its death."""
        if not isinstance(tensor, torch.Tensor) or not self._on_device(tensor):
            return
        try:
            storage = tensor.untyped_storage()
            ptr = self._storage_key(storage)
            nbytes = storage.nbytes()
        except (RuntimeError, NotImplementedError, TypeError):
            return
        if not ptr:
            return
        rows = self._alive.get(ptr)
        if rows is None:
            rows = self._alive[ptr] = []
            self._finalizers.append(weakref.finalize(storage, self._died, ptr, rows))
        elif any(self._storages[i][4] == kind and self._storages[i][5] == name for i in rows):
            return
        rows.append(len(self._storages))
        shape, dtype = str(tuple(tensor.shape)), str(tensor.dtype).replace("torch.", "")
        self._storages.append([ptr, nbytes, now, None, kind, name, module, shape, dtype])

    def _died(self, ptr: int, rows: list[int]) -> None:
        now = self._clock()
        for row in rows:
            self._storages[row][3] = now
        if self._alive.get(ptr) is rows:
            del self._alive[ptr]

    def _scan_start(self) -> None:
        """Find the model(s), optimizer(s) and inputs; name modules and parameters."""
        now = self._clock()
        found = _Found()
        for label, value in self._roots():
            found.visit(label, value, is_argument=not label.startswith("global "))
        self._modules = _outermost(found.modules)
        self._name_modules(found)
        for optimizer in found.optimizers:
            self._optimizers.setdefault(id(optimizer), optimizer)
        self._scan_state(now)
        for label, tensor, is_argument in found.tensors:
            self._see(tensor, "input" if is_argument else "other", label, "", now)

    def _roots(self) -> Iterator[tuple[str, Any]]:
        names = _parameter_names(self._func, len(self._args))
        for position, value in enumerate(self._args):
            yield names[position], value
        yield from self._kwargs.items()
        bound = getattr(self._func, "__self__", None)
        if bound is not None and not isinstance(bound, ModuleType):
            yield "self", bound
        if self._module is not None:
            for name, value in list(vars(self._module).items()):
                if not name.startswith("__"):
                    yield f"global {name}", value

    def _name_modules(self, found: _Found) -> None:
        roots = self._modules
        for root in roots:
            label = found.module_labels.get(id(root), type(root).__name__)
            prefix = "" if len(roots) == 1 else f"{label.removeprefix('global ')}."
            self._module_paths.setdefault(id(root), type(root).__name__ if not prefix else prefix[:-1])
            for path, sub in root.named_modules(remove_duplicate=True):
                if path:
                    self._module_paths.setdefault(id(sub), prefix + path)
            for path, param in root.named_parameters(remove_duplicate=True):
                self._param_names.setdefault(id(param), prefix + path)
            for path, buffer in root.named_buffers(remove_duplicate=True):
                self._buffer_names.setdefault(id(buffer), prefix + path)

    def _scan_state(self, now: int) -> None:
        """Parameters, their gradients, module buffers and optimizer state, live at ``now``."""
        with gc_paused():  # thousands of small objects: no collection passes meanwhile
            for root in self._modules:
                for param in root.parameters():
                    name = self._param_names.get(id(param), "")
                    self._see(param, "parameter", name, _owner(name), now)
                    if param.grad is not None:
                        self._see(param.grad, "gradient", name, _owner(name), now)
                for buffer in root.buffers():
                    name = self._buffer_names.get(id(buffer), "")
                    self._see(buffer, "other", name, _owner(name), now)
            self._state_seen.clear()  # a scan sees all state again
            for optimizer in list(self._optimizers.values()):
                self._see_optimizer(optimizer, now)

    def _see_optimizer(self, optimizer: torch.optim.Optimizer, now: int) -> None:
        """Its parameters, their gradients (unless a hook reports them) and its state. What was
        seen already as the same objects is skipped: this runs after every step, in the call."""
        with gc_paused():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if id(param) in self._hooked:
                        continue
                    name = self._param_names.get(id(param), "")
                    self._see(param, "parameter", name, _owner(name), now)
                    if param.grad is not None:
                        self._see(param.grad, "gradient", name, _owner(name), now)
            for param, state in optimizer.state.items():
                if not isinstance(state, dict):
                    continue
                identity = tuple(id(value) for value in state.values())
                if self._state_seen.get(id(param)) == identity:
                    continue
                self._state_seen[id(param)] = identity
                name = self._param_names.get(id(param), "")
                for key, value in state.items():
                    if isinstance(value, torch.Tensor):
                        label = f"{name}.{key}" if name else str(key)
                        self._see(value, "optimizer_state", label, _owner(name), now)

    # ---- the result ---------------------------------------------------------------------------

    def _storage_facts(self) -> tuple[TrackedStorage, ...]:
        return tuple(TrackedStorage(*row) for row in self._storages)

    def facts(
        self,
        prof: Any,
        compiled: CompileTracking | None = None,
        complete: Callable[[Allocations], Allocations | None] | None = None,
    ) -> TrackedFacts:
        """What was seen, with the finished profile's allocator records (and their addresses).
        For a compiled run, ``compiled`` (entered around the compiling call) says which source
        lines and modules each kernel computes. ``complete`` is given the records read from the
        event tree and may return all of them (:mod:`memprof.sources.allocator_history`: on
        CUDA the tree lacks some); None keeps the tree's."""
        read = _read_profile(
            prof, self._device, backward_ops=self._backward_from_profile, kernels=compiled is not None
        )
        completed = complete(read.allocations) if complete is not None else None
        if completed is not None:
            read = replace(read, allocations=completed)
        if compiled is not None:
            return compiled.facts(read, self._storage_facts(), self._device, self._notes)
        return self._facts(read)

    def fake_facts(self, allocations: Allocations, calls: Iterable[tuple[int, int]]) -> TrackedFacts:
        """What was seen in a fake run, with the ``allocations`` its storages made and died on the
        tracker's clock (from :class:`memprof.sources.fake.Recorder`) and the (start, end) of
        each measured call."""
        return self._facts(_ProfileRead(allocations, [], [], sorted(calls)))

    @property
    def _device(self) -> str:
        return "cpu" if self._device_type == "cpu" else f"{self._device_type}:{self._device_index}"

    def _facts(self, read: _ProfileRead) -> TrackedFacts:
        device = self._device
        backward_ops, backward_sequence = (
            _backward_table(read.backward)
            if self._backward_from_profile
            else (None, np.zeros(0, dtype=np.int64))
        )
        sequence = sorted(self._first_op_of_sequence.items())
        return TrackedFacts(
            calls=tuple(read.calls),
            allocations=read.allocations,
            ops=TrackedOps(
                t0=_int_array(self._op_t0),
                t1=_int_array(self._op_t1),
                name=_int_array(self._op_name),
                site=_int_array(self._op_site),
                module_call=_int_array(self._op_call),
                phase=_int_array(self._op_phase),
                names=tuple(self._name_list),
            ),
            module_calls=ModuleCalls(
                path=_int_array(self._call_path),
                parent=_int_array(self._call_parent),
                start=_int_array(self._call_start),
                end=_int_array(self._call_end),
                paths=tuple(self._path_ids),
            ),
            sites=_resolve_sites((code.co_filename, line) for code, line in self._sites),
            outputs_ptr=_int_array(self._out_ptr),
            outputs_op=_int_array(self._out_op),
            outputs_shape=_int_array(self._out_shape),
            outputs_dtype=_int_array(self._out_dtype),
            shapes=tuple(str(tuple(s)) for s in self._shapes),
            dtypes=tuple(str(d).replace("torch.", "") for d in self._dtypes),
            saved_ptr=_int_array(self._saved_ptr),
            saved_time=_int_array(self._saved_time),
            storages=self._storage_facts(),
            optimizer_steps=tuple(self._optimizer_steps),
            notes=tuple(self._notes),
            device=device,
            ops_tracked=self._ops,
            sequence=_int_array([s for s, _ in sequence]),
            sequence_op=_int_array([op for _, op in sequence]),
            backward_ops=backward_ops,
            backward_sequence=backward_sequence,
            rewrap_op=_int_array(self._rewrap_op),
            rewrap_bytes=_int_array(self._rewrap_bytes),
            inputs_op=_int_array(self._in_op),
            inputs_shape=_int_array(self._in_shape),
            inputs_dtype=_int_array(self._in_dtype),
            shape_numel=tuple(math.prod(s) for s in self._shapes),
            dtype_bytes=tuple(d.itemsize for d in self._dtypes),
        )


def _unpack(value: Any) -> Any:
    return value


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


def _tensor_arguments(func: Any) -> tuple[tuple[int, str], ...]:
    """(position, name) of the op's arguments typed ``Tensor``."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return ()
    return tuple(
        (i, a.name) for i, a in enumerate(schema.arguments) if isinstance(a.type, torch._C.TensorType)
    )


def _op_name(func: Any) -> str:
    schema = getattr(func, "_schema", None)
    return str(schema.name) if schema is not None else str(func)


def _owner(name: str) -> str:
    """The module path that owns parameter ``name`` (``blocks.0.fc.weight`` -> ``blocks.0.fc``)."""
    return name.rpartition(".")[0]


def _int_array(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64) if values else np.zeros(0, dtype=np.int64)


def _parameter_names(func: Callable[..., Any] | None, count: int) -> list[str]:
    names = [f"args[{i}]" for i in range(count)]
    if func is None:
        return names
    try:
        parameters = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return names
    for i, parameter in enumerate(parameters[:count]):
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names[i] = parameter.name
    return names


class _Found:
    """Models, optimizers and loose tensors reachable from the call's roots (bounded walk)."""

    def __init__(self) -> None:
        self.modules: list[torch.nn.Module] = []
        self.module_labels: dict[int, str] = {}
        self.optimizers: list[torch.optim.Optimizer] = []
        self.tensors: list[tuple[str, torch.Tensor, bool]] = []
        self._seen: set[int] = set()

    def visit(self, label: str, value: Any, *, is_argument: bool, depth: int = 0) -> None:
        if depth > 4 or id(value) in self._seen or len(self._seen) > _MAX_SCAN_OBJECTS:
            return
        if isinstance(value, _NOT_STATE):
            return
        self._seen.add(id(value))
        if isinstance(value, torch.Tensor):
            self.tensors.append((label, value, is_argument))
        elif isinstance(value, torch.nn.Module):
            self.modules.append(value)
            self.module_labels.setdefault(id(value), label)
        elif isinstance(value, torch.optim.Optimizer):
            self.optimizers.append(value)
        elif isinstance(value, dict):
            for key, item in list(value.items())[:10_000]:
                self.visit(f"{label}[{key!r}]", item, is_argument=is_argument, depth=depth + 1)
        elif isinstance(value, list | tuple | set | frozenset):
            for position, item in enumerate(list(value)[:10_000]):
                self.visit(f"{label}[{position}]", item, is_argument=is_argument, depth=depth + 1)
        elif hasattr(value, "__dict__"):
            with contextlib.suppress(TypeError):
                for key, item in list(vars(value).items()):
                    self.visit(f"{label}.{key}", item, is_argument=is_argument, depth=depth + 1)


def _outermost(modules: Iterable[torch.nn.Module]) -> list[torch.nn.Module]:
    """The modules that are not inside another one of ``modules``, largest first, distinct."""
    distinct = list({id(m): m for m in modules}.values())
    inner = {id(sub) for m in distinct for sub in m.modules() if sub is not m}
    roots = [m for m in distinct if id(m) not in inner]
    return sorted(roots, key=lambda m: -sum(p.numel() for p in m.parameters()))


# ---- the profiler's allocator records, with addresses -------------------------------------------


def read_calls(prof: Any, device: str = "cpu") -> tuple[Allocations, list[tuple[int, int]]]:
    """The ``[memory]`` records of ``device`` with their addresses, and the (start, end) of each
    ``CALL_MARKER`` range, in order, of a finished ``torch.profiler.profile``."""
    read = _read_profile(prof, device)
    return read.allocations, read.calls


@dataclass
class _ProfileRead:
    """What the profile's event tree holds beyond the flat event list: the allocator records
    with addresses; the ops autograd ran (name, start, end, autograd node number; -1 for
    AccumulateGrad); the kernels of compiled code (wrapper call, name, start, end, phase)."""

    allocations: Allocations
    backward: list[tuple[str, int, int, int]]
    kernels: list[tuple[int, str, int, int, int]]
    calls: list[tuple[int, int]]


def _read_profile(
    prof: Any, device: str, *, backward_ops: bool = False, kernels: bool = False
) -> _ProfileRead:
    roots = _kineto_results(prof).experimental_event_tree()
    memory = _MemoryRecords(torch.device(device))
    calls: list[tuple[int, int]] = []
    backward: list[tuple[str, int, int, int]] = []
    found: list[tuple[int, str, int, int, int]] = []
    if backward_ops or kernels:
        _walk_with_context(
            roots, memory, calls, backward if backward_ops else None, found if kernels else None
        )
    else:
        _walk(roots, memory, calls)
    return _ProfileRead(memory.allocations(), backward, sorted(found, key=lambda k: k[3]), sorted(calls))


class _MemoryRecords:
    """The ``[memory]`` nodes met in a walk, read ``_MEMORY_BLOCK`` at a time (one accessor
    over the whole block, ``map`` in C) into typed arrays: the device's records only."""

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self.nodes: list[Any] = []
        self._parts: list[np.ndarray] = []

    def flush(self) -> None:
        nodes = self.nodes
        if not nodes:
            return
        fields = list(map(_extra_fields, nodes))
        devices = list(map(_device, fields))
        if self._device.type == "cpu":
            keep = list(map(_HOST_DEVICES.__contains__, map(_device_type, devices)))
        else:
            keep = list(map(self._device.__eq__, devices))
        if not all(keep):
            nodes, fields = list(compress(nodes, keep)), list(compress(fields, keep))
        count = len(nodes)
        part = np.empty((3, count), dtype=np.int64)
        part[0] = np.fromiter(map(_start_time, nodes), dtype=np.int64, count=count)
        part[1] = np.fromiter(map(_alloc_size, fields), dtype=np.int64, count=count)
        part[2] = np.fromiter(map(_ptr, fields), dtype=np.int64, count=count)
        self._parts.append(part)
        self.nodes = []

    def allocations(self) -> Allocations:
        self.flush()
        array = np.concatenate(self._parts, axis=1) if self._parts else np.zeros((3, 0), dtype=np.int64)
        # The walk visits records depth first, backwards: time order, ties by address for stability.
        order = np.lexsort((array[2], array[0]))
        return Allocations(time=array[0][order], bytes=array[1][order], ptr=array[2][order])


_MEMORY_NODE = "[memory]"
_MEMORY_BLOCK = 4096
_extra_fields = attrgetter("extra_fields")
_device = attrgetter("device")
_device_type = attrgetter("type")
_start_time = attrgetter("start_time_ns")
_alloc_size = attrgetter("alloc_size")
_ptr = attrgetter("ptr")


def _walk(roots: list[Any], memory: _MemoryRecords, calls: list[tuple[int, int]]) -> None:
    """Depth first, the ``[memory]`` nodes and the call markers only (the measured calls'
    pass: no context to carry, so a node is all the stack holds)."""
    stack = list(roots)
    pop = stack.pop
    keep = memory.nodes.append
    memory_node, call_marker, block, device_side = _MEMORY_NODE, CALL_MARKER, _MEMORY_BLOCK, _DEVICE_SIDE
    while stack:
        node = pop()
        name = node.name
        if name == memory_node:
            keep(node)
            if len(memory.nodes) == block:
                memory.flush()
                keep = memory.nodes.append
            continue
        if name == call_marker and node.tag != device_side:
            calls.append((node.start_time_ns, node.end_time_ns))
        stack += node.children


class _Restore:
    """A stack entry that gives the walk back the context of a node's siblings, once that
    node's children (which saw a context the node changed) are done."""

    __slots__ = ("context", "name")

    def __init__(self, context: tuple[int | None, bool, int]) -> None:
        self.name = _RESTORE
        self.context = context


_RESTORE = "\x00restore"  # no profiler event is named so


def _walk_with_context(
    roots: list[Any],
    memory: _MemoryRecords,
    calls: list[tuple[int, int]],
    backward: list[tuple[str, int, int, int]] | None,
    found: list[tuple[int, str, int, int, int]] | None,
) -> None:
    """Depth first, carrying a context: the autograd node's number (None outside backward),
    whether inside a backward op already, and the Inductor wrapper call whose kernels are the
    children (-1 if none). ``backward`` collects the ops autograd ran (name, start, end,
    node number), ``found`` the kernels of compiled code (wrapper call, name, start, end,
    phase); None: not wanted. A node that changes the context leaves a :class:`_Restore`
    under its children, so that the stack holds nodes alone, not (node, context) tuples."""
    stack = list(roots)
    pop = stack.pop
    keep = memory.nodes.append
    memory_node, call_marker, block, restore = _MEMORY_NODE, CALL_MARKER, _MEMORY_BLOCK, _RESTORE
    device_side = _DEVICE_SIDE
    sequence: int | None = None
    inside = False
    wrapper = wrappers = -1
    while stack:
        node = pop()
        name = node.name
        if name == memory_node:
            keep(node)
            if len(memory.nodes) == block:
                memory.flush()
                keep = memory.nodes.append
            continue
        if name is restore:
            sequence, inside, wrapper = node.context
            continue
        before = None  # the context of the node's siblings, when the node changes it
        if (
            name == call_marker or wrapper >= 0 or name.endswith(_WRAPPER_SUFFIX)
        ) and node.tag == device_side:
            continue  # a GPU-side span: neither a call, a wrapper call nor a kernel launch
        if name == call_marker:
            calls.append((node.start_time_ns, node.end_time_ns))
        elif name.startswith(AUTOGRAD_NODE):
            before = (sequence, inside, wrapper)
            sequence, inside = int(node.extra_fields.sequence_number), False
        elif backward is not None and sequence is not None and not inside and name.startswith("aten::"):
            backward.append((name, node.start_time_ns, node.end_time_ns, sequence))
            before = (sequence, inside, wrapper)
            inside = True
        if found is not None and (wrapper >= 0 or _WRAPPER_CALL.match(name)):
            before = before or (sequence, inside, wrapper)
            if wrapper >= 0:
                phase = _BACKWARD if sequence is not None else _FORWARD
                found.append((wrapper, name, node.start_time_ns, node.end_time_ns, phase))
                wrapper = -1
            else:
                wrappers += 1
                wrapper = wrappers
        if before is None:
            stack += node.children
            continue
        children = node.children
        if children:
            stack.append(_Restore(before))
            stack += children
        else:
            sequence, inside, wrapper = before


def _kineto_results(prof: Any) -> Any:
    """The finished profile's results: ``torch.profiler.profile`` wraps the autograd profiler
    that holds them (``torch.autograd.profiler.profile``, which starts without importing
    ``torch._dynamo``: seconds saved where only allocations are wanted)."""
    return getattr(prof, "profiler", prof).kineto_results


def _backward_table(backward: list[tuple[str, int, int, int]]) -> tuple[TrackedOps, np.ndarray]:
    """Backward ops read from the profile as an op table in order of end, and their nodes' numbers."""
    ops = sorted(backward, key=lambda op: op[2])
    names = sorted({op[0] for op in ops})
    code = {name: i for i, name in enumerate(names)}
    count = len(ops)
    tracked = TrackedOps(
        t0=_int_array([op[1] for op in ops]),
        t1=_int_array([op[2] for op in ops]),
        name=_int_array([code[op[0]] for op in ops]),
        site=np.full(count, -1, dtype=np.int64),
        module_call=np.full(count, -1, dtype=np.int64),
        phase=np.full(count, _BACKWARD, dtype=np.int64),
        names=tuple(names),
    )
    return tracked, _int_array([op[3] for op in ops])


# ---- compiled runs ------------------------------------------------------------------------------


class CompileTracking:
    """Entered around a ``torch.compile``d function's first call (where Inductor compiles) and
    its profiled calls: makes Inductor keep, for each kernel it generates, the FX nodes it
    computes (provenance tracking) and each node's source line, module and aten op.

    Inductor's FX graph and AOTAutograd caches are bypassed (a cached graph is not generated
    again, so it says nothing); compiled C++ kernels stay cached. Relies on Inductor internals
    (``torch._inductor.debug``'s provenance tables, a post-grad custom pass): where they are
    missing, compiled runs are explained by kernel only, with a note."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._metas: list[dict[str, _NodeMeta]] = []
        self._kernels: list[list[tuple[str, tuple[str, ...]]]] = []
        self.notes: list[str] = []

    def __enter__(self) -> CompileTracking:
        try:
            import torch._functorch.config as functorch_config
            import torch._inductor.config as inductor_config
            import torch._inductor.debug as inductor_debug
            from torch._inductor.custom_graph_pass import CustomGraphPass
        except ImportError as error:
            self.notes.append(f"compiled code is explained by kernel only (no Inductor provenance: {error})")
            return self
        tracking = self
        chained = getattr(inductor_config, "post_grad_custom_post_pass", None)

        class NodeMeta(CustomGraphPass):  # type: ignore[misc]
            def __call__(self, graph: Any) -> None:
                if chained is not None:
                    chained(graph)
                tracking._metas.append({node.name: _node_meta(node) for node in graph.nodes})
                # Inductor resets its kernel -> node table around a forward compile but not
                # around a backward one, so a second compile of the same step in one process
                # would find the first one's backward kernels in it. This graph's kernels are
                # generated after its post-grad passes: start its table empty here.
                inductor_debug._inductor_triton_kernel_to_post_grad_node_info.clear()

            def uuid(self) -> Any:
                return ("memprof-node-meta", chained.uuid() if chained is not None else None)

        original = inductor_debug.dump_inductor_provenance_info

        def dump() -> Any:
            result = original()
            nodes = inductor_debug._inductor_triton_kernel_to_post_grad_node_info
            tracking._kernels.append(
                sorted(
                    ((name, tuple(nodes.get(name, ()))) for name in nodes),
                    key=lambda kernel: int(kernel[0].rpartition(":")[2] or 0),
                )
            )
            return result

        self._stack.enter_context(
            inductor_config.patch(
                {
                    "trace.provenance_tracking_level": 1,
                    "fx_graph_cache": False,
                    "post_grad_custom_post_pass": NodeMeta(),
                }
            )
        )
        if hasattr(functorch_config, "enable_autograd_cache"):
            self._stack.enter_context(functorch_config.patch(enable_autograd_cache=False))
        inductor_debug.dump_inductor_provenance_info = dump
        self._stack.callback(setattr, inductor_debug, "dump_inductor_provenance_info", original)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    def graphs(self) -> list[list[tuple[str, _Origin]]]:
        """Each compiled graph's kernels in the order its wrapper calls them: (kernel name as the
        profiler shows it, without the ``graph_N_`` prefix; extern kernels as their aten op) and
        (file:line trace of the user's code, module path, phase, eager ops replaced)."""
        graphs = []
        for metas, kernels in zip(self._metas, self._kernels, strict=False):
            graph = []
            order = {name: i for i, name in enumerate(metas)}
            for name, unordered in kernels:
                nodes = sorted((n for n in unordered if n in order), key=order.__getitem__)
                base = name.rpartition(":")[0] or name
                if base.startswith("extern_kernels."):
                    base = "aten::" + base.removeprefix("extern_kernels.")
                graph.append((base, _kernel_origin([metas[n] for n in nodes if n in metas])))
            graphs.append(graph)
        return graphs

    def facts(
        self, read: _ProfileRead, storages: tuple[TrackedStorage, ...], device: str, notes: list[str]
    ) -> TrackedFacts:
        """Facts of a compiled run: the kernels as ops, with the lines and modules of their nodes."""
        return _compiled_facts(read, self.graphs(), storages, device, [*notes, *self.notes])


def _node_meta(node: Any) -> tuple[str, str, str, tuple[str, str, int] | None]:
    """(stack trace, innermost module path, aten op, (shape, dtype, bytes) of its result) of a
    post-grad FX node."""
    meta = node.meta
    value = meta.get("val")
    result = None
    if isinstance(value, torch.Tensor):
        with contextlib.suppress(Exception):  # symbolic shapes have no plain size
            shape = tuple(int(n) for n in value.shape)
            nbytes = math.prod(shape) * value.dtype.itemsize
            result = (str(shape), str(value.dtype).replace("torch.", ""), nbytes)
    stack = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack") or {}
    module = ""
    if stack:
        # The root module's class (the outermost entry) and the innermost module's path below it.
        first, last = list(stack.values())[0], list(stack.values())[-1]
        root = getattr(first[1], "__name__", str(first[1]).rpartition(".")[2].rstrip("'>"))
        module = f"{root}{_ROOT_SEPARATOR}{_module_path(str(last[0]))}"
    target = node.target
    op = f"aten::{target._schema.name.partition('::')[2]}" if hasattr(target, "_schema") else ""
    return str(meta.get("stack_trace") or ""), module, op, result


def _module_path(dynamo_path: str) -> str:
    """``L['model'].blocks[0].attn`` -> ``blocks.0.attn`` (the root's own name left out)."""
    path = re.sub(r"^L\['[^']*'\]", "", dynamo_path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\[['\"]([^'\"]+)['\"]\]", r".\1", path)
    return path.strip(".")


_ROOT_SEPARATOR = "\x00"
_NodeMeta = tuple[str, str, str, "tuple[str, str, int] | None"]
# A kernel's origin: user frame "file:line", module, phase hint, eager ops, results of its nodes.
_Origin = tuple[str, str, str, tuple[str, ...], tuple[tuple[str, str, int, str], ...]]
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')


def _kernel_origin(metas: list[_NodeMeta]) -> _Origin:
    """A kernel's (user frame "file:line", module, phase, eager ops, results) from its nodes, in
    graph order: the last node's user frame and module (a kernel ends with what it produces),
    and each node's result (shape, dtype, bytes, user frame): a buffer of that size is it."""
    where, module, optimizer = "", "", False
    results: list[tuple[str, str, int, str]] = []
    for trace, node_module, _, result in metas:
        found = [(m["file"], int(m["line"])) for m in _FRAME.finditer(trace)]
        optimizer = optimizer or any(f.startswith(os.path.join(_TORCH_DIR, "optim", "")) for f, _ in found)
        user = [frame for frame in found if is_user_file(frame[0])]
        node_where = f"{user[-1][0]}:{user[-1][1]}" if user else ""
        where = node_where or where
        module = node_module or module
        if result is not None:
            results.append((*result, node_where))
    ops = tuple(sorted({op for _, _, op, _ in metas if op}))
    return where, module, "optimizer" if optimizer else "", ops, tuple(reversed(results))


def _compiled_facts(
    read: _ProfileRead,
    graphs: list[list[tuple[str, _Origin]]],
    storages: tuple[TrackedStorage, ...],
    device: str,
    notes: list[str],
) -> TrackedFacts:
    """The kernels of each wrapper call as ops, matched to the compiled graph whose kernel
    sequence they are, with that graph's lines and modules; modules as one call per path."""
    kernels = _matched_kernels(read, graphs, notes)
    kernels.sort(key=lambda k: k[2])
    names = sorted({k[0] for k in kernels})
    code = {name: i for i, name in enumerate(names)}
    where = sorted(
        {k[4][0] for k in kernels if k[4] and k[4][0]}
        | {r[3] for k in kernels if k[4] for r in k[4][4] if r[3]}
    )
    sites = _resolve_sites([(w.rpartition(":")[0], int(w.rpartition(":")[2])) for w in where])
    site_of = {w: i for i, w in enumerate(where)}
    calls, call_of = _module_calls(kernels)
    phases = [
        _BACKWARD if phase == _BACKWARD else _OPTIMIZER if origin and origin[2] == "optimizer" else _FORWARD
        for _, _, _, phase, origin in kernels
    ]
    fused = {k[0]: k[4][3] for k in kernels if k[4] and k[4][3] and not k[0].startswith("aten::")}
    empty = np.zeros(0, dtype=np.int64)
    # What each kernel's nodes produce: a buffer of its size has that shape.
    results = [(i, result) for i, k in enumerate(kernels) if k[4] for result in k[4][4]]
    shapes = sorted({r[0] for _, r in results})
    dtypes = sorted({r[1] for _, r in results})
    return TrackedFacts(
        calls=tuple(read.calls),
        allocations=read.allocations,
        ops=TrackedOps(
            t0=_int_array([k[1] for k in kernels]),
            t1=_int_array([k[2] for k in kernels]),
            name=_int_array([code[k[0]] for k in kernels]),
            site=_int_array([site_of[k[4][0]] if k[4] and k[4][0] else -1 for k in kernels]),
            module_call=_int_array([call_of.get(k[4][1], -1) if k[4] else -1 for k in kernels]),
            phase=_int_array(phases),
            names=tuple(names),
        ),
        module_calls=calls,
        sites=sites,
        outputs_ptr=empty,
        outputs_op=empty,
        outputs_shape=empty,
        outputs_dtype=empty,
        shapes=tuple(shapes),
        dtypes=tuple(dtypes),
        saved_ptr=empty,
        saved_time=empty,
        storages=storages,
        notes=tuple(notes),
        device=device,
        compiled=True,
        fused_kernels=tuple(sorted(fused.items())),
        inputs_op=_int_array([i for i, _ in results]),
        inputs_shape=_int_array([shapes.index(r[0]) for _, r in results]),
        inputs_dtype=_int_array([dtypes.index(r[1]) for _, r in results]),
        inputs_site=_int_array([site_of[r[3]] if r[3] else -1 for _, r in results]),
        shape_numel=tuple(math.prod(int(n) for n in re.findall(r"\d+", shape)) for shape in shapes),
        dtype_bytes=tuple(torch.empty(0, dtype=getattr(torch, d)).element_size() for d in dtypes),
    )


def _matched_kernels(
    read: _ProfileRead, graphs: list[list[tuple[str, _Origin]]], notes: list[str]
) -> list[tuple[str, int, int, int, _Origin | None]]:
    """Each kernel the profile saw (name, start, end, phase) with its origin in the compiled
    graph its wrapper call ran (None when no graph matches)."""
    by_wrapper: dict[int, list[tuple[str, int, int, int]]] = {}
    for wrapper, name, t0, t1, phase in read.kernels:
        by_wrapper.setdefault(wrapper, []).append((_GRAPH_PREFIX.sub("", name, count=1), t0, t1, phase))
    kernels: list[tuple[str, int, int, int, _Origin | None]] = []
    unmatched = 0
    records = read.allocations
    for events in by_wrapper.values():
        events.sort(key=lambda e: e[1])
        graph = _matching_graph(graphs, [e[0] for e in events])
        unmatched += graph is None
        unused = list(graph or [])
        previous_end = events[0][1]
        for name, t0, t1, phase in events:
            # The sizes allocated since the previous kernel: the buffers this one writes.
            lo, hi = np.searchsorted(records.time, [previous_end, t1], side="left")
            sizes = set(records.bytes[lo:hi].tolist())
            previous_end = t1
            same = [k for k in unused if k[0] == name]
            chosen = next((k for k in same if any(r[2] in sizes for r in k[1][4])), same[0] if same else None)
            if chosen is not None:
                unused.remove(chosen)
            kernels.append((name, t0, t1, phase, chosen[1] if chosen else None))
    if unmatched or not graphs:
        notes.append(
            f"{unmatched or len(by_wrapper)} compiled graph call(s) could not be matched to Inductor's "
            "provenance (compiled before tracking, or from a cache): their buffers are explained by kernel"
        )
    return kernels


def _matching_graph(
    graphs: list[list[tuple[str, _Origin]]], names: list[str]
) -> list[tuple[str, _Origin]] | None:
    """The compiled graph whose kernels a wrapper call ran: the same kernels (Inductor numbers
    extern kernels in another order than it calls them, so as a multiset)."""
    wanted = sorted(names)
    return next((graph for graph in graphs if sorted(name for name, _ in graph) == wanted), None)


def _module_calls(
    kernels: list[tuple[str, int, int, int, _Origin | None]],
) -> tuple[ModuleCalls, dict[str, int]]:
    """One call per module path (compiled code has no module boundaries at run time): its
    window spans its forward kernels and its submodules'; parents by path."""
    encoded = sorted({k[4][1] for k in kernels if k[4] and k[4][1]})
    full: dict[str, str] = {}  # "Root/blocks.0.attn" -> shown path ("blocks.0.attn"; the root by class)
    for module in encoded:
        root, _, path = module.partition(_ROOT_SEPARATOR)
        parts = path.split(".") if path else []
        for depth in range(len(parts) + 1):
            key = root + "/" + ".".join(parts[:depth])
            full.setdefault(key, ".".join(parts[:depth]) or root)
    keys = sorted(full)
    index = {key: i for i, key in enumerate(keys)}
    parent = [
        index.get(key.rpartition(".")[0] if "." in key.partition("/")[2] else key.partition("/")[0] + "/", -1)
        if key.partition("/")[2]
        else -1
        for key in keys
    ]
    start = [2**62] * len(keys)
    end = [-1] * len(keys)
    for position, (_, t0, t1, phase, origin) in enumerate(kernels):
        # The wrapper allocates a kernel's buffers just before calling it: from the previous end.
        t0 = kernels[position - 1][2] + 1 if position else t0
        if origin and origin[1] and phase != _BACKWARD:
            root, _, path = origin[1].partition(_ROOT_SEPARATOR)
            at = index[root + "/" + path]
            while at >= 0:
                start[at], end[at] = min(start[at], t0), max(end[at], t1)
                at = parent[at]
    calls = ModuleCalls(
        path=_int_array(list(range(len(keys)))),
        parent=_int_array(parent),
        start=_int_array([s if e >= 0 else -1 for s, e in zip(start, end, strict=True)]),
        end=_int_array(end),
        paths=tuple(full[key] for key in keys),
    )
    call_of = {
        module: index[module.partition(_ROOT_SEPARATOR)[0] + "/" + module.partition(_ROOT_SEPARATOR)[2]]
        for module in encoded
    }
    return calls, call_of


# ---- source lines -------------------------------------------------------------------------------


def _resolve_sites(lines: Iterable[tuple[str, int]]) -> tuple[Site, ...]:
    """Each (file, line) as the statement that covers it."""
    resolved: list[Site] = []
    files: dict[str, list[tuple[int, int, str]]] = {}
    cwd = os.path.join(os.getcwd(), "")
    for filename, line in lines:
        path = os.path.abspath(filename)
        shown = os.path.relpath(path, cwd) if path.startswith(cwd) else filename
        if filename not in files:
            files[filename] = _statements(filename)
        first, text = _statement_at(files[filename], line)
        if not text:
            text = linecache.getline(filename, line).strip()
        resolved.append(Site(file=shown, line=first, text=text[:200]))
    return tuple(resolved)


def _statements(filename: str) -> list[tuple[int, int, str]]:
    """(first line, last line, text on one line) of each statement in the file, comments left
    out; compound statements (if, for, with, def) only with their header."""
    source = "".join(linecache.getlines(filename))
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = source.splitlines()
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            last = max(node.lineno, body[0].lineno - 1)
            text = " ".join(_code_part(lines[n - 1]) for n in range(node.lineno, last + 1))
        else:
            last = node.end_lineno or node.lineno
            text = ast.get_source_segment(source, node) or ""
        found.append((node.lineno, last, " ".join(text.split())))
    return found


def _code_part(line: str) -> str:
    """A header line without its trailing comment (a ``#`` outside quotes)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError):
        return line.strip()
    for token in tokens:
        if token.type == tokenize.COMMENT:
            return line[: token.start[1]].strip()
    return line.strip()


def _statement_at(statements: list[tuple[int, int, str]], line: int) -> tuple[int, str]:
    """First line and text of the innermost statement covering ``line``; (line, "") if none."""
    best: tuple[int, int, str] | None = None
    for first, last, text in statements:
        if first <= line <= last and (best is None or last - first < best[1] - best[0]):
            best = (first, last, text)
    return (best[0], best[2]) if best else (line, "")
