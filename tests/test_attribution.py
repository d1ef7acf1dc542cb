"""The attribution on hand-made records and facts: exact numbers known by construction, and
the reconciliation on random ones."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from examples import examples
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memprof.analysis.attribution import attribute, with_device_counters
from memprof.analysis.peak_entries import OUTSIDE_OPS, UNKNOWN_BEFORE
from memprof.core.records import (
    Allocations,
    ModuleCalls,
    RawProfile,
    Site,
    TrackedFacts,
    TrackedOps,
    TrackedStorage,
)
from memprof.model.explanation import CATEGORIES

EMPTY = np.zeros(0, dtype=np.int64)


def ints(values: Sequence[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def storage(ptr: int, nbytes: int, kind: str, seen: int = 0, died: int | None = None) -> TrackedStorage:
    return TrackedStorage(ptr, nbytes, seen, died, kind, f"{kind}@{ptr}", "layer", "(1,)", "float32")


def make_facts(
    records: Sequence[tuple[int, int, int]],
    storages: Sequence[TrackedStorage] = (),
    ops: Sequence[tuple[int, int, str]] = (),
    outputs: Sequence[tuple[int, int]] = (),
    saved: Sequence[tuple[int, int]] = (),
    device: str = "cpu",
) -> TrackedFacts:
    """Facts from (time, bytes, ptr) records, storages, ops (t0, t1, name) at one source line in
    module call 0, outputs (ptr, op) and saved tensors (ptr, time)."""
    names = tuple(sorted({name for _, _, name in ops}))
    return TrackedFacts(
        allocations=Allocations.from_lists(records),
        ops=TrackedOps(
            t0=ints([o[0] for o in ops]),
            t1=ints([o[1] for o in ops]),
            name=ints([names.index(o[2]) for o in ops]),
            site=ints([0] * len(ops)),
            module_call=ints([0] * len(ops)),
            phase=ints([0] * len(ops)),
            names=names,
        ),
        module_calls=ModuleCalls(
            path=ints([0]), parent=ints([-1]), start=ints([0]), end=ints([10**6]), paths=("net",)
        ),
        sites=(Site("model.py", 7, "y = f(x)"),),
        outputs_ptr=ints([o[0] for o in outputs]),
        outputs_op=ints([o[1] for o in outputs]),
        outputs_shape=ints([0] * len(outputs)),
        outputs_dtype=ints([0] * len(outputs)),
        shapes=("(2, 3)",),
        dtypes=("float32",),
        saved_ptr=ints([s[0] for s in saved]),
        saved_time=ints([s[1] for s in saved]),
        storages=tuple(storages),
        device=device,
    )


def raw_of(facts: TrackedFacts, calls: Sequence[tuple[int, int]]) -> RawProfile:
    records = facts.allocations
    return RawProfile(
        op_name=np.zeros(0, dtype=object),
        op_start=EMPTY,
        op_end=EMPTY,
        op_thread=EMPTY,
        op_async=np.zeros(0, dtype=bool),
        mem_time=records.time,
        mem_bytes=records.bytes,
        calls=list(calls),
    )


def _made_before_profiling(device: str = "cpu") -> TrackedFacts:
    """Two blocks made before profiling: an input of 40 B at 0x30 (its free is recorded: torch
    remembered its size) and a parameter of 30 B at 0x40 (its free is not: the tracker saw it
    die at t=15); during the call an output of 100 B at 0x10 and one of 50 B at 0x20, saved."""
    return make_facts(
        records=[(10, 100, 0x10), (20, 50, 0x20), (25, -40, 0x30), (30, -100, 0x10)],
        storages=[storage(0x30, 40, "input", died=25), storage(0x40, 30, "parameter", died=15)],
        ops=[(8, 12, "aten::ones"), (18, 22, "aten::mm")],
        outputs=[(0x10, 0), (0x20, 1)],
        saved=[(0x20, 22)],
        device=device,
    )


def test_frees_of_blocks_made_before_profiling_are_followed() -> None:
    facts = _made_before_profiling()
    explained = attribute(raw_of(facts, [(5, 40)]), facts)
    # Live: 70 before; +100 (t=10) 170; -30 (t=15) 140; +50 (t=20) 190; -40 150; -100 50.
    assert (explained.live_at_start_bytes, explained.footprint_bytes, explained.peak_bytes) == (70, 190, 120)
    assert explained.freed_before_peak_bytes == 30
    assert explained.records_peak_bytes == 150  # the records alone: +100, +50
    assert explained.at_peak.by_category == {
        **dict.fromkeys(CATEGORIES, 0),
        "temporary": 100,
        "activation": 50,
        "input": 40,
    }
    entries = {(e.category, e.op, e.bytes, e.before_call) for e in explained.at_peak.entries}
    assert entries == {
        ("temporary", "aten::ones", 100, False),
        ("activation", "aten::mm", 50, False),
        ("input", "", 40, True),
    }
    top = explained.at_peak.entries[0]
    assert (top.module, top.phase, top.source, top.source_text, top.shape) == (
        "net",
        "forward",
        "model.py:7",
        "y = f(x)",
        "(2, 3)",
    )


def test_a_recorded_free_with_a_stale_size_takes_the_storage_size_on_cpu() -> None:
    # torch's CPU reporter may record the free of a block made before profiling with the size
    # of an older block at that address.
    facts = make_facts(records=[(10, -999, 0x30)], storages=[storage(0x30, 40, "gradient", died=10)])
    explained = attribute(raw_of(facts, [(5, 20)]), facts)
    assert (explained.live_at_start_bytes, explained.footprint_bytes, explained.peak_bytes) == (40, 40, 0)
    assert explained.calls[0].live_at_end_bytes == 0
    assert any("stale size" in note for note in explained.notes)
    cuda = make_facts(
        records=[(10, -512, 0x30)], storages=[storage(0x30, 40, "gradient", died=10)], device="cuda:0"
    )
    # The CUDA allocator records its block's size (rounded up): that is what was live.
    assert attribute(raw_of(cuda, [(5, 20)]), cuda).live_at_start_bytes == 512


def test_what_cannot_be_attributed_is_listed_with_its_reason() -> None:
    # A free of a block nobody knew about; an allocation after the last op.
    facts = make_facts(
        records=[(10, 64, 0x10), (20, -16, 0x50), (30, 8, 0x60)],
        ops=[(8, 12, "aten::empty")],
        outputs=[(0x10, 0)],
    )
    explained = attribute(raw_of(facts, [(5, 40)]), facts)
    assert explained.live_at_start_bytes == 16
    assert explained.footprint_bytes == 16 + 64
    unattributed = {(u.reason, u.bytes, u.before_call) for u in explained.at_peak.unattributed}
    assert unattributed == {(UNKNOWN_BEFORE, 16, True)}
    assert explained.at_peak.by_category["other"] == 16
    later = attribute(raw_of(facts, [(25, 40)]), facts)
    assert {(u.reason, u.bytes) for u in later.at_peak.unattributed} == {(OUTSIDE_OPS, 8)}


def test_workspace_is_what_an_op_allocates_and_never_returns() -> None:
    facts = make_facts(
        records=[(10, 512, 0x10), (11, 8, 0x20), (12, -512, 0x10)],
        ops=[(9, 13, "aten::sum")],
        outputs=[(0x20, 0)],
    )
    explained = attribute(raw_of(facts, [(5, 40)]), facts)
    assert explained.peak_bytes == 520
    assert explained.at_peak.by_category["workspace"] == 512
    assert explained.at_peak.by_category["temporary"] == 8


@st.composite
def programs(draw: st.DrawFn) -> tuple[TrackedFacts, tuple[int, int]]:
    """Random blocks: some made before profiling (known to the tracker, freed or not, their
    frees recorded or not), some allocated during it; random ops and outputs."""
    records: list[tuple[int, int, int]] = []
    storages: list[TrackedStorage] = []
    kinds = ["parameter", "gradient", "optimizer_state", "input", "other"]
    for ptr in range(draw(st.integers(0, 4))):
        nbytes = draw(st.integers(1, 1000))
        died = draw(st.one_of(st.none(), st.integers(1, 10_000)))
        storages.append(storage(1000 + ptr, nbytes, draw(st.sampled_from(kinds)), died=died))
        if died is not None and draw(st.booleans()):
            records.append((died, -nbytes, 1000 + ptr))
    for ptr in range(draw(st.integers(0, 8))):
        start = draw(st.integers(1, 10_000))
        nbytes = draw(st.integers(1, 1000))
        records.append((start, nbytes, ptr))
        if draw(st.booleans()):
            records.append((draw(st.integers(start + 1, 10_001)), -nbytes, ptr))
    times = [t for t, _, _ in records] + [s.died_ns for s in storages if s.died_ns is not None]
    # Distinct moments (the brute force below sees each moment's end state only).
    assume(len(set(times)) == len(times) - sum(1 for t, b, p in records if b < 0 and p >= 1000))
    ops = [(t, t + 500, "aten::op") for t in range(0, 10_000, 1000)]
    outputs = [(ptr, draw(st.integers(0, len(ops) - 1))) for ptr in range(draw(st.integers(0, 8)))]
    saved = [(ptr, draw(st.integers(0, 10_000))) for ptr in range(draw(st.integers(0, 3)))]
    start = draw(st.integers(0, 6_000))
    window = (start, draw(st.integers(start, 11_000)))
    return make_facts(records, storages, ops, outputs, saved), window


@settings(max_examples=examples(200), deadline=None)
@given(programs())
def test_every_byte_is_in_one_category_and_the_peak_is_the_highest_live_point(
    case: tuple[TrackedFacts, tuple[int, int]],
) -> None:
    facts, window = case
    explained = attribute(raw_of(facts, [window]), facts)
    at_peak = explained.at_peak
    assert sum(at_peak.by_category.values()) == explained.footprint_bytes == at_peak.footprint_bytes
    listed = sum(e.bytes for e in at_peak.entries) + sum(u.bytes for u in at_peak.unattributed)
    assert listed == explained.footprint_bytes
    assert explained.footprint_bytes - explained.live_at_start_bytes == explained.peak_bytes >= 0
    # Brute force: live bytes at each moment from the blocks' definitions.
    before = list(facts.storages)
    times = facts.allocations.time.tolist() + [s.died_ns for s in before if s.died_ns is not None]
    events = [t for t in times if window[0] <= t <= window[1]]

    def live(t: int) -> int:
        total = sum(s.nbytes for s in before if s.died_ns is None or s.died_ns > t)
        pre_ptrs = {s.ptr for s in before}
        for time, size, ptr in zip(
            facts.allocations.time.tolist(),
            facts.allocations.bytes.tolist(),
            facts.allocations.ptr.tolist(),
            strict=True,
        ):
            if time <= t and ptr not in pre_ptrs:
                total += size
        return total

    start = live(window[0] - 1)
    assert explained.live_at_start_bytes == start
    assert explained.footprint_bytes == max([start, *[live(t) for t in events]])


def test_device_counters_complete_the_footprint_with_what_memprof_did_not_find() -> None:
    facts = make_facts(
        records=[(10, 512, 0x10)],
        storages=[storage(0x30, 1024, "parameter")],
        ops=[(8, 12, "aten::empty")],
        outputs=[(0x10, 0)],
        device="cuda:0",
    )
    explained = attribute(raw_of(facts, [(5, 40)]), facts)
    assert (explained.live_at_start_bytes, explained.footprint_bytes) == (1024, 1536)
    # The caching allocator counted 4096 B live at the start and a high-water mark of 4608 B.
    completed = with_device_counters(explained, 4096, 4608)
    assert (completed.live_at_start_bytes, completed.footprint_bytes, completed.peak_bytes) == (
        4096,
        4608,
        512,
    )
    assert completed.at_peak.by_category["other"] == 3072
    assert sum(completed.at_peak.by_category.values()) == completed.at_peak.footprint_bytes == 4608
    assert [(u.bytes, u.before_call) for u in completed.at_peak.unattributed] == [(3072, True)]
    # Live through every call: each call's numbers and the stacked timeline count it too.
    assert [(c.live_at_start_bytes, c.footprint_bytes, c.peak_bytes) for c in completed.calls] == [
        (4096, 4608, 512)
    ]
    assert [
        a - b
        for a, b in zip(
            completed.timeline_by_category["other"], explained.timeline_by_category["other"], strict=True
        )
    ] == [3072] * len(explained.timeline_t_ns)
    assert completed.notes == explained.notes
    # A high-water mark far above the footprint: something allocated where the profiler did not see.
    assert any("max_memory_allocated" in n for n in with_device_counters(explained, 4096, 8 << 20).notes)


def test_numbers_only_are_the_explained_numbers_without_the_explanation() -> None:
    facts = _made_before_profiling(device="cuda:0")
    explained = attribute(raw_of(facts, [(5, 40)]), facts)
    numbers = attribute(raw_of(facts, [(5, 40)]), facts, explain=False)
    kept = ("footprint_bytes", "live_at_start_bytes", "peak_bytes", "records_peak_bytes")
    kept += ("freed_before_peak_bytes", "peak_call", "peak_time_ns", "calls", "notes", "peak_at_ns")
    assert [getattr(numbers, k) for k in (*kept, "live_t_ns", "live_bytes")] == [
        getattr(explained, k) for k in (*kept, "live_t_ns", "live_bytes")
    ]
    assert (numbers.footprint_bytes, numbers.peak_bytes) == (190, 120)
    assert (numbers.at_peak.by_category, numbers.at_peak.entries, numbers.modules) == ({}, (), ())
    assert (numbers.timeline_t_ns, dict(numbers.timeline_by_category), numbers.kernels) == ((), {}, ())
    # The device's counters complete the numbers alike; nothing is made up for the explanation.
    completed, completed_explained = (with_device_counters(a, 1000, 1120) for a in (numbers, explained))
    assert [getattr(completed, k) for k in kept] == [getattr(completed_explained, k) for k in kept]
    assert completed.live_at_start_bytes == 1000 and completed.calls[0].footprint_bytes == 1120
    assert completed.at_peak.by_category == {} and not completed.at_peak.unattributed
