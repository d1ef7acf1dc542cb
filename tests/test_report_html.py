"""The HTML report: sections, escaping, no external reference, the chart, sortable data."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import MIB, PIPE_NAME, SCRIPT_LABEL

from memprof.analysis.timeline import MAX_POINTS, Timeline
from memprof.cli import app
from memprof.commands.options import cli_spelling
from memprof.errors import UsageError, spelled_as
from memprof.model import Report, load_report
from memprof.report.html import SECTION_IDS, render_html

DATA = Path(__file__).parent / "data"
ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"


def section(page: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}">(.*?)</section>', page, re.S)
    assert match, f"no section {section_id}"
    return match.group(1)


def test_standalone_page_has_every_section_and_forbids_other_sources(compare_report: Report) -> None:
    page = render_html(compare_report)
    assert page.startswith("<!DOCTYPE html>\n")
    assert re.findall(r'<section id="([^"]+)">', page) == list(SECTION_IDS)
    assert "default-src 'none'" in page  # the page's CSP: nothing but itself may load
    assert "<title>memprof: tests.workload:sub_abs</title>" in page


def test_no_reference_leaves_the_page(compare_report: Report) -> None:
    page = render_html(compare_report)
    # The only absolute URLs are XML namespace names in the SVG (identifiers, never fetched).
    urls = set(re.findall(r"""https?://[^\s"'<>)]+""", page))
    assert urls == {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
    for attr in re.findall(r'<[^>]*\b(?:xlink:href|href)="([^"]*)"', page):
        assert attr.startswith("#"), attr
    assert re.findall(r"\bsrc=", page) == []
    assert all(ref.startswith("#") for ref in re.findall(r"url\(([^)]*)\)", page))
    assert "@import" not in page and "@font-face" not in page


def test_every_name_is_escaped(compare_report: Report) -> None:
    page = render_html(compare_report)
    assert SCRIPT_LABEL not in page
    assert page.count("<script") == 1  # the page's own sorting script, nothing else
    assert f"<code>{ESCAPED_SCRIPT}</code>" in page
    assert PIPE_NAME not in page
    assert "my|op &amp; &lt;b&gt;&#x27;quoted&#x27; &quot;twice&quot;&lt;/b&gt;" in page
    # torch's own table, also escaped, in a collapsible block.
    table = section(page, "torch-table")
    assert "<details><summary>eager</summary><pre>" in table
    assert f"{ESCAPED_SCRIPT}  -319.00 MB" in table


def with_run(report: Report, label: str, **changes: object) -> Report:
    return replace(report, runs={**report.runs, label: replace(report.runs[label], **changes)})


def test_the_chart_label_is_escaped_too(compare_report: Report) -> None:
    compare_report = with_run(compare_report, "eager", peak_op=SCRIPT_LABEL + " $x$")
    timeline = section(render_html(compare_report), "timeline")
    assert SCRIPT_LABEL not in timeline
    # parse_math off: the dollar signs stay text, not mathtext.
    assert f"peak 320.0 MiB during {ESCAPED_SCRIPT} $x$" in timeline


def test_timeline_has_one_panel_per_run_with_the_peak_marked(compare_report: Report) -> None:
    timeline = section(render_html(compare_report), "timeline")
    assert timeline.count("<svg ") == 1
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", timeline)
    assert "eager" in texts and "compile" in texts
    assert "peak 320.0 MiB during aten::abs" in texts
    assert "peak 1.0 MiB during cpp_fused_abs_sub_0" in texts
    assert "time since the call started (ms)" in texts
    assert 'aria-label="eager: peak 320.0 MiB during aten::abs; compile: peak 1.0 MiB' in timeline


def test_ops_table_sorts_on_exact_bytes(compare_report: Report) -> None:
    ops = section(render_html(compare_report), "ops")
    assert '<table class="ops sortable" data-base="eager" data-other="compile">' in ops
    headers = re.findall(r'<th scope="col" data-type="(\w+)"[^>]*>([^<]*)</th>', ops)
    assert headers[:4] == [
        ("text", "op"),
        ("num", "peak eager"),
        ("num", "peak compile"),
        ("num", "peak delta"),
    ]
    # aten::sub: 256 MiB in eager, absent from compile (empty sort key), delta -256 MiB.
    row = re.search(r"<tr><td class=\"name\" data-sort=\"aten::sub\">.*?</tr>", ops)
    assert row
    assert re.findall(r'data-sort="([^"]*)"', row.group(0))[1:4] == [
        str(256 * MIB),
        "",
        str(-256 * MIB),
    ]
    assert 'title="268,435,456 B">256.0 MiB</td>' in row.group(0)


def test_fused_kernels_list_the_aten_ops_they_replaced(compare_report: Report) -> None:
    fused = section(render_html(compare_report), "fused")
    assert "cpp_fused_abs_sub_0" in fused
    assert (
        "<code>aten::abs</code> (64.0 MiB peak in eager), <code>aten::sub</code> (256.0 MiB peak in eager)"
        in fused
    )


def test_single_run(single_report: Report) -> None:
    page = render_html(single_report)
    assert '<p class="verdict">eager: peak 8.0 MiB above the call&#x27;s start during aten::add</p>' in page
    assert '<table class="ops sortable" data-run="eager">' in page
    # How to get fused kernels, as the caller writes it: mode="both" in Python...
    assert "(<code>mode=&#x27;both&#x27;</code>)" in section(page, "fused")
    # ... and --compare-compile when the page is written by the command line.
    run_command = next(c.callback for c in app.registered_commands if c.callback.__name__ == "run")
    with spelled_as(cli_spelling(run_command)):
        fused = section(render_html(single_report), "fused")
    assert "(<code>memprof run TARGET --compare-compile</code>)" in fused
    assert "Not kept in this report" in section(page, "torch-table")


def test_a_run_without_allocations_has_no_chart(single_report: Report) -> None:
    single_report = with_run(single_report, "eager", timeline=Timeline())
    timeline = section(render_html(single_report), "timeline")
    assert "<svg" not in timeline
    assert "No allocations were recorded" in timeline


def test_jupyter_fragment(compare_report: Report) -> None:
    fragment = compare_report._repr_html_()
    assert "<html" not in fragment and "<!DOCTYPE" not in fragment
    assert fragment.startswith("<style>.memprof-report") or fragment.startswith("<style>\n.memprof-report")
    assert re.findall(r'<section id="([^"]+)">', fragment) == list(SECTION_IDS)


def test_rendering_is_repeatable(compare_report: Report) -> None:
    assert render_html(compare_report) == render_html(compare_report)


def test_real_report_from_json() -> None:
    report = load_report(DATA / "similarity-compare.json")
    page = render_html(report)
    assert "torch.compile lowers peak memory by 793.5 MiB (-99.8%): 795.4 MiB -&gt; 1.9 MiB" in page
    assert f'data-sort="{834_000_000}" title="834,000,000 B">795.4 MiB</td>' in section(page, "runs")
    assert "cpp_fused_abs_lt_sub_sum_unsqueeze_0" in section(page, "fused")


@pytest.mark.parametrize("length", [10, MAX_POINTS, 100_003])
def test_the_chart_draws_a_long_timeline_reduced_as_the_analysis_reduces_it(
    single_report: Report, length: int
) -> None:
    # A timeline from elsewhere may be longer than the analysis keeps: the chart reduces it with
    # the analysis' downsampler (each bucket's highest point), so the peak is drawn.
    values = [(i * 7919) % 1000 for i in range(length)]
    values[length // 3] = 5000
    report = with_run(
        single_report, "eager", timeline=Timeline(t_ns=tuple(range(length)), bytes=tuple(values))
    )
    timeline = section(render_html(report), "timeline")
    assert timeline.count("<svg ") == 1
    assert "peak 8.0 MiB during aten::add" in re.findall(r"<text[^>]*>([^<]*)</text>", timeline)


def test_jupyter_without_matplotlib_shows_everything_but_the_chart(
    compare_report: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what a missing package looks like
    fragment = compare_report._repr_html_()
    assert "<svg" not in fragment
    assert "The chart needs matplotlib: <code>pip install matplotlib</code>" in fragment
    assert re.findall(r'<section id="([^"]+)">', fragment) == list(SECTION_IDS)
    with pytest.raises(UsageError, match="pip install matplotlib"):
        render_html(compare_report)


# ---- what is live at the peak --------------------------------------------------------------------


def test_at_peak_section_lists_every_entry_with_exact_bytes(explained_report: Report) -> None:
    page = render_html(explained_report)
    assert re.findall(r'<section id="([^"]+)">', page) == list(SECTION_IDS)
    body = section(page, "at-peak")
    assert "footprint 10.0 MiB = 4.0 MiB live at the start + 6.0 MiB peak above it" in body
    table = re.search(r'<table class="at-peak-entries sortable">(.*?)</table>', body, re.S)
    assert table
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(1).split("<tbody>")[1], re.S)
    assert [re.search(r'data-sort="(\d+)"', row).group(1) for row in rows] == [  # type: ignore[union-attr]
        str(4 * MIB),
        str(2 * MIB),
        str(2 * MIB),
        str(2 * MIB),
    ]
    assert "<code>model.py:12</code>" in rows[0] and "<code>aten::addmm</code>" in rows[0]
    assert f"<code>{ESCAPED_SCRIPT} (backward)</code>" in rows[1]  # the module, escaped
    assert SCRIPT_LABEL not in page


def test_the_timeline_stacked_by_category_draws_each_category_and_the_peak(explained_report: Report) -> None:
    body = section(render_html(explained_report), "at-peak")
    chart = re.search(r'<figure class="chart category-chart".*?</figure>', body, re.S)
    assert chart
    categories = re.findall(r'<path class="category" data-category="([a-z_]+)"', chart.group(0))
    assert categories == ["parameter", "optimizer_state", "activation", "temporary"]  # stacked bottom up
    assert 'data-tip="activation: 4.0 MiB (4,194,304 B) at the peak"' in chart.group(0)
    assert ">peak 10.0 MiB</text>" in chart.group(0)


def test_the_icicle_nests_modules_and_lines_with_their_sizes(explained_report: Report) -> None:
    body = section(render_html(explained_report), "at-peak")
    icicle = re.search(r'<div class="icicle".*?</div><p class="help">', body, re.S)
    assert icicle
    bars = re.findall(r'data-bytes="(\d+)" data-tip="([^"]*)"', icicle.group(0))
    tips = {tip: int(nbytes) for nbytes, tip in bars}
    assert tips["eager: 10.0 MiB (10,485,760 B)"] == 10 * MIB  # the footprint
    assert tips["net: 8.0 MiB (8,388,608 B)"] == 8 * MIB  # net.fc1's entries under net
    assert tips["net.fc1: 8.0 MiB (8,388,608 B)"] == 8 * MIB
    assert tips["model.py:12: 4.0 MiB (4,194,304 B)"] == 4 * MIB
    assert tips["model.py:20 (backward): 2.0 MiB (2,097,152 B)"] == 2 * MIB
    assert "optimizer_state (before the call): 2.0 MiB (2,097,152 B)" in tips
    # Each box as wide as its bytes: net is 80% of the footprint, the hostile module 20%.
    assert 'style="width:80.0000%"' in icicle.group(0) and 'style="width:20.0000%"' in icicle.group(0)


def test_runs_not_explained_say_so(compare_report: Report) -> None:
    body = section(render_html(compare_report), "at-peak")
    assert "Not explained" in body and "<table" not in body
