"""Reports of recordings (chrome traces, CUDA memory snapshots) in every format, and the
device-wide numbers (footprint, live at start, reserved) of runs that know them.

The terminal and Markdown of one real trace and one real snapshot are golden files: regenerate
them after an intended change with ``pytest tests/test_report_recorded.py --update-golden`` and
review the diff."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import make_single_report
from gpu_data import gpu_file
from test_terminal import check_golden

import memprof
from memprof.core.errors import InputError
from memprof.model import Report, RunResult
from memprof.model.timeline import Timeline
from memprof.outputs.csv import render_csv
from memprof.outputs.html import CHART_POINTS, render_html
from memprof.outputs.markdown import render_markdown
from memprof.outputs.recorded import device_line, short_site, site_prefix
from memprof.outputs.terminal import render_terminal
from memprof.pipeline import build_report, load_report

MiB, GiB = 1 << 20, 1 << 30
H100 = "tracelens_h100_bert_small.json.gz"
MAGMA = "magma27_cs336.snapshot.pickle"
RECORDED_SECTION_IDS = ("summary", "verdict", "runs", "timeline", "snapshot", "sites", "ops", "notes")
"""The sections of a page of recordings (snapshot and sites when a snapshot is among them, ops
when a trace is, notes when there are any)."""


@pytest.fixture(scope="module")
def trace_report() -> Report:
    return memprof.analyze(gpu_file(H100))


@pytest.fixture(scope="module")
def snapshot_report() -> Report:
    return memprof.analyze(gpu_file(MAGMA), expandable_segments=True)


def test_trace_terminal(trace_report: Report, update_golden: bool) -> None:
    check_golden("analyze_trace.txt", render_terminal(trace_report, top=8), update_golden)


def test_trace_markdown(trace_report: Report, update_golden: bool) -> None:
    check_golden("analyze_trace.md", render_markdown(trace_report, top=8), update_golden)


def test_snapshot_terminal(snapshot_report: Report, update_golden: bool) -> None:
    check_golden("analyze_snapshot.txt", render_terminal(snapshot_report), update_golden)


def test_snapshot_markdown(snapshot_report: Report, update_golden: bool) -> None:
    check_golden("analyze_snapshot.md", render_markdown(snapshot_report), update_golden)


def test_a_saved_report_renders_the_same(
    trace_report: Report, snapshot_report: Report, tmp_path: Path
) -> None:
    for report in (trace_report, snapshot_report):
        path = tmp_path / "r.json"
        path.write_text(report.to_json())
        loaded = load_report(path)
        assert render_terminal(loaded) == render_terminal(report)
        assert render_markdown(loaded) == render_markdown(report)


def test_a_recorded_run_is_summed_up_without_a_wall_time(trace_report: Report) -> None:
    line = (
        "cuda:0: peak 9.5 MiB above the recording's start (footprint 96.6 MiB, 87.1 MiB live at start) "
        "during aten::linear"
    )
    assert repr(trace_report.runs["cuda:0"]) == f"<memprof.RunResult {line}; 30 ops>"
    assert line in repr(trace_report) and "wall" not in repr(trace_report)


def test_trace_html_sections_timeline_and_size() -> None:
    report = memprof.analyze(gpu_file("hta_df_index_resolver_V100_2rank.json.gz"))
    page = render_html(report)
    # A trace has no snapshot and no sites, and this one no notes: those sections are left out.
    assert re.findall(r'<section id="([^"]+)">', page) == [
        s for s in RECORDED_SECTION_IDS if s not in ("snapshot", "sites", "notes")
    ]
    # 26,770 memory events: the report keeps 4,000 points, the chart draws at most CHART_POINTS
    # per line, so the page stays small.
    assert len(report.runs["cuda:1"].timeline) == 4000
    assert len(page) < 250_000
    chart = page[page.index('<figure class="mp-chart"') : page.index("</figure>")]
    assert len(chart) < 150_000
    data = json.loads(
        chart[chart.index('class="mp-data">') + len('class="mp-data">') : chart.index("</script>")]
    )
    assert [run["label"] for run in data["runs"]] == ["cuda:1"]  # the GPU's: the host's is not drawn
    assert len(data["runs"][0]["t"]) == len(data["runs"][0]["r"]) == CHART_POINTS
    assert (
        "<b>cuda:1</b>: peak 2.4 GiB above start" in chart
        and "during <code>aten::clone</code>; 3.8 GiB live at start (dashed), reserved peak 11.9 GiB" in chart
    )
    assert "cuda:1: peak 2.4 GiB above the recording&#x27;s start (footprint 6.2 GiB" in chart  # its label
    assert "cuda:1: footprint 6.2 GiB = 19.4% of this Tesla V100-SXM2-32GB&#x27;s 31.7 GiB" in page


def test_snapshot_html_shows_sites_with_bars_and_the_model(snapshot_report: Report) -> None:
    page = render_html(snapshot_report)
    # A snapshot has no ops (and this one no notes): those sections are left out.
    assert re.findall(r'<section id="([^"]+)">', page) == [
        s for s in RECORDED_SECTION_IDS if s not in ("ops", "notes")
    ]
    start = page.index('<section id="sites">')
    sites = page[start : page.index("</section>", start)]
    assert sites.count('<span class="bar"') == 19  # every site (19), largest = full width
    assert 'style="width:100.0%"' in sites
    assert "torch\\functional.py:373 einsum" in sites
    assert "455 of 455 blocks at dump as recorded: exact" in page
    assert "<code>expandable_segments:True</code>" in page
    assert CHART_POINTS <= 4000


def test_csv_of_a_trace_has_a_row_per_op_and_run(trace_report: Report) -> None:
    rows = render_csv(trace_report).splitlines()
    assert rows[0] == "run,name,calls,self_bytes,total_bytes,allocated_bytes,peak_bytes,self_us,total_us"
    assert {row.split(",")[0] for row in rows[1:]} == {"cpu", "cuda:0"}
    assert len(rows) - 1 == sum(len(run.op_stats) for run in trace_report.runs.values())


# --------------------------------------------------------------------------------------------
# Device-wide numbers on a live run: shown where known, absent elsewhere


def cuda_report() -> Report:
    """A CUDA run as `memprof run` records it: 8 MiB above a start of 2 GiB live, max_memory_allocated
    2 GiB + 8 MiB, 3 GiB reserved, on an 80 GiB device."""
    run = RunResult(
        label="eager",
        peak_bytes=8 * MiB,
        footprint_bytes=2 * GiB + 8 * MiB,
        live_at_start_bytes=2 * GiB,
        reserved_peak_bytes=3 * GiB,
        allocated_bytes=16 * MiB,
        device="cuda:0",
        device_name="NVIDIA A100 80GB PCIe",
        device_total_bytes=80 * GiB,
        peak_op="aten::add",
        timeline=Timeline(t_ns=(0, 10), bytes=(0, 8 * MiB)),
    )
    return build_report(
        target="m:f", device="cuda:0", runs={"eager": run}, environment={"torch": "2.4.0+cu121"}
    )


def test_a_live_cuda_run_shows_footprint_live_at_start_reserved_and_its_share_of_the_device() -> None:
    report = cuda_report()
    # (2 GiB + 8 MiB) / 80 GiB = 2.51%; 3 GiB / 80 GiB = 3.75%
    line = (
        "eager: footprint 2.0 GiB = 2.5% of this NVIDIA A100 80GB PCIe's 80.0 GiB; "
        "reserved peak 3.0 GiB = 3.8%"
    )
    assert device_line(report.runs["eager"]) == line
    text = render_terminal(report, width=200)
    assert text.splitlines()[2].split() == [
        "run", "peak", "footprint", "live", "at", "start", "reserved", "peak", "allocated", "net", "args",
        "wall/call", "peak", "during",
    ]  # fmt: skip
    assert text.splitlines()[4].split()[:9] == [
        "eager",
        "8.0",
        "MiB",
        "2.0",
        "GiB",
        "2.0",
        "GiB",
        "3.0",
        "GiB",
    ]
    assert line in text.splitlines()
    # At 80 columns live at start goes first (the footprint and reserve stay), and the device's
    # line wraps.
    narrow = render_terminal(report, width=80)
    assert max(map(len, narrow.splitlines())) <= 80
    assert narrow.splitlines()[2].split()[:5] == ["run", "peak", "footprint", "reserved", "peak"]
    assert "left out at 80 columns: live at start" in narrow
    assert "reserved peak 3.0 GiB = 3.8%" in narrow
    markdown = render_markdown(report).replace("\u00a0", " ")
    assert "| run | peak | footprint | live at start | reserved peak | allocated |" in markdown
    assert f"- {line}".replace("_", "\\_") in markdown
    page = render_html(report)
    assert re.findall(r'<section id="([^"]+)">', page) == ["summary", "verdict", "runs", "timeline", "ops"]
    assert '<th scope="col">footprint</th>' in page and line.replace("'", "&#x27;") in page


def test_a_live_cpu_run_knows_none_of_them_and_writes_none() -> None:
    report = make_single_report()
    run = report.runs["eager"]
    assert (run.footprint_bytes, run.live_at_start_bytes, run.reserved_peak_bytes, run.rank) == (None,) * 4
    data = report.to_dict()["runs"]["eager"]
    assert not {"footprint_bytes", "live_at_start_bytes", "reserved_peak_bytes", "rank", "snapshot"} & set(
        data
    )
    assert "footprint" not in render_terminal(report) and "footprint" not in render_markdown(report)


def test_reports_written_before_these_fields_still_load() -> None:
    base = load_report(Path(__file__).parent / "data" / "gate" / "base.json")
    assert base.source is None and base.kind is memprof.ReportKind.RUN
    run = base.runs["eager"]
    assert (run.device, run.footprint_bytes, run.snapshot, run.allocator_model) == (None, None, None, None)


def test_a_report_written_when_mode_named_the_recording_loads_the_same(
    trace_report: Report, snapshot_report: Report
) -> None:
    # Reports written before runs had a ``source`` put "trace" or "snapshot" in ``mode``.
    for report, name in ((trace_report, "trace"), (snapshot_report, "snapshot")):
        data = report.to_dict()
        for run in data["runs"].values():
            assert (run.pop("source"), run["mode"]) == (name, None)
            run["mode"] = name
        loaded = Report.from_dict(data, "old.json")
        assert {(run.source, run.mode) for run in loaded.runs.values()} == {(name, None)}
        assert loaded.kind is memprof.ReportKind.RECORDED
        assert loaded.to_json() == report.to_json()
        assert render_terminal(loaded) == render_terminal(report)


def test_an_estimate_written_before_runs_had_a_source_is_an_estimate() -> None:
    data = json.loads((Path(__file__).parent / "data" / "estimate-similarity.json").read_text())
    assert "source" not in data["runs"]["estimate"]
    run = Report.from_dict(data).runs["estimate"]
    assert (run.source, run.mode, memprof.ReportKind.of_run(run)) == (
        "estimate",
        "eager",
        memprof.ReportKind.ESTIMATE,
    )
    live = Report.from_dict(json.loads((Path(__file__).parent / "data" / "similarity.json").read_text()))
    assert {(run.source, run.mode) for run in live.runs.values()} == {("live", "eager"), ("live", "compile")}


def test_the_new_fields_are_checked_when_read(tmp_path: Path) -> None:
    data = cuda_report().to_dict()
    data["runs"]["eager"]["footprint_bytes"] = -1
    with pytest.raises(InputError, match=r"runs\.eager\.footprint_bytes must be a number of bytes"):
        Report.from_dict(data, "r.json")
    snapshot = memprof.analyze(gpu_file(MAGMA)).to_dict()
    snapshot["runs"]["cuda:0"]["allocator_model"]["reserved_matched"] = "yes"
    with pytest.raises(
        InputError, match=r"allocator_model\.reserved_matched must be true or false, got 'yes'"
    ):
        Report.from_dict(json.loads(json.dumps(snapshot)), "r.json")


def test_runs_on_different_devices_or_ranks_are_not_compared() -> None:
    report = cuda_report()
    other = RunResult(label="cpu", peak_bytes=1, device="cpu")
    assert build_report(target="t", runs={**report.runs, "cpu": other}).diffs == ()
    ranked = {label: RunResult(label=label, peak_bytes=1, rank=rank) for rank, label in enumerate(("a", "b"))}
    assert build_report(target="t", runs=ranked).diffs == ()
    same = {label: RunResult(label=label, peak_bytes=1, device="cuda:0") for label in ("a", "b")}
    assert len(build_report(target="t", runs=same).diffs) == 1


def test_sites_are_shown_without_the_folder_they_share() -> None:
    sites = ["/home/u/proj/model.py:12 forward", "/home/u/proj/lib/ops.py:3 mm", "(C++) MmBackward0"]
    assert site_prefix(sites) == "/home/u/proj/"
    assert site_prefix(["D:\\a\\b.py:1 f", "D:\\a\\c\\d.py:2 g"]) == "D:\\a\\"
    assert site_prefix(sites[:1]) == ""  # one path: nothing to share
    assert short_site(sites[0], "/home/u/proj/") == "model.py:12 forward"
    assert short_site("D:\\a\\c\\d.py:2 g") == "d.py:2 g"  # the drive's colon is not the line's
    assert short_site("(C++) MmBackward0") == "(C++) MmBackward0"
