"""`memprof run` as a user calls it: targets, inputs, flags, exit codes, files."""

from __future__ import annotations

import json
import statistics

import pytest
from reconcile import assert_json_keeps
from typer.testing import CliRunner

from memprof.frontends.cli import app

MiB = 1024 * 1024

WORKLOAD = """
import torch

MiB = 1024 * 1024

def hold(size_mib):
    a = torch.empty(size_mib * MiB, dtype=torch.uint8)
    b = torch.empty(MiB, dtype=torch.uint8)
    del a
    return b

def hold_inputs():
    return (8,)

def no_args():
    return torch.zeros(256, dtype=torch.uint8)

def make_kwargs():
    return {"size_mib": 4}

def make_single():
    return 2

def make_for(device):
    assert device == "cpu"
    return [3]

class Model:
    def forward(self, size_mib):
        return torch.empty(size_mib * MiB, dtype=torch.uint8)

model = Model()
NUMBER = 3

def needs_args(x, y):
    return x + y

def broken(size_mib):
    raise ValueError("user bug")
"""


@pytest.fixture
def runner():
    return CliRunner()


def run_cli(runner, *args):
    return runner.invoke(app, ["run", *args, "-q", "--device", "cpu"])


def test_module_target_from_the_working_directory_without_pythonpath(runner, make_module, tmp_path):
    module = make_module(WORKLOAD)
    result = run_cli(runner, f"{module}:hold", "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert_json_keeps(data)
    run = data["runs"]["eager"]
    # <func>_inputs gives (8,): 8 MiB + 1 MiB live at once.
    assert run["peak_bytes"] == 9 * MiB
    assert run["net_bytes"] == 1 * MiB
    assert "eager" in result.output and "9.0 MiB" in result.output


def test_json_contract_keys(runner, make_module, tmp_path):
    module = make_module(WORKLOAD)
    path = tmp_path / "r.json"
    assert run_cli(runner, f"{module}:hold", "--json", str(path)).exit_code == 0
    data = json.loads(path.read_text())
    assert_json_keeps(data)
    assert data["schema_version"] == 2
    assert data["target"] == f"{module}:hold"
    assert data["device"] == "cpu"
    assert {"torch", "python", "platform", "device_name"} <= set(data["environment"])
    run = data["runs"]["eager"]
    assert {"peak_bytes", "allocated_bytes", "net_bytes", "inputs_bytes", "wall_ms", "peak_op", "ops"} <= set(
        run
    )
    assert "compile_seconds" not in run
    for op in run["ops"]:
        assert {"name", "calls", "self_bytes", "total_bytes", "allocated_bytes", "peak_bytes"} <= set(op)
    assert "diff" not in data


def test_file_target_and_explicit_inputs_forms(runner, make_module, tmp_path):
    module = make_module(WORKLOAD)
    cases = {
        "make_kwargs": 4 * MiB + MiB,  # dict -> **kwargs
        "make_single": 2 * MiB + MiB,  # anything else -> one argument
        "make_for": 3 * MiB + MiB,  # accepts device -> gets it
    }
    for factory, peak in cases.items():
        out = tmp_path / f"{factory}.json"
        result = run_cli(
            runner, f"{module}.py:hold", "--inputs", f"{module}.py:{factory}", "--json", str(out)
        )
        assert result.exit_code == 0, result.output
        assert json.loads(out.read_text())["runs"]["eager"]["peak_bytes"] == peak


def test_object_attribute_target(runner, make_module, tmp_path):
    module = make_module(WORKLOAD)
    out = tmp_path / "r.json"
    result = run_cli(
        runner, f"{module}:model.forward", "--inputs", f"{module}:make_kwargs", "--json", str(out)
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["runs"]["eager"]["peak_bytes"] == 4 * MiB


def test_function_without_parameters_needs_no_inputs(runner, make_module):
    module = make_module(WORKLOAD)
    result = run_cli(runner, f"{module}:no_args")
    assert result.exit_code == 0, result.output
    assert "256 B" in result.output


def test_missing_inputs_names_both_ways(runner, make_module):
    module = make_module(WORKLOAD)
    result = run_cli(runner, f"{module}:needs_args")
    assert result.exit_code == 2
    # The module's factories are never suggested when their values surely do not fill (x, y):
    # make_for returns one value ([3]), make_single one (2), make_kwargs names size_mib.
    assert (
        f"give a function that returns them with --inputs {module}:FACTORY, or define "
        f"needs_args_inputs() in {module}"
    ) in result.output
    assert "Traceback" not in result.output


def test_missing_inputs_without_any_factory_says_how_to_write_one(runner, make_module):
    module = make_module(
        """
        import torch
        from torch import ones  # imported, not the module's own: never suggested

        def shape_of(x):  # a function, but its name does not read like a factory
            return x.shape

        def step(model, batch):
            return model(batch)

        def make_batch():
            return torch.nn.Identity(), torch.ones(2)

        def get_batch():
            return torch.nn.Identity(), torch.ones(2)
        """
    )
    result = run_cli(runner, f"{module}:step")
    assert result.exit_code == 2
    assert f"give them with --inputs {module}:make_batch or --inputs {module}:get_batch," in result.output
    plain = make_module("def step(model, batch):\n    return model(batch)\n")
    result = run_cli(runner, f"{plain}:step")
    assert result.exit_code == 2
    assert (
        f"'{plain}:step' needs arguments (model, batch): give a function that returns them with "
        f"--inputs {plain}:FACTORY, or define step_inputs() in {plain}"
    ) in result.output


def test_module_not_found_is_a_usage_error(runner, make_module):
    make_module(WORKLOAD)
    result = run_cli(runner, "no_such_module_xyz:f")
    assert result.exit_code == 2
    assert "module 'no_such_module_xyz' not found" in result.output
    assert "working directory" in result.output and "PYTHONPATH" in result.output


def test_attribute_not_found_lists_close_names(runner, make_module):
    module = make_module(WORKLOAD)
    result = run_cli(runner, f"{module}:hol")
    assert result.exit_code == 2
    assert "has no attribute 'hol'" in result.output and "'hold'" in result.output


def test_not_callable(runner, make_module):
    module = make_module(WORKLOAD)
    result = run_cli(runner, f"{module}:NUMBER")
    assert result.exit_code == 2
    assert "not a function" in result.output


def test_bad_target_form(runner):
    result = run_cli(runner, "just_a_name")
    assert result.exit_code == 2
    assert "is not of the form" in result.output


def test_user_module_failing_to_import_is_exit_3_with_its_traceback(runner, make_module):
    module = make_module("import torch\nraise RuntimeError('boom at import')\n\ndef f():\n    pass\n")
    result = run_cli(runner, f"{module}:f")
    assert result.exit_code == 3
    assert "boom at import" in result.output
    assert f"{module}.py" in result.output
    assert "memprof/target.py" not in result.output


def test_missing_dependency_of_user_module_is_exit_3(runner, make_module):
    module = make_module("import not_installed_dependency_abc\n\ndef f():\n    pass\n")
    result = run_cli(runner, f"{module}:f")
    assert result.exit_code == 3
    assert "not_installed_dependency_abc" in result.output and "not installed" in result.output


def test_function_raising_is_exit_3_with_traceback_and_no_output_file(runner, make_module, tmp_path):
    module = make_module(WORKLOAD)
    out = tmp_path / "r.json"
    result = run_cli(runner, f"{module}:broken", "--inputs", f"{module}:hold_inputs", "--json", str(out))
    assert result.exit_code == 3
    assert "ValueError: user bug" in result.output
    assert 'raise ValueError("user bug")' in result.output
    assert not out.exists()


def test_inputs_factory_failing_is_exit_3(runner, make_module):
    module = make_module(WORKLOAD + "\ndef bad_inputs():\n    return 1 / 0\n")
    result = run_cli(runner, f"{module}:hold", "--inputs", f"{module}:bad_inputs")
    assert result.exit_code == 3
    assert "inputs factory" in result.output and "ZeroDivisionError" in result.output


def test_output_folder_missing_fails_before_profiling(runner, make_module, tmp_path):
    module = make_module(WORKLOAD)
    result = run_cli(runner, f"{module}:hold", "--csv", str(tmp_path / "nope" / "ops.csv"))
    assert result.exit_code == 2
    assert "does not exist" in result.output
    assert "peak" not in result.output  # nothing was profiled


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--repeat", "0"], "--repeat"),
        (["--warmup", "-1"], "--warmup"),
        (["--mode", "fast"], "--mode"),
        (["--sort", "size"], "--sort"),
        (["--device", "tpu"], "tpu"),
        (["--device", "cuda"], "CUDA is not available"),
    ],
)
def test_bad_option_values_are_exit_2(runner, make_module, args, fragment):
    module = make_module(WORKLOAD)
    result = runner.invoke(app, ["run", f"{module}:hold", "-q", *args])
    assert result.exit_code == 2
    assert fragment in result.output


