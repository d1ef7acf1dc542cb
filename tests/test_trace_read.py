"""Chrome traces recorded on real GPUs (and by memprof's own style of run) read back exactly.

Every figure of the published reference (tests/gpu_data.py) is reproduced for every trace;
the format's quirks are stated with small synthetic traces whose numbers are known by hand.
"""

from __future__ import annotations

import gzip
import json
import shutil
import weakref
from pathlib import Path

import numpy as np
import pytest
from gpu_data import TRACES, gpu_file, shared_dir

from memprof.analysis.peaks import analyze
from memprof.analysis.recorded import RecordedPeak, recorded_peak
from memprof.core.errors import InputError
from memprof.sources.files.readers import input_kind
from memprof.sources.files.trace import TraceDevice, read_trace

MiB = 1 << 20


def peak_of(device: TraceDevice) -> RecordedPeak:
    """The numbers of a trace device's memory records."""
    return recorded_peak(device.raw, device)


def _device(trace, key):
    device_type, device_id = key
    return next(d for d in trace.devices if d.device_type == device_type and d.device_index == device_id)


@pytest.mark.parametrize("name", sorted(TRACES))
def test_every_reference_figure_of_every_trace(name):
    ref = TRACES[name]
    trace = read_trace(gpu_file(name))
    assert [(d.device_type, d.device_index) for d in trace.devices] == sorted(ref["memory_events_by_device"])
    for key, count in ref["memory_events_by_device"].items():
        assert _device(trace, key).records == count
    assert trace.cpu_ops == ref["num_cpu_ops"]
    assert [p.name for p in trace.device_properties] == ref["device_properties"]
    for key, gpu in ref["gpu"].items():
        device = _device(trace, key)
        assert device.records == gpu["num_events"]
        assert device.allocations == gpu["num_alloc"]
        assert device.frees == gpu["num_free"]
        assert device.live_at_start_bytes == gpu["live_at_start"]
        assert peak_of(device).footprint_bytes == gpu["max_total_allocated"]
        assert peak_of(device).peak_bytes == gpu["peak_above_start"]
        assert peak_of(device).reserved_peak_bytes == gpu["max_total_reserved"]
        assert list(peak_of(device).peak_op_stack) == gpu["stack"]
        # ts of the peak record, in integer nanoseconds (floats in the file converted exactly).
        assert peak_of(device).peak_time_ns == round(gpu["peak_ts"] * 1000)
        assert peak_of(device).timeline_bytes.max() == gpu["max_total_allocated"]
        analysis = analyze(device.raw)
        assert analysis.numbers.net_bytes == gpu["final_total_allocated"] - gpu["live_at_start"]
        assert analysis.numbers.region_peak_bytes == gpu["peak_above_start"]
        if len(np.unique(device.raw.op_thread)) == 1:
            # One thread: the self bytes of torch's meaning (plus the [memory] row) add up to the
            # net. (Ops of several threads overlap in time and each counts what happened inside
            # it, as torch's table does.)
            assert sum(op.self_bytes for op in analysis.ops) == analysis.numbers.net_bytes


def test_the_gpu_is_named_as_torch_names_it_with_its_memory():
    trace = read_trace(gpu_file("tracelens_h100_bert_small.json.gz"))
    gpu = _device(trace, (1, 0))
    assert gpu.device == "cuda:0" and gpu.label == "cuda:0" and not gpu.hip
    assert gpu.device_name == "NVIDIA H100 80GB HBM3"
    assert gpu.device_total_bytes == 85018279936
    assert trace.torch_version == "2.6.0"  # from the package list the trace recorded
    # The op memprof names is the outermost aten op running (as `run` does); the stack holds it all.
    assert peak_of(gpu).peak_op == "aten::linear"
    cpu = _device(trace, (0, -1))
    assert cpu.device == "cpu" and cpu.device_name is None


def test_hip_device_type_6_is_cuda_n_and_says_hip():
    trace = read_trace(gpu_file("tracelens_mi300x_bert_small.json.gz"))
    gpu = _device(trace, (6, 0))
    assert (gpu.device, gpu.hip, gpu.device_name) == ("cuda:0", True, "AMD Instinct MI300X VF")
    assert any("HIP" in note for note in gpu.notes)
    assert gpu.device_total_bytes == 205571227648


