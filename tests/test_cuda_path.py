"""The CUDA branch, through the same code path as the CPU one, with recorded-event fixtures
(there is no GPU here): kineto-like events carrying CUDA memory records, and the allocator
cross-check."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from memprof.analysis.attribution import counters_differ
from memprof.analysis.peaks import analyze
from memprof.core.recording import Recording
from memprof.core.records import CALL_MARKER, RawProfile
from memprof.pipeline.assemble import run_of
from memprof.sources.live.kineto import raw_from_kineto

MiB = 1024 * 1024


class DeviceType(Enum):
    CPU = 0
    CUDA = 1


@dataclass
class FakeEvent:
    """The accessors of torch's ``_KinetoEvent`` that memprof reads."""

    _name: str
    _start: int
    _end: int
    _device: DeviceType = DeviceType.CPU
    _index: int = -1
    _nbytes: int = 0
    _thread: int = 1

    def name(self):
        return self._name

    def start_ns(self):
        return self._start

    def end_ns(self):
        return self._end

    def device_type(self):
        return self._device

    def device_index(self):
        return self._index

    def nbytes(self):
        return self._nbytes

    def start_thread_id(self):
        return self._thread

    def end_thread_id(self):
        return self._thread

    def is_async(self):
        return False

    def is_hidden_event(self):
        return False


def mem(t, nbytes, device=DeviceType.CUDA, index=0):
    return FakeEvent("[memory]", t, t, device, index, nbytes)


def events():
    return [
        FakeEvent(CALL_MARKER, 0, 1000),
        FakeEvent("aten::empty", 10, 20),
        mem(15, 300 * MiB),  # cuda:0
        mem(16, 64, DeviceType.CPU),  # a host-side scratch allocation
        FakeEvent("aten::matmul", 100, 200),
        mem(150, 200 * MiB),
        mem(160, 900 * MiB, index=1),  # another GPU
        mem(170, -200 * MiB),
        # a device kernel event: not a CPU op, must not become an op row
        FakeEvent("void at::native::elementwise_kernel<128, 2>", 120, 180, DeviceType.CUDA, 0),
    ]


def test_cuda_peak_counts_only_the_chosen_device():
    raw = raw_from_kineto(events(), device_type="CUDA", device_index=0)
    analysis = analyze(raw)
    assert analysis.numbers.peak_bytes == 500 * MiB
    assert analysis.numbers.peak_op == "aten::matmul"
    names = {op.name for op in analysis.ops}
    assert "void at::native::elementwise_kernel<128, 2>" not in names
    matmul = next(op for op in analysis.ops if op.name == "aten::matmul")
    assert matmul.peak_bytes == 200 * MiB and matmul.total_bytes == 0


def test_cpu_run_ignores_device_records():
    analysis = analyze(raw_from_kineto(events(), device_type="CPU"))
    assert analysis.numbers.peak_bytes == 64


def _numbers_only(counters: dict[str, int], peak: int) -> Recording:
    """A CUDA recording whose records rise ``peak`` bytes above the start, with ``counters``."""
    raw = RawProfile.from_lists([("aten::empty", 0, 10, 1)], [(5, peak)], calls=[(0, 20)])
    return Recording(label="eager", mode="eager", raw=raw, device="cuda:0", counters=dict(counters))


def test_allocator_crosscheck_agrees_or_says_why():
    counters = {"memory_allocated_start_bytes": 100 * MiB, "max_memory_allocated_bytes": 600 * MiB}
    run = run_of(_numbers_only(counters, 500 * MiB))
    assert run.device_counters["allocator_peak_above_start_bytes"] == 500 * MiB
    assert not any("max_memory_allocated" in note for note in run.notes)
    run = run_of(_numbers_only(counters, 300 * MiB))
    (note,) = [note for note in run.notes if "max_memory_allocated" in note]
    assert "500.0 MiB" in note and "300.0 MiB" in note


def test_a_cuda_run_knows_its_footprint_live_at_start_and_reserve_from_the_counters():
    # torch.cuda.memory_allocated() when profiling began, max_memory_allocated() and
    # max_memory_reserved() after (the peak stats are reset just before): what the runner records.
    counters = {
        "memory_allocated_start_bytes": 100 * MiB,
        "max_memory_allocated_bytes": 600 * MiB,
        "max_memory_reserved_bytes": 640 * MiB,
    }
    run = run_of(_numbers_only(counters, 500 * MiB))
    assert (run.footprint_bytes, run.live_at_start_bytes, run.reserved_peak_bytes) == (
        600 * MiB,
        100 * MiB,
        640 * MiB,
    )
    # On the CPU there are no such counters: unknown, not zero.
    cpu = run_of(Recording(label="eager", mode="eager", raw=_numbers_only({}, 64).raw, device="cpu"))
    assert (cpu.footprint_bytes, cpu.live_at_start_bytes, cpu.reserved_peak_bytes) == (None, None, None)


