"""The numbers, checked against values known analytically.

Synthetic profiles state exact allocator records and op intervals; real profiles allocate
tensors of known sizes through torch's allocator."""

from __future__ import annotations

import pytest

from memprof.analysis.peaks import analyze
from memprof.core.records import RawProfile

MiB = 1024 * 1024


def op_row(analysis, name):
    rows = [op for op in analysis.ops if op.name == name]
    assert len(rows) == 1, f"{name} not in {[op.name for op in analysis.ops]}"
    return rows[0]


def test_peak_is_highest_live_point_above_start():
    # hold 100 MiB, add 50, free the first, add 30: highest live point 150 MiB.
    raw = RawProfile.from_lists(
        ops=[],
        mem=[(10, 100 * MiB), (20, 50 * MiB), (30, -100 * MiB), (40, 30 * MiB)],
        calls=[(0, 100)],
    )
    numbers = analyze(raw).numbers
    assert numbers.peak_bytes == 157_286_400
    assert numbers.allocated_bytes == 180 * MiB
    assert numbers.net_bytes == 80 * MiB


def test_records_are_sorted_by_time_before_summing():
    raw = RawProfile.from_lists(
        ops=[], mem=[(40, 30 * MiB), (30, -100 * MiB), (10, 100 * MiB), (20, 50 * MiB)], calls=[(0, 100)]
    )
    assert analyze(raw).numbers.peak_bytes == 150 * MiB


def test_nested_ops_self_total_and_transient_peak():
    # outer [0, 100] calls inner [10, 50]; inner allocates 8 MiB and a 4 MiB temporary it frees;
    # outer frees the 8 MiB and allocates 1 MiB after inner returns.
    raw = RawProfile.from_lists(
        ops=[("outer", 0, 100, 1), ("inner", 10, 50, 1)],
        mem=[(20, 8 * MiB), (30, 4 * MiB), (40, -4 * MiB), (60, -8 * MiB), (70, 1 * MiB)],
        calls=[(0, 100)],
    )
    analysis = analyze(raw)
    inner, outer = op_row(analysis, "inner"), op_row(analysis, "outer")
    assert (inner.total_bytes, inner.self_bytes) == (8 * MiB, 8 * MiB)
    assert inner.peak_bytes == 12 * MiB
    assert inner.allocated_bytes == 12 * MiB
    assert outer.total_bytes == 1 * MiB
    assert outer.self_bytes == 1 * MiB - 8 * MiB
    assert outer.peak_bytes == 12 * MiB
    assert outer.allocated_bytes == 13 * MiB
    assert analysis.numbers.peak_bytes == 12 * MiB
    assert analysis.numbers.peak_op_stack == ("outer", "inner")


def test_peak_names_the_outermost_aten_op():
    raw = RawProfile.from_lists(
        ops=[("aten::sum", 0, 100, 1), ("aten::empty_strided", 10, 20, 1)],
        mem=[(15, 5 * MiB), (90, -5 * MiB)],
        calls=[(0, 100)],
    )
    numbers = analyze(raw).numbers
    assert numbers.peak_op == "aten::sum"
    assert numbers.peak_op_stack == ("aten::sum", "aten::empty_strided")


def test_frees_outside_any_op_form_the_memory_row():
    raw = RawProfile.from_lists(
        ops=[("aten::empty", 0, 10, 1)],
        mem=[(5, 2 * MiB), (20, -2 * MiB), (30, 3 * MiB)],
        calls=[(0, 100)],
    )
    analysis = analyze(raw)
    memory = op_row(analysis, "[memory]")
    assert memory.calls == 2
    assert memory.self_bytes == memory.total_bytes == 1 * MiB
    assert op_row(analysis, "aten::empty").self_bytes == 2 * MiB
    # The highest point: 3 MiB (2 MiB freed before the 3 MiB allocation).
    assert analysis.numbers.peak_bytes == 3 * MiB
    assert analysis.numbers.peak_op == "[memory]"


