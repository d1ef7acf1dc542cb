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
