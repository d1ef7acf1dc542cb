"""A compiled run measures the user's compiled code only, and says what torch.compile made of
it: Dynamo compiles no frame of memprof's (its bookkeeping after ``backward()`` is kept out),
so the measured call allocates what the same compiled call allocates without memprof; the
run's ``compile`` section holds the graphs, each graph break with its reason and line, and the
recompiles, as ``torch._dynamo.explain`` counts them. One cold compile of a small step
(about a minute on two cores), shared by every test here. The quick tier's renderers of the
section are covered by tests/test_report_compile_section.py."""

from __future__ import annotations

import importlib
import json
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.slow

CODE = """
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def logged(loss):
    torch._dynamo.graph_break()
    return loss


def step(x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss = logged(loss)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def step_inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(32, 64, generator=g), torch.randint(0, 10, (32,), generator=g)
"""


def _line(text: str) -> int:
    return next(n for n, line in enumerate(CODE.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import memprof

    folder = tmp_path_factory.mktemp("compiled")
    (folder / "compiled_step.py").write_text(CODE)
    sys.path.insert(0, str(folder))
    try:
        report = memprof.profile(
            __import__("compiled_step").step,
            *__import__("compiled_step").step_inputs(),
            mode="compile",
            device="cpu",
            time_budget=0,
        )
        module = sys.modules["compiled_step"]
        yield types.SimpleNamespace(report=report, run=report.runs["compile"], module=module)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("compiled_step", None)


def _memprof_code_objects() -> list[types.CodeType]:
    """Every function of memprof's loaded modules (methods and nested functions included)."""
    found: list[types.CodeType] = []
    seen: set[int] = set()
    todo: list[Any] = [m for n, m in list(sys.modules.items()) if n.startswith("memprof") and m is not None]
    while todo:
        thing = todo.pop()
        if id(thing) in seen:
            continue
        seen.add(id(thing))
        if isinstance(thing, types.ModuleType):
            todo += [v for v in vars(thing).values() if getattr(v, "__module__", "").startswith("memprof")]
        elif isinstance(thing, type):
            todo += list(vars(thing).values())
        elif isinstance(thing, types.CodeType):
            found.append(thing)
            todo += [c for c in thing.co_consts if isinstance(c, types.CodeType)]
        else:
            code = getattr(getattr(thing, "__func__", thing), "__code__", None)
            if isinstance(code, types.CodeType) and "memprof" in code.co_filename:
                todo.append(code)
    return found


def test_no_frame_of_memprof_is_compiled(compiled: Any) -> None:
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    codes = _memprof_code_objects()
    assert len(codes) > 500  # the walk reaches memprof's functions, the tracker's among them
    assert any(code.co_name == "_on_device" for code in codes)
    compiled_here = [f"{c.co_filename}:{c.co_firstlineno}" for c in codes if _debug_get_cache_entry_list(c)]
    assert compiled_here == []
    # What Dynamo compiled again is torch's and the user's (SGD's step once its momentum
    # exists), none of memprof's.
    recompiled = {(r.function, r.source) for r in compiled.run.compile.recompiles}
    assert not [r for r in recompiled if "memprof" in r[1]], recompiled


def test_the_measured_call_allocates_what_it_does_without_memprof(compiled: Any) -> None:
    import torch
    from torch.autograd.profiler import profile

    step = torch.compile(compiled.module.step)
    inputs = compiled.module.step_inputs()
    step(*inputs)  # as memprof's warm-up: the momentum buffers exist before the measured call
    with profile(use_cpu=True, profile_memory=True, use_kineto=True) as prof:
        step(*inputs)
    allocations = [e.nbytes() for e in prof.kineto_results.events() if e.name() == "[memory]"]
    assert compiled.run.allocated_bytes == sum(n for n in allocations if n > 0)


def test_graphs_and_breaks_are_dynamos_own(compiled: Any) -> None:
    import torch

    section = compiled.run.compile
    torch._dynamo.reset()
    explained = torch._dynamo.explain(compiled.module.step)(*compiled.module.step_inputs())
    assert section.graphs == explained.graph_count == 3
    by_line = {b.source.rpartition("/")[2]: b for b in section.breaks}
    # The user's own break, once (Dynamo meets it again compiling logged() on its own), and
    # backward(), each at its line with Dynamo's reason; then torch's own in the optimizer.
    own = by_line[f"compiled_step.py:{_line('graph_break()')}"]
    assert own.count == 1 and own.source_text == "torch._dynamo.graph_break()"
    assert own.reason.startswith("Call to `torch._dynamo.graph_break()`")
    backward = by_line[f"compiled_step.py:{_line('loss.backward()')}"]
    assert backward.reason.startswith("Unsupported Tensor.backward() call")
    assert list(by_line)[:2] != [] and all(b.reason and b.source for b in section.breaks)


def test_the_json_and_the_terminal_show_the_breaks(compiled: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from memprof.outputs import renderer
    from memprof.outputs.terminal import print_terminal

    written = json.loads(renderer("json")(compiled.report))["runs"]["compile"]["compile"]
    assert written["graphs"] == compiled.run.compile.graphs
    assert {b["source"] for b in written["breaks"]} == {b.source for b in compiled.run.compile.breaks}
    assert all(b["reason"] for b in written["breaks"])
    print_terminal(compiled.report)
    out = capsys.readouterr().out
    assert f"compile: torch.compile made {compiled.run.compile.summary()}" in out
    own = next(b for b in compiled.run.compile.breaks if b.source.endswith(f":{_line('graph_break()')}"))
    shown = " ".join(out.split())
    assert f"graph break at {own.source} torch._dynamo.graph_break(): {own.reason[:20]}" in shown


KERNELS = """
import torch

weight = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))


def forward(x):
    return (torch.relu(x @ weight) * 2.0).sum(dim=1)
"""


@pytest.mark.filterwarnings("ignore:dynamo_pgo force disabled")  # torch's, of the plain compile
def test_the_kernels_compiled_are_those_of_a_compile_without_memprof(
    make_module: Callable[[str], str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C++ Inductor generates for a compiled run is the C++ of the same compile without
    memprof: no profiler range is compiled into a kernel (memprof opens each kernel's range from
    the graph's Python wrapper), so a cold compile costs what the user's own does, and the
    kernels either run compiles serve the other from Inductor's cache."""
    import torch
    import torch._inductor.config as inductor_config
    from torch._inductor.codecache import CppCodeCache

    import memprof

    sources: list[str] = []
    original = CppCodeCache.load_async.__func__  # type: ignore[attr-defined]

    def noted(cls: Any, main_code: str, *args: Any, **kwargs: Any) -> Any:
        sources.append(main_code)
        return original(cls, main_code, *args, **kwargs)

    monkeypatch.setattr(CppCodeCache, "load_async", classmethod(noted))
    monkeypatch.syspath_prepend(str(tmp_path))  # where make_module writes
    module = importlib.import_module(make_module(KERNELS))
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(2))
    try:
        with inductor_config.patch(force_disable_caches=True):  # both compile every kernel
            torch._dynamo.reset()
            report = memprof.profile(module.forward, x, mode="compile", device="cpu", time_budget=0)
            under_memprof, sources[:] = sorted(sources), []
            torch._dynamo.reset()
            torch.compile(module.forward)(x)
    finally:
        torch._dynamo.reset()
    assert under_memprof and under_memprof == sorted(sources)
    assert not [s for s in under_memprof if "RecordFunction" in s]
    # The kernels were still seen in the profile, each by its own range, and matched to the
    # eager ops they replace.
    run = report.runs["compile"]
    assert any("relu" in name and "relu" in str(ops) for name, ops in (run.fused_kernels or {}).items())
