"""The HTML report: sections, escaping, no external reference, the chart, sortable data."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import MIB, PIPE_NAME, SCRIPT_LABEL

from memprof.model import Report
from memprof.model.timeline import MAX_POINTS, Timeline
from memprof.outputs.chart import CHART_POINTS
from memprof.outputs.html import render_html
from memprof.outputs.notebook import notebook_html
from memprof.pipeline import load_report

DATA = Path(__file__).parent / "data"
ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"
SECTION_IDS = ("summary", "verdict", "runs", "timeline", "at-peak", "ops", "fused", "notes", "torch-table")
"""The sections of a page of live runs, in order (each only when it has something to show)."""


def section(page: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}">(.*?)</section>', page, re.S)
    assert match, f"no section {section_id}"
    return match.group(1)


def test_standalone_page_has_every_section_and_forbids_other_sources(compare_report: Report) -> None:
    page = render_html(compare_report)
    assert page.startswith("<!DOCTYPE html>\n")
    # Every section but at-peak: these runs were not explained (an explained run's page below).
    assert re.findall(r'<section id="([^"]+)">', page) == [s for s in SECTION_IDS if s != "at-peak"]
    assert "default-src 'none'" in page  # the page's CSP: nothing but itself may load
    assert "<title>memprof: tests.workload:sub_abs</title>" in page


def test_no_reference_leaves_the_page(compare_report: Report) -> None:
    page = render_html(compare_report)
    # The only absolute URL is the SVG namespace name the script creates elements in (an
    # identifier, never fetched).
    urls = set(re.findall(r"""https?://[^\s"'<>)]+""", page))
    assert urls == {"http://www.w3.org/2000/svg"}
    for attr in re.findall(r'<[^>]*\b(?:xlink:href|href)="([^"]*)"', page):
        assert attr.startswith("#"), attr
    assert re.findall(r"\bsrc=", page) == []
    assert all(ref.startswith("#") for ref in re.findall(r"url\(([^)]*)\)", page))
    assert "@import" not in page and "@font-face" not in page


def test_every_name_is_escaped(compare_report: Report) -> None:
    page = render_html(compare_report)
    assert SCRIPT_LABEL not in page
    # The chart's data (JSON, never run) and the page's own script, nothing else.
    assert page.count("<script") == 2
    assert '<script type="application/json" class="mp-data">' in page
    assert f"<code>{ESCAPED_SCRIPT}</code>" in page
    assert PIPE_NAME not in page
    assert "my|op &amp; &lt;b&gt;&#x27;quoted&#x27; &quot;twice&quot;&lt;/b&gt;" in page
    # torch's own table, also escaped, in a collapsible block.
    table = section(page, "torch-table")
    assert "<details><summary>eager</summary><pre>" in table
    assert f"{ESCAPED_SCRIPT}  -319.00 MB" in table


def with_run(report: Report, label: str, **changes: object) -> Report:
    return replace(report, runs={**report.runs, label: replace(report.runs[label], **changes)})


def chart_data(page: str) -> dict:
    text = re.search(r'<script type="application/json" class="mp-data">(.*?)</script>', page, re.S)
    assert text
    return json.loads(text.group(1))


def test_the_chart_label_and_data_are_escaped_too(compare_report: Report) -> None:
    eager = replace(compare_report.runs["eager"], peak_op=SCRIPT_LABEL + " $x$", label="<b>eager</b>")
    compare_report = replace(
        compare_report, runs={"<b>eager</b>": eager, "compile": compare_report.runs["compile"]}
    )
    timeline = section(render_html(compare_report), "timeline")
    assert SCRIPT_LABEL not in timeline and "<b>eager</b>" not in timeline
    assert f"peak 320.0 MiB during {ESCAPED_SCRIPT} $x$" in timeline  # the aria-label
    assert f"<code>{ESCAPED_SCRIPT} $x$</code>" in timeline  # the legend
    # Inside the data block "<" is written \u003c: no label can close the script element.
    assert chart_data(timeline)["runs"][0]["label"] == "<b>eager</b>"
    assert "</b>" not in re.search(r'class="mp-data">(.*?)</script>', timeline, re.S).group(1)


def test_timeline_puts_every_run_on_one_scale_with_the_peak_time(compare_report: Report) -> None:
    timeline = section(render_html(compare_report), "timeline")
    # Two layouts of the same paths (overlaid; one panel per run), a toggle between them.
    assert re.findall(r'<svg class="mp-svg" data-layout="(\w+)"', timeline) == ["overlay", "stacked"]
    assert "one panel per run (shared y axis)" in timeline
    legend = re.sub(r"<[^>]+>", "", re.search(r'<ul class="mp-legend">(.*?)</ul>', timeline).group(1))
    # eager peaks (320 MiB) 2 ms after its call started, compile (1 MiB) at 0.5 ms.
    assert "eager: peak 320.0 MiB at 2.000 ms during aten::abs" in legend
    assert "compile: peak 1.0 MiB at 0.500 ms during cpp_fused_abs_sub_0" in legend
    paths = dict(re.findall(r'<path id="mp\w+-line-(\d)" d="([^"]+)"', timeline))
    # Step lines in data units: x in ms since the call started.
    assert re.findall(r"[MH](-?[\d.]+)", paths["0"]) == ["0", "1", "2", "3", "4"]
    heights = {
        run: [float(y) for y in re.findall(r"(?:M-?[\d.]+ |V)([\d.]+)", d)] for run, d in paths.items()
    }
    # One scale: 1 MiB is drawn at the same height in both runs (the eager run ends at 1 MiB).
    assert heights["0"][-1] == heights["1"][-1] == heights["1"][1]
    assert heights["0"][2] == min(heights["0"])  # 320 MiB, the highest point, is the top
    data = chart_data(timeline)
    assert data["runs"][0]["t"] == [0, 1, 2, 3, 4] and data["runs"][0]["b"][2] == 320 * MIB
    assert "time since the call started (ms)" in timeline


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


