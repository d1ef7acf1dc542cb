"""Each at-peak entry of a compiled run says which graph allocated it: a step broken in two by a
call Dynamo does not trace (a ``torch.compiler.disable``d function, run eagerly between the
graphs) has entries of its first graph (``0/0 step (graph_step.py:14)``), of the graph Dynamo
resumes after the break (``1/0 torch_dynamo_resume_in_step_at_16 (graph_step.py:16)``) and of
the eager code between them, on that code's line (``return h * 3.0``); each entry names the
graph whose ``Torch-Compiled Region`` range holds its allocation in a profile of the same
compiled step read here with torch's profiler alone. One small compile (seconds with
Inductor's cache warm)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

pytestmark = pytest.mark.slow

CODE = """
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
head = torch.nn.Linear(64, 512)


@torch.compiler.disable
def eager_scale(h):
    return h * 3.0


def step(x):
    h = model(x)
    g = eager_scale(h)
    y = head(h + g)
    return y.sum()


def step_inputs():
    return (torch.randn(128, 64, generator=torch.Generator().manual_seed(1)),)
"""
BREAK_LINE = next(n for n, line in enumerate(CODE.splitlines(), 1) if "g = eager_scale(h)" in line)
SCALE_LINE = next(n for n, line in enumerate(CODE.splitlines(), 1) if "return h * 3.0" in line)
FLOAT32 = 4


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import memprof

    folder = tmp_path_factory.mktemp("graphs")
    (folder / "graph_step.py").write_text(CODE)
    sys.path.insert(0, str(folder))
    try:
        module = __import__("graph_step")
        report = memprof.profile(
            module.step, *module.step_inputs(), mode="compile", device="cpu", time_budget=0.05
        )
        yield types.SimpleNamespace(report=report, run=report.runs["compile"], module=module)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("graph_step", None)


def _profiled_regions(module: Any) -> tuple[dict[int, str], list[int]]:
    """The same compiled step profiled by torch alone: for each size allocated inside a compiled
    graph's call, the id of the innermost ``Torch-Compiled Region`` around it; and the sizes
    allocated inside a region but outside every graph's call (eager code at the break)."""
    import torch
    from torch.autograd.profiler import profile

    step = torch.compile(module.step)
    inputs = module.step_inputs()
    step(*inputs)
    with profile(use_cpu=True, profile_memory=True, use_kineto=True) as prof:
        step(*inputs)
    events = list(prof.kineto_results.events())

    def spans(prefix: str) -> list[tuple[int, int, str]]:
        return [
            (e.start_ns(), e.start_ns() + e.duration_ns(), e.name().removeprefix(prefix))
            for e in events
            if e.name().startswith(prefix)
        ]

    regions, graphs = spans("Torch-Compiled Region: "), spans("## Call CompiledFxGraph")
    in_graph: dict[int, str] = {}
    eager: list[int] = []
    for event in (e for e in events if e.name() == "[memory]" and e.nbytes() > 0):
        t = event.start_ns()
        around = [r for r in regions if r[0] <= t <= r[1]]
        if not around:
            continue
        if any(g[0] <= t <= g[1] for g in graphs):
            in_graph[event.nbytes()] = max(around)[2]  # the latest to start: the innermost
        else:
            eager.append(event.nbytes())
    return in_graph, eager


def test_entries_name_the_graph_whose_region_allocated_them(compiled: Any) -> None:
    assert compiled.run.compile.graphs == 2
    in_graph, eager = _profiled_regions(compiled.module)
    by_shape = {e.shape: e for e in compiled.run.at_peak.entries if e.category == "temporary" and e.shape}
    first = by_shape["(128, 256)"]  # model.0's output, before the break
    after = by_shape["(128, 512)"]  # head's output, after it
    assert (first.bytes, after.bytes) == (128 * 256 * FLOAT32, 128 * 512 * FLOAT32)
    start = next(n for n, line in enumerate(CODE.splitlines(), 1) if line.startswith("def step"))
    assert first.graph == f"{in_graph[first.bytes]} step (graph_step.py:{start})"
    resumed = f"torch_dynamo_resume_in_step_at_{BREAK_LINE} (graph_step.py:{BREAK_LINE})"
    assert after.graph == f"{in_graph[after.bytes]} {resumed}"
    assert in_graph[after.bytes] != in_graph[first.bytes]
    # h * 3.0, run eagerly at the break (outside both graphs' calls in the profile): on its own
    # line, not on a kernel's.
    made_eagerly = [e for e in compiled.run.at_peak.entries if e.graph == "eager, between graphs"]
    assert 128 * 64 * FLOAT32 in eager
    assert len(made_eagerly) == 1 and 128 * 64 * FLOAT32 <= made_eagerly[0].bytes <= sum(eager)
    entry = made_eagerly[0]
    assert (entry.op, entry.phase, entry.user_source) == ("", "forward", "")
    assert entry.source.endswith(f"graph_step.py:{SCALE_LINE}") and entry.source_text == "return h * 3.0"
    # State made before the call names no graph.
    assert {e.graph for e in compiled.run.at_peak.entries if e.before_call} == {""}


def test_eager_code_has_no_line_when_the_profiled_calls_are_the_timing(compiled: Any) -> None:
    """With no time budget the profiled calls are the wall times reported: the statements are
    not noted then (it would slow them), and what eager code made at the break has no line."""
    import memprof

    report = memprof.profile(
        compiled.module.step, *compiled.module.step_inputs(), mode="compile", device="cpu", time_budget=0
    )
    made_eagerly = [e for e in report.runs["compile"].at_peak.entries if e.graph == "eager, between graphs"]
    assert len(made_eagerly) == 1
    assert (made_eagerly[0].source, made_eagerly[0].op) == ("", "")
