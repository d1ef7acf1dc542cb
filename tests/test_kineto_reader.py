"""Reading profiler events into arrays gives what reading them one at a time gives.

The reader works on blocks of events with one accessor at a time and interns names; the
reference below is the plain per-event loop with torch's own filters written out."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import pytest
from examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.core.records import CALL_MARKER, RawProfile
from memprof.sources.live import kineto
from memprof.sources.live.kineto import raw_from_kineto, raw_from_profiler


class DeviceType(Enum):
    """torch's c10::DeviceType values for the device types the reader sorts by."""

    CPU = 0
    CUDA = 1
    MKLDNN = 2
    IDEEP = 5
    HIP = 6
    XPU = 12
    PrivateUse1 = 20


@dataclass
class Event:
    """The accessors of torch's ``_KinetoEvent`` that memprof reads."""

    _name: str
    _start: int
    _end: int
    _device: DeviceType
    _index: int
    _nbytes: int
    _thread: int
    _end_thread: int
    _async: bool
    _hidden: bool

    def name(self) -> str:
        return self._name

    def start_ns(self) -> int:
        return self._start

    def end_ns(self) -> int:
        return self._end

    def device_type(self) -> DeviceType:
        return self._device

    def device_index(self) -> int:
        return self._index

    def nbytes(self) -> int:
        return self._nbytes

    def start_thread_id(self) -> int:
        return self._thread

    def end_thread_id(self) -> int:
        return self._end_thread

    def is_async(self) -> bool:
        return self._async

    def is_hidden_event(self) -> bool:
        return self._hidden


SKIPPED = sorted(kineto._SKIPPED_NAMES - {"[memory]"})
NAMES = ["aten::add", "aten::mm", "my range", CALL_MARKER, "[memory]", "[memory]", *SKIPPED]
NAMES.append("autograd::engine::evaluate_function: MmBackward0")


def reference(events: list[Any], device_type: str = "CPU", device_index: int | None = None) -> RawProfile:
    """One event at a time, as torch's table filters them."""
    wanted = kineto.HOST_DEVICE_TYPES if device_type == "CPU" else kineto.ACCELERATOR_DEVICE_TYPES
    ops: list[tuple[str, int, int, int, bool]] = []
    mem: list[tuple[int, int, int]] = []
    calls: list[tuple[int, int]] = []
    call_threads: set[int] = set()
    for event in events:
        name = event.name()
        if name == "[memory]":
            if event.device_type().name not in wanted:
                continue
            if device_type != "CPU" and device_index is not None and event.device_index() != device_index:
                continue
            mem.append((event.start_ns(), event.nbytes(), event.start_thread_id()))
        elif name in kineto._SKIPPED_NAMES or event.device_type().name != "CPU" or event.is_hidden_event():
            continue
        elif name == CALL_MARKER:
            calls.append((event.start_ns(), event.end_ns()))
            call_threads.add(event.start_thread_id())
        else:
            thread = event.start_thread_id()
            moved = thread != event.end_thread_id()
            ops.append((name, event.start_ns(), event.end_ns(), thread, event.is_async() or moved))
    # Autograd's threads work for the call (on CUDA backward runs on a thread per device).
    if call_threads:
        call_threads |= {op[3] for op in ops if op[0].startswith("autograd::engine::evaluate_function")}
    raw = RawProfile.from_lists(ops, [(t, b) for t, b, _ in mem], sorted(calls))
    other = sum(b for _, b, thread in mem if thread not in call_threads and b > 0) if call_threads else 0
    return RawProfile(**{**raw.__dict__, "other_thread_bytes": other})


def assert_same(got: RawProfile, want: RawProfile) -> None:
    for column in ("op_start", "op_end", "op_thread", "op_async", "mem_time", "mem_bytes"):
        a, b = getattr(got, column), getattr(want, column)
        assert a.dtype == b.dtype and a.tolist() == b.tolist(), column
    assert got.op_name.dtype == object and got.op_name.tolist() == want.op_name.tolist()
    assert got.calls == want.calls
    assert got.other_thread_bytes == want.other_thread_bytes
    assert got.op_code is not None
    assert [got.op_code_names[c] for c in got.op_code] == want.op_name.tolist()


