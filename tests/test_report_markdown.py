"""The Markdown summary: golden files for a comparison and a single run, and escaping rules."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import PIPE_NAME, SCRIPT_LABEL, TICK_NAME

from memprof.model import Report
from memprof.outputs.markdown import code, escape_text, render_markdown
from memprof.pipeline import compared, load_report

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
    text = text.replace("\u00a0", " ")  # sizes are kept whole with non-breaking spaces
    assert "**torch.compile lowers peak memory by 319.0 MiB (-99.7%): 320.0 MiB -> 1.0 MiB**" in text
    # One timed call each (no spread): the percentage as measured.
    assert "compile vs eager: peak -99.7%, wall time +0.0% (12.5 ms -> 12.5 ms)" in text
    assert "| eager | 320.0 MiB | 320.0 MiB | +1.0 MiB | 12.5 ms | - | `aten::abs` |" in text
    assert "| compile | 1.0 MiB | 1.0 MiB | +1.0 MiB | 12.5 ms | 4.3 s | `cpp_fused_abs_sub_0` |" in text
    assert "| `aten::sub` | 256.0 MiB | - | -256.0 MiB | fused into `cpp_fused_abs_sub_0` |" in text
    assert "| `cpp_fused_abs_sub_0` | - | 1.0 MiB | +1.0 MiB | fuses `abs`, `sub` |" in text


def with_activity(report: Report, name: str) -> Report:
    """``report`` where op ``name`` allocates (and frees) 512 B in every run, so it is shown."""
    runs = {
        label: replace(
            run,
            op_stats=tuple(
                replace(op, allocated_bytes=512, peak_bytes=512) if op.name == name else op
                for op in run.op_stats
            ),
        )
        for label, run in report.runs.items()
    }
    return compared(replace(report, runs=runs))


def test_names_cannot_break_the_table(compare_report: Report) -> None:
    text = render_markdown(with_activity(compare_report, PIPE_NAME))
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


def test_rows_without_memory_activity_or_repeating_their_child_are_left_out() -> None:
    # The real similarity report: aten::to, aten::_to_copy and aten::empty_strided have the same
    # calls and bytes (488.3 MiB peak); aten::to, the call the code made, stays.
    report = load_report(DATA / "similarity-compare.json")
    text = render_markdown(report, top=15)
    ops = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| `")]
    assert "`aten::to`" in ops and "`aten::_to_copy`" not in ops and "`aten::empty_strided`" not in ops
    assert "`aten::as_strided`" not in ops  # 0 B everywhere
    assert (
        "<sub>13 ops not shown: `aten::empty_strided`, `aten::_to_copy` (same figures as `aten::to`); "
        "`## Call CompiledFxGraph ##`, `Torch-Compiled Region` (same figures as `inductor_wrapper_call`); "
        "9 with no memory activity.</sub>"
    ) in text


def test_sizes_and_times_never_wrap() -> None:
    text = render_markdown(load_report(DATA / "similarity-compare.json"))
    assert "795.4\u00a0MiB" in text and "795.4 MiB" not in text
    assert re.search(r"\d [KMGT]?i?B\b", text) is None
    assert re.search(r"\d (ms|us|s)\b", text) is None


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
