"""A model's forward pass with autograd recording, under ``torch.no_grad()`` and under
``torch.inference_mode()``.

With autograd on, every layer's input is saved for the backward pass, so all activations stay
alive until the output is dropped; without it, each activation is freed as soon as the next
layer has consumed it. The peak falls from "all activations" to "about two at a time".

    memprof compare memprof.examples.no_grad:with_autograd memprof.examples.no_grad:no_grad \\
        memprof.examples.no_grad:inference_mode
"""

from __future__ import annotations

import torch
from torch import nn

BATCH = 512
WIDTH = 1024
DEPTH = 8


def make_model(width: int = WIDTH, depth: int = DEPTH) -> nn.Module:
    """``depth`` blocks of Linear(width, width) + GELU; seeded, parameters require grad."""
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers)


def with_autograd(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The plain forward: autograd records the graph and keeps what backward would need."""
    return model(x)


def no_grad(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The forward under ``torch.no_grad()``: nothing is saved for backward."""
    with torch.no_grad():
        return model(x)


def inference_mode(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The forward under ``torch.inference_mode()``: no_grad plus no version counters."""
    with torch.inference_mode():
        return model(x)


def forward_inputs(device: str = "cpu") -> tuple[nn.Module, torch.Tensor]:
    """The model and a (512, 1024) float32 batch (2 MiB) on ``device``."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, WIDTH, generator=generator)
    return make_model().to(device), x.to(device)


with_autograd_inputs = forward_inputs
no_grad_inputs = forward_inputs
inference_mode_inputs = forward_inputs
