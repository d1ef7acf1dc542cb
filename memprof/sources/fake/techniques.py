"""Memory-saving techniques applied to a step's own objects: the modules, optimizers and
tensors its inputs factory returns (modules wrapped, optimizers rebuilt with the same
parameter groups and hyperparameters) and the call itself (wrapped in autocast, ``no_grad``).

:func:`discover` looks at the objects a factory made and lists what can be tried on them
(:class:`Technique`, each with the one line a user writes to apply it) and what cannot (with
the reason); :func:`applied` makes a factory's inputs and a step with a combination applied;
:class:`FlopCount` counts the floating-point operations of a step's last call
(``torch.utils.flop_counter.FlopCounterMode``: recomputation in backward counts again).
Used on fake tensors by :mod:`memprof.library.advice`, and on real ones to verify its plan.
"""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from memprof.sources.targets.target import Inputs

Transform = Callable[[Inputs], Inputs]
Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]

MAX_CHECKPOINT_CLASSES = 3
"""Repeated module classes tried for activation checkpointing, outermost first."""
MICRO_BATCH_DIVISORS = (2, 4)
"""A smaller micro-batch: the batch divided by each of these that divides it."""
SAVED_OPS = (
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "linear",
    "convolution",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
)
"""aten ops whose outputs selective checkpointing keeps (matmuls, convolutions, fused
attention): the costly ones; the rest is recomputed."""


class Refused(Exception):
    """A technique that does not apply to this step, with the reason."""


@dataclass(frozen=True)
class Technique:
    """One technique: ``key`` (unique), ``name`` in words, ``apply`` (the line of code),
    ``cost`` (what it costs besides compute, in words: a numerics change, smaller matmuls),
    ``group`` (techniques of one group do not combine), what it does to the factory's objects
    (``transform``) and to the call (``wrap``), the factory parameters it changes
    (``params``), how many calls make one step (``calls``: a micro-batch of 1/k is k
    calls), and the ranks of the job it is run as one rank of (``world_size``: sharding)."""

    key: str
    name: str
    apply: str
    group: str
    cost: str = ""
    transform: Transform | None = None
    wrap: Wrap | None = None
    params: dict[str, Any] = field(default_factory=dict)
    calls: int = 1
    world_size: int | None = None


@dataclass(frozen=True)
class Refusal:
    """A technique that does not apply (its ``key``, as a :class:`Technique`'s names its kind),
    and why."""

    key: str
    name: str
    reason: str


# ---- what a factory made ------------------------------------------------------------------------


def _objects(inputs: Inputs) -> Iterator[Any]:
    """The factory's arguments, and the items of its lists, tuples and dicts (one level)."""
    for value in (*inputs.args, *inputs.kwargs.values()):
        yield value
        if isinstance(value, list | tuple):
            yield from value
        elif isinstance(value, dict):
            yield from value.values()


def modules_of(inputs: Inputs) -> list[Any]:
    import torch

    found = {id(v): v for v in _objects(inputs) if isinstance(v, torch.nn.Module)}
    return list(found.values())


def optimizers_of(inputs: Inputs) -> list[Any]:
    import torch

    found = {id(v): v for v in _objects(inputs) if isinstance(v, torch.optim.Optimizer)}
    return list(found.values())


def _replaced(inputs: Inputs, swap: dict[int, Any]) -> Inputs:
    """``inputs`` with each object whose id is in ``swap`` replaced (one level deep)."""

    def one(value: Any) -> Any:
        if id(value) in swap:
            return swap[id(value)]
        if isinstance(value, list | tuple) and any(id(v) in swap for v in value):
            return type(value)(swap.get(id(v), v) for v in value)
        if isinstance(value, dict) and any(id(v) in swap for v in value.values()):
            return {k: swap.get(id(v), v) for k, v in value.items()}
        return value

    return replace(
        inputs, args=tuple(one(a) for a in inputs.args), kwargs={k: one(v) for k, v in inputs.kwargs.items()}
    )