def test_csv_has_one_row_per_op_and_run_with_exact_bytes(runner, make_module, tmp_path):
    module = make_module(WORKLOAD)
    out = tmp_path / "ops.csv"
    assert run_cli(runner, f"{module}:hold", "--csv", str(out), "--repeat", "2").exit_code == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "run,name,calls,self_bytes,total_bytes,allocated_bytes,peak_bytes,self_us,total_us"
    empty = next(line for line in lines if ",aten::empty," in line).split(",")
    assert empty[0] == "eager"
    assert empty[2:7] == [
        "4",
        str(18 * MiB),
        str(18 * MiB),
        str(18 * MiB),
        str(8 * MiB),
    ]  # one call of empty allocates at most 8 MiB


def test_sort_and_top(runner, make_module):
    module = make_module(WORKLOAD)
    result = run_cli(runner, f"{module}:hold", "--top", "1", "--sort", "allocated")
    assert result.exit_code == 0
    assert "Top 1 ops of eager by allocated bytes" in result.output
    body = result.output.split("Top 1 ops")[1]
    assert "aten::empty" in body


def test_table_saves_torch_table(runner, make_module, tmp_path):
    module = make_module(WORKLOAD)
    out = tmp_path / "t.txt"
    assert run_cli(runner, f"{module}:hold", "--table", str(out)).exit_code == 0
    text = out.read_text()
    assert text.startswith(f"memprof run eager: {module}:hold\n")
    assert "Self CPU Mem" in text and "aten::empty" in text


