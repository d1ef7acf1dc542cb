"""Reports of several ranks, built by hand: the per-rank summary and imbalance
(``memprof.analysis.ranks``), how every format shows them, the gate per rank, and how ranks'
reports are relabelled, merged and exchanged. The same code serves runs profiled live under
torchrun (``rank0``, ``rank1/eager``) and per-rank traces (``rank1/cuda:1``), so both kinds are
built here; ``tests/test_distributed.py`` runs real jobs."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from conftest import MIB, SCRIPT_LABEL, op_stats

from memprof.analysis.gate import GateConfig, evaluate, parse_budget
from memprof.analysis.ranks import group_of, summarize
from memprof.core.errors import UsageError
from memprof.library.jobs import failed_rank, for_rank, merge
from memprof.model import Report, RunResult
from memprof.model.timeline import Timeline
from memprof.outputs.html import render_html
from memprof.outputs.markdown import render_markdown
from memprof.outputs.ranks import rank_view
from memprof.outputs.terminal import render_terminal
from memprof.pipeline import build_report, compared, failed_run, load_report
from memprof.sources.distributed import (
    Exchange,
    RankEnv,
    exchange_folder,
    rank_env,
    rank_labels,
)


def ranked_run(label: str, rank: int, peak: int, mode: str = "eager", **extra: object) -> RunResult:
    """A run of ``rank`` whose one op, ``aten::mm``, allocates ``peak`` bytes."""
    return RunResult(
        label=label,
        mode=mode,
        rank=rank,
        peak_bytes=peak,
        allocated_bytes=peak,
        wall_ms=10.0 + rank,
        peak_op="aten::mm",
        op_stats=op_stats([(f"aten::mm#{rank}", 1, peak, peak, peak, peak)]),
        timeline=Timeline(t_ns=(0, 1_000, 2_000), bytes=(0, peak, 0)),
        **extra,  # type: ignore[arg-type]
    )


def live_report(*peaks: int) -> Report:
    """A torchrun job profiled live: rank r's one run ``rank<r>`` peaks at ``peaks[r]``."""
    runs = {f"rank{r}": ranked_run(f"rank{r}", r, peak) for r, peak in enumerate(peaks)}
    return build_report(
        target="train:step", device="cpu", runs=runs, environment={"torch": "2.13.0+cpu", "world_size": "2"}
    )


def trace_report() -> Report:
    """Per-rank CUDA traces, labelled the way a folder of traces is: ``rank<r>/cuda:<r>``; the
    allocator's reserved bytes are known (from the device's counters here)."""
    runs = {
        f"rank{r}/cuda:{r}": ranked_run(
            f"rank{r}/cuda:{r}", r, peak, device_counters={"max_memory_reserved_bytes": reserved}
        )
        for r, (peak, reserved) in enumerate(
            [(30 * MIB, 40 * MIB), (90 * MIB, 128 * MIB), (60 * MIB, 64 * MIB)]
        )
    }
    return build_report(
        target="traces/", device="cuda:0, cuda:1, cuda:2", runs=runs, environment={"torch": "2.4.0"}
    )


# ------------------------------------------------------------------------------ the summary


@pytest.mark.parametrize(
    ("label", "group"),
    [
        ("rank0", ""),
        ("rank12", ""),
        ("rank0/eager", "eager"),
        ("rank1/compile", "compile"),
        ("rank3/cuda:3", "cuda"),
        ("rank1/cpu", "cpu"),
        ("eager", "eager"),
    ],
)
def test_runs_of_different_ranks_compare_by_what_follows_their_rank(label: str, group: str) -> None:
    assert group_of(label) == group


def test_live_runs_give_one_row_per_rank_and_the_imbalance() -> None:
    summary = live_report(4_457_476, 7_865_348).ranks
    assert summary is not None
    assert [(row.rank, row.label, row.peak_bytes, row.peak_op) for row in summary.rows] == [
        (0, "rank0", 4_457_476, "aten::mm"),
        (1, "rank1", 7_865_348, "aten::mm"),
    ]
    assert [row.wall_ms for row in summary.rows] == [10.0, 11.0]
    (imbalance,) = summary.imbalances
    assert (imbalance.highest_rank, imbalance.lowest_rank) == (1, 0)
    assert imbalance.ratio == 7_865_348 / 4_457_476
    assert (
        imbalance.line
        == "imbalance: rank 1's peak 7.5 MiB is 1.76x rank 0's 4.3 MiB (highest over lowest peak)"
    )
    assert summary.highest_rank == 1
    assert not summary.known("footprint_bytes") and not summary.known("reserved_peak_bytes")


