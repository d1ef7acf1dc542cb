"""A small GPT training step: token embedding tied to the output layer, pre-norm blocks of
causal self-attention and an MLP, cross-entropy loss, AdamW.

The peak of a language-model step is usually made of the logits and what the loss makes of
them: ``logits`` (batch x context x vocabulary floats, kept by the step as nanoGPT's are),
their log-softmax, and in backward two gradients of the same size. With the default sizes each
of those is 8 MiB (8 x 64 x 4096 x 4 B) while one block's attention scores are 512 KiB.

    memprof run memprof.examples.gpt:train_step
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of the model and of one batch."""

    vocab_size: int = 4096
    context: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    batch: int = 8


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention with a causal mask, written out (no fused kernel)."""

    mask: torch.Tensor

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        mask = torch.tril(torch.ones(config.context, config.context, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, config.context, config.context), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class MLP(nn.Module):
    """Linear -> GELU -> Linear, four times wider inside."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-norm residual block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token and position embeddings, ``n_layer`` blocks, a final LayerNorm and an output
    layer that shares its weight with the token embedding."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos_emb = nn.Embedding(config.context, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # weight tying: one storage, two modules

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The logits and the mean next-token cross-entropy."""
        t = idx.size(1)
        pos = torch.arange(t, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        logits = self.lm_head(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def train_step(
    model: GPT, optimizer: torch.optim.Optimizer, idx: torch.Tensor, targets: torch.Tensor
) -> float:
    """One AdamW step: forward, loss, backward, update; gradients are dropped at the start."""
    optimizer.zero_grad(set_to_none=True)
    logits, loss = model(idx, targets)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def make_model(config: GPTConfig = GPTConfig(), device: str = "cpu") -> GPT:  # noqa: B008 - frozen
    """A seeded GPT of ``config`` on ``device``."""
    torch.manual_seed(0)
    return GPT(config).to(device)


def train_step_inputs(
    device: str = "cpu",
    config: GPTConfig = GPTConfig(),  # noqa: B008 - frozen
    *,
    batch: int | None = None,
    context: int | None = None,
    n_layer: int | None = None,
    n_head: int | None = None,
    n_embd: int | None = None,
    vocab_size: int | None = None,
) -> tuple[GPT, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    """The model, its AdamW optimizer (no state yet: the first step makes it) and one seeded
    batch of token ids and next-token targets, on ``device``. The keywords replace the sizes of
    ``config`` (``memprof estimate memprof.examples.gpt:train_step --set batch=64``)."""
    sizes = {
        "batch": batch,
        "context": context,
        "n_layer": n_layer,
        "n_head": n_head,
        "n_embd": n_embd,
        "vocab_size": vocab_size,
    }
    config = replace(config, **{name: value for name, value in sizes.items() if value is not None})
    model = make_model(config, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    generator = torch.Generator().manual_seed(1)
    shape = (config.batch, config.context)
    idx = torch.randint(config.vocab_size, shape, generator=generator).to(device)
    targets = torch.randint(config.vocab_size, shape, generator=generator).to(device)
    return model, optimizer, idx, targets
