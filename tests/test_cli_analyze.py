"""``memprof analyze`` on real GPU recordings: what it prints and writes, its gates, and every
way a path can be wrong (exit 2 with one line saying what to do).

Figures are the published reference figures of each recording (tests/gpu_data.py, truth.json),
or worked out by hand for the synthetic snapshot below.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
from gpu_data import SNAPSHOTS, TRACES, gpu_file
from typer.testing import CliRunner

from memprof.core.recording import Provenance, RecordedMemory, Recording
from memprof.core.records import RawProfile
from memprof.frontends.cli import app
from memprof.library.recordings import stem
from memprof.outputs import STANDARD_NAMES
from memprof.pipeline import load_report
from memprof.sources.files.readers import READERS

MiB = 1 << 20
H100 = "tracelens_h100_bert_small.json.gz"
MI300X = "tracelens_mi300x_bert_small.json.gz"
MAGMA = "magma27_cs336.snapshot.pickle"


def invoke(*args: str | Path, columns: int = 1000):
    """``memprof analyze ARGS``; the summary laid out for ``columns`` (wide: a check of a whole
    line sees it unwrapped)."""
    return CliRunner().invoke(app, ["analyze", *map(str, args)], env={"COLUMNS": str(columns)})


def gate_lines(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if " exceeds " in line or line.startswith("memprof gate:"))
    return lines[start:]


# --------------------------------------------------------------------------------------------
# A trace: the reference figures, in the JSON and on the terminal


def test_a_trace_gives_one_run_per_device_with_the_reference_figures(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = invoke(gpu_file(H100), "-q", "--json", out)
    assert result.exit_code == 0, result.output
    ref = TRACES[H100]["gpu"][(1, 0)]
    data = json.loads(out.read_text())
    assert list(data["runs"]) == ["cpu", "cuda:0"]
    gpu = data["runs"]["cuda:0"]
    assert (gpu["label"], gpu["source"], gpu["mode"], gpu["device"]) == ("cuda:0", "trace", None, "cuda:0")
    assert gpu["peak_bytes"] == ref["peak_above_start"] == 9944576
    assert gpu["footprint_bytes"] == ref["max_total_allocated"] == 101305344
    assert gpu["live_at_start_bytes"] == ref["live_at_start"] == 91360768
    assert gpu["reserved_peak_bytes"] == ref["max_total_reserved"] == 121634816
    assert gpu["peak_op"] == "aten::linear" and gpu["peak_op_stack"] == ref["stack"]
    assert (gpu["device_name"], gpu["device_total_bytes"]) == ("NVIDIA H100 80GB HBM3", 85018279936)
    assert gpu["records"] == ref["num_events"]
    assert "rank" not in gpu  # not recorded: left out, read back as None
    # The timeline: live bytes above the start (its highest is the peak), reserved absolute.
    assert max(gpu["timeline"]["bytes"]) == ref["peak_above_start"]
    assert max(gpu["timeline"]["reserved"]) == ref["max_total_reserved"]
    assert "reserved_peak_bytes" not in data["runs"]["cpu"]  # the host's allocator reserves nothing
    assert data["source"] == {
        "kind": "trace",
        "paths": [str(gpu_file(H100))],
        "files": [
            {
                "path": str(gpu_file(H100)),
                "kind": "trace",
                "runs": ["cpu", "cuda:0"],
                "torch_version": "2.6.0",
            }
        ],
    }
    assert data["device"] == "cpu, cuda:0"
    assert data["environment"] == {"torch": "2.6.0", "device_name": "NVIDIA H100 80GB HBM3"}
    assert "diff" not in data  # a GPU is not compared with the host
    assert load_report(out).runs["cuda:0"].footprint_bytes == 101305344


def test_the_terminal_puts_the_peak_against_the_device() -> None:
    result = invoke(gpu_file(H100), "-q", "--top", "3")
    assert result.exit_code == 0
    assert (
        result.stdout.splitlines()[0]
        == "memprof: tracelens_h100_bert_small.json.gz: chrome trace (torch 2.6.0)"
    )
    # 101,305,344 / 85,018,279,936 = 0.119%; 121,634,816 / 85,018,279,936 = 0.143%
    assert (
        "cuda:0: footprint 96.6 MiB = 0.1% of this NVIDIA H100 80GB HBM3's 79.2 GiB; "
        "reserved peak 116.0 MiB = 0.1%"
    ) in result.stdout.splitlines()


def test_a_hip_trace_is_cuda_n_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert invoke(gpu_file(MI300X), "-q", "--json", out).exit_code == 0
    run = load_report(out).runs["cuda:0"]
    ref = TRACES[MI300X]["gpu"][(6, 0)]
    assert (run.peak_bytes, run.footprint_bytes) == (ref["peak_above_start"], ref["max_total_allocated"])
    assert run.device_name == "AMD Instinct MI300X VF"
    assert "cuda:0 is an AMD GPU (HIP, ROCm build of torch)" in run.notes


@pytest.mark.parametrize("name", sorted(TRACES))
def test_every_reference_trace_reads_to_its_figures(name: str) -> None:
    import memprof

    report = memprof.analyze(gpu_file(name))
    for (_, index), ref in TRACES[name]["gpu"].items():
        run = report.runs[f"cuda:{index}"]
        assert run.peak_bytes == ref["peak_above_start"]
        assert run.footprint_bytes == ref["max_total_allocated"]
        assert run.live_at_start_bytes == ref["live_at_start"]
        assert run.reserved_peak_bytes == ref["max_total_reserved"]
        assert list(run.peak_op_stack) == ref["stack"]
        assert run.timeline.bytes and max(run.timeline.bytes) == ref["peak_above_start"]


# --------------------------------------------------------------------------------------------
# A snapshot: the reference figures, the model's check, sites, what-if


def test_a_snapshot_gives_its_figures_sites_and_the_models_check(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = invoke(gpu_file(MAGMA), "-q", "--json", out)
    assert result.exit_code == 0, result.output
    ref = SNAPSHOTS[MAGMA]
    run = json.loads(out.read_text())["runs"]["cuda:0"]
    assert (run["source"], run["mode"], run["device"]) == ("snapshot", None, "cuda:0")
    assert run["peak_bytes"] == ref["peak_above_start"] == 12550078464
    assert run["live_at_start_bytes"] == ref["live_at_trace_start"] == 1373919236
    assert run["footprint_bytes"] == 13927832064  # block sizes, as max_memory_allocated counts them
    assert run["reserved_peak_bytes"] == ref["reserved_bytes"]
    snap = run["snapshot"]
    assert (snap["segments"], snap["large_segments"], snap["small_segments"]) == (216, 208, 8)
    assert (snap["reserved_bytes"], snap["allocated_bytes"]) == (
        ref["reserved_bytes"],
        ref["allocated_bytes_at_dump"],
    )
    assert snap["peak_requested_bytes"] == ref["peak_allocated"]
    assert snap["trace_actions"] == {"alloc": 1721, "free_requested": 1721, "free_completed": 1721}
    assert snap["frees_without_alloc"] == 2
    assert sum(site["bytes"] for site in snap["sites_at_peak"]) == ref["peak_allocated"]
    assert snap["sites_at_peak"][0] == {
        "site": "D:\\Dev\\assignment2-systems\\.venv\\Lib\\site-packages\\torch\\functional.py:373 einsum",
        "bytes": 3045588992,
        "count": 37,
    }
    assert run["allocator_model"] == {
        "placements_matched": 1721,
        "placements": 1721,
        "segments_matched": 0,
        "segments": 0,
        "segments_unexpected": 0,
        "blocks_matched": 455,
        "blocks": 455,
        "reserved_matched": True,
        "allocated_matched": True,
        "exact": True,
        "settings": "default",
        "settings_differ": [],
    }
    assert (
        run["peak_op"]
        == "D:\\Dev\\assignment2-systems\\cs336-basics\\cs336_basics\\nn_utils.py:13 log_softmax"
    )
    lines = result.stdout.splitlines()
    assert (
        "  allocator model (default settings): 1,721 of 1,721 placements, 0 of 0 segments, "
        "455 of 455 blocks at dump as recorded: exact"
    ) in lines


def _event(action, addr, size, t):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "frames": [], "time_us": t}


def oom_snapshot() -> dict:
    """Four 6 MiB tensors in two 20 MiB segments, the 1st and 3rd freed, then a 16 MiB request
    fails with 5 MiB free on the device: 28 MiB are cached but the largest free block is 14 MiB.
    (The same case as tests/test_snapshot_read.py.)"""
    base = 0x7F0000000000
    a, b, c, seg2 = base, base + 6 * MiB, base + 12 * MiB, base + 64 * MiB
    trace = [
        _event("segment_alloc", base, 20 * MiB, 1),
        _event("alloc", a, 6 * MiB, 2),
        _event("alloc", b, 6 * MiB, 3),
        _event("alloc", c, 6 * MiB, 4),
        _event("segment_alloc", seg2, 20 * MiB, 5),
        _event("alloc", seg2, 6 * MiB, 6),
        _event("free_requested", a, 6 * MiB, 7),
        _event("free_completed", a, 6 * MiB, 7),
        _event("free_requested", c, 6 * MiB, 8),
        _event("free_completed", c, 6 * MiB, 8),
        _event("oom", 5 * MiB, 16 * MiB, 9),
    ]

    def block(addr, size, state):
        return {"address": addr, "size": size, "requested_size": size, "state": state, "frames": []}

    def segment(addr, blocks):
        return {
            "device": 0,
            "address": addr,
            "total_size": 20 * MiB,
            "stream": 0,
            "segment_type": "large",
            "blocks": blocks,
        }

    return {
        "segments": [
            segment(
                base,
                [
                    block(a, 6 * MiB, "inactive"),
                    block(b, 6 * MiB, "active_allocated"),
                    block(c, 8 * MiB, "inactive"),
                ],
            ),
            segment(
                seg2, [block(seg2, 6 * MiB, "active_allocated"), block(seg2 + 6 * MiB, 14 * MiB, "inactive")]
            ),
        ],
        "device_traces": [trace],
        "allocator_settings": {"expandable_segments": False},
    }


def test_an_oom_is_explained_and_expandable_segments_would_have_saved_it(tmp_path: Path) -> None:
    path = tmp_path / "oom.pickle"
    path.write_bytes(pickle.dumps(oom_snapshot()))
    out = tmp_path / "r.json"
    result = invoke(path, "-q", "--expandable-segments", "--json", out)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        "  out of memory at event 10: asked 16.0 MiB with 5.0 MiB free on the device; the allocator held "
        "40.0 MiB reserved, 12.0 MiB allocated, largest free block 14.0 MiB: fragmentation "
        "(28.0 MiB cached, but no free block fits)"
    ) in lines
    snap = json.loads(out.read_text())["runs"]["cuda:0"]["snapshot"]
    assert snap["capacity_bytes"] == 45 * MiB  # reserved 40 MiB + 5 MiB free at the out-of-memory
    assert [(w["settings"], w["reserved_peak_bytes"], w["ooms"]) for w in snap["what_if"]] == [
        ("default", 40 * MiB, 1),  # the 16 MiB request still fails: no 16 MiB block, no room for 20 more
        ("expandable_segments:True", 40 * MiB, 0),  # one growing segment: it lands in the free tail
    ]
    rows = lines[lines.index(next(line for line in lines if line.startswith("What if, cuda:0"))) + 3 :]
    # By default: 4 x 6 MiB allocated at most in two 20 MiB segments; at the end b and d are live
    # and the largest free block is the 14 MiB tail of the second segment.
    assert rows[0].split() == ["default", "40.0", "MiB", "24.0", "MiB", "16.0", "MiB", "2", "14.0", "MiB",
                               "1", "of", "1", "still", "fail", "(45.0", "MiB", "capacity)"]  # fmt: skip
    assert rows[1].split()[-8:] == ["0", "of", "1", "still", "fail", "(45.0", "MiB", "capacity)"]


def test_what_if_needs_a_snapshot() -> None:
    result = invoke(gpu_file(H100), "-q", "--max-split-size-mb", "128")
    assert result.exit_code == 2
    assert result.stderr == (
        "memprof: error: --expandable-segments and --max-split-size-mb replay a CUDA memory snapshot's "
        "allocations; these paths hold only chrome traces\n"
    )


# --------------------------------------------------------------------------------------------
# Several files and folders of ranks


def test_a_folder_of_ranks_gives_a_run_per_rank_and_device(tmp_path: Path) -> None:
    shutil.copy(gpu_file(H100), tmp_path / "worker_rank0.pt.trace.json.gz")
    shutil.copy(gpu_file(MI300X), tmp_path / "worker_rank1.pt.trace.json.gz")
    out = tmp_path / "r.json"
    result = invoke(tmp_path, "-q", "--json", out)
    assert result.exit_code == 0, result.output
    report = load_report(out)
    assert list(report.runs) == ["rank0/cpu", "rank0/cuda:0", "rank1/cpu", "rank1/cuda:0"]
    gpus = [report.runs["rank0/cuda:0"], report.runs["rank1/cuda:0"]]
    assert [(r.rank, r.device) for r in gpus] == [(0, "cuda:0"), (1, "cuda:0")]
    # What a per-rank summary needs is on every run: peak, footprint, reserved, op at the peak.
    assert [(r.peak_bytes, r.footprint_bytes, r.reserved_peak_bytes, r.peak_op) for r in gpus] == [
        (9944576, 101305344, 121634816, "aten::linear"),
        (88587776, 146394112, 224395264, "aten::linear"),
    ]
    assert report.diffs == ()  # ranks are not compared run by run
    assert report.source is not None and [f.rank for f in report.source.files] == [0, 1]
    assert result.stdout.splitlines()[0] == (
        f"memprof: {tmp_path.name}: 2 chrome traces (ranks 0, 1, torch 2.6.0, 2.7.0+gitf717b2a)"
    )


def test_a_folder_of_ranks_shows_every_rank_and_their_imbalance(tmp_path: Path) -> None:
    # The same per-rank view as a torchrun job's report: rows per rank, the imbalance of the GPU
    # peaks (88,587,776 / 9,944,576 B = 8.91x), then rank 1 (the highest) in detail.
    shutil.copy(gpu_file(H100), tmp_path / "worker_rank0.pt.trace.json.gz")
    shutil.copy(gpu_file(MI300X), tmp_path / "worker_rank1.pt.trace.json.gz")
    markdown = tmp_path / "r.md"
    result = invoke(tmp_path, "-q", "--markdown", markdown)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any(line.startswith("rank ") and "peak" in line for line in lines)
    imbalance = [line for line in lines if line.startswith("imbalance")]
    assert len(imbalance) == 2  # one per device group: cpu, cuda
    assert any("rank 1's peak 84.5 MiB is 8.91x rank 0's 9.5 MiB" in line for line in imbalance)
    assert "Details of rank 1 (the highest peak; --rank=K shows another):" in lines
    assert "### Ranks" in markdown.read_text()
    # --rank 0 details the other one; a rank the folder lacks is a usage error.
    chosen = invoke(tmp_path, "-q", "--rank", "0")
    assert "Details of rank 0 (as asked):" in chosen.stdout.splitlines()
    missing = invoke(tmp_path, "-q", "--rank", "5")
    assert missing.exit_code == 2
    assert missing.stderr == "memprof: error: --rank 5: the report's ranks are 0, 1\n"


def test_the_summaries_fit_80_columns(tmp_path: Path) -> None:
    # A trace, a snapshot with its what-if, and a folder of two ranks, at COLUMNS=80: no line
    # wider, narrow tables say what they left out, the ranks' view keeps its imbalance and detail.
    shutil.copy(gpu_file(H100), tmp_path / "worker_rank0.pt.trace.json.gz")
    shutil.copy(gpu_file(MI300X), tmp_path / "worker_rank1.pt.trace.json.gz")
    trace = invoke(gpu_file(H100), "-q", columns=80)
    snapshot = invoke(gpu_file(MAGMA), "-q", "--expandable-segments", columns=80)
    ranks = invoke(tmp_path, "-q", columns=80)
    for result in (trace, snapshot, ranks):
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert max(map(len, lines)) <= 80, max(lines, key=len)
    assert "(left out at 80 columns: allocated, live at start)" in trace.stdout.splitlines()
    assert "cuda:0           9.5 MiB   96.6 MiB      116.0 MiB  aten::linear" in trace.stdout.splitlines()
    assert "What if, cuda:0: its allocations replayed from an empty allocator (the recorded" in (
        snapshot.stdout.splitlines()
    )
    assert any(
        line.startswith("expandable_segments:True       13.0 GiB") for line in snapshot.stdout.splitlines()
    )
    lines = ranks.stdout.splitlines()
    header = next(line for line in lines if line.startswith("rank "))
    assert header.split() == ["rank", "run", "peak", "footprint", "reserved", "peak", "during"]
    assert "(left out at 80 columns: wall/call)" in lines
    assert "imbalance (cuda): rank 1's peak 84.5 MiB is 8.91x rank 0's 9.5 MiB (highest over" in lines
    assert "Details of rank 1 (the highest peak; --rank=K shows another):" in lines


def test_a_folder_of_one_rank_keeps_ranked_labels(tmp_path: Path) -> None:
    import memprof

    shutil.copy(gpu_file(H100), tmp_path / "trace.json.gz")  # no rank recorded: its position, 0
    assert list(memprof.analyze(tmp_path).runs) == ["rank0/cpu", "rank0/cuda:0"]


def test_gates_apply_per_rank_and_name_the_run(tmp_path: Path) -> None:
    shutil.copy(gpu_file(H100), tmp_path / "worker_rank0.pt.trace.json.gz")
    shutil.copy(gpu_file(MI300X), tmp_path / "worker_rank1.pt.trace.json.gz")
    result = invoke(tmp_path, "-q", "--budget", "rank0/cuda:0=50MB,rank1/cuda:0=50MB")
    assert result.exit_code == 1
    # 88,587,776 B = 84.5 MiB: 69.0% over 50 MiB
    assert gate_lines(result.stdout) == [
        "rank1/cuda:0 peak 84.5 MiB exceeds budget 50.0 MiB by 69.0%",
        "memprof gate: FAILED, 1 violation (budget 1)",
    ]


def test_several_files_are_labelled_by_their_names(tmp_path: Path) -> None:
    import memprof

    before = tmp_path / "before.pt.trace.json.gz"
    after = tmp_path / "after.json.gz"
    shutil.copy(gpu_file(H100), before)
    shutil.copy(gpu_file(MI300X), after)
    report = memprof.analyze(before, after, gpu_file(MAGMA))
    assert list(report.runs) == [
        "before/cpu",
        "before/cuda:0",
        "after/cpu",
        "after/cuda:0",
        "magma27_cs336/cuda:0",
    ]
    assert report.source is not None and report.source.kind == "trace+snapshot"
    assert [r.rank for r in report.runs.values()] == [None] * 5
    same = memprof.analyze(before, before)
    assert list(same.runs) == ["before/cpu", "before/cuda:0", "before#2/cpu", "before#2/cuda:0"]
    assert [stem(Path(n)) for n in ("w0.pt.trace.json.gz", "a.snapshot.pickle", "x.pkl", ".json")] == [
        "w0",
        "a",
        "x",
        ".json",
    ]


def test_two_recordings_of_one_device_are_compared(tmp_path: Path) -> None:
    source = gpu_file("leimao_rtx5080_without_make_graphed_callables.json")  # cuda:0 records only
    shutil.copy(source, tmp_path / "before.json")
    shutil.copy(source, tmp_path / "after.json")
    out = tmp_path / "r.json"
    result = invoke(tmp_path / "before.json", tmp_path / "after.json", "-q", "--json", out)
    assert result.exit_code == 0, result.output
    # 5,243,392 B above the start in both.
    verdict = "after/cuda:0 leaves peak memory vs before/cuda:0 unchanged: 5.0 MiB -> 5.0 MiB"
    assert verdict in result.stdout.splitlines()
    assert "Top 5 ops by peak bytes, before/cuda:0 vs after/cuda:0:" in result.stdout.splitlines()
    data = json.loads(out.read_text())
    assert (data["diff"]["base"], data["diff"]["other"], data["diff"]["peak_bytes_delta"]) == (
        "before/cuda:0",
        "after/cuda:0",
        0,
    )


# --------------------------------------------------------------------------------------------
# Gating a trace a GPU job saved


def test_a_budget_below_the_peak_fails_naming_the_run_and_a_baseline_passes(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    failed = invoke(gpu_file(H100), "-q", "--budget", "9MB", "--json", base)
    assert failed.exit_code == 1
    # 9,944,576 B = 9.48 MiB, 5.4% over 9 MiB; the cpu run (16 B) is within it.
    assert gate_lines(failed.stdout) == [
        "cuda:0 peak 9.5 MiB exceeds budget 9.0 MiB by 5.4%",
        "memprof gate: FAILED, 1 violation (budget 1)",
    ]
    assert base.exists()  # the report is written before the gate decides
    again = invoke(gpu_file(H100), "-q", "--baseline", base, "--per-op", "--tolerance", "0")
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[-1].startswith("memprof gate: passed (")
    # `memprof check` gives the same verdict on the saved report, without reading the trace.
    check = CliRunner().invoke(app, ["check", str(base), "--budget", "9MB"])
    assert check.exit_code == 1 and check.stdout.splitlines() == gate_lines(failed.stdout)


def test_out_writes_every_format(tmp_path: Path) -> None:
    result = invoke(gpu_file(H100), "-q", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(STANDARD_NAMES.values())
    csv = (tmp_path / "memprof-ops.csv").read_text().splitlines()
    assert csv[0] == "run,name,calls,self_bytes,total_bytes,allocated_bytes,peak_bytes,self_us,total_us"
    assert any(line.startswith("cuda:0,aten::linear,26,") for line in csv)


# --------------------------------------------------------------------------------------------
# Paths that are not readable recordings: exit 2, one line saying what to do


def _error(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("memprof: error: ")
    return lines[0].removeprefix("memprof: error: ")


def test_a_truncated_trace(tmp_path: Path) -> None:
    path = tmp_path / "cut.json.gz"
    data = gpu_file(H100).read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert (
        _error(invoke(path, "-q"))
        == f"{path}: the gzip data is truncated; the file is incomplete, copy it again"
    )


def test_a_truncated_plain_json_trace(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text('{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Bytes": 5')
    message = _error(invoke(path, "-q"))
    assert message.startswith(f"{path}: the JSON ends early (") and message.endswith(
        "); the file is truncated"
    )


def test_a_file_that_is_neither_json_nor_a_pickle(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text("hello")
    assert _error(invoke(path, "-q")) == (
        f"{path} is neither a chrome trace (JSON, plain or gzip) nor a CUDA memory snapshot (a pickle); "
        "give a file written by prof.export_chrome_trace or torch.cuda.memory._dump_snapshot"
    )


def test_a_folder_without_recordings(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    assert _error(invoke(tmp_path, "-q")) == (
        f"{tmp_path}: no chrome trace (.json, .json.gz) or CUDA memory snapshot (pickle) in this folder "
        "(subfolders are not searched); give the folder that holds them, or the files"
    )


class _Payload:
    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


def test_a_pickle_naming_a_global_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [_Payload(marker)]}))
    message = _error(invoke(path, "-q"))
    assert (
        message.startswith(f"{path}: the pickle names ")
        and "system (code a pickle can run); memprof refuses it" in message
    )
    assert not marker.exists()


def test_a_memprof_report_is_not_a_trace(tmp_path: Path) -> None:
    report = Path(__file__).parent / "data" / "gate" / "base.json"
    assert _error(invoke(report, "-q")) == (
        f"{report} is a memprof report, not a chrome trace; gate it with `memprof check`, or give the "
        "trace it was made from"
    )


def test_a_trace_without_memory_events(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 2, "tid": 1}]}
        )
    )
    assert _error(invoke(path, "-q")) == (
        f"{path}: no [memory] events in this trace; record it with "
        "torch.profiler.profile(profile_memory=True)"
    )


def test_a_missing_path_and_bad_options(tmp_path: Path) -> None:
    assert (
        _error(invoke(tmp_path / "absent.json", "-q"))
        == f"{tmp_path / 'absent.json'}: no such file or folder"
    )
    assert _error(invoke(gpu_file(H100), "--table", tmp_path / "t.txt", "-q")) == (
        "--table saves torch's own table of a profile memprof runs; a recording has none"
    )
    assert _error(invoke(gpu_file(H100), "--budget", "cuda:1=1GB", "-q")) == (
        "--budget names 'cuda:1', but the runs are 'cpu', 'cuda:0'; e.g. --budget cpu=800MB"
    )
    assert invoke(gpu_file(MAGMA), "--max-split-size-mb", "0").exit_code == 2
    assert invoke().exit_code == 2  # no path at all


# --------------------------------------------------------------------------------------------
# A CPU trace exported from a memprof-style profile reads back to what `memprof run` measures


def test_an_exported_cpu_trace_gives_the_numbers_of_the_live_run(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    import memprof
    from memprof.core.records import CALL_MARKER

    x = torch.randn(300)

    def work():
        b = torch.abs(x * 2 - 1)
        with record_function("my_block"):
            return (b.unsqueeze(0) - b.unsqueeze(1)).sum()  # a 300 x 300 float temporary: 360,000 B

    live = memprof.profile(work, device="cpu", warmup=1, repeat=2).runs["eager"]
    work()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(2):
            with record_function(CALL_MARKER):
                work()
    path = tmp_path / "cpu.pt.trace.json"
    prof.export_chrome_trace(str(path))
    out = tmp_path / "r.json"
    assert invoke(path, "-q", "--json", out).exit_code == 0
    read = load_report(out).runs["cpu"]
    assert read.peak_bytes == live.peak_bytes >= 360_000
    # The 360,000 B difference is still live while sum allocates its result.
    assert read.peak_op == live.peak_op == "aten::sum"
    assert read.peak_op_stack == live.peak_op_stack
    # (Not net_bytes: `memprof run` keeps the last call's result until the profile ends.)
    assert read.allocated_bytes == live.allocated_bytes

    def byte_columns(run):
        # The [memory] row differs by that result's free, outside every op.
        return sorted(
            (op.name, op.calls, op.self_bytes, op.total_bytes, op.allocated_bytes, op.peak_bytes)
            for op in run.op_stats
            if op.name != "[memory]"
        )

    assert byte_columns(read) == byte_columns(live)


# --------------------------------------------------------------------------------------------
# orjson is optional (the `fast` extra): the standard library gives the same report


def test_the_standard_library_parser_gives_the_same_report(monkeypatch: pytest.MonkeyPatch) -> None:
    import memprof
    import memprof.sources.files.trace as trace_module

    fast = memprof.analyze(gpu_file(H100)).to_dict()
    monkeypatch.setattr(trace_module, "_loads", json.loads)
    plain = memprof.analyze(gpu_file(H100)).to_dict()
    assert {**plain, "created": None} == {**fast, "created": None}


def test_without_orjson_traces_are_read_with_the_standard_library() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, json; sys.modules['orjson'] = None\n"
        "import memprof.sources.files.trace as t\n"
        "assert t._loads is json.loads\n"
        f"print(t.read_trace({str(gpu_file(H100))!r}).devices[1].live.max())\n"
    )
    root = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "101305344"


def _traced(path: Path, rank: int | None = None, world_size: int | None = None) -> Path:
    """The H100 trace at ``path``, with the distributed info a rank of a job records."""
    import gzip

    data = json.loads(gzip.decompress(gpu_file(H100).read_bytes()))
    if rank is not None:
        data["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    return path


def test_files_that_are_not_one_jobs_ranks_are_labelled_by_file_with_a_warning(tmp_path: Path) -> None:
    # One trace of rank 1 of a job of 2, and five traces of nothing: their positions in the
    # folder (a: 0, b: 1, ...) are not ranks ("ranks 0, 1, 2, 3, 4, 1 of 2" before).
    _traced(tmp_path / "job.json.gz", rank=1, world_size=2)
    for name in "abcde":
        shutil.copy(gpu_file(H100), tmp_path / f"{name}.json.gz")
    result = invoke(tmp_path, "-q")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"memprof: {tmp_path.name}: 6 chrome traces (nccl, torch 2.6.0)"
    note = next(line for line in lines if line.startswith("note (all runs): these 6 files"))
    said = " ".join(line.strip() for line in lines[lines.index(note) :])
    assert (
        "do not look like the ranks of one job (no rank recorded in a.json.gz, b.json.gz, c.json.gz and 2 "
        "more; rank 1 in b.json.gz, job.json.gz; 6 files, ranks up to 4, for a world size of 2)"
    ) in said
    assert "each run is labelled by its file, and no run is compared with another as a rank" in said
    assert not any(line.startswith("rank ") for line in lines)  # no ranks' table
    assert "a/cuda:0" in result.stdout and "job/cuda:0" in result.stdout


def test_the_ranks_of_one_job_agree(tmp_path: Path) -> None:
    import memprof
    from memprof.library.recordings import not_one_job

    _traced(tmp_path / "rank0.json.gz", rank=0, world_size=2)
    _traced(tmp_path / "rank1.json.gz", rank=1, world_size=2)
    report = memprof.analyze(tmp_path)
    assert list(report.runs) == ["rank0/cpu", "rank0/cuda:0", "rank1/cpu", "rank1/cuda:0"]
    assert not any("one job" in note for run in report.runs.values() for note in run.notes)
    _traced(tmp_path / "rank1.json.gz", rank=1, world_size=4)
    report = memprof.analyze(tmp_path)
    assert [run.rank for run in report.runs.values()] == [None] * 4
    assert "world sizes 2, 4" in report.runs["rank0/cpu"].notes[-1]
    assert not_one_job([]) == []


# --------------------------------------------------------------------------------------------
# A new format: one reader, registered in the table


class ToyReader:
    """A made-up format: ``toymem`` on the first line, then one memory record a line: the time
    (ns), the bytes allocated (negative: freed) and the op that did it (running 1 ns either
    side)."""

    name = "toy"
    what = "a toy recording"
    in_folder = "toy recording"
    counted = "toy recording(s)"
    written_by = "a toy"

    def sniff(self, path: Path) -> bool:
        with path.open("rb") as handle:
            return handle.read(6) == b"toymem"

    def read(self, path: Path, rank: int | None = None) -> list[Recording]:
        rows = [line.split() for line in path.read_text().splitlines()[1:]]
        raw = RawProfile.from_lists(
            [(op, int(t) - 1, int(t) + 1, 0) for t, _, op in rows], [(int(t), int(b)) for t, b, _ in rows]
        )
        # The records as the file gives them, live bytes their running sum (no count of its own).
        memory = RecordedMemory()
        file = Provenance(str(path), rank)
        return [Recording("cpu", None, raw, "cpu", source=self.name, file=file, memory=memory)]


@pytest.fixture
def toy_reader():
    reader = ToyReader()
    READERS.append(reader)
    yield reader
    READERS.remove(reader)


def test_a_reader_registered_in_the_table_is_read_by_analyze(tmp_path: Path, toy_reader: ToyReader) -> None:
    path = tmp_path / "run.toy"
    path.write_text(f"toymem\n10 {4 * MiB} aten::empty\n20 {6 * MiB} aten::mm\n30 {-4 * MiB} aten::relu\n")
    out = tmp_path / "r.json"
    result = invoke(path, "-q", "--json", out)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["source"]["kind"] == "toy"
    run = data["runs"]["cpu"]
    # Peak: 4 MiB then 6 MiB more, at the second record, during aten::mm; 4 MiB freed after.
    assert (run["source"], run["mode"]) == ("toy", None)
    assert (run["peak_bytes"], run["peak_op"]) == (10 * MiB, "aten::mm")
    assert (run["allocated_bytes"], run["net_bytes"], run["records"]) == (10 * MiB, 6 * MiB, 3)
    # Without the reader, the file is no format memprof knows.
    READERS.remove(toy_reader)
    refused = invoke(path)
    READERS.append(toy_reader)
    assert refused.exit_code == 2
    assert "is neither a chrome trace (JSON, plain or gzip) nor a CUDA memory snapshot" in refused.output
