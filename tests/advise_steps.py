"""Steps ``memprof advise`` is tested on: a tiny MLP of repeated blocks (no optimizer, quick)
and a small convolutional network with AdamW and a batch parameter. Each is a target memprof
can name (``tests/advise_steps.py:tiny_step``) with its inputs factory."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    """Linear -> ReLU -> Linear, four times wider inside, with a residual."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x)))


def tiny_step(model: nn.Module, x: torch.Tensor) -> None:
    """Forward and backward of a stack of two blocks (gradients made, no optimizer)."""
    model(x).square().mean().backward()


def tiny_step_inputs(batch: int = 64, width: int = 64) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Sequential(Block(width), Block(width)), torch.randn(batch, width)


class ConvBlock(nn.Module):
    """3x3 convolution, batch norm, ReLU."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.norm(self.conv(x)))


class ConvNet(nn.Module):
    """A stem convolution, three conv blocks, global pooling and a linear classifier."""

    def __init__(self, channels: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.Sequential(*(ConvBlock(channels) for _ in range(3)))
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(x.mean(dim=(2, 3)))


def conv_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    """One AdamW step of the conv net on a batch of images."""
    optimizer.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()
    optimizer.step()


def conv_step_inputs(
    batch: int = 8, size: int = 32
) -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = ConvNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, optimizer, torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,))
