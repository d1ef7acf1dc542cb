"""The pytest plugin, run on generated test files with ``pytester``: passing, failing and
baseline cases. The workload allocates one float32 tensor of exactly 25 MiB.

Each run is a subprocess (torch does not survive pytester's in-process module reset), so the
cases share runs where they can, and are marked slow (run with ``--run-slow``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _importable(monkeypatch: pytest.MonkeyPatch) -> None:
    # memprof is not installed: the pytest subprocess finds it through PYTHONPATH.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


WORKLOAD = """
import pytest
import torch

def alloc():
    return torch.empty(25 * 2**20 // 4)
"""


def _entry_point_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value == "memprof.frontends.pytest_plugin" for ep in entry_points(group="pytest11"))


# Installed (`pip install -e .`), pytest loads the plugin through its pytest11 entry point, as it
# does for a user; from a bare checkout it is loaded by name.
PLUGIN_ARGS = [] if _entry_point_installed() else ["-p", "memprof.frontends.pytest_plugin"]


def test_installed_memprof_registers_the_plugin_entry_point() -> None:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution("torch-memprof")
    except PackageNotFoundError:
        pytest.skip("torch-memprof is not installed here (tests run from the checkout)")
    assert _entry_point_installed()


def run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_mem=WORKLOAD + source)
    return pytester.runpytest_subprocess(*PLUGIN_ARGS, "-p", "no:cacheprovider", *args)


@pytest.mark.slow  # a pytest subprocess per case
def test_marker_passing_failing_and_misused(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
@pytest.mark.memprof(peak="26 MB")
def test_ok(memprof_profile):
    report = memprof_profile(alloc)
    assert report.runs["eager"].peak_bytes == 25 * 2**20

def test_unmarked_is_not_gated(memprof_profile):
    assert memprof_profile(alloc).runs["eager"].peak_bytes == 25 * 2**20

@pytest.mark.memprof(peak="20 MB", mode="eager")
def test_too_big(memprof_profile):
    memprof_profile(alloc)

@pytest.mark.memprof(peak="1 GB")
def test_forgot():
    alloc()

@pytest.mark.memprof(peak="lots")
def test_bad_peak(memprof_profile):
    memprof_profile(alloc)
""",
        "-rA",
    )
    result.assert_outcomes(passed=2, failed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "PASSED test_mem.py::test_ok",
            "PASSED test_mem.py::test_unmarked_is_not_gated",
            "ERROR test_mem.py::test_bad_peak - Failed: @pytest.mark.memprof: peak: not a*",
            "FAILED test_mem.py::test_too_big - Failed: eager peak 25.0 MiB exceeds budget*",
            "FAILED test_mem.py::test_forgot - Failed: @pytest.mark.memprof: the test neve*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.memprof: peak: not a size: 'lots'; write it like '800MB', '800 MB'*",
            "*never called the memprof_profile fixture, so nothing was measured*",
        ]
    )
    result.stdout.no_fnmatch_line("During handling of the above exception*")
    # The line of alloc's torch.empty in the file as written (pytester strips the leading newline).
    written = (pytester.path / "test_mem.py").read_text().splitlines()
    line = written.index("    return torch.empty(25 * 2**20 // 4)") + 1
    result.stdout.fnmatch_lines(
        [
            "eager peak 25.0 MiB exceeds budget 20.0 MiB by 25.0%",
            "  largest at the peak (footprint 25.0 MiB):",
            f"  25.0 MiB  temporary  -  test_mem.py:{line} return torch.empty(25 ? 2??20 // 4)  aten::empty",
            "top ops of eager by peak: aten::empty 25.0 MiB",
            "memprof gate: FAILED, 1 violation (budget 1)",
        ]
    )


