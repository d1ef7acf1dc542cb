"""A DistributedDataParallel training step whose ranks get uneven batches.

Rank ``r`` trains on ``(r + 1) * BATCH`` rows, so rank 1 holds twice the activations of rank
0 and the ranks' peaks differ (what a skewed data loader or an uneven last batch does). Profile
every rank with one merged report::

    torchrun --nproc-per-node 2 -m memprof run memprof.examples.ddp:step --warmup 2
    memprof run memprof.examples.ddp:step --nproc-per-node 2 --warmup 2

The inputs factory starts the process group (gloo on CPU, nccl on CUDA) from the variables
torchrun sets; run without them, it starts a group of one, so the example also runs alone.
DDP rebuilds its gradient buckets during its second call (``--warmup 2`` leaves that to the
warm-up; memprof warms up once more by itself when it would be the measured call). Estimate
the job for any number of ranks without running it::

    memprof estimate memprof.examples.ddp:step --world-size 2 --device cpu
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

BATCH = 256
WIDTH = 256
HIDDEN = 1024
LEARNING_RATE = 1e-3


def make_model() -> nn.Sequential:
    """Linear(256, 1024) -> ReLU -> Linear(1024, 256), seeded (the same on every rank)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, WIDTH))


def step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, target: torch.Tensor) -> float:
    """Forward, MSE loss, backward (DDP all-reduces the gradients), SGD update; gradients are
    dropped at the end, so every call starts and ends with none."""
    loss = nn.functional.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


def _start_process_group(device: str) -> None:
    if dist.is_initialized():
        return
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group(backend)  # torchrun's RANK, WORLD_SIZE, MASTER_ADDR/PORT
    else:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)


def step_inputs(
    device: str = "cpu",
) -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    """The DDP model, its SGD optimizer, and this rank's batch of ``(rank + 1) * 256`` rows of
    256 float32 features with its regression target, on ``device``."""
    _start_process_group(device)
    rank = dist.get_rank()
    model = make_model().to(device)
    index = torch.device(device).index
    ddp = DistributedDataParallel(model, device_ids=[index] if index is not None else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=LEARNING_RATE)
    generator = torch.Generator().manual_seed(1 + rank)
    rows = (rank + 1) * BATCH
    x = torch.randn(rows, WIDTH, generator=generator)
    target = torch.randn(rows, WIDTH, generator=generator)
    return ddp, optimizer, x.to(device), target.to(device)
