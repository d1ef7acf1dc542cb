"""When the profiled code fails: the right exit code, the numbers reached, nothing half-written."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from memprof.frontends.cli import app

MiB = 1024 * 1024

FAILING = """
import threading

import torch

MiB = 1024 * 1024

def runs_out():
    keep = torch.empty(64 * MiB, dtype=torch.uint8)
    more = torch.empty(2**60, dtype=torch.uint8)  # no machine has this: the allocator refuses
    return keep, more

def runs_out_at_once():
    return torch.empty(2**60, dtype=torch.uint8)

def raises_memory_error():
    keep = torch.empty(16 * MiB, dtype=torch.uint8)
    raise MemoryError("simulated")

def interrupted():
    keep = torch.empty(MiB, dtype=torch.uint8)
    raise KeyboardInterrupt

def threaded():
    out = []
    load = lambda: out.append(torch.empty(8 * MiB, dtype=torch.uint8))  # noqa: E731
    worker = threading.Thread(target=load, name="loader")
    worker.start()
    worker.join()
    return out

def nothing():
    return 42

def simple():
    return torch.ones(1024, dtype=torch.uint8)
"""


@pytest.fixture
def runner():
    return CliRunner()


def invoke(runner, *args):
    return runner.invoke(app, ["run", *args, "-q", "--device", "cpu"])


def test_cpu_out_of_memory_reports_peak_reached_and_op(runner, make_module, tmp_path):
    module = make_module(FAILING)
    out = tmp_path / "r.json"
    result = invoke(runner, f"{module}:runs_out", "--json", str(out))
    assert result.exit_code == 3
    # The allocation that failed (2**60 B), what was live when it failed, and the most reached.
    assert (
        "runs_out ran out of memory trying to allocate 1048576.0 TiB with 64.0 MiB live above its "
        "start (the most it reached: 64.0 MiB, during aten::empty): RuntimeError:"
    ) in result.output
    assert not out.exists()


def test_out_of_memory_at_the_first_allocation_says_nothing_was_live(runner, make_module):
    module = make_module(FAILING)
    result = invoke(runner, f"{module}:runs_out_at_once")
    assert result.exit_code == 3
    assert (
        "runs_out_at_once ran out of memory trying to allocate 1048576.0 TiB; nothing it allocated was "
        "live yet (the first allocation failed)"
    ) in result.output
    assert "0 B" not in result.output.splitlines()[-1]


def test_cuda_out_of_memory_message_names_the_allocation() -> None:
    from memprof.sources.failures import out_of_memory_message

    first = (
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of "
        "79.1 GiB"
    )
    assert out_of_memory_message("step", first, 3 << 30, "aten::mm", 2 << 30) == (
        "step ran out of memory trying to allocate 20.0 GiB with 2.0 GiB live above its start (the most it "
        f"reached: 3.0 GiB, during aten::mm): {first}"
    )


def test_memory_error_is_exit_3_with_the_peak(runner, make_module):
    module = make_module(FAILING)
    result = invoke(runner, f"{module}:raises_memory_error")
    assert result.exit_code == 3
    assert (
        "raises_memory_error ran out of memory with 16.0 MiB live above its start (the most it reached: "
        "16.0 MiB, during aten::empty): MemoryError: simulated"
    ) in result.output


def test_ctrl_c_is_130_and_writes_nothing(runner, make_module, tmp_path):
    module = make_module(FAILING)
    outputs = [tmp_path / "r.json", tmp_path / "ops.csv"]
    result = invoke(runner, f"{module}:interrupted", "--json", str(outputs[0]), "--csv", str(outputs[1]))
    assert result.exit_code == 130
    assert "interrupted" in result.output
    assert not any(p.exists() for p in outputs)
    assert list(tmp_path.glob(".*.tmp")) == []


def test_threads_started_during_the_call_are_warned_about(runner, make_module, tmp_path):
    module = make_module(FAILING)
    out = tmp_path / "r.json"
    result = invoke(runner, f"{module}:threaded", "--json", str(out))
    assert result.exit_code == 0
    assert "thread(s) started during the call (loader)" in result.output
    run = json.loads(out.read_text())["runs"]["eager"]
    # The 8 MiB allocated on the loader thread are invisible to torch's profiler.
    assert run["peak_bytes"] == 0
    assert any("not counted" in note for note in run["notes"])


def test_a_function_that_allocates_nothing_reports_zeros_and_a_note(runner, make_module, tmp_path):
    module = make_module(FAILING)
    out = tmp_path / "r.json"
    result = invoke(runner, f"{module}:nothing", "--json", str(out))
    assert result.exit_code == 0
    run = json.loads(out.read_text())["runs"]["eager"]
    assert (run["peak_bytes"], run["allocated_bytes"], run["net_bytes"]) == (0, 0, 0)
    assert "no allocations were recorded" in result.output


def test_unknown_compile_backend_is_exit_3_with_hint(runner, make_module):
    module = make_module(FAILING)
    result = invoke(runner, f"{module}:simple", "--mode", "compile", "--backend", "no_such_backend")
    assert result.exit_code == 3
    assert "torch.compile" in result.output and "try --mode eager" in result.output
    assert "Traceback" not in result.output


def test_compile_failure_keeps_eager_results(runner, make_module, tmp_path):
    module = make_module(FAILING)
    out = tmp_path / "r.json"
    result = invoke(
        runner, f"{module}:simple", "--compare-compile", "--backend", "no_such_backend", "--json", str(out)
    )
    assert result.exit_code == 3
    data = json.loads(out.read_text())
    assert data["runs"]["eager"]["status"] == "ok"
    assert data["runs"]["eager"]["peak_bytes"] == 1024
    assert data["runs"]["compile"]["status"] == "failed"
    assert "try --mode eager" in data["runs"]["compile"]["error"]
    assert "diff" not in data
    assert re.search(r"^compile +failed$", result.output, re.M)
    assert "compile failed: torch.compile(simple) failed: InvalidBackend: Invalid backend:" in result.output


def test_failed_rendering_leaves_no_file(tmp_path, monkeypatch):
    from memprof.core import writing

    target = tmp_path / "report.json"
    target.write_text("previous")

    def explode(handle):
        handle.write("partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        writing.atomic_write(target, explode)
    assert target.read_text() == "previous"
    assert list(tmp_path.iterdir()) == [target]


@pytest.mark.slow
def test_missing_cxx_compiler_is_one_line_exit_3_and_eager_still_written(make_module, tmp_path):
    import os
    import subprocess
    import sys

    module = make_module(
        FAILING
        + "\ndef small(x):\n    return (x * 2).sin().sum()\n"
        + "\ndef small_inputs():\n    return (torch.randn(100),)\n"
    )
    env = {**os.environ, "CXX": "/nonexistent/g++", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = tmp_path / "r.json"
    done = subprocess.run(
        [sys.executable, "-m", "memprof", "run", f"{module}:small", "--compare-compile", "--fresh-compile"]
        + ["--device", "cpu", "-q", "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 3
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("memprof: error: torch.compile of small failed: InductorError: InvalidCxxCompiler")
    assert last.endswith("try --mode eager")
    assert "Traceback" not in done.stderr
    data = json.loads(out.read_text())
    assert data["runs"]["eager"]["status"] == "ok" and data["runs"]["compile"]["status"] == "failed"


def test_atomic_write_gives_ordinary_permissions(tmp_path):
    from memprof.core import writing

    path = writing.atomic_write_text(tmp_path / "out.csv", "a,b\n")
    assert path.read_text() == "a,b\n"
    assert path.stat().st_mode & 0o044 == 0o044  # readable by group and others, as with open()