def events_strategy(cpu_only: bool = False) -> st.SearchStrategy[list[Event]]:
    devices = [DeviceType.CPU] if cpu_only else list(DeviceType)
    memory_devices = list(DeviceType)

    def build(name: str, start: int, length: int, device: DeviceType, *flags: Any) -> Event:
        index, nbytes, thread, other_end, is_async, hidden = flags
        if name == "[memory]":
            device = memory_devices[int(device.value) % len(memory_devices)]
            index = -1 if device in (DeviceType.CPU, DeviceType.MKLDNN, DeviceType.IDEEP) else index
            return Event(name, start, start, device, index, nbytes, thread, thread, False, False)
        end_thread = thread + 1 if other_end else thread
        return Event(name, start, start + length, device, index, 0, thread, end_thread, is_async, hidden)

    event = st.builds(
        build,
        st.sampled_from(NAMES),
        st.integers(0, 10**6),
        st.integers(0, 1000),
        st.sampled_from(devices),
        st.integers(0, 2),
        st.integers(-(2**40), 2**40),
        st.integers(1, 3),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    )
    return st.lists(event, max_size=60)


@settings(max_examples=examples(200), deadline=None)
@given(events=events_strategy(), index=st.sampled_from([None, 0, 1]), device=st.sampled_from(["CPU", "CUDA"]))
def test_reading_in_blocks_equals_reading_one_event_at_a_time(
    events: list[Event], index: int | None, device: str
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kineto, "_BLOCK", 7)  # many blocks, and blocks that end mid-way
        assert_same(raw_from_kineto(events, device, index), reference(events, device, index))
        assert_same(raw_from_kineto(iter(events), device, index), reference(events, device, index))


@settings(max_examples=examples(100), deadline=None)
@given(events=events_strategy(cpu_only=True))
def test_a_cpu_only_session_needs_no_per_op_device_check(events: list[Event]) -> None:
    assert_same(raw_from_kineto(events, device_events=False), reference(events))


def test_the_callers_event_list_is_left_as_it_was() -> None:
    events = [
        Event("aten::add", 0, 5, DeviceType.CPU, -1, 0, 1, 1, False, False),
        Event("[memory]", 2, 2, DeviceType.CPU, -1, 64, 1, 1, False, False),
    ]
    kept = list(events)
    raw_from_kineto(events)
    assert events == kept and all(a is b for a, b in zip(events, kept, strict=True))


def test_no_events_give_empty_typed_arrays() -> None:
    raw = raw_from_kineto([])
    assert len(raw.op_name) == len(raw.mem_time) == 0
    assert raw.op_start.dtype == raw.mem_bytes.dtype == np.int64 and raw.op_async.dtype == bool


def test_a_real_profile_reads_as_event_by_event() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(3):
            with record_function(CALL_MARKER):
                model(torch.randn(8, 16)).sum().backward()
    want = reference(prof.profiler.kineto_results.events())
    assert len(want.op_name) > 100 and len(want.mem_time) > 20 and len(want.calls) == 3
    assert_same(raw_from_kineto(prof.profiler.kineto_results.events()), want)
    assert_same(raw_from_profiler(prof), want)  # the CPU-only session: no per-op device check


def test_a_range_closed_on_another_thread_reads_as_async() -> None:
    """A range whose end torch did not record on the thread that opened it (closed from another
    thread here; a TorchScript function that resumes on a worker thread after ``torch.jit.wait``
    is the same case) is read as async: it neither nests the ops nor owns the allocations made
    while it is open. Only the flat event list says so: the nodes of torch's event tree carry
    neither the end thread nor the async flag."""
    import threading

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        elsewhere = record_function("closed elsewhere")
        elsewhere.__enter__()
        kept = torch.ones(256)
        closer = threading.Thread(target=elsewhere.__exit__, args=(None, None, None))
        closer.start()
        closer.join()
        with record_function("closed here"):
            kept = kept + 1
    raw = raw_from_profiler(prof)
    is_async = dict(zip(raw.op_name.tolist(), raw.op_async.tolist(), strict=True))
    assert is_async["closed elsewhere"] is True and is_async["closed here"] is False
    assert is_async["aten::ones"] is False and is_async["aten::add"] is False
    assert_same(raw, reference(prof.profiler.kineto_results.events()))
