"""What a user meets on the way: names as they are called, a short repr, hints for a target
typed with a space, memory-mapped loads labelled, a failed compile that names the user's line,
and what to expect from a first compile."""

from __future__ import annotations

import re
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import memprof
from memprof.frontends.cli import app, colon_hint
from memprof.sources.failures import traced_user_error

ROOT = Path(__file__).resolve().parents[1]


def test_a_bound_builtin_is_named_as_it_is_called() -> None:
    from memprof.sources.targets.target import Target

    assert Target.of(torch.ones).spec == "torch.ones"
    report = memprof.profile(torch.ones, 1024, 1024, time_budget=0)
    assert report.target == "torch.ones" and list(report.runs) == ["eager"]
    assert report.runs["eager"].peak_bytes == 4 * 1024 * 1024
    # Functions keep module:qualname.
    assert Target.of(traced_user_error).spec == "memprof.sources.failures:traced_user_error"


def test_repr_is_a_short_summary(compare_report) -> None:
    assert repr(compare_report) == (
        "<memprof.Report tests.workload:sub_abs on cpu: eager: peak 320.0 MiB during aten::abs, "
        "wall 12.5 ms; compile: peak 1.0 MiB during cpp_fused_abs_sub_0, wall 12.5 ms; "
        "torch.compile lowers peak memory by 319.0 MiB (-99.7%): 320.0 MiB -> 1.0 MiB>"
    )
    assert repr(compare_report.runs["eager"]) == (
        "<memprof.RunResult eager: peak 320.0 MiB during aten::abs, wall 12.5 ms; 5 ops>"
    )


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["run", "x.py", "fn"], "did you mean x.py:fn?"),
        (["run", "pkg.mod", "fn", "--repeat", "2"], "did you mean pkg.mod:fn?"),
        (["compare", "a.py:f", "b.py", "g"], None),  # compare takes many targets: not its error
        (["run", "x.py:fn", "extra"], None),
    ],
)
def test_a_space_instead_of_the_colon_is_pointed_out(args: list[str], hint: str | None) -> None:
    message = f"Got unexpected extra argument ({args[2]})"
    found = colon_hint(message, args)
    assert (found is None) if hint is None else (found is not None and found.startswith(hint))


def test_the_command_line_suggests_the_colon(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memprof", "run", "x.py", "fn"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "memprof: error: Got unexpected extra argument(s) (fn); did you mean x.py:fn? "
        "A target is FILE.py:FUNCTION or module:function"
    )


def test_a_memory_mapped_load_is_labelled() -> None:
    from memprof.examples.checkpoint_load import checkpoint_path
    from memprof.sources.live.mapped import MAPPED_RANGE

    report = memprof.compare(
        "memprof.examples.checkpoint_load:full_load",
        "memprof.examples.checkpoint_load:mmap_load",
        device="cpu",
        time_budget=0,
    )
    size = checkpoint_path().stat().st_size
    mapped = report.runs["mmap_load"]
    (row,) = [op for op in mapped.op_stats if op.name == MAPPED_RANGE]
    # The profiler counts the whole file as allocated while it is mapped.
    assert row.allocated_bytes == row.peak_bytes == size and mapped.peak_bytes >= size
    (note,) = [n for n in mapped.notes if "memory-mapped" in n]
    assert note.startswith("64.0 MiB of the allocations are memory-mapped files (checkpoint.pt;")
    assert "far less may be resident" in note
    full = report.runs["full_load"]
    assert not any(op.name == MAPPED_RANGE for op in full.op_stats)
    assert not any("memory-mapped" in n for n in full.notes)
    # torch's functions are as they were after the run.
    assert (
        "from_file" not in vars(torch.UntypedStorage)
        and type(torch.from_file).__name__ == "builtin_function_or_method"
    )


# --- a failed compile -------------------------------------------------------------------------


def _fake_torch_error(name: str, module: str = "torch._dynamo.exc") -> type[Exception]:
    return type(name, (RuntimeError,), {"__module__": module})


def test_the_users_error_under_torchs_wrapper_is_found() -> None:
    def user_code() -> None:
        raise RuntimeError("a and b must have same reduction dim, but got [3, 4] X [5, 6].")

    TorchRuntimeError = _fake_torch_error("TorchRuntimeError")
    try:
        try:
            user_code()
        except RuntimeError as inner:
            wrapped = TorchRuntimeError("RuntimeError when making fake tensor call")
            wrapped.real_stack = traceback.extract_tb(inner.__traceback__)[-1:]  # type: ignore[attr-defined]
            raise wrapped from inner
    except RuntimeError as error:
        traced = traced_user_error(error)
    assert traced is not None
    assert (
        traced.first_line() == "RuntimeError: a and b must have same reduction dim, but got [3, 4] X [5, 6]."
    )
    assert re.fullmatch(r"test_user_facing\.py:\d+ \(raise RuntimeError\(.*\)\)", traced.where())
    assert traced.traceback_text().splitlines()[-1] == traced.first_line()
    # The compiler's own failure is not the user's error.
    backend = _fake_torch_error("BackendCompilerFailed", "torch._dynamo.exc")
    assert traced_user_error(backend("inductor crashed")) is None
    assert traced_user_error(ValueError("plain")) is None


