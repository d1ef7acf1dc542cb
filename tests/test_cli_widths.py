"""Every command at the terminal widths a user has (60, 80 and 120 columns, set by ``COLUMNS``):
no line of its output wider than the terminal, and its last lines its answer (each comparison's
verdict and biggest cause, an estimate's fit, a recording's peak, the gate's summary).

No profiling: ``run``, ``compare`` and ``estimate`` are given saved reports in place of what
they would measure (``memprof.library.api.compare`` and ``memprof.library.api.estimate`` replaced), so the
commands print and gate exactly as after a run; ``analyze``, ``diff`` and ``check`` read the
recordings and reports under ``tests/data``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.frontends.cli import app
from memprof.outputs.layout import wrap
from memprof.pipeline import load_report

DATA = Path(__file__).parent / "data"
GATE = DATA / "gate"
WIDTHS = (60, 80, 120)


def invoke(args: list[str], width: int) -> list[str]:
    result = CliRunner().invoke(app, args, env={"COLUMNS": str(width)})
    assert result.exit_code in (0, 1), result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in [*lines, *result.stderr.splitlines()]) <= width, result.output
    return lines


def ends_with(lines: list[str], texts: list[str], width: int) -> None:
    """The output's last lines are ``texts``, each wrapped to ``width`` as a paragraph is."""
    expected = [row for text in texts for row in wrap(text, width)]
    assert lines[-len(expected) :] == expected


@pytest.fixture
def saved(monkeypatch: pytest.MonkeyPatch):
    """Make ``memprof.library.api.compare`` / ``estimate`` return the saved report ``name``."""

    def use(function: str, name: str):
        report = load_report(DATA / name)
        monkeypatch.setattr(f"memprof.library.api.{function}", lambda *args, **kwargs: report)
        return report

    return use


@pytest.mark.parametrize("width", WIDTHS)
def test_run_compare_compile_ends_with_the_verdict_and_its_biggest_cause(saved, width: int) -> None:
    report = saved("compare", "gpt-explained.json")
    lines = invoke(["run", "memprof.examples.gpt:train_step", "--compare-compile", "-q"], width)
    diff = report.diffs[0]
    cause = "biggest cause: the backward of GPT -16.0 MiB of temporaries"
    ends_with(lines, [diff.verdict, cause, diff.summary], width)
    assert diff.verdict == "torch.compile lowers peak memory by 22.7 MiB (-59.8%): 38.0 MiB -> 15.3 MiB"


@pytest.mark.parametrize("width", WIDTHS)
def test_run_with_a_budget_ends_with_the_gates_summary(saved, width: int) -> None:
    saved("compare", "gpt-explained.json")
    args = ["run", "memprof.examples.gpt:train_step", "--compare-compile", "-q", "--budget", "eager=20MB"]
    lines = invoke(args, width)
    assert lines[-1] == "memprof gate: FAILED, 1 violation (budget 1)"


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_ends_with_the_verdict(saved, width: int) -> None:
    report = saved("compare", "similarity.json")
    targets = ["memprof.examples.no_grad:with_autograd", "memprof.examples.no_grad:no_grad"]
    lines = invoke(["compare", *targets, "-q"], width)
    diff = report.diffs[0]
    ends_with(lines, [diff.verdict, diff.summary], width)


@pytest.mark.parametrize("width", WIDTHS)
def test_estimate_ends_with_whether_it_fits(saved, width: int) -> None:
    saved("estimate", "estimate-similarity.json")
    lines = invoke(["estimate", "memprof.examples.similarity:similarity", "--gpu", "L4", "-q"], width)
    ends_with(
        lines,
        [
            "estimated peak 550.3 MiB allocated, 556.0 MiB reserved: fits the NVIDIA L4 (22.5 GiB less "
            "a 1.0 GiB reserve) with 21.0 GiB to spare"
        ],
        width,
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_analyze_ends_with_the_devices_peak(width: int) -> None:
    lines = invoke(["analyze", str(DATA / "gpu" / "memprof_h100_gpt_step.snapshot.pickle"), "-q"], width)
    ends_with(
        lines,
        [
            "cuda:0: peak 38.0 MiB above the recording's start (footprint 117.2 MiB, 79.2 MiB live at "
            "start) at (C++) LogSoftmaxBackward0"
        ],
        width,
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_diff_ends_with_the_verdict_and_its_biggest_cause(width: int) -> None:
    lines = invoke(["diff", str(GATE / "gpt-batch2.json"), str(GATE / "gpt-batch4.json"), "-q"], width)
    ends_with(
        lines,
        [
            "gpt-batch4 raises peak memory vs gpt-batch2 by 10.4 MiB (+151.7%): 6.8 MiB -> 17.2 MiB",
            "biggest cause: the backward of GPT +4.0 MiB of temporaries",
            "gpt-batch4 vs gpt-batch2: peak +151.7%, wall time +13.2% (2436.4 ms -> 2759.1 ms)",
        ],
        width,
    )
    # The lines that changed most keep their file and line whatever the width.
    assert any(line.startswith(("memprof/examples/gpt.py:109", "…/examples/gpt.py:109")) for line in lines)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(
    ("args", "summary"),
    [
        (
            ["grown.json", "--baseline", "base.json", "--per-op"],
            "memprof gate: FAILED, 1 violation (baseline 1)",
        ),
        (
            ["compile_worse.json", "--require-compile-saves", "--budget", "1MB"],
            "memprof gate: FAILED, 3 violations (budget 2, compile 1)",
        ),
    ],
)
def test_check_ends_with_the_gates_summary(args: list[str], summary: str, width: int) -> None:
    lines = invoke(["check", *(str(GATE / a) if a.endswith(".json") else a for a in args)], width)
    assert lines[-1] == summary


def test_the_files_written_are_said_before_the_report_so_the_answer_stays_last(
    saved, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = saved("compare", "gpt-explained.json")
    monkeypatch.chdir(tmp_path)  # the files are named as given, relative to the working folder
    page, data = Path("report.html"), Path("report.json")
    args = [
        "run",
        "memprof.examples.gpt:train_step",
        "--compare-compile",
        "--html",
        str(page),
        "--json",
        str(data),
    ]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "memprof: wrote report.json, report.html" in result.stderr.splitlines()
    assert page.is_file() and data.is_file()
    # stdout and stderr as a terminal shows them, one after the other: the answer is last.
    diff = report.diffs[0]
    ends_with(result.output.splitlines(), [diff.summary], 80)
    assert result.output.index("memprof: wrote") < result.output.index(diff.verdict[:40])
