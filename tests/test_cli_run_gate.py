"""``memprof run`` as a gate on a real profile whose peak is known exactly (one 25 MiB tensor),
and ``memprof check`` giving the same verdict, line for line, on the report it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.frontends.cli import app

DATA = Path(__file__).parent / "data" / "gate"
TARGET = f"{DATA / 'workload.py'}:alloc"
PEAK = 25 * 2**20  # the workload's one float32 tensor: 26,214,400 bytes
# What a budget's violation lists under its line: the one entry live at the peak, on its line.
LARGEST = [
    "  largest at the peak (footprint 25.0 MiB):",
    f"  25.0 MiB  temporary  -  {(DATA / 'workload.py').relative_to(Path.cwd())}:9 "
    "return torch.empty(NBYTES // 4, dtype=to…  aten::empty",
]


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def gate_lines(stdout: str) -> list[str]:
    """The lines after the terminal report: from the first gate line to the summary."""
    lines = stdout.splitlines()
    start = next(
        i for i, line in enumerate(lines) if line.startswith(("eager peak", "warning:", "memprof gate:"))
    )
    return lines[start:]


def test_budget_exceeded_exits_1_after_writing_the_report(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    result = invoke("run", TARGET, "-q", "--budget", "20MB", "--json", str(report))
    assert result.exit_code == 1
    assert gate_lines(result.stdout) == [
        "eager peak 25.0 MiB exceeds budget 20.0 MiB by 25.0%",
        *LARGEST,
        "memprof gate: FAILED, 1 violation (budget 1)",
    ]
    assert json.loads(report.read_text())["runs"]["eager"]["peak_bytes"] == PEAK
    again = invoke("check", str(report), "--budget", "20MB")
    assert again.exit_code == 1
    assert again.stdout.splitlines() == gate_lines(result.stdout)


def test_within_budget_exits_0() -> None:
    result = invoke("run", TARGET, "-q", "--budget", f"eager={PEAK}")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1] == "memprof gate: passed (1 check)"


def test_baseline_growth_per_run_and_per_op_same_verdict_as_check(tmp_path: Path) -> None:
    saved = tmp_path / "saved.json"
    first = invoke("run", TARGET, "-q", "--save-baseline", str(saved))
    assert first.exit_code == 0
    assert "memprof gate" not in first.stdout  # no gate option: no gate
    # The baseline: the same report with the tensor at 24 MiB (25/24 = +4.2%).
    data = json.loads(saved.read_text())
    data["runs"]["eager"]["peak_bytes"] = 24 * 2**20
    for op in data["runs"]["eager"]["ops"]:
        if op["name"] == "aten::empty":
            op["peak_bytes"] = 24 * 2**20
    base = tmp_path / "base.json"
    base.write_text(json.dumps(data))

    report = tmp_path / "r.json"
    args = ["--baseline", str(base), "--tolerance", "2%", "--per-op"]
    result = invoke("run", TARGET, "-q", *args, "--json", str(report))
    assert result.exit_code == 1
    expected = [
        "eager peak 25.0 MiB exceeds baseline 24.0 MiB by 4.2% (tolerance 2%)",
        # The baseline's peak was edited, not its entries: at the peak, nothing changed.
        "  what grew: nothing changed at the peak (25.0 MiB in both)",
        "eager op aten::empty peak 25.0 MiB exceeds baseline 24.0 MiB by 4.2% (tolerance 2%)",
        "memprof gate: FAILED, 2 violations (baseline 2)",
    ]
    assert gate_lines(result.stdout) == expected
    assert invoke("check", str(report), *args).stdout.splitlines() == expected
    # Within a 5% tolerance both pass.
    assert invoke("run", TARGET, "-q", *args[:2], "--per-op").exit_code == 0
    assert invoke("check", str(report), *args[:2], "--per-op").exit_code == 0
    # Against itself: no change.
    same = invoke("run", TARGET, "-q", "--baseline", str(saved), "--per-op", "--tolerance", "0")
    assert same.exit_code == 0, same.stdout


def test_bad_gate_options_exit_2_before_profiling(tmp_path: Path) -> None:
    for args, message in [
        (["--budget", "1.5 GX"], "not a size: '1.5 GX'"),
        (["--budget", "compile=1GB"], "--budget names 'compile', but the runs are 'eager'"),
        (["--baseline", str(DATA / "wrong_schema.json")], "schema_version is 99"),
        (["--baseline", str(DATA / "malformed.json")], "is not valid JSON"),
        (["--require-compile-saves"], "add --compare-compile"),
        (["--tolerance", "-1%"], "not a percentage"),
    ]:
        result = invoke("run", TARGET, "--json", str(tmp_path / "r.json"), *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr
        assert "profiling" not in result.stderr  # no status line: nothing ran
        assert not (tmp_path / "r.json").exists()


def test_the_compile_gate_asks_each_caller_for_both_runs_in_its_own_words() -> None:
    from memprof.analysis.gate import GateConfig
    from memprof.core.errors import UsageError
    from memprof.library.jobs import check_gate

    with pytest.raises(UsageError) as caught:
        check_gate(GateConfig(require_compile_saves=True), ["eager"])
    assert caught.value.message == "require_compile_saves compares compiled with eager; add mode='both'"
    # compare has no --compare-compile: it is told the command that has.
    result = invoke("compare", TARGET, TARGET, "--require-compile-saves")
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "memprof: error: --require-compile-saves compares compiled with eager; add memprof run TARGET "
        "--compare-compile\n"
    )


def test_save_baseline_and_json(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert invoke("run", TARGET, "-q", "--json", str(a), "--save-baseline", str(b)).exit_code == 0
    assert json.loads(a.read_text())["runs"] == json.loads(b.read_text())["runs"]
    # The same file under both options is written once, not refused.
    c = tmp_path / "c.json"
    assert invoke("run", TARGET, "-q", "--json", str(c), "--save-baseline", str(c)).exit_code == 0
    assert json.loads(c.read_text())["runs"]["eager"]["peak_bytes"] == PEAK


# Slow tier (ten profiles): the quick tier checks each gate's answer once.
@pytest.mark.slow
def test_the_same_gate_ten_times_gives_the_same_answer() -> None:
    """No flakes: ten real profiles of the same workload, the same gate, the same lines."""
    import memprof
    from memprof.analysis.gate import GateConfig, evaluate, parse_budget
    from memprof.outputs.gate import gate_lines as render_gate_lines
    from memprof.sources.targets.target import resolve

    alloc = resolve(TARGET).func
    first = memprof.profile(alloc)
    config = GateConfig(budgets=parse_budget("24MB"), baseline=first, tolerance=0.0, per_op=True)
    outcomes = set()
    for _ in range(10):
        report = memprof.profile(alloc)
        assert report.runs["eager"].peak_bytes == PEAK
        outcomes.add(tuple(render_gate_lines(evaluate(report, config))))
    assert outcomes == {
        (
            "eager peak 25.0 MiB exceeds budget 24.0 MiB by 4.2%",
            *LARGEST,
            "memprof gate: FAILED, 1 violation (budget 1)",
        )
    }