def test_a_distributed_trace_gives_its_rank_and_labels():
    trace = read_trace(gpu_file("hta_df_index_resolver_V100_2rank.json.gz"))
    assert (trace.rank, trace.world_size, trace.distributed_backend) == (1, 2, "nccl")
    assert [d.label for d in trace.devices] == ["rank1/cpu", "rank1/cuda:1"]
    # Device 1 is named from the deviceProperties entry with id 1.
    assert _device(trace, (1, 1)).device_total_bytes == 34089730048


def test_the_2021_schema_running_sum_and_string_tids():
    trace = read_trace(gpu_file("kineto_tbplugin_resnet50_nw0_V100_2021.pt.trace.json.gz"))
    gpu = _device(trace, (1, 0))
    assert peak_of(gpu).reserved_peak_bytes is None and len(peak_of(gpu).timeline_reserved) == 0
    assert any("2021 schema" in note for note in gpu.notes)


# --------------------------------------------------------------------------------------------
# Quirks, stated with synthetic traces


def _mem(ts, nbytes, total=None, *, device_type=1, device_id=0, tid=1, reserved=None):
    args = {"Device Type": device_type, "Device Id": device_id, "Bytes": nbytes}
    if total is not None:
        args["Total Allocated"] = total
    if reserved is not None:
        args["Total Reserved"] = reserved
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "args": args,
    }


def _op(name, ts, dur, tid=1, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def _write(path: Path, events, **meta) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, **meta, "traceEvents": events}))
    return path


def test_records_are_taken_in_time_order_not_file_order(tmp_path):
    # An autograd thread writes its records out of order; by ts Total Allocated is consistent.
    events = [
        _op("aten::mm", 10, 100),
        _mem(30, 2 * MiB, 103 * MiB, reserved=120 * MiB),
        _mem(20, MiB, 101 * MiB, reserved=100 * MiB),
        _mem(40, -2 * MiB, 101 * MiB, reserved=120 * MiB),
    ]
    device = read_trace(_write(tmp_path / "t.json", events)).devices[0]
    assert device.live_at_start_bytes == 100 * MiB
    assert peak_of(device).footprint_bytes == 103 * MiB
    assert peak_of(device).peak_bytes == 3 * MiB
    assert peak_of(device).reserved_peak_bytes == 120 * MiB
    assert peak_of(device).peak_time_ns == 30_000
    assert device.notes == ()
    assert list(peak_of(device).timeline_bytes) == [101 * MiB, 103 * MiB, 101 * MiB]
    assert list(peak_of(device).timeline_t_ns) == [0, 10_000, 20_000]


def test_old_schema_without_total_allocated_sums_bytes_and_matches_string_tids(tmp_path):
    events = [
        {**_op("aten::conv", 0, 50, cat="Operator"), "tid": "7"},
        {**_op("aten::empty", 5, 10, cat="Operator"), "tid": "7"},
        {**_op("aten::other_thread", 0, 50, cat="Operator"), "tid": "8"},
        _mem(8, 3 * MiB, tid=7),
        _mem(30, -MiB, tid=7),
        _mem(45, -2 * MiB, tid=7),
    ]
    device = read_trace(_write(tmp_path / "t.json", events)).devices[0]
    read = peak_of(device)
    assert (device.live_at_start_bytes, read.footprint_bytes, read.peak_bytes) == (0, 3 * MiB, 3 * MiB)
    assert peak_of(device).reserved_peak_bytes is None
    # Containment on the allocating thread only: the op on thread "8" is not in the stack.
    assert peak_of(device).peak_op_stack == ("aten::conv", "aten::empty")


def test_old_schema_frees_of_blocks_from_before_give_the_least_live_at_start(tmp_path):
    events = [_mem(1, -4 * MiB), _mem(2, MiB), _mem(3, 5 * MiB)]
    device = read_trace(_write(tmp_path / "t.json", events)).devices[0]
    assert device.live_at_start_bytes == 4 * MiB
    assert peak_of(device).footprint_bytes == 6 * MiB
    assert peak_of(device).peak_bytes == 2 * MiB


