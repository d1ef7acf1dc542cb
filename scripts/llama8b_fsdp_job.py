"""A Llama-3-8B-shaped bf16 training step (Hugging Face Llama from a config, random weights),
FSDP2 over the job's ranks: each decoder layer and the root sharded, AdamW. The job's own
``init_process_group("nccl")`` and its ``"cuda"`` mesh run unchanged under an estimate.
Used by scripts/bench_sharded.py."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def step(model: Any, optimizer: torch.optim.Optimizer, tokens: torch.Tensor) -> None:
    """Forward with the tokens as labels, backward, AdamW."""
    model(input_ids=tokens, labels=tokens).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def step_inputs(layers: int = 32, sequence: int = 2048, batch: int = 1) -> tuple[Any, Any, torch.Tensor]:
    """The sharded model in bf16, its AdamW and a batch of token ids."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if not dist.is_initialized():
        dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    config = LlamaConfig(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=layers,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
        max_position_embeddings=8192,
        rope_theta=500000.0,
    )
    config._attn_implementation = "sdpa"
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, config.vocab_size, (batch, sequence))
    return model, optimizer, tokens
