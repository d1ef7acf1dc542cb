"""What FSDP2 (``fully_shard``) holds besides each rank's shards, named as such: the parameters
it gathers whole before a module's forward and backward (and the flat buffer it gathers them
into), and the gradients of those gathered parameters with the flat buffer it reduce-scatters
them from (:data:`memprof.model.explanation.ROLES`).

Between steps a parameter is its shard (a DTensor: :mod:`.wrappers` counts its local tensor);
during forward and backward FSDP2 gathers each module's parameters into storages it keeps and
resizes (to the whole size, then to nothing) rather than makes anew. These are seen as they are
gathered, through FSDP2's parameter-group methods: private to torch, so each is looked up
and left alone when absent (another torch release), and the tensors are then counted by
category alone.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

from memprof.sources.patching import replace_attribute
from memprof.sources.tracking.state import ProgramState, owner

_GROUP_MODULE = "torch.distributed.fsdp._fully_shard._fsdp_param_group"


def follow_fsdp(state: ProgramState, clock: Callable[[], int], stack: contextlib.ExitStack) -> None:
    """Name FSDP2's gathered parameters, gradients and buffers until ``stack`` closes (nothing
    when FSDP2 was never imported: no module of this program was sharded with it)."""
    module = sys.modules.get(_GROUP_MODULE)
    group = getattr(module, "FSDPParamGroup", None)
    if group is None:
        return
    names = _Names(state)

    def after_unshard(self: Any) -> None:
        result = getattr(self, "_all_gather_result", None)
        flat = getattr(result, "all_gather_output", None)
        if flat is not None:
            path = getattr(self, "_module_fqn", None) or ""
            state.see(flat, "other", path, path, clock(), "fsdp_all_gather_buffer")

    def after_copy_out(self: Any) -> None:
        now = clock()
        for param in getattr(self, "fsdp_params", ()):
            name = names.of(param)
            for tensor in getattr(param, "all_gather_outputs", ()) or ():
                state.see(tensor, "parameter", name, owner(name), now, "fsdp_unsharded_parameter")

    def before_reduce(self: Any) -> None:
        now = clock()
        for param in getattr(self, "fsdp_params", ()):
            unsharded = getattr(param, "_unsharded_param", None)
            grads = (getattr(unsharded, "grad", None), getattr(param, "unsharded_accumulated_grad", None))
            name = names.of(param)
            for grad in grads:
                if grad is not None:
                    state.see(grad, "gradient", name, owner(name), now, "fsdp_unsharded_gradient")

    def after_reduce(self: Any) -> None:
        states = getattr(getattr(self, "comm_ctx", None), "reduce_scatter_states", None) or ()
        flat = getattr(states[-1], "reduce_scatter_input", None) if states else None
        if flat is not None:
            path = getattr(self, "_module_fqn", None) or ""
            state.see(flat, "gradient", path, path, clock(), "fsdp_reduce_scatter_buffer")

    _wrap(stack, group, "unshard", after=after_unshard)
    _wrap(stack, group, "wait_for_unshard", after=after_copy_out)
    _wrap(stack, group, "post_backward", before=before_reduce, after=after_reduce)


class _Names:
    """A gathered parameter's name: its shard's, as the model names it."""

    def __init__(self, state: ProgramState) -> None:
        self._state = state

    def of(self, param: Any) -> str:
        sharded = getattr(param, "sharded_param", None)
        return self._state.parameter_name(sharded) or str(getattr(param, "_param_fqn", None) or "")


def _wrap(
    stack: contextlib.ExitStack,
    cls: type,
    name: str,
    before: Callable[[Any], None] | None = None,
    after: Callable[[Any], None] | None = None,
) -> None:
    """``cls.name`` calling ``before(self)`` and ``after(self)`` around itself, until ``stack``
    closes. What they look at is torch's private state: a failure there is not the program's."""
    original = cls.__dict__.get(name)
    if original is None:
        return

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if before is not None:
            with contextlib.suppress(Exception):
                before(self)
        result = original(self, *args, **kwargs)
        if after is not None:
            with contextlib.suppress(Exception):
                after(self)
        return result

    replace_attribute(stack, cls, name, method)