def test_a_peak_outside_every_op_is_named_memory_and_said(tmp_path):
    events = [_op("aten::add", 0, 10), _mem(5, MiB, MiB), _mem(8, -MiB, 0), _mem(20, 4 * MiB, 4 * MiB)]
    device = read_trace(_write(tmp_path / "t.json", events)).devices[0]
    assert peak_of(device).peak_bytes == 4 * MiB
    assert peak_of(device).peak_op == "[memory]" and peak_of(device).peak_op_stack == ()
    assert "outside every recorded op" in " ".join(peak_of(device).notes)


def test_every_device_of_a_trace_is_its_own_set_of_records(tmp_path):
    events = [
        _mem(1, 100, 100, device_type=0, device_id=-1),
        _mem(2, MiB, MiB, device_type=1, device_id=0),
        _mem(3, 3 * MiB, 3 * MiB, device_type=1, device_id=1),
        _mem(4, 50, 150, device_type=2, device_id=-1),  # MKLDNN counts as CPU, as torch's table does
    ]
    trace = read_trace(_write(tmp_path / "t.json", events))
    assert [(d.device, peak_of(d).footprint_bytes) for d in trace.devices] == [
        ("cpu", 150),
        ("cuda:0", MiB),
        ("cuda:1", 3 * MiB),
    ]


def test_microsecond_floats_become_exact_integer_nanoseconds(tmp_path):
    events = [_op("aten::sum", 919761104563.86, 17.586), _mem(919761104567.085, 8192, 8192)]
    device = read_trace(_write(tmp_path / "t.json", events)).devices[0]
    assert device.raw.op_start.tolist() == [919761104563860]
    assert device.raw.op_end.tolist() == [919761104581446]
    assert device.raw.mem_time.tolist() == [919761104567085]
    assert peak_of(device).peak_op_stack == ("aten::sum",)


def test_profiler_step_markers_are_not_ops_at_the_peak(tmp_path):
    events = [
        _op("ProfilerStep#3", 0, 100, cat="user_annotation"),
        _op("my_block", 0, 100, cat="user_annotation"),
        _mem(10, MiB, MiB),
    ]
    device = read_trace(_write(tmp_path / "t.json", events)).devices[0]
    assert peak_of(device).peak_op_stack == ("my_block",)


def test_a_trace_without_memory_records_says_how_to_record_them(tmp_path):
    trace = read_trace(_write(tmp_path / "t.json", [_op("aten::add", 0, 1)]))
    assert trace.devices == () and "profile_memory=True" in trace.notes[0]


def test_the_kind_is_detected_from_the_content_not_the_name(tmp_path):
    plain = _write(tmp_path / "x.pickle", [_mem(1, 1, 1)])
    packed = tmp_path / "y.bin"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    snapshot = tmp_path / "z.json"
    snapshot.write_bytes(b"\x80\x04\x95\x00")
    other = tmp_path / "w.json"
    other.write_text("hello")
    assert [input_kind(p) for p in (plain, packed, snapshot, other)] == ["trace", "trace", "snapshot", None]
    assert peak_of(read_trace(packed).devices[0]).footprint_bytes == 1


# --------------------------------------------------------------------------------------------
# Folders of per-rank traces


def test_a_folder_gives_one_trace_per_rank_one_file_at_a_time(tmp_path):
    source = gpu_file("tracelens_h100_bert_small.json.gz")
    for name in ("worker_rank3.pt.trace.json.gz", "worker_rank1.pt.trace.json.gz"):
        shutil.copy(source, tmp_path / name)
    _write(tmp_path / "b.json", [_mem(1, 5, 5)], distributedInfo={"rank": 7, "world_size": 8})
    (tmp_path / "notes.txt").write_text("not a trace")
    import memprof

    report = memprof.analyze(tmp_path)
    assert report.source is not None
    files = report.source.files
    assert [(Path(f.path).name, f.rank) for f in files] == [
        ("b.json", 7),
        ("worker_rank1.pt.trace.json.gz", 1),
        ("worker_rank3.pt.trace.json.gz", 3),
    ]
    assert list(files[1].runs) == ["rank1/cpu", "rank1/cuda:0"]


