"""A small conv net's forward pass on NCHW-contiguous tensors and in ``channels_last`` (NHWC).

Both variants compute the same thing; only the memory format of the input and the weights
differs. On CPU the oneDNN convolution works in NHWC natively, so a contiguous input is
reordered to a blocked layout and back inside each convolution, while channels_last skips
those reorders. What that does to the peak is measured, not assumed: see docs/guides/compare.md.

    memprof compare memprof.examples.channels_last:contiguous \\
        memprof.examples.channels_last:channels_last
"""

from __future__ import annotations

import torch
from torch import nn

BATCH = 8
CHANNELS = 3
SIZE = 64


def make_model() -> nn.Module:
    """conv(3->32) BN ReLU, conv(32->64) BN ReLU, conv(64->64) ReLU, pool, linear; seeded, eval."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(CHANNELS, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    ).eval()


def _forward(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(x)


def contiguous(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The forward pass with NCHW-contiguous input and weights."""
    return _forward(model, x)


def channels_last(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The same forward pass with input and weights in ``torch.channels_last``."""
    return _forward(model, x)


def _batch(device: str) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, CHANNELS, SIZE, SIZE, generator=generator).to(device)


def contiguous_inputs(device: str = "cpu") -> tuple[nn.Module, torch.Tensor]:
    """The model and an (8, 3, 64, 64) float32 batch, NCHW-contiguous, on ``device``."""
    return make_model().to(device), _batch(device)


def channels_last_inputs(device: str = "cpu") -> tuple[nn.Module, torch.Tensor]:
    """The same model and batch converted to ``channels_last`` before profiling (the conversion
    is a one-off cost, not part of each forward)."""
    # Module.to(memory_format=...) exists at runtime but is missing from torch's type stubs.
    model = make_model().to(device).to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    return model, _batch(device).to(memory_format=torch.channels_last)