def repeated_classes(model: Any) -> list[type]:
    """Module classes with two or more instances that hold modules of their own (a transformer's
    blocks, their attention and MLP), outermost first; containers are not counted."""
    import torch

    containers = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)
    counts: Counter[type] = Counter()
    depth: dict[type, int] = {}
    for name, module in model.named_modules():
        if module is model or isinstance(module, containers) or next(module.children(), None) is None:
            continue
        counts[type(module)] += 1
        depth.setdefault(type(module), name.count("."))
    repeated = [cls for cls, n in counts.items() if n >= 2]
    return sorted(repeated, key=lambda cls: (depth[cls], -counts[cls], cls.__name__))[:MAX_CHECKPOINT_CLASSES]


# ---- the techniques -----------------------------------------------------------------------------


def _checkpoint(cls: type, selective: bool) -> Transform:
    def transform(inputs: Inputs) -> Inputs:
        import torch
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            CheckpointImpl,
            apply_activation_checkpointing,
            checkpoint_wrapper,
        )

        extra: dict[str, Any] = {}
        if selective:
            from torch.utils.checkpoint import create_selective_checkpoint_contexts

            ops = [
                getattr(torch.ops.aten, name).default for name in SAVED_OPS if hasattr(torch.ops.aten, name)
            ]
            extra["context_fn"] = functools.partial(create_selective_checkpoint_contexts, ops)
        wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT, **extra)
        for model in modules_of(inputs):
            apply_activation_checkpointing(
                model, checkpoint_wrapper_fn=wrapper, check_fn=lambda m: isinstance(m, cls)
            )
        return inputs

    return transform


def _hf_checkpoint(inputs: Inputs) -> Inputs:
    for model in modules_of(inputs):
        if getattr(model, "supports_gradient_checkpointing", False):
            settings = {"use_reentrant": False}
            if hasattr(model, "activation_checkpointing_enable"):  # transformers 5
                model.activation_checkpointing_enable(activation_checkpointing_kwargs=settings)
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=settings)
            model.train()
    return inputs


def _rebuilt(changes: dict[str, Any]) -> Transform:
    """The factory's optimizers rebuilt with the same parameter groups and hyperparameters, and
    ``changes``."""

    def transform(inputs: Inputs) -> Inputs:
        swap = {
            id(optimizer): _rebuild(optimizer, [{**g, **changes} for g in optimizer.param_groups], changes)
            for optimizer in optimizers_of(inputs)
        }
        return _replaced(inputs, swap)

    return transform


def _rebuild(optimizer: Any, groups: list[dict[str, Any]], changes: dict[str, Any]) -> Any:
    """A new optimizer of ``optimizer``'s class over ``groups``, with its hyperparameters and
    ``changes`` (those its class takes)."""
    accepted = inspect.signature(type(optimizer)).parameters
    defaults = {k: v for k, v in {**optimizer.defaults, **changes}.items() if k in accepted}
    return type(optimizer)(groups, **defaults)


def _set_to_none(inputs: Inputs) -> Inputs:
    for thing in (*optimizers_of(inputs), *modules_of(inputs)):
        original = thing.zero_grad
        thing.zero_grad = functools.partial(_zero_grad, original)
    return inputs


def _accumulating(inputs: Inputs) -> Inputs:
    """A later micro-step of gradient accumulation: ``zero_grad`` does nothing, so the previous
    call's gradients are live through this call's forward and backward adds to them (the
    optimizer steps at the end, as the last micro-step's does)."""
    for thing in (*optimizers_of(inputs), *modules_of(inputs)):
        thing.zero_grad = _kept
    return inputs


def _kept(*args: Any, **kwargs: Any) -> None:
    return None