@pytest.mark.slow  # a pytest subprocess and a torch.compile
def test_a_failed_test_shows_no_torch_log_records(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def doubled(x):
    return (x * 2).sum()

@pytest.mark.memprof(peak=1, mode="compile")
def test_compiled_too_big(memprof_profile):
    memprof_profile(doubled, torch.ones(1000))
""",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["compile peak * exceeds budget 1 B by *"])
    # torch logs ~150-1,300 DEBUG torch.__trace records while compiling; none reach the test's log.
    assert "torch.__trace" not in result.stdout.str() and "Captured log" not in result.stdout.str()


@pytest.mark.slow  # a pytest subprocess per case
def test_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--markers")
    result.stdout.fnmatch_lines(['@pytest.mark.memprof(peak="800 MB", mode="eager")*'])


@pytest.mark.slow  # a pytest subprocess per case
def test_baseline_save_then_compare(pytester: pytest.Pytester) -> None:
    source = """
def test_alloc(memprof_profile):
    memprof_profile(alloc)
    memprof_profile(alloc)
"""
    saved = run(pytester, source, "--memprof-baseline-dir", "base", "--memprof-save-baseline")
    saved.assert_outcomes(passed=1)
    files = sorted(p.name for p in (pytester.path / "base").iterdir())
    assert files == ["test_mem.py__test_alloc-2.json", "test_mem.py__test_alloc.json"]
    stored = json.loads((pytester.path / "base" / files[1]).read_text())
    assert stored["runs"]["eager"]["peak_bytes"] == 25 * 2**20

    run(pytester, source, "--memprof-baseline-dir", "base").assert_outcomes(passed=1)

    # The stored peak 24 MiB: today's 25 MiB is 4.2% more, beyond 2% but within 5%.
    for name in files:
        path = pytester.path / "base" / name
        data = json.loads(path.read_text())
        data["runs"]["eager"]["peak_bytes"] = 24 * 2**20
        path.write_text(json.dumps(data))
    run(pytester, source, "--memprof-baseline-dir", "base").assert_outcomes(passed=1)
    failed = run(pytester, source, "--memprof-baseline-dir", "base", "--memprof-tolerance", "2%")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(
        [
            "eager peak 25.0 MiB exceeds baseline 24.0 MiB by 4.2% (tolerance 2%)",
            "top ops of eager by peak: aten::empty 25.0 MiB",
            "memprof gate: FAILED, 1 violation (baseline 1)",
        ]
    )


@pytest.mark.slow  # a pytest subprocess per case
def test_missing_baseline_warns(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_alloc(memprof_profile):
    memprof_profile(alloc)
""",
        "--memprof-baseline-dir",
        "nowhere",
    )
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        ["*MemprofWarning: no memprof baseline nowhere*test_mem.py__test_alloc.json*"]
    )


@pytest.mark.slow  # a pytest subprocess per case
def test_bad_tolerance_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = run(pytester, "def test_x():\n    pass\n", "--memprof-tolerance", "lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--memprof-tolerance: not a percentage: 'lots'*"])


def test_plugin_import_does_not_import_torch() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = "import sys, memprof.frontends.pytest_plugin; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_plugin_warnings_do_not_point_to_options_it_lacks() -> None:
    # A baseline from another setup: the command line adds "(--strict-env makes this an error)";
    # the plugin has no such option, so its warning ends at "comparing anyway".
    from memprof.analysis.gate import GateConfig, evaluate
    from memprof.core.errors import spelled_as
    from memprof.frontends.pytest_plugin import _spelling
    from memprof.pipeline import load_report

    data = Path(__file__).parent / "data" / "gate"
    with spelled_as(_spelling):
        result = evaluate(
            load_report(data / "base.json"), GateConfig(baseline=load_report(data / "cuda_base.json"))
        )
    assert [w.rpartition(";")[2] for w in result.warnings] == [" comparing anyway"]


def test_baseline_names_are_one_to_one_and_keep_plain_names() -> None:
    from memprof.frontends.pytest_plugin import baseline_name

    # Node ids made only of safe characters and their structure keep the names they always had.
    assert baseline_name("tests/test_m.py::test_step[cpu]") == "tests_test_m.py__test_step_cpu.json"
    assert baseline_name("test_mem.py::TestA::test_b[1-2]", 1) == "test_mem.py__TestA__test_b_1-2-2.json"
    # Where mangling replaced more than that, a hash of the node id tells them apart.
    spaced, underscored = baseline_name("t.py::test_c[a b]"), baseline_name("t.py::test_c[a_b]")
    assert (spaced, underscored) == ("t.py__test_c_a_b-5479d56da2.json", "t.py__test_c_a_b.json")
    assert baseline_name("t.py::test_c[a/b]") == "t.py__test_c_a_b-6573d2cc33.json"
    # the docstring's example, then docs/guides/pytest.md's
    assert baseline_name("test_a.py::test_c[a b]") == "test_a.py__test_c_a_b-6987fce7b1.json"
    assert baseline_name("tests/test_m.py::test_c[a b]") == "tests_test_m.py__test_c_a_b-a4d60010f2.json"
    assert baseline_name("t.py::test_c[a b]", 2) == "t.py__test_c_a_b-5479d56da2-3.json"
    long_name = baseline_name("t.py::test_c[" + "x" * 5000 + "]")
    assert len(long_name) == len("-0123456789.json") + 120 and long_name.startswith("t.py__test_c_xxx")


