"""Optimizer state on the CPU, as torchao's ``CPUOffloadOptimizer`` keeps it, applied by
``memprof advise`` to the optimizer a step's inputs factory made.

Each parameter of at least :data:`MINIMAL_SIZE` elements that requires a gradient gets a copy
on the host, with a host gradient, and an optimizer of its own over that copy (the user's
class, groups and hyperparameters; AdamW fused, as torchao makes it): its state lives on the
host. A step copies each gradient to the host, steps there, and copies the parameter back; the
GPU keeps the parameters, their gradients (until ``zero_grad``) and the smaller parameters'
optimizer. What is made on the host is said to the estimate
(:func:`memprof.sources.fake.host.host_memory`): in a CUDA estimate it is not the device's memory.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

MINIMAL_SIZE = 4096
"""Parameters with fewer elements stay with an optimizer on the GPU (torchao's
``minimal_size``: many small transfers cost more than they save)."""

Rebuild = Callable[[Any, list[dict[str, Any]], dict[str, Any]], Any]


def not_offloaded(optimizers: list[Any], device: str, stepped: bool) -> str:
    """Why the technique does not apply (empty: it does): on a CPU estimate, without an
    optimizer, with one that already holds state (it cannot be rebuilt as new), or when no
    parameter is large enough to be moved."""
    if device != "cuda":
        return "a CPU estimate: the optimizer state is in the CPU's memory already (this moves it off a GPU)"
    if not optimizers:
        return "no optimizer among the inputs factory's objects"
    if stepped:
        return "the optimizer already holds state; it cannot be rebuilt as new"
    if not any(offloaded_params(o) for o in optimizers):
        return f"no parameter has {MINIMAL_SIZE:,} elements or more (smaller ones stay on the GPU)"
    return ""


def offloaded_params(optimizer: Any) -> list[Any]:
    """The parameters of ``optimizer`` whose state would move to the host."""
    return [
        p
        for group in optimizer.param_groups
        for p in group["params"]
        if p.requires_grad and p.numel() >= MINIMAL_SIZE
    ]


def offloaded(optimizer: Any, rebuild: Rebuild) -> Any:
    """``optimizer`` (new: no state yet) with its larger parameters' state on the host;
    ``rebuild(optimizer, groups, changes)`` makes an optimizer of its class over other groups."""
    return _offloaded_class()(optimizer, rebuild)


@functools.cache
def _offloaded_class() -> type:
    import torch

    from memprof.sources.fake.host import host_memory

    class CPUOffloaded(torch.optim.Optimizer):
        """torchao's ``CPUOffloadOptimizer(params, type(optimizer), ...)``, for one estimate or
        one verifying run. Like torchao's, it does not call ``Optimizer.__init__``."""

        def __init__(self, optimizer: Any, rebuild: Rebuild) -> None:
            # torchao makes AdamW fused unless told otherwise (foreach=True would clash with it).
            settings = optimizer.defaults
            told = settings.get("fused") is not None or settings.get("foreach")
            changes = {"fused": True} if type(optimizer) is torch.optim.AdamW and not told else {}
            big = {id(p) for p in offloaded_params(optimizer)}
            self.pairs: list[tuple[Any, Any, Any]] = []  # (parameter, host copy, its optimizer)
            kept: list[dict[str, Any]] = []
            for group in optimizer.param_groups:
                small = [p for p in group["params"] if p.requires_grad and id(p) not in big]
                if small:
                    kept.append({**group, "params": small})
                for p in (p for p in group["params"] if id(p) in big):
                    host = _host_copy(p)
                    self.pairs.append(
                        (p, host, rebuild(optimizer, [{**group, "params": [host], **changes}], changes))
                    )
            self.kept = rebuild(optimizer, kept, {}) if kept else None
            self.param_groups = optimizer.param_groups
            self.defaults = optimizer.defaults
            self.state = self.kept.state if self.kept is not None else {}

        @torch.no_grad()
        def step(self, closure: Callable[[], Any] | None = None) -> Any:
            loss = closure() if closure is not None else None
            if self.kept is not None:
                self.kept.step()
            for param, host, optimizer in self.pairs:
                if param.grad is None:
                    continue
                host.grad.copy_(param.grad)  # torchao copies in the gradient's hook: no memory
                with host_memory():
                    optimizer.step()
                param.copy_(host)
            return loss

        def zero_grad(self, set_to_none: bool = True) -> None:
            if not set_to_none:
                raise ValueError(
                    "CPUOffloadOptimizer.zero_grad only sets gradients to None (set_to_none=True)"
                )
            for param, _, _ in self.pairs:
                param.grad = None
            if self.kept is not None:
                self.kept.zero_grad(set_to_none=True)

    def _host_copy(param: Any) -> Any:
        pin = bool(param.is_cuda)  # pinned host memory, as torchao's; none on a fake or CPU run
        with host_memory(), torch.no_grad():
            host = torch.empty_like(param, device="cpu", pin_memory=pin)
            host.grad = torch.empty_like(host, pin_memory=pin)
            host.copy_(param.detach())
        return host

    return CPUOffloaded
