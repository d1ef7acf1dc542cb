"""Pairwise "closeness" counts through a broadcast: the classic case where torch.compile removes
a huge intermediate.

Eager builds ``xy`` of shape (n, d, d) (256 x 500 x 500 float32 = 256,000,000 B), then ``abs``
and ``lt`` make more full-size temporaries; the compiled version fuses the whole expression into
one loop and allocates only the (d, d) int64 result (2,000,000 B).

    memprof run memprof.examples.similarity:similarity --compare-compile
"""

from __future__ import annotations

import torch


def similarity(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """For each pair of columns (i, j): how many rows have ``|x[r, i] - y[r, j]| < 1``."""
    xy = x[:, :, None] - y[:, None, :]
    return xy.abs().lt(1).sum(axis=0)  # type: ignore[call-overload]  # numpy-style alias


def similarity_inputs(device: str = "cpu", n: int = 256, d: int = 500) -> tuple[torch.Tensor, torch.Tensor]:
    """Two (n, d) float32 tensors (256 x 500 by default), seeded so runs are repeatable."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=generator).to(device)
    y = torch.randn(n, d, generator=generator).to(device)
    return x, y