def test_a_folder_is_read_one_rank_at_a_time(tmp_path, monkeypatch):
    """When a rank's file is read, no earlier rank's parsed JSON, trace, devices or records is
    alive (without a garbage collection): memory is bounded by one file, not by the ranks."""
    import memprof
    import memprof.sources.files.trace as trace_module

    for rank in range(3):
        shutil.copy(gpu_file("tracelens_h100_bert_small.json.gz"), tmp_path / f"worker_rank{rank}.json.gz")
    refs: list[weakref.ref[object]] = []
    alive_when_read: list[int] = []
    load, read = trace_module.load_trace_json, trace_module.read_trace

    class Marker:
        """Lives as long as the parsed document that holds it (a dict cannot be weakly referenced)."""

    def load_marked(path):
        document = load(path)
        document["marker"] = marker = Marker()
        refs.append(weakref.ref(marker))
        return document

    def read_tracked(path, rank=None):
        alive_when_read.append(sum(ref() is not None for ref in refs))
        trace = read(path, rank)
        refs.extend(weakref.ref(o) for o in (trace, *trace.devices, *(d.raw for d in trace.devices)))
        return trace

    monkeypatch.setattr(trace_module, "load_trace_json", load_marked)
    monkeypatch.setattr(trace_module, "read_trace", read_tracked)
    report = memprof.analyze(tmp_path)
    assert list(report.runs) == [f"rank{r}/{d}" for r in range(3) for d in ("cpu", "cuda:0")]
    # Per file: its document, its trace, 2 devices and their 2 sets of records.
    assert (len(refs), alive_when_read) == (18, [0, 0, 0])
    assert [ref() for ref in refs] == [None] * 18


def test_files_that_record_no_rank_are_runs_of_their_own(tmp_path):
    """Files with no rank, in name or recorded, are read in name order and labelled by their
    file: nothing says they are the ranks of one job."""
    import memprof

    for name in ("a.json", "b.json"):
        _write(tmp_path / name, [_mem(1, 5, 5)])
    report = memprof.analyze(tmp_path)
    assert [(label, run.rank) for label, run in report.runs.items()] == [
        ("a/cuda:0", None),
        ("b/cuda:0", None),
    ]


def test_two_files_of_one_rank_are_said(tmp_path):
    for name in ("a.json", "b.json"):
        _write(tmp_path / name, [_mem(1, 5, 5)], distributedInfo={"rank": 2})
    import memprof

    first, second = memprof.analyze(tmp_path).runs.values()
    assert "rank 2 is also the rank of a.json" not in first.notes
    assert "rank 2 is also the rank of a.json" in second.notes


def test_snapshots_in_a_folder_are_found_by_content(tmp_path):
    from memprof.sources.files.readers import files_of
    from memprof.sources.files.snapshot import SnapshotReader

    shutil.copy(gpu_file("silmont2000_cs336_tiny.snapshot.pickle"), tmp_path / "rank0.bin")
    _write(tmp_path / "t.json", [_mem(1, 5, 5)])
    assert [p.name for p in files_of(tmp_path, SnapshotReader())] == ["rank0.bin"]


def test_a_folder_without_traces_is_an_input_error(tmp_path):
    (tmp_path / "x.txt").write_text("x")
    import memprof

    with pytest.raises(InputError, match="no chrome trace"):
        memprof.analyze(tmp_path)


# --------------------------------------------------------------------------------------------
# Files that are not readable traces: one InputError saying why


def test_truncated_gzip_is_said_to_be_truncated(tmp_path):
    data = gpu_file("tracelens_h100_bert_small.json.gz").read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated"):
        read_trace(path)


def test_truncated_json_is_said_to_end_early(tmp_path):
    path = _write(tmp_path / "t.json", [_mem(1, 1, 1), _mem(2, 1, 2)])
    path.write_text(path.read_text()[:-40])
    with pytest.raises(InputError, match="ends early.*truncated"):
        read_trace(path)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("this is not json", "not valid JSON"),
        ('{"a": 1}', "not a chrome trace"),
        ('{"traceEvents": 5}', "not a chrome trace"),
        ('{"traceEvents": [1, 2]}', "is not an event object"),
        ('{"traceEvents": [{"ph": "i", "name": "[memory]", "args": 3}]}', "is not an event object"),
        ("", "is empty"),
    ],
)
def test_non_traces_are_refused_with_the_reason(tmp_path, content, reason):
    path = tmp_path / "t.json"
    path.write_text(content)
    with pytest.raises(InputError, match=reason):
        read_trace(path)