def _zero_grad(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    kwargs.pop("set_to_none", None)
    return original(set_to_none=True)


def _channels_last(inputs: Inputs) -> Inputs:
    import torch

    for model in modules_of(inputs):
        model.to(memory_format=torch.channels_last)

    def convert(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dim() == 4 and value.is_floating_point():
            return value.contiguous(memory_format=torch.channels_last)
        return value

    return replace(
        inputs,
        args=tuple(convert(a) for a in inputs.args),
        kwargs={k: convert(v) for k, v in inputs.kwargs.items()},
    )


def _in_context(make: Callable[[], Any]) -> Wrap:
    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with make():
                return func(*args, **kwargs)

        return wrapped

    return wrap


def _autocast(dtype_name: str) -> Wrap:
    def make() -> Any:
        import torch

        # Fake tensors are CPU tensors: the CPU's autocast runs on them (and on this machine's
        # real run); on a GPU the same line names "cuda".
        return torch.autocast(device_type="cpu", dtype=getattr(torch, dtype_name))

    return _in_context(make)


def _no_grad() -> Any:
    import torch

    return torch.no_grad()


def stateful(inputs: Inputs) -> bool:
    """Whether an optimizer the factory made already holds state (it stepped)."""
    return any(o.state for o in optimizers_of(inputs))


def discover(
    inputs: Inputs,
    batch_param: str | None,
    batch: Any,
    device: str,
    stepped: bool = False,
    world_size: int | None = None,
) -> tuple[list[Technique], list[Refusal]]:
    """What can be tried on the objects a factory made (``inputs``, as the factory returned
    them), and what cannot, with why. ``batch_param``: the factory's batch parameter and
    ``batch`` its value (None: unknown); ``stepped``: the factory's optimizer already held state
    (:func:`stateful`); ``world_size``: the GPUs to try sharding over (None: not tried)."""
    found: list[Technique] = []
    refused: list[Refusal] = []
    for part in (_checkpoints, _precision, _optimizer, _micro_batch, _layout, _inference):
        techniques, refusals = part(inputs, batch_param, batch, device)
        if part is _optimizer and stepped:
            techniques, refusals = (
                [],
                [
                    Refusal(
                        "optimizer",
                        "optimizer variants",
                        "the optimizer already holds state; it cannot be rebuilt as new",
                    )
                ],
            )
        found += techniques
        refused += refusals
    techniques, refusals = _sharding(inputs, world_size)
    offload, not_offloaded = _offload(inputs, device, stepped)
    return found + techniques + offload, refused + refusals + not_offloaded


Found = tuple[list[Technique], list[Refusal]]


def _checkpoints(inputs: Inputs, batch_param: str | None, batch: Any, device: str) -> Found:
    models = modules_of(inputs)
    if not models:
        return [], [
            Refusal("checkpoint", "activation checkpointing", "no module among the inputs factory's objects")
        ]
    classes = [cls for model in models for cls in repeated_classes(model)]
    found = []
    for model in models:
        if getattr(model, "supports_gradient_checkpointing", False) and hasattr(
            model, "gradient_checkpointing_enable"
        ):
            layers = sorted(
                {
                    type(m).__name__
                    for m in model.modules()
                    if hasattr(m, "gradient_checkpointing") and m is not model
                }
            )
            what = ", ".join(layers) or "layer"
            found.append(
                Technique(
                    key="checkpoint:hf",
                    name=f"checkpoint every {what} (Hugging Face)",
                    apply="model.gradient_checkpointing_enable("
                    "gradient_checkpointing_kwargs={'use_reentrant': False})",
                    group="checkpoint",
                    transform=_hf_checkpoint,
                )
            )
            break
    if not classes:
        refusal = Refusal(
            "checkpoint", "activation checkpointing", "no module class is repeated (two or more instances)"
        )
        return found, [refusal] if not found else []
    for cls in dict.fromkeys(classes):
        check = f"check_fn=lambda m: isinstance(m, {cls.__name__})"
        found.append(
            Technique(
                key=f"checkpoint:{cls.__name__}",
                name=f"checkpoint every {cls.__name__}",
                apply=f"apply_activation_checkpointing(model, {check})",
                group="checkpoint",
                transform=_checkpoint(cls, selective=False),
            )
        )
    outer = classes[0]
    found.append(
        Technique(
            key=f"selective:{outer.__name__}",
            name=f"selective checkpoint of every {outer.__name__}",
            apply=(
                "apply_activation_checkpointing(model, checkpoint_wrapper_fn=partial(checkpoint_wrapper, "
                "context_fn=partial(create_selective_checkpoint_contexts, "
                "[aten.mm.default, aten.addmm.default, aten.bmm.default, aten.convolution.default])), "
                f"check_fn=lambda m: isinstance(m, {outer.__name__}))"
            ),
            group="checkpoint",
            cost="keeps the outputs of matmuls, convolutions and fused attention; recomputes the rest",
            transform=_checkpoint(outer, selective=True),
        )
    )
    return found, []


def _precision(inputs: Inputs, batch_param: str | None, batch: Any, device: str) -> Found:
    if not modules_of(inputs):
        return [], [Refusal("autocast", "autocast", "no module among the inputs factory's objects")]
    where = "cuda" if device == "cuda" else "cpu"
    words = {
        "bfloat16": "numerics change: matmuls and convolutions in bfloat16 (8 bits of mantissa); "
        "check the loss",
        "float16": "numerics change: matmuls and convolutions in float16 "
        "(needs a GradScaler against underflow)",
    }
    return [
        Technique(
            key=f"autocast:{short}",
            name=f"autocast {short}",
            apply=f'with torch.autocast("{where}", dtype=torch.{dtype}): around the step\'s forward',
            group="autocast",
            cost=words[dtype],
            wrap=_autocast(dtype),
        )
        for short, dtype in (("bf16", "bfloat16"), ("fp16", "float16"))
    ], []


def _optimizer(inputs: Inputs, batch_param: str | None, batch: Any, device: str) -> Found:
    optimizers = optimizers_of(inputs)
    if not optimizers:
        return [], [
            Refusal("optimizer", "optimizer variants", "no optimizer among the inputs factory's objects")
        ]
    name = type(optimizers[0]).__name__
    found, refused = [], []
    for key, changes in (("foreach=False", {"foreach": False}), ("fused=True", {"fused": True})):
        option = next(iter(changes))
        if all(option in o.defaults for o in optimizers):
            found.append(
                Technique(
                    key=f"optimizer:{key}",
                    name=f"{name}({key})",
                    apply=f"{name}(model.parameters(), ..., {key})",
                    group="optimizer",
                    transform=_rebuilt(changes),
                )
            )
        else:
            refused.append(Refusal(f"optimizer:{key}", f"{name}({key})", f"{name} takes no {option} option"))
    found.append(
        Technique(
            key="zero_grad:set_to_none",
            name="zero_grad(set_to_none=True)",
            apply="optimizer.zero_grad(set_to_none=True)",
            group="zero_grad",
            transform=_set_to_none,
        )
    )
    return found, refused


def _micro_batch(inputs: Inputs, batch_param: str | None, batch: Any, device: str) -> Found:
    from memprof.core.errors import param

    name = "a smaller micro-batch with gradient accumulation"
    if batch_param is None:
        return [], [
            Refusal(
                "micro_batch", name, f"name the inputs factory's batch parameter ({param('batch_param')})"
            )
        ]
    if isinstance(batch, bool) or not isinstance(batch, int):
        return [], [
            Refusal(
                "micro_batch",
                name,
                f"the batch parameter {batch_param!r} has no whole-number value: set it ({batch_param}=8)",
            )
        ]
    found = []
    for k in MICRO_BATCH_DIVISORS:
        if batch % k == 0 and batch // k >= 1:
            found.append(
                Technique(
                    key=f"micro_batch:{k}",
                    name=f"micro-batch {batch_param}={batch // k}, {k} accumulation steps",
                    apply=f"{batch_param}={batch // k}: (loss / {k}).backward() {k} times, then "
                    "optimizer.step() and zero_grad() once",
                    group="micro_batch",
                    cost=f"{k} calls per step on smaller tensors (lower throughput); estimated as a later "
                    "micro-step, the previous one's gradients live through it",
                    transform=_accumulating,
                    params={batch_param: batch // k},
                    calls=k,
                )
            )
    if not found:
        return [], [
            Refusal(
                "micro_batch",
                name,
                f"{batch_param}={batch} is not divisible by {' or '.join(map(str, MICRO_BATCH_DIVISORS))}",
            )
        ]
    return found, []


def _layout(inputs: Inputs, batch_param: str | None, batch: Any, device: str) -> Found:
    import torch

    if not any(isinstance(m, torch.nn.Conv2d) for model in modules_of(inputs) for m in model.modules()):
        return [], [Refusal("channels_last", "channels_last", "no 2-D convolution among the modules")]
    return [
        Technique(
            key="channels_last",
            name="channels_last",
            apply="model.to(memory_format=torch.channels_last); "
            "x = x.contiguous(memory_format=torch.channels_last)",
            group="channels_last",
            transform=_channels_last,
        )
    ], []


def _inference(inputs: Inputs, batch_param: str | None, batch: Any, device: str) -> Found:
    return [
        Technique(
            key="no_grad",
            name="torch.no_grad()",
            apply="with torch.no_grad(): around the step (it makes no gradients)",
            group="no_grad",
            wrap=_in_context(_no_grad),
        )
    ], []


def _sharding(inputs: Inputs, world_size: int | None) -> Found:
    from memprof.core.errors import param

    name = "sharding over N GPUs"
    if world_size is None:
        return [], [
            Refusal("sharding", name, f"give the number of GPUs to shard over ({param('world_size')})")
        ]
    models = modules_of(inputs)
    classes = [cls for model in models for cls in repeated_classes(model)[:1]]
    if not models or not classes:
        return [], [Refusal("sharding", name, "no repeated module class to shard (FSDP2 shards each block)")]
    outer = classes[0].__name__
    return [
        Technique(
            key=f"fsdp:{world_size}",
            name=f"FSDP2 over {world_size} GPUs",
            apply=f"fully_shard(block, mesh=mesh) for every {outer}, then fully_shard(model, mesh=mesh), "
            "then the optimizer",
            group="placement",
            cost=f"{world_size} GPUs: parameters, gradients and optimizer state sharded; all-gathers and "
            "reduce-scatters every step (rank 0 estimated)",
            transform=_fully_sharded(classes[0]),
            world_size=world_size,
        )
    ], []


def _fully_sharded(cls: type) -> Transform:
    """FSDP2 on the factory's modules: ``fully_shard`` on every instance of ``cls``, then on the
    model, on a mesh of the job's ranks; the optimizers rebuilt on the sharded parameters
    (same groups and hyperparameters)."""

    def transform(inputs: Inputs) -> Inputs:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        names: dict[int, str] = {}
        for model in modules_of(inputs):
            names.update({id(p): f"{id(model)}.{n}" for n, p in model.named_parameters()})
            blocks: list[Any] = [m for m in model.modules() if isinstance(m, cls)]
            for module in blocks:
                fully_shard(module, mesh=mesh)
            fully_shard(model, mesh=mesh)
        sharded = {f"{id(model)}.{n}": p for model in modules_of(inputs) for n, p in model.named_parameters()}
        swap = {}
        for optimizer in optimizers_of(inputs):
            groups = [
                {**g, "params": [sharded[names[id(p)]] for p in g["params"]]} for g in optimizer.param_groups
            ]
            swap[id(optimizer)] = _rebuild(optimizer, groups, {})
        return _replaced(inputs, swap)

    return transform


def _offload(inputs: Inputs, device: str, stepped: bool) -> Found:
    from memprof.sources.fake.offload import not_offloaded

    name = "optimizer state on the CPU"
    optimizers = optimizers_of(inputs)
    why = not_offloaded(optimizers, device, stepped)
    if why:
        return [], [Refusal("offload", name, why)]
    return [
        Technique(
            key="offload",
            name=name,
            apply=f"CPUOffloadOptimizer(model.parameters(), torch.optim.{type(optimizers[0]).__name__}, ...) "
            "(from torchao.optim import CPUOffloadOptimizer)",
            group="placement",  # with FSDP2 a job offloads with its CPUOffloadPolicy, not this
            cost="the optimizer steps on the CPU: each step copies the gradients to the host and the "
            "parameters back; the host holds a copy of the parameters, their gradients and the state",
            transform=_offloaded,
        )
    ], []


def _offloaded(inputs: Inputs) -> Inputs:
    from memprof.sources.fake.offload import offloaded

    swap = {id(o): offloaded(o, _rebuild) for o in optimizers_of(inputs)}
    for optimizer in optimizers_of(inputs):
        # A technique applied before (accumulation's, set_to_none's) replaced its zero_grad.
        if "zero_grad" in vars(optimizer):
            swap[id(optimizer)].zero_grad = optimizer.zero_grad
    return _replaced(inputs, swap)


# ---- a combination applied ----------------------------------------------------------------------


def applied(
    techniques: tuple[Technique, ...], make: Callable[[dict[str, Any]], Inputs], func: Callable[..., Any]
) -> tuple[Callable[[dict[str, Any]], Inputs], Callable[..., Any]]:
    """A factory (parameters -> inputs) and a step with ``techniques`` applied, in order."""

    def made(params: dict[str, Any]) -> Inputs:
        for technique in techniques:
            params = {**params, **technique.params}
        inputs = make(params)
        for technique in techniques:
            if technique.transform is not None:
                inputs = technique.transform(inputs)
        return inputs

    step = func
    for technique in techniques:
        if technique.wrap is not None:
            step = technique.wrap(step)
    return made, step


class FlopCount:
    """A step whose every call is counted; ``last`` holds the floating-point operations of the
    latest call: torch's own formulas (``torch.utils.flop_counter``'s registry: matmuls,
    convolutions, attention; recomputation in backward counts again), the CPU's fused
    attention included. Counted by a dispatch mode of its own (:meth:`mode`, entered once for
    the whole session, under any mode entered later) rather than ``FlopCounterMode``, which
    decomposes the ops it has no formula for (the CPU's fused attention into the unfused one:
    other tensors, other memory) and hooks every module."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.last: int | None = None
        self.mode = _counting_mode()()
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        before = self.mode.total
        result = self.func(*args, **kwargs)
        self.last = self.mode.total - before
        return result


@functools.cache
def _counting_mode() -> type:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Flops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.total = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            self.total += flops_of(func, args, kwargs, out)
            return out

    return Flops


def flops_of(func: Any, args: Any, kwargs: Any, out: Any) -> int:
    """The floating-point operations of one op call, by torch's formulas (0: not counted)."""
    import torch
    from torch.utils import flop_counter

    packet = getattr(func, "_overloadpacket", None)
    formula = flop_counter.flop_registry.get(packet)
    if formula is not None:
        return int(formula(*args, **kwargs, out_val=out))
    aten = torch.ops.aten
    if packet is aten._scaled_dot_product_flash_attention_for_cpu:
        query, key, value = args[:3]
        return int(flop_counter.sdpa_flop_count(query.shape, key.shape, value.shape))
    if packet is aten._scaled_dot_product_flash_attention_for_cpu_backward:
        grad, query, key, value = args[:4]
        return int(flop_counter.sdpa_backward_flop_count(grad.shape, query.shape, key.shape, value.shape))
    return 0
