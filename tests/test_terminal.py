"""The terminal summary, golden: rendered from a real captured report (tests/data/similarity.json).

Regenerate after an intended change with ``pytest tests/test_terminal.py --update-golden``."""

from __future__ import annotations

from pathlib import Path

import pytest

from memprof.model import load_report
from memprof.report.terminal import render_terminal

DATA = Path(__file__).parent / "data"
GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, text: str, update: bool) -> None:
    path = GOLDEN / name
    if update:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


@pytest.fixture
def report():
    return load_report(DATA / "similarity.json")


def test_two_runs_side_by_side(report, update_golden):
    check_golden("terminal_similarity.txt", render_terminal(report, sort="peak", top=6), update_golden)


def test_single_run_sorted_by_self(report, update_golden):
    del report.runs["compile"]
    check_golden(
        "terminal_similarity_eager_self.txt", render_terminal(report, sort="self", top=5), update_golden
    )


def test_top_n_shows_n_ops_and_fused_kernels_their_own_section(report):
    text = render_terminal(report, top=1)
    table = text.split("Top 1 ops by peak bytes, eager vs compile:\n")[1].split("\n\n")[0]
    assert len(table.splitlines()) == 2 + 1  # header, rule, one op
    assert "aten::sum" in table.splitlines()[2]
    # The kernel that explains where the eager ops went is listed, with what it replaced.
    fused = text.split("Fused kernels:\n")[1].split("\n\n")[0].splitlines()
    assert fused[2].split() == [
        "compile",
        "cpp_fused_abs_lt_sub_sum_unsqueeze_0",
        "0",
        "B",
        "aten::abs",
        "(244.1",
        "MiB",
        "peak",
        "in",
        "eager)",
    ]
    assert [line.strip() for line in fused[3:]] == [
        "aten::lt (61.0 MiB peak in eager)",
        "aten::sub (244.1 MiB peak in eager)",
        "aten::sum (490.2 MiB peak in eager)",
        "aten::unsqueeze (0 B peak in eager)",
    ]


@pytest.mark.parametrize(
    ("data", "golden"),
    [
        ("similarity-explained.json", "terminal_similarity_explained.txt"),
        ("gpt-explained.json", "terminal_gpt_explained.txt"),
    ],
)
def test_explained_runs(data: str, golden: str, update_golden: bool) -> None:
    """Real explained reports (``memprof run memprof.examples.<similarity|gpt>:... --compare-compile
    --json tests/data/<name>-explained.json``, from the repository's root)."""
    check_golden(golden, render_terminal(load_report(DATA / data)), update_golden)