def test_trace_like_runs_are_summarised_the_same_way() -> None:
    summary = trace_report().ranks
    assert summary is not None
    assert [row.group for row in summary.rows] == ["cuda", "cuda", "cuda"]
    assert [row.reserved_peak_bytes for row in summary.rows] == [40 * MIB, 128 * MIB, 64 * MIB]
    (imbalance,) = summary.imbalances
    assert (imbalance.group, imbalance.highest_label, imbalance.lowest_label) == (
        "cuda",
        "rank1/cuda:1",
        "rank0/cuda:0",
    )
    assert imbalance.ratio == 3.0
    assert imbalance.line == (
        "imbalance (cuda): rank 1's peak 90.0 MiB is 3.00x rank 0's 30.0 MiB (highest over lowest peak)"
    )


@dataclass(frozen=True)
class TraceRun:
    """A run as another source may make it: with a footprint and reserved bytes of its own."""

    label: str
    rank: int | None
    peak_bytes: int
    footprint_bytes: int
    reserved_peak_bytes: int
    status: str = "ok"
    error: str | None = None
    wall_ms: float = float("nan")
    peak_op: str | None = None
    device_counters: dict[str, int] | None = None


def test_a_runs_own_footprint_and_reserved_bytes_are_shown_where_it_has_them() -> None:
    runs = [TraceRun("rank0/cuda:0", 0, 10, 110, 200), TraceRun("rank1/cuda:1", 1, 20, 120, 300)]
    summary = summarize(runs)  # type: ignore[arg-type]
    assert summary is not None
    assert [(row.footprint_bytes, row.reserved_peak_bytes) for row in summary.rows] == [
        (110, 200),
        (120, 300),
    ]
    assert summary.known("footprint_bytes") and summary.known("reserved_peak_bytes")


def test_eager_and_compiled_runs_each_get_their_imbalance() -> None:
    runs = {
        "rank0/eager": ranked_run("rank0/eager", 0, 8 * MIB),
        "rank0/compile": ranked_run("rank0/compile", 0, 2 * MIB, mode="compile"),
        "rank1/eager": ranked_run("rank1/eager", 1, 4 * MIB),
        "rank1/compile": ranked_run("rank1/compile", 1, 3 * MIB, mode="compile"),
    }
    summary = build_report(target="m:f", runs=runs).ranks
    assert summary is not None
    assert [(i.group, i.highest_rank, i.lowest_rank, i.ratio) for i in summary.imbalances] == [
        ("eager", 0, 1, 2.0),
        ("compile", 1, 0, 1.5),
    ]
    assert summary.highest_rank == 0  # 8 MiB, the highest peak of any run


def test_a_failed_rank_is_a_row_without_numbers_and_outside_the_imbalance() -> None:
    failed = replace(failed_run("rank2", "eager", "step raised RuntimeError: boom"), rank=2)
    report = live_report(3 * MIB, 5 * MIB)
    report = compared(replace(report, runs={**report.runs, "rank2": failed}))
    summary = report.ranks
    assert summary is not None
    row = summary.rows[2]
    assert (row.status, row.peak_bytes, row.error) == ("failed", None, "step raised RuntimeError: boom")
    (imbalance,) = summary.imbalances
    assert (imbalance.highest_rank, imbalance.lowest_rank) == (1, 0)