PLUGIN_CASES = """
import os
import pytest
import torch

def alloc_mib(n):
    return torch.empty(n * 2**20, dtype=torch.uint8)

@pytest.mark.parametrize("x", ["a b", "a_b"])
def test_c(memprof_profile, x):
    memprof_profile(alloc_mib, 2 if x == "a b" else 1)

def test_c_a_b(memprof_profile):
    memprof_profile(alloc_mib, 1)

def test_moves_away(memprof_profile, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    memprof_profile(alloc_mib, 1)

def test_fifo(memprof_profile):
    memprof_profile(alloc_mib, 1)

def test_deep(memprof_profile):
    memprof_profile(alloc_mib, 1)

@pytest.mark.memprof(peak=-5)
def test_negative(memprof_profile):
    pass

@pytest.mark.memprof(peak=1.5)
def test_float(memprof_profile):
    pass

@pytest.mark.memprof(peak="abc")
def test_text(memprof_profile):
    pass

@pytest.mark.memprof(peak=True)
def test_bool(memprof_profile):
    pass

@pytest.mark.memprof(peak="1.5")
def test_fraction(memprof_profile):
    pass
"""


@pytest.mark.slow  # a pytest subprocess per case
def test_plugin_baselines_markers_and_special_files(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cases=PLUGIN_CASES)
    args = [*PLUGIN_ARGS, "-p", "no:cacheprovider", "--memprof-baseline-dir", "base", "-rA"]
    saved = pytester.runpytest_subprocess(*args, "--memprof-save-baseline", timeout=300)
    base = pytester.path / "base"
    peaks = {p.name: json.loads(p.read_text())["runs"]["eager"]["peak_bytes"] for p in base.iterdir()}
    assert peaks == {
        "test_cases.py__test_c_a_b-cb46177e60.json": 2 * 2**20,  # test_c[a b]
        "test_cases.py__test_c_a_b.json": 2**20,  # test_c[a_b]
        "test_cases.py__test_moves_away.json": 2**20,  # in the folder pytest started in
        "test_cases.py__test_fifo.json": 2**20,
        "test_cases.py__test_deep.json": 2**20,
    }
    saved.assert_outcomes(passed=5, failed=1, errors=5)
    saved.stdout.fnmatch_lines(
        [
            "memprof: baseline file test_cases.py__test_c_a_b.json would also be used by "
            "test_cases.py::test_c[a_b]; rename one of the tests (or its parameter ids) so that each has "
            "its own baseline",
        ]
    )
    saved.stdout.fnmatch_lines(
        [
            f"@pytest.mark.memprof: peak: {message}"
            for message in [
                "-5 is negative; a budget is a size like '800MB'*",
                "1.5 is a float; give a whole number of bytes or a size like '800MB'*",
                "not a size: 'abc'; write it like '800MB'*",
                "True is a bool; give a whole number of bytes or a size like '800MB'*",
                "not a size: '1.5' is a fraction of a byte; give whole bytes*",
            ]
        ]
    )

    (base / "test_cases.py__test_fifo.json").unlink()
    os.mkfifo(base / "test_cases.py__test_fifo.json")
    (base / "test_cases.py__test_deep.json").write_text("[" * 100_000 + "]" * 100_000)
    compared = pytester.runpytest_subprocess(*args, "-k", "fifo or deep", timeout=120)
    compared.assert_outcomes(failed=2)
    compared.stdout.fnmatch_lines(
        [
            "memprof: report '*test_fifo.json' is a FIFO (named pipe), not a regular file; save the content "
            "to a file and give that",
            "memprof: report '*test_deep.json' nests arrays or objects too deeply to be read; it is not a "
            "file memprof wrote",
        ]
    )


def test_a_baseline_dir_that_is_a_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    # Every baseline was "missing" then: each test passed with a warning, the gate silently off.
    pytester.makefile(".json", base="{}")
    result = run(pytester, "def test_x():\n    pass\n", "--memprof-baseline-dir", "base.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--memprof-baseline-dir 'base.json' is a file, not a folder; give the folder that holds the "
            "baselines (or that --memprof-save-baseline writes them into)"
        ]
    )


RAISES = """
def broken(x):
    raise ValueError(f"bad input {x}")

def test_raises(memprof_profile):
    memprof_profile(broken, 3)

def test_expects_it(memprof_profile):
    with pytest.raises(ValueError, match="bad input 4"):
        memprof_profile(broken, 4)
"""


@pytest.mark.slow  # a pytest subprocess per case
def test_a_profiled_function_that_raises_fails_the_test_with_its_own_error(pytester: pytest.Pytester) -> None:
    result = run(pytester, RAISES)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*memprof_profile(broken, 3)",
            "*test_mem.py:*",
            "*def broken(x):",
            '>*raise ValueError(f"bad input {x}")',
            "E*ValueError: bad input 3",
            "E*memprof: broken raised ValueError: bad input 3 (peak before the failure: 0 B)",
        ]
    )
    output = result.stdout.str()
    assert "UserCodeError" not in output and f"{os.sep}memprof{os.sep}" not in output
