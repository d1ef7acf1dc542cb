"""A training step with and without activation checkpointing (``torch.utils.checkpoint``).

The plain step keeps every block's activations from the forward pass until backward uses
them. The checkpointed step keeps only each block's input and recomputes the block's inside
during backward: less memory, one extra forward of compute.

    memprof compare memprof.examples.activation_checkpointing:plain_step \\
        memprof.examples.activation_checkpointing:checkpointed_step
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

BATCH = 1024
WIDTH = 256
HIDDEN = 1024
DEPTH = 4
LEARNING_RATE = 1e-3


class Block(nn.Module):
    """Linear(width, hidden) -> GELU -> Linear(hidden, width), with a residual connection."""

    def __init__(self, width: int = WIDTH, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(self.act(self.up(x)))


def make_model(depth: int = DEPTH) -> nn.ModuleList:
    """``depth`` blocks, seeded."""
    torch.manual_seed(0)
    return nn.ModuleList(Block() for _ in range(depth))


def _step(blocks: nn.ModuleList, x: torch.Tensor, target: torch.Tensor, checkpointed: bool) -> float:
    h = x
    for block in blocks:
        h = checkpoint(block, h, use_reentrant=False) if checkpointed else block(h)
    loss = nn.functional.mse_loss(h, target)
    loss.backward()
    with torch.no_grad():
        for p in blocks.parameters():
            assert p.grad is not None
            p.add_(p.grad, alpha=-LEARNING_RATE)
    # Gradients are dropped inside the step, so every call starts and ends with none.
    blocks.zero_grad(set_to_none=True)
    return float(loss.detach())


def plain_step(blocks: nn.ModuleList, x: torch.Tensor, target: torch.Tensor) -> float:
    """Forward, backward, SGD update: all activations live until backward."""
    return _step(blocks, x, target, checkpointed=False)


def checkpointed_step(blocks: nn.ModuleList, x: torch.Tensor, target: torch.Tensor) -> float:
    """The same step with each block under ``torch.utils.checkpoint.checkpoint``."""
    return _step(blocks, x, target, checkpointed=True)


def step_inputs(device: str = "cpu") -> tuple[nn.ModuleList, torch.Tensor, torch.Tensor]:
    """The blocks, a (1024, 256) float32 batch and its regression target, on ``device``."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, WIDTH, generator=generator)
    target = torch.randn(BATCH, WIDTH, generator=generator)
    return make_model().to(device), x.to(device), target.to(device)


plain_step_inputs = step_inputs
checkpointed_step_inputs = step_inputs