def test_equal_peaks_still_name_two_ranks_and_a_zero_peak_has_no_ratio() -> None:
    (even,) = live_report(MIB, MIB).ranks.imbalances  # type: ignore[union-attr]
    assert (even.highest_rank, even.lowest_rank, even.ratio) == (0, 1, 1.0)
    (zero,) = live_report(0, MIB).ranks.imbalances  # type: ignore[union-attr]
    assert (zero.highest_rank, zero.lowest_rank, zero.ratio) == (1, 0, None)
    assert zero.line == "imbalance: rank 1's peak 1.0 MiB; rank 0's is 0 B"
    (nothing,) = live_report(0, 0).ranks.imbalances  # type: ignore[union-attr]
    assert (nothing.ratio, nothing.line) == (None, "imbalance: none, every rank's peak is 0 B")
    (close,) = live_report(4_457_476, 4_457_480).ranks.imbalances  # type: ignore[union-attr]
    assert "rank 1's peak 4,457,480 B is 1.0000x rank 0's 4,457,476 B" in close.line


def test_one_rank_has_no_imbalance_and_unranked_runs_no_summary(single_report: Report) -> None:
    assert live_report(MIB).ranks.imbalances == ()  # type: ignore[union-attr]
    assert single_report.ranks is None


def test_the_json_holds_each_runs_rank_and_the_summary_and_loads_back(tmp_path: Path) -> None:
    report = live_report(3 * MIB, 6 * MIB)
    document = report.to_dict()
    assert [run["rank"] for run in document["runs"].values()] == [0, 1]
    assert document["ranks"]["imbalances"] == [
        {
            "group": "",
            "highest_rank": 1,
            "highest_label": "rank1",
            "highest_peak_bytes": 6 * MIB,
            "lowest_rank": 0,
            "lowest_label": "rank0",
            "lowest_peak_bytes": 3 * MIB,
            "ratio": 2.0,
        }
    ]
    path = tmp_path / "r.json"
    path.write_text(report.to_json())
    loaded = load_report(path)
    assert loaded.runs["rank1"].rank == 1
    assert loaded.to_dict()["ranks"] == document["ranks"]


def test_unranked_runs_write_no_rank(single_report: Report) -> None:
    document = single_report.to_dict()
    assert "rank" not in document["runs"]["eager"] and "ranks" not in document


# ------------------------------------------------------------------------------ what shows


def test_the_terminal_shows_every_rank_then_details_the_highest() -> None:
    text = render_terminal(live_report(3 * MIB, 6 * MIB))
    lines = text.splitlines()
    assert lines[2].split() == ["rank", "run", "peak", "wall/call", "peak", "during"]
    assert lines[4].split() == ["0", "rank0", "3.0", "MiB", "10.0", "ms", "aten::mm"]
    assert lines[5].split() == ["1", "rank1", "6.0", "MiB", "11.0", "ms", "aten::mm"]
    assert "imbalance: rank 1's peak 6.0 MiB is 2.00x rank 0's 3.0 MiB (highest over lowest peak)" in lines
    assert "Details of rank 1 (the highest peak; rank=K shows another):" in lines
    assert "Top 15 ops of rank1 by peak bytes:" in lines
    assert "aten::mm#1" in text and "aten::mm#0" not in text


def test_rank_k_details_another_rank_and_an_unknown_rank_is_a_usage_error(single_report: Report) -> None:
    text = render_terminal(live_report(3 * MIB, 6 * MIB), rank=0)
    assert "Details of rank 0 (as asked):" in text.splitlines()
    assert "aten::mm#0" in text and "aten::mm#1" not in text
    with pytest.raises(UsageError, match=r"^rank=5: the report's ranks are 0, 1$"):
        render_terminal(live_report(3 * MIB, 6 * MIB), rank=5)
    with pytest.raises(UsageError, match="this report has no ranks"):
        render_terminal(single_report, rank=0)


def test_the_terminal_shows_reserved_bytes_where_known_and_each_ranks_notes() -> None:
    report = trace_report()
    noted = replace(report.runs["rank0/cuda:0"], notes=("rank 0 note",))
    report = replace(report, runs={**report.runs, "rank0/cuda:0": noted})
    lines = render_terminal(report).splitlines()
    assert lines[2].split() == ["rank", "run", "peak", "reserved", "wall/call", "peak", "during"]
    assert lines[5].split()[:6] == ["1", "rank1/cuda:1", "90.0", "MiB", "128.0", "MiB"]
    assert "note (rank0/cuda:0): rank 0 note" in lines  # a rank not detailed keeps its notes


