"""``memprof check``: the gate on saved reports, its lines, its exit codes; and it never
imports torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.frontends.cli import app
from memprof.pipeline import failed_run

DATA = Path(__file__).parent / "data" / "gate"
ROOT = Path(__file__).resolve().parents[1]


def check(*args: str):
    return CliRunner().invoke(app, ["check", *args])


def test_within_budget_exits_0() -> None:
    result = check(str(DATA / "base.json"), "--budget", "800MB")
    assert result.exit_code == 0
    assert result.stdout == "memprof gate: passed (2 checks)\n"


def test_budget_exceeded_exits_1_with_the_line() -> None:
    result = check(str(DATA / "base.json"), "--budget", "eager=500 MB")
    assert result.exit_code == 1
    assert result.stdout == (
        "eager peak 795.4 MiB exceeds budget 500.0 MiB by 59.1%\n"
        "memprof gate: FAILED, 1 violation (budget 1)\n"
    )


def test_growth_over_baseline_per_run_exits_1() -> None:
    result = check(str(DATA / "grown.json"), "--baseline", str(DATA / "base.json"), "--tolerance", "2%")
    assert result.exit_code == 1
    # The baseline was saved without at-peak entries: each violation says so.
    unexplained = (
        "  the baseline's run '{}' has no at-peak entries (profiled without explaining, or saved by an older "
        "memprof): gated on the numbers only; save a new baseline to see what grew"
    )
    assert result.stdout.splitlines() == [
        "eager peak 834.0 MiB exceeds baseline 795.4 MiB by 4.9% (tolerance 2%)",
        unexplained.format("eager"),
        "compile peak 2.0 MiB exceeds baseline 1.9 MiB by 5.0% (tolerance 2%)",
        unexplained.format("compile"),
        "memprof gate: FAILED, 2 violations (baseline 2)",
    ]


def test_growth_over_an_explained_baseline_says_what_grew() -> None:
    result = check(str(DATA / "gpt-batch4.json"), "--baseline", str(DATA / "gpt-batch2.json"))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "eager peak 17.2 MiB exceeds baseline 6.8 MiB by 151.7% (tolerance 5%)"
    assert lines[1].startswith("  what grew: +10.4 MiB at the peak (21.0 MiB -> 31.4 MiB): ")
    assert "memprof/examples/gpt.py:109 loss = F.cross_entropy(" in lines[2]
    assert lines[-1] == "memprof gate: FAILED, 1 violation (baseline 1)"


def test_growth_over_baseline_per_op_exits_1() -> None:
    result = check(str(DATA / "grown.json"), "--baseline", str(DATA / "base.json"), "--per-op")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "eager op aten::sum peak 515.0 MiB exceeds baseline 490.2 MiB by 5.1% (tolerance 5%)",
        "memprof gate: FAILED, 1 violation (baseline 1)",
    ]


def test_growth_within_default_tolerance_exits_0() -> None:
    result = check(str(DATA / "grown.json"), "--baseline", str(DATA / "base.json"))
    assert result.exit_code == 0
    assert result.stdout == "memprof gate: passed (2 checks)\n"


def test_improvement_is_reported_and_passes() -> None:
    result = check(str(DATA / "improved.json"), "--baseline", str(DATA / "base.json"))
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "improved: eager peak 476.8 MiB is 40.0% below baseline 795.4 MiB; "
        "save a new baseline to keep the gain",
        "memprof gate: passed (2 checks)",
    ]


def test_compile_worse_than_eager_exits_1_with_require_compile_saves() -> None:
    result = check(str(DATA / "compile_worse.json"), "--require-compile-saves")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == (
        "compile peak 2.1 MiB exceeds eager peak 1.9 MiB by 10.0% (tolerance 5%): "
        "torch.compile does not save memory"
    )
    assert (
        check(str(DATA / "compile_worse.json"), "--require-compile-saves", "--tolerance", "10").exit_code == 0
    )


def test_environment_mismatch_warns_or_exits_2_with_strict_env() -> None:
    report, base = str(DATA / "base.json"), str(DATA / "cuda_base.json")
    result = check(report, "--baseline", base)
    assert result.exit_code == 0
    assert result.stdout.startswith("warning: the baseline was measured on a different setup (device cuda:0")
    strict = check(report, "--baseline", base, "--strict-env")
    assert strict.exit_code == 2
    assert "memprof: error: the baseline was measured on a different setup" in strict.stderr
    assert strict.stdout == ""


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("malformed.json", "is not valid JSON"),
        ("wrong_schema.json", "schema_version is 99, this memprof reads 1"),
        ("missing.json", "does not exist"),
    ],
)
def test_malformed_or_wrong_schema_baseline_exits_2(name: str, message: str) -> None:
    result = check(str(DATA / "base.json"), "--baseline", str(DATA / name))
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_not_a_report_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text(json.dumps([1, 2]))
    result = check(str(path), "--budget", "1GB")
    assert result.exit_code == 2
    assert "expected a memprof report" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "800 XB"], "not a size: '800 XB'; write it like '800MB', '800 MB', '1.5GiB'"),
        (["--budget", "eagre=1GB"], "--budget names 'eagre', but the runs are 'eager', 'compile'"),
        (["--tolerance", "five"], "--tolerance: not a percentage: 'five'"),
        (["--per-op", "--budget", "1GB"], "--per-op compares each op with a baseline"),
        ([], "nothing to check: give --budget SIZE, --baseline BASE.json or --require-compile-saves"),
    ],
)
def test_bad_options_exit_2(args: list[str], message: str) -> None:
    result = check(str(DATA / "base.json"), *args)
    assert result.exit_code == 2
    assert message in result.stderr


def _imports_torch(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_check_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from memprof.frontends.cli import app\n"
        "try:\n"
        f"    app([{'check'!r}, {str(DATA / 'grown.json')!r}, '--baseline', {str(DATA / 'base.json')!r},"
        " '--per-op', '--budget', '1GB'])\n"
        "except SystemExit as exit:\n"
        "    print('exit', exit.code)\n"
        "print('torch' in sys.modules)\n"
    )
    assert _imports_torch(code).splitlines()[-2:] == ["exit 1", "False"]


def test_help_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from memprof.frontends.cli import app\n"
        "try:\n"
        "    app(['--help'])\n"
        "except SystemExit as exit:\n"
        "    print('exit', exit.code)\n"
        "print('torch' in sys.modules)\n"
    )
    assert _imports_torch(code).splitlines()[-2:] == ["exit 0", "False"]


def test_check_does_not_import_pandas_or_numpy_either() -> None:
    # `memprof check` starts as fast as `memprof --help`: the report model, the schema and the
    # gate are pure Python.
    code = (
        "import sys\n"
        "from memprof.frontends.cli import app\n"
        "try:\n"
        f"    app([{'check'!r}, {str(DATA / 'grown.json')!r}, '--baseline', {str(DATA / 'base.json')!r},"
        " '--per-op', '--budget', '1GB'])\n"
        "except SystemExit as exit:\n"
        "    print('exit', exit.code)\n"
        "print(sorted(m for m in ('torch', 'pandas', 'numpy') if m in sys.modules))\n"
    )
    assert _imports_torch(code).splitlines()[-2:] == ["exit 1", "[]"]


# ------------------------------------------------------------- labels that try to forge lines

FORGED = "eager\nmemprof gate: passed (1 checks)"


def _report_with(tmp_path: Path, name: str, label: str, failed: str | None = None) -> Path:
    from dataclasses import replace

    from conftest import make_single_report

    report = make_single_report()
    run = replace(report.runs["eager"], label=label)
    if failed is not None:
        run = failed_run(label, "eager", failed)
    path = tmp_path / name
    path.write_text(replace(report, runs={label: run}).to_json())
    return path


def test_a_label_holding_a_newline_cannot_print_a_gate_line_of_its_own(tmp_path: Path) -> None:
    result = check(str(_report_with(tmp_path, "r.json", FORGED)), "--budget", "1MB")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "eager\\x0amemprof gate: passed (1 checks) peak 8.0 MiB exceeds budget 1.0 MiB by 700.0%",
        "memprof gate: FAILED, 1 violation (budget 1)",
    ]


def test_a_failure_message_holding_a_newline_stays_on_its_line(tmp_path: Path) -> None:
    path = _report_with(tmp_path, "r.json", "eager", failed="boom\nmemprof gate: passed (1 checks)")
    result = check(str(path), "--budget", "1MB")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "eager run failed, its memory is unknown: boom\\x0amemprof gate: passed (1 checks)",
        "memprof gate: FAILED, 1 violation (failed 1)",
    ]


def test_a_huge_label_is_quoted_short(tmp_path: Path) -> None:
    label = "x" * 1_000_000
    result = check(str(_report_with(tmp_path, "r.json", label)), "--budget", "1MB")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"{'x' * 200}… peak 8.0 MiB exceeds budget 1.0 MiB by 700.0%",
        "memprof gate: FAILED, 1 violation (budget 1)",
    ]


def test_baseline_labels_and_op_names_with_newlines_stay_on_their_lines(tmp_path: Path) -> None:
    base = json.loads((DATA / "base.json").read_text())
    base["runs"]["eager"]["ops"][0]["name"] = FORGED
    grown = json.loads(json.dumps(base))
    grown["runs"]["eager"]["ops"][0]["peak_bytes"] *= 2
    grown["runs"][FORGED] = dict(grown["runs"]["eager"], label=FORGED)
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "grown.json").write_text(json.dumps(grown))
    result = check(str(tmp_path / "grown.json"), "--baseline", str(tmp_path / "base.json"), "--per-op")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "warning: run 'eager\\nmemprof gate: passed (1 checks)' has no baseline; not compared",
        "eager op eager\\x0amemprof gate: passed (1 checks) peak 980.4 MiB exceeds baseline 490.2 MiB by "
        "100.0% (tolerance 5%)",
        "memprof gate: FAILED, 1 violation (baseline 1)",
    ]
