"""The program's state during a profiled call: parameters, gradients, optimizer state, module
buffers and inputs, found from the call's roots (its arguments, the bound object or the
module called, the target module's globals, roots the user names), each storage followed
until it dies.

Storages live before profiling are followed by a weak reference: the profiler does not record
their frees (``zero_grad(set_to_none=True)`` in a training step is one).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType
from typing import Any

import torch  # noqa: TID253 - the torch side of tracking

from memprof.core.gcpause import gc_paused
from memprof.core.records import TrackedStorage
from memprof.sources.live.tree import HOST_DEVICES
from memprof.sources.tracking.wrappers import is_wrapper, plain_tensors

_MAX_SCAN_OBJECTS = 200_000  # bound on the objects visited to find the program's state
# Objects never searched for tensors: code, classes and modules, and scalars.
_NOT_STATE = (type, ModuleType, FunctionType, BuiltinFunctionType, MethodType, str, bytes, int, float, bool)


def call_roots(
    args: tuple[Any, ...], kwargs: dict[str, Any], func: Callable[..., Any] | None, module: ModuleType | None
) -> Iterator[tuple[str, Any]]:
    """Where the state of a call ``func(*args, **kwargs)`` is found: its arguments (named after
    ``func``'s parameters), the object a bound method is bound to, the module a ``nn.Module``
    call is (its own state: ``memprof.profile(model, x)``), the target module's globals."""
    names = _parameter_names(func, len(args))
    for position, value in enumerate(args):
        yield names[position], value
    yield from kwargs.items()
    if isinstance(func, torch.nn.Module):
        yield "self", func
    bound = getattr(func, "__self__", None)
    if bound is not None and not isinstance(bound, ModuleType):
        yield "self", bound
    if module is not None:
        for name, value in list(vars(module).items()):
            if not name.startswith("__"):
                yield f"global {name}", value


class ProgramState:
    """Finds the model(s), optimizer(s) and inputs among ``roots`` ((label, value) pairs; a
    label starting with ``global `` is not an argument), names modules and parameters, and
    records each storage of state with its kind, name and owning module as it is seen live.

    ``clock`` gives the time of each observation; ``storage_key`` a storage's identity (its
    address; for fake tensors their ``StorageImpl``); ``device_type``/``device_index`` the
    measured device (state elsewhere is not counted)."""

    def __init__(
        self,
        roots: Iterable[tuple[str, Any]],
        *,
        clock: Callable[[], int],
        storage_key: Callable[[Any], int],
        device_type: str,
        device_index: int | None,
    ) -> None:
        self._roots = roots
        self._clock = clock
        self._storage_key = storage_key
        self._device_type = device_type
        self._device_index = device_index
        self._storages: list[list[Any]] = []
        self._alive: dict[int, list[int]] = {}
        # One weak reference per followed storage, whose callback notes its death; dropped at
        # finish (a dropped reference calls nothing). Cheaper than weakref.finalize (no registry),
        # which counts: a gradient is seen as autograd makes it, in the middle of backward.
        self._watching: list[weakref.ref[Any]] = []
        self._host = device_type == "cpu"
        self.hooked: set[int] = set()  # parameters whose gradients a hook reports
        # Sharded parameters (DTensors) whose gradients their wrapper's owner sets (FSDP2
        # assigns a reduce-scattered gradient, no accumulation runs): seen around optimizer steps.
        self.unhooked = 0
        self._state_seen: dict[int, tuple[int, ...]] = {}  # parameter -> its state tensors' ids
        self._param_names: dict[int, str] = {}
        self._buffer_names: dict[int, str] = {}
        self._optimizers: dict[int, torch.optim.Optimizer] = {}
        self.modules: list[torch.nn.Module] = []
        self.module_paths: dict[int, str] = {}
        self.module_classes: dict[int, str] = {}
        self.notes: list[str] = []

    def start(self) -> None:
        """Find the model(s), optimizer(s) and inputs; name modules and parameters."""
        now = self._clock()
        found = _Found()
        for label, value in self._roots:
            found.visit(label, value, is_argument=not label.startswith("global "))
        # Looked through: held longer, the roots would keep alive what the code frees (a
        # block's local that it deletes).
        self._roots = ()
        self.modules = _outermost(found.modules)
        self._name_modules(found)
        for optimizer in found.optimizers:
            self._optimizers.setdefault(id(optimizer), optimizer)
        self.scan(now)
        for label, tensor, is_argument in found.tensors:
            self.see(tensor, "input" if is_argument else "other", label, "", now)
        self._ddp_buckets(now)

    def _ddp_buckets(self, now: int) -> None:
        """DDP's gradient buckets: its C++ reducer holds them, no tensor reaches them, yet they
        are live at the call's start. Each is counted there as a block no record names (an
        address below 0: never an allocator's), with its size from DDP's own figures."""
        ddp = ddp_class()
        if ddp is None:
            return
        fake_address = -1
        for root in self.modules:
            for module in root.modules():
                if not isinstance(module, ddp):
                    continue
                path = self.module_paths.get(id(module), type(module).__name__)
                buckets = getattr(module, "_memprof_buckets", None)
                if buckets is not None:  # an estimate's DDP: its buckets are tensors
                    for index, bucket in enumerate(buckets):
                        self.see(bucket, "other", f"bucket {index}", path, now, "ddp_gradient_bucket")
                    continue
                try:
                    data = module._get_ddp_logging_data()
                    listed = str(data.get("bucket_sizes", "")).split(",")
                    sizes = [int(part) for part in listed if part.strip()]
                except Exception:  # DDP's private figures moved: the buckets go uncounted, as before
                    continue
                if data.get("gradient_as_bucket_view"):
                    continue  # the gradients are views of the buckets: seen as gradients
                if rebuilds_buckets(module):
                    self.notes.append(
                        f"DistributedDataParallel rebuilds its gradient buckets ({sum(sizes):,} B) during "
                        "its second training call, here a measured one: the new buckets are counted, the "
                        "old ones' free is not (they were made before profiling), so the peak holds the "
                        "buckets once too many; warm up at least twice"
                    )
                    continue
                for index, nbytes in enumerate(sizes):
                    row = [fake_address, nbytes, now, None, "other", f"bucket {index}", path, None, None]
                    self._storages.append([*row, "ddp_gradient_bucket"])
                    fake_address -= 1

    def hook_gradients(self, stack: contextlib.ExitStack) -> None:
        """A post-accumulate-grad hook on every trainable parameter: its gradient, when made."""
        for module in self.modules:
            for param in module.parameters():
                if is_wrapper(param):
                    self.unhooked += 1
                elif param.requires_grad and id(param) not in self.hooked:
                    self.hooked.add(id(param))
                    stack.callback(param.register_post_accumulate_grad_hook(self.grad_ready).remove)

    def finish(self, now: int) -> None:
        """A last scan; deaths after this no longer matter (the weak references are dropped, and
        with them what they held of the tracker)."""
        self.scan(now)
        self._watching.clear()

    def storages(self) -> tuple[TrackedStorage, ...]:
        # Shapes and dtypes are kept as torch's objects while tracking, written out here.
        return tuple(
            TrackedStorage(
                ptr,
                nbytes,
                seen,
                died,
                kind,
                name,
                module,
                str(tuple(shape)) if shape is not None else "",
                str(dtype).replace("torch.", "") if dtype is not None else "",
                role,
            )
            for ptr, nbytes, seen, died, kind, name, module, shape, dtype, role in self._storages
        )

    def parameter_name(self, param: Any) -> str:
        """The name a model gives ``param`` (empty when none does)."""
        return self._param_names.get(id(param), "")

    def grad_ready(self, param: torch.Tensor) -> None:
        if param.grad is not None:
            name = self._param_names.get(id(param), "")
            self.see(param.grad, "gradient", name, owner(name), self._clock())

    def gradients_made(self) -> None:
        """Backward has run: see each parameter's gradient (where no hook reports it)."""
        now = self._clock()
        with gc_paused():
            for root in self.modules:
                for param in root.parameters():
                    if param.grad is not None and id(param) not in self.hooked:
                        name = self._param_names.get(id(param), "")
                        self.see(param.grad, "gradient", name, owner(name), now)

    def _on_device(self, tensor: torch.Tensor) -> bool:
        if self._host:
            return tensor.is_cpu or tensor.device.type in HOST_DEVICES
        device = tensor.device
        return device.type == self._device_type and device.index == self._device_index

    def see(self, tensor: torch.Tensor, kind: str, name: str, module: str, now: int, role: str = "") -> None:
        """Record that ``tensor``'s storage is ``kind`` state, live at ``now``; follow its death.
        A sharded tensor (DTensor) is its local shard: the memory this process holds. ``role``:
        what the distributed machinery holds it as (FSDP's gathered parameters, ...)."""
        if not isinstance(tensor, torch.Tensor):
            return
        if is_wrapper(tensor):
            for plain in plain_tensors(tensor):
                self._see(plain, kind, name, module, now, role)
            return
        self._see(tensor, kind, name, module, now, role)

    def _see(self, tensor: torch.Tensor, kind: str, name: str, module: str, now: int, role: str = "") -> None:
        if not self._on_device(tensor):
            return
        try:
            storage = tensor.untyped_storage()
            ptr = self._storage_key(storage)
            nbytes = storage.nbytes()
        except (RuntimeError, NotImplementedError, TypeError):
            return
        if not ptr or (role and not nbytes):  # a gathered parameter's storage, freed (resized to 0)
            return
        rows = self._alive.get(ptr)
        if rows is None:
            rows = self._alive[ptr] = []
            self._watching.append(weakref.ref(storage, functools.partial(self._died, ptr, rows)))
        elif not role and any(self._storages[i][4] == kind and self._storages[i][5] == name for i in rows):
            # (A role's storage is gathered again into the same storage: each time is seen.)
            return
        rows.append(len(self._storages))
        self._storages.append([ptr, nbytes, now, None, kind, name, module, tensor.shape, tensor.dtype, role])

    def _died(self, ptr: int, rows: list[int], reference: object = None) -> None:
        now = self._clock()
        for row in rows:
            self._storages[row][3] = now
        if self._alive.get(ptr) is rows:
            del self._alive[ptr]

    def _name_modules(self, found: _Found) -> None:
        roots = self.modules
        for root in roots:
            label = found.module_labels.get(id(root), type(root).__name__)
            prefix = "" if len(roots) == 1 else f"{label.removeprefix('global ')}."
            self.module_paths.setdefault(id(root), type(root).__name__ if not prefix else prefix[:-1])
            for path, sub in root.named_modules(remove_duplicate=True):
                self.module_classes.setdefault(id(sub), type(sub).__name__)
                if path:
                    self.module_paths.setdefault(id(sub), prefix + path)
            for path, param in root.named_parameters(remove_duplicate=True):
                self._param_names.setdefault(id(param), prefix + path)
            for path, buffer in root.named_buffers(remove_duplicate=True):
                self._buffer_names.setdefault(id(buffer), prefix + path)

    def scan(self, now: int) -> None:
        """Parameters, their gradients, module buffers and optimizer state, live at ``now``."""
        with gc_paused():  # thousands of small objects: no collection passes meanwhile
            for root in self.modules:
                for param in root.parameters():
                    name = self._param_names.get(id(param), "")
                    self.see(param, "parameter", name, owner(name), now)
                    if param.grad is not None:
                        self.see(param.grad, "gradient", name, owner(name), now)
                for buffer in root.buffers():
                    name = self._buffer_names.get(id(buffer), "")
                    self.see(buffer, "other", name, owner(name), now)
            self._state_seen.clear()  # a scan sees all state again
            for optimizer in list(self._optimizers.values()):
                self.see_optimizer(optimizer, now)

    def see_optimizer(self, optimizer: torch.optim.Optimizer, now: int) -> None:
        """Its parameters, their gradients (unless a hook reports them) and its state. What was
        seen already as the same objects is skipped: this runs after every step, in the call."""
        self._optimizers.setdefault(id(optimizer), optimizer)
        with gc_paused():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if id(param) in self.hooked:
                        continue
                    name = self._param_names.get(id(param), "")
                    self.see(param, "parameter", name, owner(name), now)
                    if param.grad is not None:
                        self.see(param.grad, "gradient", name, owner(name), now)
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
                        self.see(value, "optimizer_state", label, owner(name), now)


def ddp_class() -> Any:
    """DistributedDataParallel, when the program imported it (else no module of it is DDP)."""
    return getattr(sys.modules.get("torch.nn.parallel.distributed"), "DistributedDataParallel", None)


def rebuilds_buckets(ddp: Any) -> bool:
    """Whether DistributedDataParallel ``ddp``'s next training call rebuilds its gradient
    buckets (its second call does, in the order its first backward used them)."""
    return bool(getattr(ddp, "_lazy_init_ran", False)) and not getattr(ddp, "_has_rebuilt_buckets", True)


def owner(name: str) -> str:
    """The module path that owns parameter ``name`` (``blocks.0.fc.weight`` -> ``blocks.0.fc``)."""
    return name.rpartition(".")[0]


def _parameter_names(func: Callable[..., Any] | None, count: int) -> list[str]:
    names = [f"args[{i}]" for i in range(count)]
    if func is None:
        return names
    if isinstance(func, torch.nn.Module):  # called through __call__: its forward's parameters
        func = func.forward
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
