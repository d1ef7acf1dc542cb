"""A workload whose peak is known exactly: one float32 tensor of 25 MiB (26,214,400 bytes)."""

import torch

NBYTES = 25 * 2**20


def alloc() -> torch.Tensor:
    return torch.empty(NBYTES // 4, dtype=torch.float32)


def alloc_inputs() -> tuple[()]:
    return ()