def test_a_failed_rank_says_why_in_the_table() -> None:
    failed = replace(failed_run("rank1", "eager", "step raised RuntimeError: boom"), rank=1)
    report = compared(replace(live_report(MIB), runs={**live_report(MIB).runs, "rank1": failed}))
    lines = render_terminal(report).splitlines()
    assert lines[5].split() == ["1", "rank1", "failed"]
    assert lines[6] == "rank1 failed: step raised RuntimeError: boom"  # under the table, whole
    assert "Details of rank 0 (the highest peak; rank=K shows another):" in lines


def test_a_report_of_two_ranks_fits_80_columns() -> None:
    long_op = "aten::_scaled_dot_product_efficient_attention_backward"
    runs = {
        f"rank{r}/train_step_with_a_long_name": replace(
            ranked_run(f"rank{r}/train_step_with_a_long_name", r, (r + 1) * MIB),
            peak_op=long_op,
            footprint_bytes=(r + 3) * MIB,
            reserved_peak_bytes=(r + 8) * MIB,
            notes=(f"rank {r}: " + "a note long enough to wrap " * 5,),
        )
        for r in range(2)
    }
    text = render_terminal(build_report(target="train:step", runs=runs), width=80)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    header = next(line for line in lines if line.startswith("rank "))
    assert header.split()[:5] == ["rank", "run", "peak", "footprint", "reserved"]
    assert any(
        line.startswith("imbalance (train_step_with_a_long_name): rank 1's peak 2.0 MiB") for line in lines
    )
    assert "Details of rank 1 (the highest peak; rank=K shows another):" in lines
    assert sum(line.startswith("note (rank") for line in lines) == 2  # both ranks' notes, wrapped


def test_markdown_shows_the_ranks_table_the_imbalance_and_the_detailed_rank() -> None:
    text = render_markdown(live_report(3 * MIB, 6 * MIB)).replace("\u00a0", " ")  # sizes kept whole
    assert "| 1 | rank1 | 6.0 MiB | 11.0 ms | `aten::mm` |" in text
    assert "**imbalance: rank 1's peak 6.0 MiB is 2.00x rank 0's 3.0 MiB (highest over lowest peak)**" in text
    assert "### Details of rank 1 (the highest peak; rank=K shows another)" in text
    assert "`aten::mm#1`" in text and "`aten::mm#0`" not in text
    assert "`aten::mm#0`" in render_markdown(live_report(3 * MIB, 6 * MIB), rank=0)


