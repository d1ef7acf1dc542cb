"""Activation checkpointing in a Hugging Face model (GPT-2's blocks through
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``, as transformers enables it):
the forward work run again in backward is put on the module and line being recomputed, with
phase ``recompute``, eager and compiled. transformers checkpoints each block's ``forward``
(not the module itself), so the block's own hooks do not fire when it runs again."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="transformers is not installed (pip install 'torch-memprof[hf]')")

import transformers  # noqa: E402
from reconcile import assert_reconciled  # noqa: E402
from transformers.integrations import sdpa_attention  # noqa: E402
from transformers.models.gpt2 import modeling_gpt2  # noqa: E402

pytestmark = pytest.mark.slow

BLOCKS = ("transformer.h.0", "transformer.h.1")


def library_line(module: Any, statement: str) -> str:
    path = Path(inspect.getsourcefile(module) or "")
    found = [
        n for n, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith(statement)
    ]
    assert len(found) == 1, (statement, found)
    return f"{path.relative_to(Path(transformers.__file__).parent.parent).as_posix()}:{found[0]}"


ATTENTION = "attn_output = torch.nn.functional.scaled_dot_product_attention("


def check_recompute(run: Any) -> None:
    """The recomputed attention buffers are on the attention line, in the attention module of
    a checkpointed block, phase recompute; each block recomputed has a recompute row that
    holds them."""
    attention = library_line(sdpa_attention, ATTENTION)
    recomputed = [e for e in run.at_peak.entries if e.phase == "recompute"]
    on_attention = [e for e in recomputed if e.source == attention]
    assert on_attention, sorted({(e.module, e.source) for e in recomputed})
    assert {e.module for e in on_attention} <= {f"{block}.attn" for block in BLOCKS}
    assert all(e.module.startswith(BLOCKS) for e in recomputed), sorted({e.module for e in recomputed})
    modules = {(m.module, m.phase): m for m in run.module_stats}
    for block in {e.module.rpartition(".")[0] for e in on_attention}:
        row = modules[(block, "recompute")]
        assert row.module_class == "GPT2Block" and row.calls == 1
        held = sum(e.bytes for e in recomputed if e.module.startswith(block + "."))
        assert row.at_peak_bytes >= held


def test_eager_recompute_is_on_the_recomputed_module_and_line(profiled: Any) -> None:
    done = profiled("gpt2_checkpointed_step")
    run = done.run
    assert run.peak_bytes == done.replayed_peak_bytes > 0
    assert_reconciled(done.report)
    check_recompute(run)
    # The block's own work (the residual add, outside its submodules) is the block's.
    residual = library_line(modeling_gpt2, "hidden_states = attn_output + residual")
    own = [e for e in run.at_peak.entries if e.phase == "recompute" and e.source == residual]
    assert own and {e.module for e in own} <= set(BLOCKS)
    # Each recomputed line of transformers is called from the user's backward() line.
    from real_models import workloads

    lines, first = inspect.getsourcelines(workloads.gpt2_checkpointed_step)
    (call,) = [first + n for n, text in enumerate(lines) if text.strip().startswith("out.loss.backward()")]
    recomputed = [e for e in run.at_peak.entries if e.phase == "recompute"]
    assert {e.user_source.rpartition("/")[2] for e in recomputed} == {f"workloads.py:{call}"}


def test_compiled_recompute_is_on_the_recomputed_module_and_line(profiled: Any) -> None:
    done = profiled("gpt2_checkpointed_step", "compile")
    assert_reconciled(done.report)
    check_recompute(done.run)


@pytest.mark.parametrize(
    ("name", "blocks"),
    # Llama's peak is in the second layer's backward, once its state was freed.
    [("gpt2_checkpointed_step", BLOCKS), ("llama_checkpointed_step", ("model.layers.0",))],
)
def test_the_rng_state_checkpointing_saves_is_other_on_the_checkpoint_call(
    profiled: Any, name: str, blocks: tuple[str, ...]
) -> None:
    # torch.utils.checkpoint saves the CPU RNG state of each checkpointed block's forward
    # (torch.get_rng_state(): made outside any op). It is "other", on transformers' line that
    # calls the checkpoint, called from the user's model() line, not a workspace of the op
    # that follows (the block's first layer norm, on another line).
    import torch

    from real_models import workloads

    modeling_layers = pytest.importorskip("transformers.modeling_layers")  # transformers >= 4.52
    done = profiled(name)
    run = done.run
    assert run.peak_bytes == done.replayed_peak_bytes > 0
    state = torch.get_rng_state()
    nbytes = state.numel() * state.element_size()
    assert nbytes == 5_056
    saved = [e for e in run.at_peak.entries if e.bytes == nbytes * e.count and not e.before_call]
    assert [e.category for e in saved] == ["other"] * len(blocks)
    assert {e.module for e in saved} == set(blocks)
    lines, first = inspect.getsourcelines(getattr(workloads, name))
    (call,) = [first + n for n, text in enumerate(lines) if text.strip().startswith("out = model(")]
    checkpoint_call = library_line(modeling_layers, "return self._gradient_checkpointing_func(")
    assert {(e.source, e.user_source.rpartition("/")[2], e.op, e.phase) for e in saved} == {
        (checkpoint_call, f"workloads.py:{call}", "", "forward")
    }
    assert run.at_peak.by_category["workspace"] == 0
    other = [e for e in run.at_peak.entries if e.category == "other" and not e.before_call]
    assert sum(e.bytes for e in other) == len(blocks) * nbytes


# Llama's attention projections, each called on one line of modeling_llama.py.
PROJECTIONS = {
    "q_proj": "query_states = self.q_proj(hidden_states)",
    "k_proj": "key_states = self.k_proj(hidden_states)",
    "v_proj": "value_states = self.v_proj(hidden_states)",
    "o_proj": "attn_output = self.o_proj(attn_output)",
}


def test_compiled_gradients_are_backward_work_on_their_parameters_lines(profiled: Any) -> None:
    # Under checkpointing, Inductor fuses a layer's recomputed forward into the backward kernels
    # that write gradients: the kernel's own line and phase (another projection's line,
    # recompute) are not the gradient's. Each weight's gradient made by the call is backward
    # work, in its projection, on the line that calls that projection.
    from transformers.models.llama import modeling_llama

    done = profiled("llama_checkpointed_step", "compile")
    assert_reconciled(done.report)
    model = done.args[0]
    sizes = {name: p.numel() * p.element_size() for name, p in model.named_parameters()}
    gradients = [e for e in done.run.at_peak.entries if e.category == "gradient" and not e.before_call]
    projections = [e for e in gradients if e.module.rpartition(".")[2] in PROJECTIONS]
    assert any(e.module.endswith("q_proj") for e in projections), sorted(e.module for e in gradients)
    assert {e.phase for e in gradients} == {"backward"}
    for entry in projections:
        statement = PROJECTIONS[entry.module.rpartition(".")[2]]
        assert entry.source == library_line(modeling_llama, statement), entry
        assert entry.bytes == entry.count * sizes[f"{entry.module}.weight"], entry