def test_a_live_cpu_run_says_its_device_and_knows_its_footprint_but_no_device_totals():
    import torch

    import memprof

    report = memprof.profile(torch.ones, 1024, 1024, device="cpu")
    run = report.runs["eager"]
    assert (run.device, run.peak_bytes) == ("cpu", 4 * MiB)
    # The footprint and live bytes at the start come from tracking the call (no arguments: 0 B
    # live); the CPU has no caching allocator nor a memory total torch reports.
    assert (run.footprint_bytes, run.live_at_start_bytes) == (4 * MiB, 0)
    assert (run.reserved_peak_bytes, run.device_total_bytes) == (None, None)
    untracked = memprof.profile(torch.ones, 1024, 1024, device="cpu", explain=False).runs["eager"]
    assert (untracked.footprint_bytes, untracked.live_at_start_bytes) == (4 * MiB, 0)
    assert untracked.at_peak is None
    assert report.source is not None and report.source.kind == "live"
    assert report.kind is memprof.ReportKind.RUN
    assert report.to_dict()["source"] == {"kind": "live", "paths": [], "files": []}


def test_an_explained_cuda_run_takes_footprint_and_live_at_start_from_the_counters():
    """A CUDA run's explanation meets the caching allocator's own counters: what
    ``torch.cuda.memory_allocated()`` counted at the start that memprof did not find is an
    unattributed line live through the call, and the footprint is cross-checked with
    ``max_memory_allocated()``. Recorded events, as a GPU run gives them (no GPU here)."""
    from reconcile import assert_explained
    from test_attribution import make_facts, raw_of, storage

    from memprof.analysis.attribution import DEVICE_BEFORE

    # A 1024 B parameter found live at the start; a 512 B tensor made during the call.
    facts = make_facts(
        records=[(10, 512, 0x10)],
        storages=[storage(0x30, 1024, "parameter")],
        ops=[(8, 12, "aten::empty")],
        outputs=[(0x10, 0)],
        device="cuda:0",
    )
    raw = raw_of(facts, [(5, 40)])
    # The allocator counted 4096 B at the start (3072 B memprof did not find), 4608 B at most.
    counters = {
        "memory_allocated_start_bytes": 4096,
        "max_memory_allocated_bytes": 4608,
        "max_memory_reserved_bytes": 2 * MiB,
    }
    device = {"device_name": "GPU", "device_total_bytes": 8 * MiB}

    def recording(counters: dict[str, int]) -> Recording:
        """The run as the live source hands it over: its records, the program state tracked
        during the call, CUDA's counters around it."""
        return Recording(
            label="eager",
            mode="eager",
            raw=raw,
            device="cuda:0",
            facts=facts,
            counters=dict(counters),
            device_facts=device,
            walls_ms=(1.0,),
        )

    run = run_of(recording(counters))
    assert (run.peak_bytes, run.footprint_bytes, run.live_at_start_bytes) == (512, 4608, 4096)
    assert (run.reserved_peak_bytes, run.device_total_bytes) == (2 * MiB, 8 * MiB)
    assert run.inputs_bytes == 1024  # what memprof found live at the start
    assert run.at_peak is not None
    assert [(u.bytes, u.reason, u.before_call) for u in run.at_peak.unattributed] == [
        (3072, DEVICE_BEFORE, True)
    ]
    assert [(c.live_at_start_bytes, c.footprint_bytes) for c in run.call_numbers] == [(4096, 4608)]
    assert_explained(run)
    assert not any("max_memory_allocated" in note for note in run.notes)
    # A high-water mark far above the footprint: allocated where the profiler does not record.
    counters["max_memory_allocated_bytes"] = 8 * MiB
    run = run_of(recording(counters))
    assert run.footprint_bytes == 4608
    assert any(
        "torch.cuda.max_memory_allocated() is 8,388,608 B, the footprint 4,608 B" in n for n in run.notes
    )


def test_records_and_counters_differ_past_one_percent_and_one_mib():
    # The explaining call on an H100 whose event tree lacked its frees: 33,554,432 B by the
    # records, 4,194,304 B by max_memory_allocated().
    assert counters_differ(4_194_304, 33_554_432)
    assert not counters_differ(4_194_304, 4_194_304)
    assert not counters_differ(4_194_304, 4_194_304 + (1 << 20))  # within 1 MiB
    assert not counters_differ(900 * MiB, 905 * MiB)  # within 1%
    assert counters_differ(900 * MiB, 920 * MiB)
