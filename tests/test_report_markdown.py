"""The Markdown summary: golden files for a comparison and a single run, and escaping rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import PIPE_NAME, SCRIPT_LABEL, TICK_NAME

from memprof.model import Report, load_report
from memprof.report.markdown import code, escape_text, render_markdown

GOLDEN = Path(__file__).parent / "golden"
DATA = Path(__file__).parent / "data"


def check_golden(name: str, text: str, update: bool) -> None:
    path = GOLDEN / name
    if update:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing; run pytest --update-golden"
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("fixture", "golden"),
    [
        ("compare_report", "compare.md"),
        ("single_report", "single.md"),
    ],
)
def test_markdown_matches_golden(
    fixture: str, golden: str, update_golden: bool, request: pytest.FixtureRequest
) -> None:
    report: Report = request.getfixturevalue(fixture)
    check_golden(golden, render_markdown(report), update_golden)


def test_markdown_of_the_real_similarity_report_matches_golden(update_golden: bool) -> None:
    report = load_report(DATA / "similarity-compare.json")
    check_golden("similarity-compare.md", render_markdown(report), update_golden)


def test_compare_summary_has_verdict_peaks_and_deltas(compare_report: Report) -> None:
    text = render_markdown(compare_report)
    # 320 MiB -> 1 MiB: -319 MiB, -99.7 %.
    assert "**torch.compile lowers peak memory by 319.0 MiB (-99.7%): 320.0 MiB -> 1.0 MiB**" in text
    assert "| eager | 320.0 MiB | 320.0 MiB | +1.0 MiB | 12.5 ms | - | `aten::abs` |" in text
    assert "| compile | 1.0 MiB | 1.0 MiB | +1.0 MiB | 12.5 ms | 4.3 s | `cpp_fused_abs_sub_0` |" in text
    assert "| `aten::sub` | 256.0 MiB | - | -256.0 MiB | fused into `cpp_fused_abs_sub_0` |" in text
    assert "| `cpp_fused_abs_sub_0` | - | 1.0 MiB | +1.0 MiB | fuses `abs`, `sub` |" in text


def test_names_cannot_break_the_table(compare_report: Report) -> None:
    text = render_markdown(compare_report)
    table_rows = [line for line in text.splitlines() if line.startswith("| `")]
    # Every op row has exactly the header's 5 cells: no unescaped pipe inside a name.
    for row in table_rows:
        unescaped = row.replace("\\|", "")
        assert unescaped.count("|") == 6, row
    assert f"`{SCRIPT_LABEL}`" in text  # a code span: shown literally, never run
    assert "`my\\|op & <b>'quoted' \"twice\"</b>`" in text
    assert "``weird `tick` *star* _under_``" in text
    assert PIPE_NAME not in text  # only ever in its escaped form
    assert TICK_NAME in text  # unchanged inside the double-backtick span


def test_code_span_fences_backticks_and_pipes() -> None:
    assert code("aten::add") == "`aten::add`"
    assert code("a`b") == "``a`b``"
    assert code("``x") == "``` ``x ```"
    assert code("a|b") == "`a\\|b`"
    assert code("two\nlines") == "`two lines`"


def test_escape_text_neutralises_markup() -> None:
    assert escape_text("<script>alert(1)</script>") == "\\<script>alert(1)\\</script>"
    assert escape_text("*bold* _it_ [link](x) a|b ~s~ `c`") == (
        "\\*bold\\* \\_it\\_ \\[link\\](x) a\\|b \\~s\\~ \\`c\\`"
    )
    assert escape_text("# not a heading") == "\\# not a heading"
    assert escape_text("a & b") == "a &amp; b"


@pytest.mark.parametrize(
    ("data", "golden"),
    [("similarity-explained.json", "similarity-explained.md"), ("gpt-explained.json", "gpt-explained.md")],
)
def test_markdown_of_explained_runs_matches_golden(data: str, golden: str, update_golden: bool) -> None:
    """Real explained reports: see tests/test_terminal.py::test_explained_runs."""
    check_golden(golden, render_markdown(load_report(DATA / data)), update_golden)