@pytest.mark.parametrize(
    ("field", "value", "what"),
    [
        ("Bytes", "12", "Bytes of a \\[memory\\] event is not an integer"),
        ("Bytes", 1.5, "Bytes of a \\[memory\\] event is not an integer"),
        ("Total Allocated", None, "Total Allocated .* is not an integer"),
        ("Device Type", "cuda", "Device Type .* is not an integer"),
        ("ts", "now", "ts of a \\[memory\\] event is not a number"),
    ],
)
def test_wrong_types_are_input_errors_naming_the_field(tmp_path, field, value, what):
    event = _mem(1, 10, 10)
    if field == "ts":
        event["ts"] = value
    else:
        event["args"][field] = value
    with pytest.raises(InputError, match=what):
        read_trace(_write(tmp_path / "t.json", [event, _mem(2, 5, 15)]))


def test_missing_file_and_folder_given_as_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_trace(tmp_path / "absent.json")
    with pytest.raises(InputError, match="is a folder"):
        read_trace(tmp_path)


# --------------------------------------------------------------------------------------------
# A CPU profile recorded memprof's way and exported reads back to the same analysis


def test_a_memprof_style_cpu_trace_reads_back_to_the_live_analysis(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    from memprof.core.records import CALL_MARKER
    from memprof.sources.live.kineto import raw_from_profiler

    x = torch.randn(300)

    def work():
        a = x * 2
        b = torch.abs(a - 1)
        with record_function("my_block"):
            c = (b.unsqueeze(0) - b.unsqueeze(1)).sum()  # a 300 x 300 float temporary: 360,000 B
        return c

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(2):
            with record_function(CALL_MARKER):
                work()
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    live = analyze(raw_from_profiler(prof))
    device = read_trace(path).devices[0]
    back = analyze(device.raw)
    assert device.device == "cpu"
    assert back.numbers == live.numbers
    assert live.numbers.peak_bytes >= 360_000
    assert sorted(back.ops, key=lambda op: op.name) == sorted(live.ops, key=lambda op: op.name)
    assert back.timeline == live.timeline
    assert peak_of(device).peak_op == live.numbers.peak_op == "aten::sum"
    assert tuple(peak_of(device).peak_op_stack) == live.numbers.peak_op_stack


def test_reference_figures_are_the_published_ones():
    truth_path = shared_dir() / "truth.json"
    if not truth_path.exists():
        pytest.skip(f"{truth_path} is absent (set MEMPROF_GPU_DATA)")
    truth = json.loads(truth_path.read_text())
    for name, ref in TRACES.items():
        published = truth[name]
        assert published["device_properties"] == ref["device_properties"]
        assert published["num_cpu_ops"] == ref["num_cpu_ops"]
        assert published["memory_events_by_device"] == {
            f"type={t},id={i}": n for (t, i), n in ref["memory_events_by_device"].items()
        }
        for (t, i), gpu in ref["gpu"].items():
            entry = published["gpu_devices"][f"type={t},id={i}"]
            for key in (
                "num_events",
                "num_alloc",
                "num_free",
                "live_at_start",
                "max_total_allocated",
                "peak_above_start",
                "final_total_allocated",
            ):
                assert entry[key] == gpu[key], (name, key)
            assert entry.get("max_total_reserved") == gpu["max_total_reserved"]
            assert entry["op_stack_at_peak"] == gpu["stack"]
            assert entry["op_at_peak"]["name"] == gpu["stack"][-1]
            assert entry["peak_event"]["ts"] == gpu["peak_ts"]
            assert entry["peak_event"]["tid"] == gpu["peak_tid"]


def test_analyze_looks_for_the_peak_op_on_the_allocating_thread():
    from memprof.core.records import RawProfile

    raw = RawProfile.from_lists(
        ops=[("main_thread_op", 0, 100, 1), ("aten::mm", 10, 50, 2), ("aten::empty", 20, 30, 2)],
        mem=[(25, MiB)],
    )
    assert analyze(raw).numbers.peak_op_stack == ("main_thread_op", "aten::mm", "aten::empty")
    threaded = RawProfile(**{**raw.__dict__, "mem_thread": np.array([2])})
    assert analyze(threaded).numbers.peak_op_stack == ("aten::mm", "aten::empty")
    assert analyze(threaded).numbers.peak_op == "aten::mm"
