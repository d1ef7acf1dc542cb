"""Tensors that hold other tensors: a ``DTensor`` (FSDP2's sharded parameters, tensor
parallelism) is a wrapper whose own storage is a placeholder of the *global* size; the memory
this process holds is its local shard's. Everything memprof counts is counted through
:func:`plain_tensors`, which unwraps such wrappers into the tensors they hold.

torch calls these wrappers "traceable wrapper subclasses": ``__tensor_flatten__`` names the
inner tensors (a DTensor's ``_local_tensor``), whatever the subclass.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch  # noqa: TID253 - the torch side of tracking

_MAX_DEPTH = 4  # a wrapper of a wrapper of ...: bounded, as any walk of user objects is


_WRAPPER_TYPES: dict[type, bool] = {torch.Tensor: False}


def is_wrapper(tensor: Any) -> bool:
    """Whether ``tensor`` is a tensor subclass that holds its data in inner tensors."""
    kind = type(tensor)
    found = _WRAPPER_TYPES.get(kind)
    if found is None:  # once per type: this is asked of every op's every tensor
        found = _WRAPPER_TYPES[kind] = hasattr(kind, "__tensor_flatten__")
    return found


def plain_tensors(tensor: torch.Tensor, depth: int = 0) -> Iterator[torch.Tensor]:
    """``tensor`` itself, or for a wrapper (a DTensor) the tensors it holds, unwrapped to
    tensors that own their storage."""
    if depth >= _MAX_DEPTH or not is_wrapper(tensor):
        yield tensor
        return
    try:
        names, _ = tensor.__tensor_flatten__()  # type: ignore[attr-defined]
    except Exception:  # a subclass whose flattening fails: take it as it is
        yield tensor
        return
    for name in names:
        inner = getattr(tensor, name, None)
        if isinstance(inner, torch.Tensor):
            yield from plain_tensors(inner, depth + 1)


def has_wrappers(values: Any) -> bool:
    """Whether any of ``values`` (a flat sequence) is a wrapper tensor."""
    return any(isinstance(v, torch.Tensor) and is_wrapper(v) for v in values)
