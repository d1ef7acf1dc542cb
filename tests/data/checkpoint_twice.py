"""Two checkpointed traversals of the same transformer blocks in one compiled graph.

The step runs four ``checkpoint``-wrapped blocks over the tokens twice, once plain and once
with a context to attend to (the contrastive-plus-caption shape of CoCa-like models), and
backpropagates the sum of both losses. Eager backward recomputes one block at a time;
``torch.compile`` compiles both traversals as one graph, and its backward holds the recompute
buffers of several blocks at once: its peak is well above eager's (torch 2.13, CPU).

    memprof run tests/data/checkpoint_twice.py:step --compare-compile
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

WIDTH, HEADS, DEPTH, TOKENS, BATCH, CONTEXT = 256, 4, 4, 128, 8, 32


class Block(nn.Module):
    """Pre-norm self-attention, cross-attention to a context when given, and an MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.norm2 = nn.LayerNorm(WIDTH)
        self.q = nn.Linear(WIDTH, WIDTH)
        self.kv = nn.Linear(WIDTH, 2 * WIDTH)
        self.norm3 = nn.LayerNorm(WIDTH)
        self.fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.out = nn.Linear(4 * WIDTH, WIDTH)

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (HEADS, -1)).transpose(1, 2)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        y = F.scaled_dot_product_attention(self.heads(q), self.heads(k), self.heads(v), is_causal=True)
        x = x + self.proj(y.transpose(1, 2).flatten(2))
        if context is not None:
            k, v = self.kv(context).chunk(2, dim=-1)
            y = F.scaled_dot_product_attention(
                self.heads(self.q(self.norm2(x))), self.heads(k), self.heads(v)
            )
            x = x + self.proj(y.transpose(1, 2).flatten(2))
        return x + self.out(F.gelu(self.fc(self.norm3(x))))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(DEPTH))

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        plain = x
        for block in self.blocks:
            plain = checkpoint(block, plain, use_reentrant=False)
        with_context = x
        for block in self.blocks:
            with_context = checkpoint(block, with_context, context, use_reentrant=False)
        return plain.square().mean() + with_context.square().mean()


def step(model: Model, x: torch.Tensor, context: torch.Tensor) -> float:
    loss = model(x, context)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return float(loss.detach())


def step_inputs() -> tuple[Model, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = Model()
    x = torch.randn(BATCH, TOKENS, WIDTH, requires_grad=True)
    context = torch.randn(BATCH, CONTEXT, WIDTH)
    return model, x, context
