"""Explaining the peak of compiled runs: buffers to kernels, kernels to the user's lines and
modules (Inductor's provenance and FX node metadata). Compiling costs 10-90 s here: one
compiled run per workload for the whole module."""

from __future__ import annotations

import pytest
from explaining import profile_compiled

import memprof.examples.gpt as gpt
import memprof.examples.similarity as similarity
from memprof.analysis.attribution import Attribution

pytestmark = pytest.mark.slow

MiB = 1024 * 1024


def line(module: object, statement: str) -> str:
    from test_explain import line_of

    return line_of(module, statement)


@pytest.fixture(scope="module")
def gpt_compiled() -> Attribution:
    return profile_compiled(gpt.train_step, gpt.train_step_inputs(), module=gpt)[1]


@pytest.fixture(scope="module")
def similarity_compiled() -> Attribution:
    return profile_compiled(similarity.similarity, similarity.similarity_inputs(), module=similarity)[1]


def test_compiled_similarity_allocates_only_the_fused_kernels_result(
    similarity_compiled: Attribution,
) -> None:
    explained = similarity_compiled
    assert explained.peak_bytes == 2_000_000  # only the (500, 500) int64 result
    (entry,) = [e for e in explained.at_peak.entries if not e.before_call]
    assert (entry.bytes, entry.category, entry.shape, entry.dtype) == (
        2_000_000,
        "temporary",
        "(500, 500)",
        "int64",
    )
    assert entry.op.startswith("cpp_fused_") and entry.source == line(
        similarity, "return xy.abs().lt(1).sum("
    )
    (kernel,) = [k for k in explained.kernels if k.name == entry.op]
    assert (kernel.allocated_bytes, kernel.at_peak_bytes) == (2_000_000, 2_000_000)
    assert {"aten::sub", "aten::abs", "aten::lt", "aten::sum"} <= set(kernel.replaces)
    assert explained.fused_kernels[entry.op] == kernel.replaces


def test_compiled_gpt_peak_is_traced_to_the_users_lines(gpt_compiled: Attribution) -> None:
    explained = gpt_compiled
    during = [e for e in explained.at_peak.entries if not e.before_call]
    made = sum(e.bytes for e in during) + sum(
        u.bytes for u in explained.at_peak.unattributed if not u.before_call
    )
    in_gpt = sum(e.bytes for e in during if e.source.startswith("memprof/examples/gpt.py:"))
    assert made == explained.peak_bytes + explained.freed_before_peak_bytes
    assert in_gpt >= 0.8 * made
    config = gpt.GPTConfig()
    logits = config.batch * config.context * config.vocab_size * 4
    top = during[0]
    assert (top.bytes, top.module, top.source, top.shape) == (
        logits,
        "lm_head",
        line(gpt, "logits = self.lm_head(x)"),
        f"({config.batch * config.context}, {config.vocab_size})",
    )


def test_compiled_gpt_state_and_modules(gpt_compiled: Attribution) -> None:
    from test_explain import GPT_TENSORS, gpt_parameter_bytes

    parameters = gpt_parameter_bytes(gpt.GPTConfig())
    by_category = gpt_compiled.at_peak.by_category
    assert by_category["parameter"] == parameters
    assert by_category["optimizer_state"] == 2 * parameters + 4 * GPT_TENSORS
    assert gpt_compiled.freed_before_peak_bytes == parameters  # zero_grad, as in eager
    assert by_category["activation"] > 0  # forward buffers freed by backward kernels
    modules = {(m.module, m.phase) for m in gpt_compiled.modules}
    assert {("lm_head", "forward"), ("blocks.1.attn", "forward"), ("blocks.0.mlp.fc", "backward")} <= modules
    fused = [k for k in gpt_compiled.kernels if k.name.startswith("cpp_fused_")]
    assert fused and all(k.replaces for k in fused)
    assert all(k.allocated_bytes > 0 for k in gpt_compiled.kernels)


def _linear_step(x, w):  # type: ignore[no-untyped-def]
    loss = (x @ w).relu().sum()
    loss.backward()
    return loss.detach()


def test_a_second_compile_of_a_training_step_in_one_process_is_explained_like_the_first() -> None:
    # Inductor leaves its backward kernel -> node table filled after a compile; a second compile
    # of the same step (a notebook, a test session) must not read the first one's kernels.
    import torch

    import memprof

    def explained() -> tuple[dict[tuple[str, str], tuple[str, ...]], tuple[str, ...]]:
        x = torch.randn(64, 32)
        w = torch.randn(32, 16, requires_grad=True)
        run = memprof.profile(_linear_step, x, w, device="cpu", mode="compile").runs["compile"]
        return {(k.name, k.phase): k.replaces for k in run.kernels}, run.notes

    first, _ = explained()
    second, notes = explained()
    assert any(phase == "backward" and replaces for (_, phase), replaces in first.items())
    assert second == first
    assert not any("could not be matched" in note for note in notes)
