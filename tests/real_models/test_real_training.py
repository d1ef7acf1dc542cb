"""Eager training steps of Hugging Face models (GPT-2, Llama with SDPA, BERT for sequence
classification, ViT, ResNet), each checked against figures memprof does not compute: the peak
replayed from torch.profiler's own allocation records of another call, parameter bytes counted
from the model (a tied embedding once), the optimizer's state from ``optimizer.state``, and
``torch.distributed._tools.mem_tracker.MemTracker``'s view of the same step. The explanations
are checked too: the largest entries name the model's lines in transformers' files and keep the
line of the workload that called the model."""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("transformers", reason="transformers is not installed (pip install 'torch-memprof[hf]')")

import transformers  # noqa: E402
from reconcile import assert_reconciled  # noqa: E402
from state_bytes import optimizer_state_bytes, parameter_bytes  # noqa: E402

from real_models import workloads  # noqa: E402

pytestmark = pytest.mark.slow

TRAINING = ["gpt2_step", "llama_step", "bert_step", "vit_step", "resnet_step"]


def library_line(module: Any, statement: str) -> str:
    """``transformers/...py:LINE`` of the statement of ``module``'s source that starts with
    ``statement`` (as the report names a library's line: from its site directory)."""
    path = Path(inspect.getsourcefile(module) or "")
    found = [
        n for n, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith(statement)
    ]
    assert len(found) == 1, (statement, found)
    root = Path(transformers.__file__).parent.parent
    return f"{path.relative_to(root).as_posix()}:{found[0]}"


def user_line(function: Any, statement: str) -> str:
    """``file:LINE`` of the statement of ``function`` (a workload), as the report names a user's
    line: relative to the working directory."""
    lines, first = inspect.getsourcelines(function)
    found = [first + n for n, text in enumerate(lines) if text.strip() == statement]
    assert len(found) == 1, (statement, found)
    return f"{os.path.relpath(inspect.getsourcefile(function) or '', Path.cwd())}:{found[0]}"


@pytest.mark.parametrize("name", TRAINING)
def test_the_peak_is_the_profilers_own_records_replayed(profiled: Any, name: str) -> None:
    done = profiled(name)
    run = done.run
    assert run.peak_bytes == done.replayed_peak_bytes > 0
    assert_reconciled(done.report)


@pytest.mark.parametrize("name", TRAINING)
def test_parameters_and_optimizer_state_are_the_models_own(profiled: Any, name: str) -> None:
    done = profiled(name)
    model, optimizer = done.args[0], done.args[1]
    by_category = done.run.at_peak.by_category
    assert by_category["parameter"] == parameter_bytes(model)
    assert by_category["optimizer_state"] == optimizer_state_bytes(optimizer)
    if isinstance(optimizer, torch.optim.AdamW):
        # Two moments per parameter and one step counter per parameter tensor.
        tensors = len({id(p) for p in model.parameters()})
        assert optimizer_state_bytes(optimizer) == 2 * parameter_bytes(model) + 4 * tensors
    else:  # SGD with momentum: one buffer per parameter
        assert optimizer_state_bytes(optimizer) == parameter_bytes(model)


@pytest.mark.filterwarnings("ignore:Module is None:UserWarning")  # MemTracker's own, on BERT
@pytest.mark.parametrize("name", TRAINING)
def test_torchs_mem_tracker_sees_the_same_state(profiled: Any, name: str) -> None:
    """MemTracker follows tensors by hooks from when it starts: its parameters and optimizer
    state are memprof's to the byte; its peak is memprof's footprint less what it cannot see,
    the workspaces ops allocate and free inside themselves, the tensors torch makes of Python
    numbers before an op starts, and (not always) the call's inputs, made before it started."""
    from torch.distributed._tools.mem_tracker import MemTracker

    done = profiled(name)
    step = getattr(workloads, name)
    tracker = MemTracker()
    tracker.track_external(*(a for a in done.args if isinstance(a, torch.nn.Module | torch.optim.Optimizer)))
    with tracker:
        step(*done.args)
    (seen,) = tracker.get_tracker_snapshot("peak").values()
    by_type = {str(kind).rpartition(".")[2]: nbytes for kind, nbytes in seen.items()}
    by_category = done.run.at_peak.by_category
    assert by_type["PARAM"] == by_category["parameter"]
    assert by_type["OPT"] == by_category["optimizer_state"]
    unseen = done.run.footprint_bytes - by_category["workspace"] - by_type["Total"]
    assert 0 <= unseen <= by_category["input"], (unseen, by_category["input"])
    if name == "gpt2_step":
        # Nor the float64 tensors torch makes of the Python numbers GPT-2's GELU multiplies by
        # (0.5, sqrt(2/pi) and 0.044715: 8 B each, in each of 2 layers), made before their op
        # starts and kept by autograd for the products' backward.
        entries = done.run.at_peak.entries
        numbers = [e for e in entries if (e.category, e.op, e.shape) == ("activation", "aten::mul", "")]
        assert {e.module.rpartition(".")[2] for e in numbers} == {"act"}
        assert unseen == sum(e.bytes for e in numbers) == 2 * 3 * 8


