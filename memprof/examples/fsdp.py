"""An FSDP2 training step: a small language model sharded with ``fully_shard`` per block and at
the root, AdamW, the process group started by the inputs factory as a real job's would be.

Each rank holds 1/N of the parameters, of their gradients and of AdamW's state (FSDP2 pads
each parameter's first dimension to a multiple of N); a block's parameters are gathered whole
just before it runs and freed after (the root's are kept from forward to backward).
Estimate it for 8 GPUs from one CPU, or measure it on this machine's CPU with gloo::

    memprof estimate memprof.examples.fsdp:step --world-size 8 --gpu H100
    memprof run memprof.examples.fsdp:step --nproc-per-node 2

Run alone (no launcher, no fake job), the factory starts a group of one.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

VOCAB = 1024
WIDTH = 256
LAYERS = 4
SEQUENCE = 64


class Block(nn.Module):
    """A residual MLP block."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.proj = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.proj(torch.relu(self.fc(x)))


class Model(nn.Module):
    """Embedding, ``LAYERS`` blocks, an output head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def step(
    model: nn.Module, optimizer: torch.optim.Optimizer, tokens: torch.Tensor, targets: torch.Tensor
) -> None:
    """Forward, cross-entropy, backward (FSDP reduce-scatters the gradients), AdamW update."""
    logits = model(tokens)
    loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def step_inputs(
    batch: int = 8, device: str = "cpu"
) -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    """The sharded model, its AdamW and a batch of ``batch`` sequences of 64 tokens."""
    if not dist.is_initialized():
        if "WORLD_SIZE" in os.environ:
            dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
        else:
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    mesh = init_device_mesh(torch.device(device).type, (dist.get_world_size(),))
    torch.manual_seed(0)
    model = Model().to(device)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1)  # a real loader gives each rank its own batch
    tokens = torch.randint(0, VOCAB, (batch, SEQUENCE), generator=generator)
    targets = torch.randint(0, VOCAB, (batch, SEQUENCE), generator=generator)
    return model, optimizer, tokens.to(device), targets.to(device)


def parameter_count() -> int:
    """The model's parameters (each rank holds 1/N of them, padded)."""
    block = WIDTH * 4 * WIDTH + 4 * WIDTH + 4 * WIDTH * WIDTH + WIDTH
    return VOCAB * WIDTH + LAYERS * block + WIDTH * VOCAB