def test_single_run_has_no_empty_sections(single_report: Report) -> None:
    page = render_html(single_report)
    assert '<p class="verdict">eager: peak 8.0 MiB above the call&#x27;s start during aten::add</p>' in page
    assert '<table class="ops sortable" data-run="eager">' in page
    # Nothing to say: no section says so (no "Notes: None", no fused kernels of a single run,
    # no torch table, no word about deltas between runs there are not).
    assert re.findall(r'<section id="([^"]+)">', page) == ["summary", "verdict", "runs", "timeline", "ops"]
    assert "Deltas" not in page and "None." not in page


def test_a_run_without_allocations_has_no_chart(single_report: Report) -> None:
    single_report = with_run(single_report, "eager", timeline=Timeline())
    timeline = section(render_html(single_report), "timeline")
    assert "<svg" not in timeline
    assert "No allocations were recorded" in timeline


def test_jupyter_fragment_brings_its_own_colours(compare_report: Report) -> None:
    fragment = notebook_html(compare_report)
    assert "<html" not in fragment and "<!DOCTYPE" not in fragment
    assert fragment.startswith("<style>\n.memprof-report{--mp-bg:#ffffff;--mp-fg:#1b1b1b;")
    # The root paints its own background and text, whatever the notebook's theme.
    assert "background:var(--mp-bg);color:var(--mp-fg)" in fragment
    assert re.findall(r'<section id="([^"]+)">', fragment) == [s for s in SECTION_IDS if s != "at-peak"]


def test_rendering_is_repeatable(compare_report: Report) -> None:
    assert render_html(compare_report) == render_html(compare_report)


def test_real_report_from_json() -> None:
    report = load_report(DATA / "similarity-compare.json")
    page = render_html(report)
    assert "torch.compile lowers peak memory by 793.5 MiB (-99.8%): 795.4 MiB -&gt; 1.9 MiB" in page
    assert f'data-sort="{834_000_000}" title="834,000,000 B">795.4 MiB</td>' in section(page, "runs")
    assert "cpp_fused_abs_lt_sub_sum_unsqueeze_0" in section(page, "fused")


def test_quiet_rows_are_behind_a_toggle_and_long_notes_collapsed() -> None:
    page = render_html(load_report(DATA / "transformer-step.json"))
    ops = section(page, "ops")
    quiet = re.findall(r'<tr class="quiet" title="hidden: ([^"]+)">', ops)
    # 62 without memory activity, 5 repeating an op they call, 24 wrappers (autograd's ranges).
    assert len(quiet) == 91 and quiet.count("no memory activity") == 62
    assert quiet.count("wrapper range") == 23 and "folded into CompiledFunctionBackward" in quiet
    assert "show 91 more ops (no memory activity, repeating or wrapping an op they call)" in ops
    assert '<input type="search" class="mp-filter" placeholder="Filter ops by name"' in ops
    # A note naming two kernels of 90 characters each is collapsed to one line.
    row = re.search(r'<tr><td class="name" data-sort="aten::_log_softmax">.*?</tr>', ops).group(0)
    assert '<details class="note"><summary>fused into 2 kernels</summary>' in row


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
    (run,) = chart_data(timeline)["runs"]
    assert len(run["b"]) == min(length, CHART_POINTS) and max(run["b"]) == 5000
    assert run["t"][run["b"].index(5000)] == (length // 3) / 1e6


def test_the_page_needs_no_plotting_library(compare_report: Report, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what a missing package looks like
    assert '<svg class="mp-svg"' in render_html(compare_report)


# ---- what is live at the peak --------------------------------------------------------------------


def test_at_peak_section_lists_every_entry_with_exact_bytes(explained_report: Report) -> None:
    page = render_html(explained_report)
    assert re.findall(r'<section id="([^"]+)">', page) == [*SECTION_IDS[:5], "ops"]
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
    assert '<svg class="mp-stacked"' in chart.group(0)  # on the timeline chart's axes, no plotting library


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


def test_runs_not_explained_have_no_at_peak_section(compare_report: Report) -> None:
    assert all(run.at_peak is None for run in compare_report.runs.values())
    assert '<section id="at-peak">' not in render_html(compare_report)


def test_a_recordings_chart_starts_its_axis_near_what_was_live_from_the_start() -> None:
    # 8.7 GiB live from the start and a 60 MiB peak above it: on an axis from 0 a flat line.
    import re

    from memprof.model.timeline import Timeline
    from memprof.outputs.chart import timeline_chart
    from memprof.outputs.document import Series, TimelineChart

    gib, mib = 1024**3, 1024**2
    live = Timeline(t_ns=(0, 1_000_000, 2_000_000), bytes=(0, 60 * mib, 10 * mib))

    def ticks(series: Series) -> list[str]:
        svg = timeline_chart(TimelineChart((series,), x_label="ms", caption="", points=100), "mp1")
        return re.findall(r'class="mp-tick" [^>]*text-anchor="end">([^<]*)<', svg)

    recorded = ticks(Series("cuda:0", live, 60 * mib, start_bytes=int(8.7 * gib)))
    assert recorded and all(t.endswith(" GiB") for t in recorded)
    assert 8.6 < min(float(t.split()[0]) for t in recorded) <= 8.7
    # A run measured from its call's start is drawn from 0, as before.
    assert ticks(Series("eager", live, 60 * mib))[0] == "0 MiB"