def test_repeat_peak_is_the_worst_call_relative_to_its_own_start():
    # call 1 peaks 10 MiB and keeps a 1 MiB output; the output is freed between calls;
    # call 2 peaks 12 MiB over its start.
    raw = RawProfile.from_lists(
        ops=[("work", 0, 100, 1), ("work", 200, 300, 1)],
        mem=[(10, 10 * MiB), (20, -9 * MiB), (150, -1 * MiB), (210, 12 * MiB), (220, -11 * MiB)],
        calls=[(0, 100), (200, 300)],
    )
    analysis = analyze(raw)
    assert analysis.numbers.peak_bytes == 12 * MiB
    assert analysis.numbers.calls == 2
    work = op_row(analysis, "work")
    assert work.calls == 2
    assert work.peak_bytes == 12 * MiB
    assert work.total_bytes == 2 * MiB
    assert work.allocated_bytes == 22 * MiB


def test_same_name_nesting_counts_allocations_once_and_totals_like_torch():
    # torch's table sums nested same-name calls (aten::abs inside aten::abs): total doubles.
    raw = RawProfile.from_lists(
        ops=[("aten::abs", 0, 100, 1), ("aten::abs", 10, 90, 1)],
        mem=[(50, 4 * MiB)],
        calls=[(0, 100)],
    )
    row = op_row(analyze(raw), "aten::abs")
    assert row.calls == 2
    assert row.total_bytes == 8 * MiB
    assert row.self_bytes == 4 * MiB
    assert row.allocated_bytes == 4 * MiB


def test_a_function_that_allocates_nothing_gives_zeros():
    analysis = analyze(RawProfile.from_lists(ops=[("aten::view", 0, 10, 1)], mem=[], calls=[(0, 10)]))
    assert analysis.numbers.peak_bytes == 0
    assert analysis.numbers.peak_op is None
    assert op_row(analysis, "aten::view").total_bytes == 0


def test_timeline_starts_at_zero_and_reaches_the_peak():
    raw = RawProfile.from_lists(ops=[], mem=[(10, 5 * MiB), (20, 3 * MiB), (30, -8 * MiB)], calls=[(0, 40)])
    analysis = analyze(raw)
    assert analysis.timeline.bytes[0] == 0
    assert max(analysis.timeline.bytes) == 8 * MiB
    assert analysis.timeline.t_ns[0] == 0
    assert analysis.timeline.t_ns[-1] == 40


@pytest.mark.parametrize("repeat", [1, 3])
def test_real_profile_of_known_allocations(repeat):
    import torch

    import memprof

    def work():
        a = torch.empty(100 * MiB, dtype=torch.uint8)
        b = torch.empty(50 * MiB, dtype=torch.uint8)
        del a
        c = torch.empty(30 * MiB, dtype=torch.uint8)
        return b, c

    run = memprof.profile(work, repeat=repeat, device="cpu").runs["eager"]
    assert run.peak_bytes == 157_286_400
    assert run.allocated_bytes == 180 * MiB
    assert run.net_bytes == 80 * MiB
    assert run.inputs_bytes == 0
    # Wall times come from calls timed without the profiler: at least 5 (and 0.2 s), at most 1,000.
    assert run.repeat == repeat and run.wall_timing == "timed" and 5 <= len(run.wall_ms_all) <= 1000
    empty = run.ops[run.ops["name"] == "aten::empty"].iloc[0]
    assert empty.calls == 3 * repeat
    assert empty.allocated_bytes == 180 * MiB * repeat


def test_inputs_made_before_the_profile_are_reported_not_counted():
    import torch

    import memprof

    x = torch.ones(1024, 1024)  # 4 MiB
    run = memprof.profile(torch.mul, x, x).runs["eager"]
    assert run.inputs_bytes == 4 * MiB
    assert run.peak_bytes == 4 * MiB
    assert run.peak_op == "aten::mul"
