"""Every format shows the same op rows (report/rows.py decides them) and the same fused kernels."""

from __future__ import annotations

import re

import pytest

from memprof.model import Report
from memprof.report.html import render_html
from memprof.report.markdown import render_markdown
from memprof.report.rows import fused_rows, op_tables
from memprof.report.terminal import render_terminal


def terminal_ops(text: str) -> list[str]:
    table = re.search(r"^Top \d+ ops[^\n]*:\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
    assert table
    return [line.split("  ")[0] for line in table.group(1).splitlines()[2:]]


def markdown_ops(text: str) -> list[str]:
    table = re.search(r"^### Top \d+ ops[^\n]*\n\n(.*?)\n\n", text, re.S | re.M)
    assert table
    return [
        re.match(r"\| (`+) ?(.*?) ?\1 \|", row).group(2).replace("\\|", "|")
        for row in table.group(1).splitlines()[2:]
    ]


def html_ops(page: str) -> list[str]:
    import html

    ops = re.search(r'<section id="ops">(.*?)</section>', page, re.S)
    assert ops
    return [
        html.unescape(name) for name in re.findall(r'<td class="name" data-sort="([^"]*)">', ops.group(1))
    ]


@pytest.mark.parametrize("fixture", ["compare_report", "single_report"])
@pytest.mark.parametrize("top", [1, 2, 4, 50])
def test_terminal_markdown_and_html_show_the_same_top_rows(fixture: str, top: int, request) -> None:
    report: Report = request.getfixturevalue(fixture)
    (table,) = op_tables(report, "peak", top)
    expected = [op.name for op in table.rows]
    assert len(expected) == min(top, len(report.ok_runs()[0].op_stats) if fixture == "single_report" else 6)
    assert terminal_ops(render_terminal(report, sort="peak", top=top)) == expected
    assert markdown_ops(render_markdown(report, top=top)) == expected
    assert html_ops(render_html(report, top=top)) == expected


def test_fused_kernels_are_the_same_section_everywhere(compare_report: Report) -> None:
    (row,) = fused_rows(compare_report)
    assert (row.run, row.kernel, row.peak_bytes) == ("compile", "cpp_fused_abs_sub_0", 1024 * 1024)
    assert [(r.op, r.base_peak_bytes) for r in row.replaced] == [
        ("aten::abs", 64 << 20),
        ("aten::sub", 256 << 20),
    ]
    # The same kernel, the same replaced ops with the same peaks, in each format's own syntax.
    terminal = render_terminal(compare_report, top=1).split("Fused kernels:\n")[1]
    assert "compile  cpp_fused_abs_sub_0" in terminal
    assert "aten::abs (64.0 MiB peak in eager)\naten::sub (256.0 MiB peak in eager)" in re.sub(
        r"\n +", "\n", terminal
    )
    markdown = render_markdown(compare_report, top=1).split("### Fused kernels\n")[1]
    assert (
        "| compile | `cpp_fused_abs_sub_0` | 1.0 MiB | "
        "`aten::abs` (64.0 MiB peak in eager), `aten::sub` (256.0 MiB peak in eager) |"
    ) in markdown
    page = render_html(compare_report, top=1)
    fused = re.search(r'<section id="fused">(.*?)</section>', page, re.S)
    assert fused is not None
    assert (
        "<code>aten::abs</code> (64.0 MiB peak in eager), <code>aten::sub</code> (256.0 MiB peak in eager)"
    ) in fused.group(1)


def test_each_comparison_is_computed_once_per_report(compare_report: Report, monkeypatch) -> None:
    from memprof.analysis import diff

    calls = []
    real = diff.diff_runs
    monkeypatch.setattr(diff, "diff_runs", lambda base, other: calls.append(other.label) or real(base, other))
    render_terminal(compare_report)
    render_markdown(compare_report)
    render_html(compare_report)
    compare_report.to_json()
    assert calls == ["compile"]
