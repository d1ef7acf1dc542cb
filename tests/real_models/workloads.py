"""Hugging Face transformers models built from small configs (random weights, nothing
downloaded) and the code the real-model tests profile: a decoder LM training step (GPT-2, Llama
with SDPA), an encoder fine-tuning step (BERT for sequence classification), vision models
(ViT, ResNet), ``generate`` (Llama), and GPT-2 with activation checkpointing.

Each workload is a target memprof can name (``tests/real_models/workloads.py:gpt2_step``) with
its inputs factory (``gpt2_step_inputs``), which also runs on fake tensors for estimates.
Needs transformers (``pip install 'torch-memprof[hf]'``); the tests skip without it.
"""

from __future__ import annotations

from typing import Any

import torch
import transformers

VOCAB = 512


def _seeded() -> None:
    torch.manual_seed(0)


def _ids(batch: int, seq: int, device: str) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq), device=device)


def _tokens(batch: int, seq: int, device: str) -> dict[str, torch.Tensor]:
    """A causal LM's batch: the tokens are their own labels (the model shifts them)."""
    ids = _ids(batch, seq, device)
    return {"input_ids": ids, "labels": ids}


def train_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: dict[str, Any]
) -> torch.Tensor:
    """One training step of a transformers model that computes its loss from ``labels``."""
    out = model(**batch)
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return out.loss.detach()


# Every training workload is this step, on its own model and batch (``<name>_inputs``).
gpt2_step = llama_step = bert_step = vit_step = resnet_step = train_step


# ---- GPT-2: a decoder LM training step ----------------------------------------------------------


def gpt2_model(seq: int = 32) -> transformers.GPT2LMHeadModel:
    config = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=64, vocab_size=VOCAB, n_positions=max(seq, 64), bos_token_id=0,
        eos_token_id=0, attn_implementation="sdpa",
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(config)


def gpt2_step_inputs(batch: int = 2, seq: int = 32, device: str = "cpu") -> tuple[Any, ...]:
    _seeded()
    model = gpt2_model(seq).to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3), _tokens(batch, seq, device)


# ---- GPT-2 with activation checkpointing (torch.utils.checkpoint, use_reentrant=False) --------


def gpt2_checkpointed_step(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    return out.loss.detach()


def gpt2_checkpointed_step_inputs(batch: int = 2, seq: int = 32, device: str = "cpu") -> tuple[Any, ...]:
    """GPT-2 whose blocks are checkpointed the way transformers does it: each block's forward
    through ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``."""
    _seeded()
    model = gpt2_model(seq).to(device)
    settings = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers 5.x
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=settings)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=settings)
    model.train()
    return model, _ids(batch, seq, device)


# ---- Llama with SDPA: training and generate ------------------------------------------------------


def llama_model() -> transformers.LlamaForCausalLM:
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, bos_token_id=0, eos_token_id=1, pad_token_id=0,
        attn_implementation="sdpa",
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config)


def llama_step_inputs(batch: int = 2, seq: int = 32, device: str = "cpu") -> tuple[Any, ...]:
    _seeded()
    model = llama_model().to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3), _tokens(batch, seq, device)


def llama_checkpointed_step(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Forward and backward of a checkpointed Llama, its gradients made anew (no optimizer:
    a smaller compile)."""
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    return out.loss.detach()


def llama_checkpointed_step_inputs(batch: int = 2, seq: int = 32, device: str = "cpu") -> tuple[Any, ...]:
    """Llama whose decoder layers are checkpointed the way transformers does it
    (``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``)."""
    _seeded()
    model = llama_model().to(device)
    settings = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers 5.x
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=settings)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=settings)
    model.train()
    return model, _ids(batch, seq, device)


def llama_bf16_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: dict[str, Any]
) -> torch.Tensor:
    """:func:`train_step` with the forward under CPU autocast to bfloat16 (the fp32 weights are
    cast for each layer, and those copies are kept for backward)."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(**batch)
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return out.loss.detach()


def llama_bf16_step_inputs(batch: int = 2, seq: int = 32, device: str = "cpu") -> tuple[Any, ...]:
    return llama_step_inputs(batch, seq, device)


NEW_TOKENS = 40


def llama_generate(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Greedy generation of exactly :data:`NEW_TOKENS` tokens (the stopping check runs on every
    token: a value fake tensors cannot know)."""
    return model.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)


def llama_generate_inputs(device: str = "cpu") -> tuple[Any, ...]:
    _seeded()
    return llama_model().to(device).eval(), _ids(1, 8, device)


def llama_decode_until_eos(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Greedy decoding written by hand, until the model says end of sequence: whether the
    loop goes on is a value fake tensors cannot know (an estimate can only guess it)."""
    with torch.no_grad():
        while (ids[:, -1] != model.config.eos_token_id).any():
            logits = model(input_ids=ids).logits
            ids = torch.cat([ids, logits[:, -1:].argmax(-1)], dim=1)
    return ids


def llama_decode_until_eos_inputs(device: str = "cpu") -> tuple[Any, ...]:
    return llama_generate_inputs(device)


# ---- BERT: an encoder fine-tuning step -----------------------------------------------------------


def bert_step_inputs(batch: int = 4, seq: int = 32, device: str = "cpu") -> tuple[Any, ...]:
    _seeded()
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64, num_labels=3,
    )  # fmt: skip
    model = transformers.BertForSequenceClassification(config).to(device)
    ids = _ids(batch, seq, device)
    inputs = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "labels": torch.arange(batch, device=device) % 3,
    }
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3), inputs


# ---- vision: ViT and ResNet ----------------------------------------------------------------------


def _images(batch: int, device: str) -> dict[str, torch.Tensor]:
    pixels = torch.randn(batch, 3, 32, 32, device=device)
    return {"pixel_values": pixels, "labels": torch.arange(batch, device=device) % 10}


def vit_step_inputs(batch: int = 4, device: str = "cpu") -> tuple[Any, ...]:
    _seeded()
    config = transformers.ViTConfig(
        image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, num_labels=10,
    )  # fmt: skip
    model = transformers.ViTForImageClassification(config).to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3), _images(batch, device)


def resnet_step_inputs(batch: int = 4, device: str = "cpu") -> tuple[Any, ...]:
    """A small ResNet trained with SGD and momentum (one momentum buffer per parameter)."""
    _seeded()
    config = transformers.ResNetConfig(
        num_channels=3,
        embedding_size=16,
        hidden_sizes=[16, 32],
        depths=[1, 1],
        layer_type="basic",
        num_labels=10,
    )
    model = transformers.ResNetForImageClassification(config).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), _images(batch, device)
