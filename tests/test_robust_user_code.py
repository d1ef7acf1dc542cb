"""User code that does what a profiler does not expect: leaves through ``sys.exit``, raises a
``BaseException``, is a generator or a coroutine, changes the working folder. Each case gets
the documented exit code (3: the profiled code failed; 2: it cannot be measured as written;
130: Ctrl-C) and its one-line message, and a memory gate is never skipped without a word."""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

import memprof
from memprof.core.errors import UsageError, UserCodeError
from memprof.frontends.cli import app

MiB = 1024 * 1024

USER_CODE = """
import asyncio
import os
import sys

import torch

MiB = 1024 * 1024
calls = 0

def exits():
    keep = torch.empty(MiB, dtype=torch.uint8)
    sys.exit(0)

def exits_5():
    sys.exit(5)

def exits_none():
    sys.exit()

def exits_with_text():
    sys.exit("bye")

def exits_on_third_call():
    # eager: warm-up and profiled call (no timed calls: --time-budget 0); the compiled run's
    # first call is the third
    global calls
    calls += 1
    keep = torch.empty(MiB, dtype=torch.uint8)
    if calls >= 3:
        sys.exit(0)
    return keep

class Custom(BaseException):
    pass

def raises_base_exception():
    keep = torch.empty(MiB, dtype=torch.uint8)
    raise Custom("not an Exception")

def takes_x(x):
    return x + 1

def factory_exits():
    sys.exit(0)

def factory_interrupted():
    raise KeyboardInterrupt

def factory_returns_none():
    pass

def factory_returns_generator():
    return (torch.ones(4) for _ in range(2))

def gen():
    yield torch.empty(MiB, dtype=torch.uint8)

async def coro():
    return torch.empty(MiB, dtype=torch.uint8)

async def agen():
    yield torch.empty(MiB, dtype=torch.uint8)

def returns_generator():
    return gen()

def returns_coroutine():
    return coro()

def moves_away():
    # Into the same folder at every call (the timed calls and the profiled one).
    away = os.path.join(os.path.dirname(os.path.abspath(__file__)), "elsewhere")
    os.makedirs(away, exist_ok=True)
    os.chdir(away)
    return torch.empty(MiB, dtype=torch.uint8)

class Holder:
    @property
    def prop(self):
        sys.exit(0)

holder = Holder()
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def run(runner: CliRunner, *args: str):
    return runner.invoke(app, ["run", *args, "-q", "--device", "cpu"])


def error_line(result) -> str:
    """The last stderr line: memprof's one-line message (the user's traceback comes before)."""
    return result.stderr.rstrip("\n").splitlines()[-1]


# -------------------------------------------------------------------------------- sys.exit


@pytest.mark.parametrize(
    ("function", "called"),
    [
        ("exits", "sys.exit(0)"),
        ("exits_5", "sys.exit(5)"),
        ("exits_none", "sys.exit()"),
        ("exits_with_text", "sys.exit('bye')"),
    ],
)
def test_sys_exit_in_the_function_is_exit_3_and_the_gate_is_not_skipped(
    runner, make_module, tmp_path, function, called
):
    module = make_module(USER_CODE)
    out = tmp_path / "r.json"
    result = run(runner, f"{module}:{function}", "--budget", "1B", "--json", str(out))
    assert result.exit_code == 3
    peak = "1.0 MiB while aten::empty ran" if function == "exits" else "0 B"
    assert error_line(result) == (
        f"memprof: error: {function} called {called} (peak before the failure: {peak})"
    )
    assert "SystemExit" in result.stderr  # the user's traceback says where
    assert not out.exists()


def test_sys_exit_in_the_module_import_is_exit_3(runner, make_module):
    module = make_module("import sys\nsys.exit(0)\ndef f():\n    return 1\n")
    result = run(runner, f"{module}:f", "--budget", "1B")
    assert result.exit_code == 3
    assert error_line(result) == f"memprof: error: importing {module!r} failed: it called sys.exit(0)"
    assert "importlib" not in result.stderr  # the traceback shows the user's frames only


def test_sys_exit_in_a_file_target_is_exit_3(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "exits_at_import.py"
    path.write_text("import sys\nsys.exit(7)\ndef f():\n    return 1\n")
    result = run(runner, f"{path}:f")
    assert result.exit_code == 3
    assert error_line(result) == f"memprof: error: running {str(path)!r} failed: it called sys.exit(7)"


def test_sys_exit_in_the_inputs_factory_is_exit_3(runner, make_module):
    module = make_module(USER_CODE)
    result = run(runner, f"{module}:takes_x", "--inputs", f"{module}:factory_exits", "--budget", "1B")
    assert result.exit_code == 3
    assert error_line(result) == (
        f"memprof: error: inputs factory '{module}:factory_exits' failed: it called sys.exit(0)"
    )


def test_sys_exit_in_a_property_on_the_target_path_is_exit_3(runner, make_module):
    module = make_module(USER_CODE)
    result = run(runner, f"{module}:holder.prop")
    assert result.exit_code == 3
    assert error_line(result) == (
        f"memprof: error: getting 'prop' from '{module}:holder' failed: it called sys.exit(0)"
    )


@pytest.mark.slow  # torch.compile
@pytest.mark.filterwarnings("ignore:Dynamo does not know how to trace the builtin")
def test_sys_exit_in_the_compiled_call_keeps_the_eager_run_and_exits_3(runner, make_module, tmp_path):
    module = make_module(USER_CODE)
    out = tmp_path / "r.json"
    args = ["--compare-compile", "--time-budget", "0", "--budget", "1TB", "--json", str(out)]
    result = run(runner, f"{module}:exits_on_third_call", *args)
    assert result.exit_code == 3
    message = "exits_on_third_call called sys.exit(0) (first compiled call)"
    assert error_line(result) == f"memprof: error: {message}"
    runs = json.loads(out.read_text())["runs"]
    assert (runs["eager"]["status"], runs["eager"]["peak_bytes"]) == ("ok", MiB)
    assert (runs["compile"]["status"], runs["compile"]["error"]) == ("failed", message)
    assert "memprof gate" not in result.stdout  # no verdict on numbers that do not exist


def test_a_base_exception_from_user_code_is_exit_3(runner, make_module):
    module = make_module(USER_CODE)
    result = run(runner, f"{module}:raises_base_exception")
    assert result.exit_code == 3
    assert error_line(result) == (
        "memprof: error: raises_base_exception raised Custom: not an Exception "
        "(peak before the failure: 1.0 MiB while aten::empty ran)"
    )


def test_ctrl_c_in_the_inputs_factory_is_130_and_writes_nothing(runner, make_module, tmp_path):
    module = make_module(USER_CODE)
    out = tmp_path / "r.json"
    result = run(runner, f"{module}:takes_x", "--inputs", f"{module}:factory_interrupted", "--json", str(out))
    assert result.exit_code == 130
    assert result.stderr == "memprof: interrupted; no output was written\n"
    assert not out.exists()


def imported(make_module) -> ModuleType:
    name = make_module(USER_CODE)
    sys.path.insert(0, os.getcwd())  # make_module restores sys.path afterwards
    return importlib.import_module(name)


def test_python_api_raises_user_code_error_for_sys_exit(make_module):
    module = imported(make_module)
    with pytest.raises(UserCodeError, match=r"^exits called sys\.exit\(0\) \(peak before the failure"):
        memprof.profile(module.exits, device="cpu")


# ------------------------------------------------------------------- factories and results


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (
            "factory_returns_none",
            "inputs factory '{m}:factory_returns_none' returned None; return the arguments: "
            "a tuple/list (*args), a dict (**kwargs) or one argument",
        ),
        (
            "factory_returns_generator",
            "inputs factory '{m}:factory_returns_generator' returned a generator, which the first call "
            "would use up; return the arguments themselves: a tuple/list (*args), a dict (**kwargs) "
            "or one argument",
        ),
    ],
)
def test_inputs_that_cannot_be_used_are_exit_2(runner, make_module, factory, message):
    module = make_module(USER_CODE)
    result = run(runner, f"{module}:takes_x", "--inputs", f"{module}:{factory}")
    assert result.exit_code == 2
    assert result.stderr == f"memprof: error: {message.format(m=module)}\n"


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (
            "gen",
            "'{m}:gen' is a generator function: calling it runs none of its body; profile a function "
            "that consumes it, e.g. def run(): return list(gen(...))",
        ),
        (
            "coro",
            "'{m}:coro' is an async function: calling it runs none of its body; wrap it in asyncio.run, "
            "e.g. def run(): return asyncio.run(coro(...))",
        ),
        (
            "agen",
            "'{m}:agen' is an async generator function: calling it runs none of its body; profile a "
            "function that consumes it, e.g. asyncio.run of an async loop over agen(...)",
        ),
        (
            "returns_generator",
            "returns_generator returned a generator, so its body never ran and nothing was measured; "
            "profile a function that consumes it (list(...) for a generator, asyncio.run(...) for a "
            "coroutine)",
        ),
        (
            "returns_coroutine",
            "returns_coroutine returned a coroutine, so its body never ran and nothing was measured; "
            "profile a function that consumes it (list(...) for a generator, asyncio.run(...) for a "
            "coroutine)",
        ),
    ],
)
def test_generators_and_coroutines_are_exit_2_with_what_to_do(
    runner, make_module, tmp_path, function, message
):
    module = make_module(USER_CODE)
    out = tmp_path / "r.json"
    result = run(runner, f"{module}:{function}", "--budget", "1B", "--json", str(out))
    assert result.exit_code == 2
    assert result.stderr == f"memprof: error: {message.format(m=module)}\n"
    assert not out.exists()


def test_python_api_refuses_a_generator_function_even_through_a_partial(make_module):
    module = imported(make_module)
    with pytest.raises(UsageError, match="is a generator function: calling it runs none of its body"):
        memprof.profile(functools.partial(module.gen), device="cpu")


# --------------------------------------------------------------------------- working folder


def test_relative_outputs_go_to_the_starting_folder_when_the_function_moves(runner, make_module, tmp_path):
    module = make_module(USER_CODE)  # the working folder is tmp_path
    result = run(runner, f"{module}:moves_away", "--json", "r.json", "--csv", "ops.csv")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r.json").read_text())["runs"]["eager"]["peak_bytes"] == MiB
    assert (tmp_path / "ops.csv").is_file()
    assert sorted(p.name for p in Path(tmp_path, "elsewhere").rglob("*") if p.is_file()) == []
