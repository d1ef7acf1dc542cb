"""Explaining the peak of compiled runs: buffers to kernels, kernels to the user's lines and
modules (Inductor's provenance and FX node metadata). Compiling costs 10-90 s here: one
compiled run per workload for the whole module."""

from __future__ import annotations

from typing import Any

import pytest
from explaining import profile_compiled

import memprof.examples.gpt as gpt
import memprof.examples.similarity as similarity
from memprof.analysis.attribution import Attribution
from memprof.model.explanation import EAGER_GRAPH

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


def _compiles(generated: list[int]) -> tuple[int, int, int]:
    """Graphs Dynamo captured, graphs Inductor generated code for (``generated``: counted by
    the test), graphs Inductor read back from its FX graph cache."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], len(generated), counters["inductor"]["fxgraph_cache_hit"]


def test_an_explained_compiled_run_compiles_nothing_for_its_explanation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The measured calls explain themselves with what the warm-up's compile kept; a later run
    # of the same step reads every graph back from Inductor's cache, with what explains it,
    # and reports what a run that generates every graph again (--fresh-compile) reports.
    import torch
    from torch._inductor.graph import GraphLowering

    import memprof
    from memprof.library.api import Variant
    from memprof.sources.live import run as live
    from memprof.sources.targets.target import Inputs

    generated: list[int] = []
    codegen = GraphLowering.codegen

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        generated.append(1)
        return codegen(self, *args, **kwargs)

    monkeypatch.setattr(GraphLowering, "codegen", counted)
    during: list[tuple[tuple[int, int, int], tuple[int, int, int]]] = []
    profile_calls = live._profile_calls

    def profiled(*args: Any, **kwargs: Any) -> Any:
        before = _compiles(generated)
        try:
            return profile_calls(*args, **kwargs)
        finally:
            during.append((before, _compiles(generated)))

    monkeypatch.setattr(live, "_profile_calls", profiled)
    inputs = Inputs(args=(torch.randn(64, 32), torch.randn(32, 16, requires_grad=True)), kwargs={})

    def run(**settings: Any) -> Any:
        variant = Variant(target=_linear_step, inputs=inputs)
        report = memprof.compare(variant, mode="compile", device="cpu", time_budget=0, **settings)
        return report.runs["compile"]

    first = run()
    after_first = _compiles(generated)
    second = run()
    after_second = _compiles(generated)
    fresh = run(fresh_compile=True)
    after_fresh = _compiles(generated)

    # Nothing is captured, generated or loaded while the calls are profiled and explained.
    assert len(during) == 3 and all(before == after for before, after in during)
    assert after_second[1] == after_first[1]  # the second run generated no code
    assert after_second[2] >= after_first[2] + 2  # its forward and backward graphs: from the cache
    assert after_fresh[1] >= after_second[1] + 2  # a fresh compile generates both again

    def numbers(run: Any) -> tuple[object, ...]:
        kernels = {(k.name, k.phase, k.replaces, k.allocated_bytes) for k in run.kernels}
        return run.peak_bytes, run.footprint_bytes, run.at_peak.entries, kernels

    assert numbers(second) == numbers(fresh) == numbers(first)
    assert second.at_peak.entries and any(k.phase == "backward" and k.replaces for k in second.kernels)
    assert not any("could not be matched" in note for note in second.notes)


def _linear_step_elsewhere(x, w):  # type: ignore[no-untyped-def]
    loss = (x @ w).relu().sum()
    loss.backward()
    return loss.detach()


def test_the_same_graph_traced_from_other_lines_is_explained_with_its_own_lines() -> None:
    # Inductor's cache keys leave out where a graph's nodes come from: memprof adds it, so the
    # graph of _linear_step, cached above, is not read back with _linear_step's lines.
    import inspect

    import torch

    import memprof

    lines = []
    for step in (_linear_step, _linear_step_elsewhere):
        x, w = torch.randn(64, 32), torch.randn(32, 16, requires_grad=True)
        run = memprof.profile(step, x, w, device="cpu", mode="compile", time_budget=0).runs["compile"]
        # What compiled code made (the seed gradient backward() makes eagerly, outside
        # both graphs, names no kernel's line).
        lines.append({e.source for e in run.at_peak.entries if not e.before_call and e.graph != EAGER_GRAPH})
    first, elsewhere = (inspect.getsourcelines(f)[1] + 1 for f in (_linear_step, _linear_step_elsewhere))
    assert lines == [
        {f"tests/test_explain_compiled.py:{first}"},
        {f"tests/test_explain_compiled.py:{elsewhere}"},
    ]