SHAPE_ERROR = """
import torch

def f(a, b):
    c = a + 1
    return c @ b

def f_inputs():
    return torch.ones(3, 4), torch.ones(5, 6)
"""


@pytest.mark.slow  # a real torch.compile
def test_a_shape_error_under_compile_names_the_users_line(make_module) -> None:
    module = make_module(SHAPE_ERROR)
    result = CliRunner().invoke(app, ["run", f"{module}:f", "--mode", "compile"])
    assert result.exit_code == 3
    message = result.stderr.strip().splitlines()
    assert (
        "memprof: error: f raised RuntimeError: a and b must have same reduction dim, but got [3, 4] X "
        f"[5, 6]. at {module}.py:6 (return c @ b) while torch.compile traced it; run with --mode eager "
        "to see the error plainly"
    ) in message
    # The user's frame and error, as Python shows them; none of torch's frames or log lines.
    assert "Traceback (most recent call last), as torch.compile traced the code:" in message
    assert f'  File "{Path.cwd() / (module + ".py")}", line 6, in f' in message
    assert "fake_tensor" not in result.stderr and "torch/_" not in result.stderr
    assert re.search(r"memprof: \d+ torch warnings? hidden \(.*\); -v shows them", result.stderr)


def test_a_long_first_compile_says_what_to_expect(monkeypatch) -> None:
    from memprof.sources.live import profiling
    from memprof.sources.live import run as live

    said: list[str] = []
    monkeypatch.setattr(
        profiling.threading.Event, "wait", lambda self, timeout=None: self.is_set() or len(said) > 3
    )
    with profiling.ticker(said.append, "compiling f", live.FIRST_COMPILE_HINT):
        while len(said) < 3:
            pass
    assert said[0] == "compiling f ..."
    assert re.fullmatch(
        r"compiling f \.\.\. \d+ s \(a first compile can take minutes; later runs reuse Inductor's cache\)",
        said[1],
    )
    assert re.fullmatch(r"compiling f \.\.\. \d+ s", said[2])


def test_a_compile_s_ticks_say_what_it_has_done_so_far(monkeypatch) -> None:
    from memprof.sources.live import dynamo_watch, profiling
    from memprof.sources.live import run as live

    said: list[str] = []
    monkeypatch.setattr(
        profiling.threading.Event, "wait", lambda self, timeout=None: self.is_set() or len(said) > 3
    )
    # Dynamo's graphs, Inductor's generated graphs and its cache hits since the compile began
    counts = {"now": (1, 1, 0)}
    monkeypatch.setattr(dynamo_watch, "_counts", lambda: counts["now"])
    watch = dynamo_watch.DynamoWatch()
    with profiling.ticker(said.append, "compiling f", live.FIRST_COMPILE_HINT, watch.progress):
        while len(said) < 2:
            pass
    counts["now"] = (2, 1, 4)
    done = watch.first_call_done()
    assert re.fullmatch(
        r"compiling f \.\.\. \d+ s, 1 graph so far; Inductor: 1 generated, 0 from its cache "
        r"\(a first compile can take minutes; later runs reuse Inductor's cache\)",
        said[1],
    )
    assert done == " (2 graphs; Inductor: 1 generated, 4 from its cache)"


def test_the_python_api_says_so_when_a_step_takes_long() -> None:
    """memprof.profile is never silent through a long compile: a step past 5 s says so on
    stderr, then every 30 s; quicker steps and other status lines print nothing."""
    import io

    from memprof.library.api import slow_steps

    stream = io.StringIO()
    status = slow_steps(stream)
    for message in (
        "profiling f (eager, 1 call)",
        "compiling f ...",
        "compiling f ... 5 s (a first compile can take minutes; later runs reuse Inductor's cache)",
        "compiling f ... 10 s",
        "compiling f ... 30 s, 2 graphs so far",
        "compiling f ... 35 s, 3 graphs so far; Inductor: 4 generated, 0 from its cache",
        "explaining f ... 5 s",
    ):
        status(message)
    assert stream.getvalue().splitlines() == [
        "memprof: compiling f ... 5 s (a first compile can take minutes; later runs reuse Inductor's cache)",
        "memprof: compiling f ... 35 s, 3 graphs so far; Inductor: 4 generated, 0 from its cache",
        "memprof: explaining f ... 5 s",
    ]