def section(page: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', page, re.S)
    assert match is not None, name
    return match.group(1)


def test_html_adds_the_ranks_section_with_a_bar_per_rank_and_a_timeline_per_rank() -> None:
    page = render_html(trace_report())
    ids = re.findall(r'<section id="([^"]+)">', page)
    # No fused kernels, notes or torch tables in these runs: those sections are left out.
    assert ids == ["summary", "ranks", "verdict", "runs", "timeline", "ops"]
    ranks = section(page, "ranks")
    assert "imbalance (cuda): rank 1&#x27;s peak 90.0 MiB is 3.00x rank 0&#x27;s 30.0 MiB" in ranks
    assert 'id="rank-peaks-chart"' in ranks
    chart = ranks[ranks.index("<svg") :]
    # One bar per rank, named and labelled with its peak; the highest (rank 1's) marked.
    assert all(f">rank{r}/cuda:{r}</text>" in chart for r in range(3))
    assert all(f">{size} MiB</text>" in chart for size in ("30.0", "90.0", "60.0"))
    bars = re.findall(r'<rect class="mp-bar( mp-highest)?" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', chart)
    assert [marked for marked, _ in bars] == ["", " mp-highest", ""]
    widths = [float(width) for _, width in bars]
    assert widths[1] == pytest.approx(3 * widths[0], rel=1e-3) and widths[2] == pytest.approx(
        2 * widths[0], rel=1e-3
    )
    assert "matplotlib" not in page
    assert "128.0 MiB" in ranks  # reserved, where known
    timeline = section(page, "timeline")
    assert all(f"rank{r}/cuda:{r}" in timeline for r in range(3))  # every rank's timeline
    ops = section(page, "ops")
    assert "aten::mm#1" in ops and "aten::mm#0" not in ops  # the highest rank's op table


def test_html_escapes_rank_labels() -> None:
    run = ranked_run(SCRIPT_LABEL, 0, MIB)
    report = build_report(target="m:f", runs={SCRIPT_LABEL: run, "rank1": ranked_run("rank1", 1, MIB)})
    page = render_html(report)
    assert "<script>alert(1)</script>" not in page.replace("<script>(function", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(page, "ranks")


def test_the_view_details_the_highest_ranks_runs() -> None:
    view = rank_view(trace_report())
    assert view is not None
    assert (view.rank, list(view.report.runs)) == (1, ["rank1/cuda:1"])
    # One rank has nothing to set beside it: shown as it is, unless that rank is asked for.
    single = build_report(target="m:f", runs={"eager": ranked_run("eager", 0, 1)})
    assert rank_view(single, None) is None
    assert rank_view(single, 0) is not None


# ------------------------------------------------------------------------------ the gate


def test_a_plain_budget_applies_to_every_rank_and_names_the_one_over_it() -> None:
    result = evaluate(live_report(4_457_476, 7_865_348), GateConfig(budgets=parse_budget("6MB")))
    assert [v.line for v in result.violations] == ["rank1 peak 7.5 MiB exceeds budget 6.0 MiB by 25.0%"]
    assert result.checks == 2


def test_a_budget_per_rank_uses_the_labels() -> None:
    config = GateConfig(budgets=parse_budget("rank0=4MB,rank1=8MB"))
    result = evaluate(live_report(4_457_476, 7_865_348), config)
    assert [v.subject for v in result.violations] == ["rank0"]


def test_a_baseline_compares_each_rank_with_its_own() -> None:
    baseline = live_report(4 * MIB, 6 * MIB)
    result = evaluate(live_report(4 * MIB, 7 * MIB), GateConfig(baseline=baseline, tolerance=0.05))
    assert [v.line for v in result.violations] == [
        "rank1 peak 7.0 MiB exceeds baseline 6.0 MiB by 16.7% (tolerance 5%)"
    ]


def test_compile_must_save_memory_on_every_rank() -> None:
    runs = {
        "rank0/eager": ranked_run("rank0/eager", 0, 8 * MIB),
        "rank0/compile": ranked_run("rank0/compile", 0, 2 * MIB, mode="compile"),
        "rank1/eager": ranked_run("rank1/eager", 1, 4 * MIB),
        "rank1/compile": ranked_run("rank1/compile", 1, 5 * MIB, mode="compile"),
    }
    result = evaluate(build_report(target="m:f", runs=runs), GateConfig(require_compile_saves=True))
    assert result.checks == 2
    assert [v.subject for v in result.violations] == ["rank1/compile"]
    assert result.violations[0].line.startswith("rank1/compile peak 5.0 MiB exceeds rank1/eager peak 4.0 MiB")


# ----------------------------------------------------------------------- naming and merging


def test_rank_env_reads_the_launchers_variables() -> None:
    assert rank_env({}) is None
    env = rank_env(
        {
            "RANK": "3",
            "WORLD_SIZE": "4",
            "LOCAL_RANK": "1",
            "TORCHELASTIC_RUN_ID": "abc",
            "MASTER_ADDR": "node0",
            "MASTER_PORT": "29500",
        }
    )
    assert env == RankEnv(rank=3, world_size=4, local_rank=1, run_id="abc", master="node0:29500")
    with pytest.raises(UsageError, match=r"RANK=4 is not below WORLD_SIZE=4"):
        rank_env({"RANK": "4", "WORLD_SIZE": "4"})
    with pytest.raises(UsageError, match=r"WORLD_SIZE='two' is not a whole number"):
        rank_env({"RANK": "0", "WORLD_SIZE": "two"})


def test_the_shared_folder_is_torchelastics_for_this_attempt_else_named_after_the_job(tmp_path: Path) -> None:
    error_file = tmp_path / "run_x" / "attempt_0" / "1" / "error.json"
    env = RankEnv(rank=1, world_size=2, local_rank=1, error_file=str(error_file))
    assert exchange_folder(env) == tmp_path / "run_x" / "attempt_0" / "memprof"
    plain = exchange_folder(RankEnv(rank=1, world_size=2, local_rank=1, run_id="job 7", master="h:29500"))
    assert plain.name.startswith("memprof-") and plain.name.endswith("-job_7-h_29500-2")


def test_labels_and_merging(compare_report: Report) -> None:
    assert rank_labels(2, ["eager"]) == ["rank2"]
    assert rank_labels(2, ["eager", "compile"]) == ["rank2/eager", "rank2/compile"]
    ranked = for_rank(compare_report, 1)
    assert list(ranked.runs) == ["rank1/eager", "rank1/compile"]
    assert {run.label: run.rank for run in ranked.runs.values()} == {"rank1/eager": 1, "rank1/compile": 1}
    missing = failed_rank(2, ranked.runs, "rank 2 did not report")
    assert list(missing) == ["rank2/eager", "rank2/compile"]
    assert [(run.mode, run.rank, run.failed) for run in missing.values()] == [
        ("eager", 2, "rank 2 did not report"),
        ("compile", 2, "rank 2 did not report"),
    ]
    zero = for_rank(compare_report, 0)
    merged = merge({1: ranked, 0: zero, 2: replace(zero, device="", runs=missing)}, 3, {"backend": "gloo"})
    assert list(merged.runs) == [*zero.runs, *ranked.runs, *missing]
    assert merged.device == "cpu"  # the rank that did not report adds no device
    assert merged.environment["world_size"] == "3" and merged.environment["backend"] == "gloo"


# ------------------------------------------------------------------------------ the exchange


def _env(rank: int, world: int = 3) -> RankEnv:
    return RankEnv(rank=rank, world_size=world, local_rank=rank)


def test_files_carry_each_ranks_report_to_rank_0_and_a_missing_rank_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "exchange"
    one = Exchange(_env(1), timeout=5.0, folder=folder)
    assert one.hand_in("report of rank 1") == str(folder)
    taken = threading.Thread(target=one.wait_taken)
    taken.start()
    got, missing = Exchange(_env(0), timeout=0.3, folder=folder).collect()
    taken.join(5.0)
    assert not taken.is_alive()  # rank 1 saw its report taken
    assert (got, missing) == ({1: "report of rank 1"}, [2])
    assert not folder.exists()  # rank 0 leaves nothing behind


def test_a_rank_whose_report_is_never_taken_stops_waiting(tmp_path: Path) -> None:
    one = Exchange(_env(1), timeout=0.2, folder=tmp_path)
    one.hand_in("{}")
    assert one.wait_taken() is False


def test_the_process_groups_store_carries_reports_between_ranks(tmp_path: Path) -> None:
    import torch.distributed as dist

    store = dist.HashStore()
    one = Exchange(_env(1), timeout=5.0, store=store, folder=tmp_path / "unused")
    two = Exchange(_env(2), timeout=5.0, store=store, folder=tmp_path / "unused")
    assert one.hand_in("one") == "store" and two.hand_in("two") == "store"
    got, missing = Exchange(_env(0), timeout=5.0, store=store, folder=tmp_path / "unused").collect()
    assert (got, missing) == ({1: "one", 2: "two"}, [])
    assert one.wait_taken() and two.wait_taken()
    assert not (tmp_path / "unused").exists()


def test_rank_0_also_reads_a_rank_that_could_only_write_a_file(tmp_path: Path) -> None:
    # A rank whose inputs factory failed before the process group existed.
    import torch.distributed as dist

    store = dist.HashStore()
    Exchange(_env(1), timeout=5.0, store=store, folder=tmp_path).hand_in("by store")
    Exchange(_env(2), timeout=5.0, folder=tmp_path).hand_in("by file")
    got, missing = Exchange(_env(0), timeout=5.0, store=store, folder=tmp_path).collect()
    assert (got, missing) == ({1: "by store", 2: "by file"}, [])


def test_a_handed_in_report_is_the_reports_json(compare_report: Report) -> None:
    from memprof.library.jobs import decode_report

    ranked = for_rank(compare_report, 1)
    assert decode_report(ranked.to_json(), 1).to_dict() == json.loads(ranked.to_json())
    with pytest.raises(Exception, match="the report of rank 1 is not JSON"):
        decode_report("{", 1)
