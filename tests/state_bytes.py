"""A model's and an optimizer's own bytes, counted from their tensors (the figures tests check
memprof's categories against)."""

from __future__ import annotations

import torch


def parameter_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's distinct parameters (a weight two modules share counted once, as
    GPT-2's embedding and output layer)."""
    distinct = {id(p): p for p in model.parameters()}
    return sum(p.numel() * p.element_size() for p in distinct.values())


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the distinct storages of the optimizer's state tensors (``optimizer.state``)."""
    storages = {
        value.untyped_storage().data_ptr(): value.untyped_storage().nbytes()
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    }
    return sum(storages.values())