def test_gpt2_largest_entries_name_the_models_lines_and_the_users_call(profiled: Any) -> None:
    from transformers.models.gpt2 import modeling_gpt2

    run = profiled("gpt2_step").run
    made = [e for e in run.at_peak.entries if not e.before_call]
    largest = made[:8]
    call = user_line(workloads.gpt2_step, "out = model(**batch)")
    # Every one made in transformers' code, on the line that made it; the user's line kept.
    assert all(e.source.startswith("transformers/") for e in largest), [e.source for e in largest]
    forward = [e for e in largest if e.phase == "forward"]
    assert forward and all(e.user_source == call for e in forward)
    assert all(e.user_source_text == "out = model(**batch)" for e in forward)
    # The logits: lm_head's matmul, on the line of modeling_gpt2.py that calls lm_head.
    logits = profiled("gpt2_step").args[2]["input_ids"].numel() * workloads.VOCAB * 4  # (batch, seq, vocab)
    (head,) = [e for e in made if e.module == "lm_head" and e.phase == "forward" and e.op == "aten::mm"]
    assert head.bytes == logits
    assert head.source == library_line(modeling_gpt2, "logits = self.lm_head(")
    assert head.source_text.startswith("logits = self.lm_head(")
    # Module paths and classes are the model's own.
    classes = {m.module: m.module_class for m in run.module_stats}
    named = dict(workloads.gpt2_model().named_modules())
    assert {path for path in classes if path != "GPT2LMHeadModel"} <= set(named)
    assert all(type(named[path]).__name__ == cls for path, cls in classes.items() if path in named)
    assert classes["transformer.h.0.attn"] == "GPT2Attention"


def test_llama_attention_is_on_the_sdpa_line_of_its_layer(profiled: Any) -> None:
    from transformers.integrations import sdpa_attention

    run = profiled("llama_step").run
    attention = library_line(
        sdpa_attention, "attn_output = torch.nn.functional.scaled_dot_product_attention("
    )
    on_line = [e for e in run.at_peak.entries if e.source == attention]
    assert on_line, "no entry on the attention line"
    assert {e.module for e in on_line} <= {"model.layers.0.self_attn", "model.layers.1.self_attn"}
    call = user_line(workloads.llama_step, "out = model(**batch)")
    assert all(e.user_source == call for e in on_line if e.phase == "forward")


def test_the_autocast_diff_names_the_casts_kept_for_backward(profiled: Any) -> None:
    # fp32 against autocast bf16: bf16 halves the activations while its copies of the weights
    # (kept for backward) add as much again, so the modules' and lines' changes nearly cancel;
    # the largest change, the copies, is named by the summary with their exact bytes.
    from memprof.analysis.peak_diff import diff_at_peak
    from memprof.core.units import format_bytes

    base, bf16 = profiled("llama_step"), profiled("llama_bf16_step")
    assert bf16.run.peak_bytes == bf16.replayed_peak_bytes > 0
    diff = diff_at_peak(base.run, bf16.run, labels=("fp32", "bf16"))
    assert diff is not None

    def casts(run: Any) -> list[Any]:
        return [e for e in run.at_peak.entries if e.op == "aten::_to_copy"]

    assert casts(base.run) == []
    copies = casts(bf16.run)
    assert {(e.category, e.dtype) for e in copies} == {("activation", "bfloat16")}
    kept = sum(e.bytes for e in copies)
    # Among them, one bf16 copy of every Linear weight (2 bytes per element).
    model = bf16.args[0]
    weights = {str(tuple(m.weight.shape)) for m in model.modules() if isinstance(m, torch.nn.Linear)}
    linear = sum(2 * m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert sum(e.bytes for e in copies if e.shape in weights) == linear == 212_992
    largest = max(diff.by_op, key=lambda row: abs(row.delta_bytes))
    assert (largest.op, largest.delta_bytes) == ("aten::_to_copy", kept)
    assert abs(bf16.run.at_peak.footprint_bytes - base.run.at_peak.footprint_bytes) < kept
    named = f"casts kept for backward (aten::_to_copy) {format_bytes(kept, signed=True)} of activations"
    assert f"by op, {named}" in diff.summary, diff.summary


def test_a_module_called_as_the_target_counts_its_own_state() -> None:
    """``memprof.profile(model, x)``: the module is the callable, and its parameters are the
    run's (as for ``model.forward``), under paths from the model as root."""
    import memprof

    torch.manual_seed(0)
    model = transformers.ViTModel(
        transformers.ViTConfig(
            image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
            intermediate_size=128,
        )
    ).eval()  # fmt: skip
    pixels = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        report = memprof.profile(model, pixels, time_budget=0)
    run = report.runs["eager"]
    assert run.at_peak.by_category["parameter"] == parameter_bytes(model)
    assert run.footprint_bytes >= parameter_bytes(model) + pixels.numel() * 4
    paths = {m.module for m in run.module_stats}
    named = dict(model.named_modules())
    assert "ViTModel" in paths and paths - {"ViTModel"} <= set(named)
    assert any(
        isinstance(named[path], transformers.models.vit.modeling_vit.ViTAttention)
        for path in paths - {"ViTModel"}
    )