# Slow tier (a fresh interpreter that imports torch): the quick tier runs the same app in process.
@pytest.mark.slow
def test_python_dash_m(make_module, tmp_path):
    import os
    import subprocess
    import sys

    module = make_module(WORKLOAD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-m", "memprof", "run", f"{module}:hold", "-q", "--device", "cpu"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "9.0 MiB" in done.stdout
    assert "USDT" not in done.stderr  # torch's profiler start/stop lines are kept off the terminal


def test_help_lists_commands_and_exit_codes(runner):
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "run" in result.output and "Exit codes" in result.output
    assert runner.invoke(app, ["run", "--help"]).exit_code == 0


COUNTED = """
import torch

CALLS = []

def counted():
    CALLS.append(1)
    return torch.empty(1024, dtype=torch.uint8)
"""


def test_compile_options_reach_torch_compile_and_calls_are_counted(
    runner, make_module, tmp_path, monkeypatch
):
    import importlib

    import torch

    seen = {}

    def fake_compile(func, **kwargs):
        # Stands in for torch.compile (tested for real in test_similarity.py): records its options.
        seen.update(kwargs)
        return func

    monkeypatch.setattr(torch, "compile", fake_compile)
    module = make_module(COUNTED)
    out = tmp_path / "r.json"
    result = run_cli(
        runner,
        f"{module}:counted",
        "--mode", "compile",
        "--compile-mode", "max-autotune-no-cudagraphs",
        "--backend", "aot_eager",
        "--warmup", "2",
        "--repeat", "3",
        "--time-budget", "0",
        "--json", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert seen == {"backend": "aot_eager", "mode": "max-autotune-no-cudagraphs"}
    assert len(importlib.import_module(module).CALLS) == 2 + 3
    data = json.loads(out.read_text())
    assert_json_keeps(data)
    run = data["runs"]["compile"]
    assert run["compile_seconds"] >= 0 and run["repeat"] == 3 and len(run["wall_ms_all"]) == 3
    assert run["wall_timing"] == "profiled"  # --time-budget 0: the profiled calls' times
    assert run["peak_bytes"] == 1024


def test_eager_warmup_zero_calls_only_the_profiled_ones_and_explaining_adds_one(runner, make_module):
    import importlib

    module = make_module(COUNTED)
    args = ["--warmup", "0", "--repeat", "2", "--time-budget", "0"]
    assert run_cli(runner, f"{module}:counted", *args, "--no-explain").exit_code == 0
    calls = importlib.import_module(module).CALLS
    assert len(calls) == 2
    # Explaining the peak (the default) profiles one more, instrumented call after the measured ones.
    assert run_cli(runner, f"{module}:counted", *args).exit_code == 0
    assert len(calls) == 2 + 3


def test_wall_time_comes_from_calls_timed_without_the_profiler(runner, make_module, tmp_path):
    import importlib

    module = make_module(COUNTED)
    out = tmp_path / "r.json"
    result = run_cli(
        runner, f"{module}:counted", "--repeat", "2", "--time-budget", "0.05", "--json", str(out)
    )
    assert result.exit_code == 0, result.output
    run = json.loads(out.read_text())["runs"]["eager"]
    timed = len(run["wall_ms_all"])
    # 1 warm-up call, 2 profiled, the one that explains the peak, then the timed calls (5 at
    # least, and 0.05 s of them).
    assert run["wall_timing"] == "timed" and 5 <= timed <= 1000
    assert len(importlib.import_module(module).CALLS) == 1 + timed + 2 + 1
    assert sum(run["wall_ms_all"]) >= 50 or timed == 1000
    assert run["wall_ms"] == pytest.approx(statistics.median(run["wall_ms_all"]), abs=1e-5)


def test_unwritable_output_folder_is_exit_2(runner, make_module, tmp_path, monkeypatch):
    import os

    module = make_module(COUNTED)
    real_access = os.access
    # Tests may run as root, for whom every folder is writable: simulate a read-only folder.
    monkeypatch.setattr(
        os, "access", lambda path, mode: False if mode == os.W_OK else real_access(path, mode)
    )
    result = run_cli(runner, f"{module}:counted", "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 2
    assert "is not writable" in result.output


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["run", "m:f", "--top", "0"],
            "memprof: error: Invalid value for '--top': Input should be greater than or equal to 1; "
            "see 'memprof run --help'",
        ),
        (["run"], "memprof: error: Missing argument 'TARGET'; see 'memprof run --help'"),
        (["frobnicate"], "memprof: error: No such command 'frobnicate'; see 'memprof --help'"),
    ],
)  # fmt: skip
def test_console_entry_gives_parse_errors_as_one_line(args, line):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "memprof", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr == line + "\n"
    assert done.stdout == ""
