"""The op running at each point of the timeline (shown when hovering the HTML chart): the same op
that "peak during" names, found for thousands of points at once."""

from __future__ import annotations

import random

import numpy as np
from examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.analysis.peaks import analyze, op_stack_at, responsible_op
from memprof.analysis.running import ops_at
from memprof.core.records import CALL_MARKER, RawProfile

NAMES = [
    "aten::linear",
    "aten::addmm",
    "aten::empty",
    "autograd::engine::evaluate_function: X",
    "my block",
    "k0",
]


def call_tree(rng: random.Random, start: int, end: int, depth: int, out: list) -> None:
    """Properly nested intervals inside [start, end], like one thread's ops."""
    t = start
    while depth < 4 and t < end - 4 and rng.random() < 0.8:
        a = rng.randint(t, end - 3)
        b = rng.randint(a + 1, min(end, a + (end - start) // 2 + 1))
        out.append((rng.choice(NAMES), a, b, 1))
        call_tree(rng, a, b, depth + 1, out)
        t = b + 1


def expected(raw: RawProfile, t: int) -> str | None:
    stack = [name for name in op_stack_at(raw, t) if name != CALL_MARKER]
    return responsible_op(stack) if stack else None


@settings(max_examples=examples(150), deadline=None)
@given(st.integers(0, 2**32))
def test_ops_at_names_what_responsible_op_names(seed: int) -> None:
    rng = random.Random(seed)
    ops: list = [(CALL_MARKER, 0, 1000, 1)]
    call_tree(rng, 0, 1000, 0, ops)
    rng.shuffle(ops)
    raw = RawProfile.from_lists(ops, [])
    times = np.array(sorted(rng.randint(-5, 1005) for _ in range(60)), dtype=np.int64)
    names, index = ops_at(raw, times)
    found = [names[i] if i >= 0 else None for i in index]
    assert found == [expected(raw, int(t)) for t in times]


def test_the_timeline_of_a_run_names_the_op_at_each_point() -> None:
    # One call: aten::mul allocates 100 B at t=15 inside the range "block"; a free outside any
    # op at t=40; aten::add allocates 50 B at t=55.
    raw = RawProfile.from_lists(
        [(CALL_MARKER, 0, 100, 1), ("block", 10, 30, 1), ("aten::mul", 12, 20, 1), ("aten::add", 50, 60, 1)],
        [(15, 100), (40, -100), (55, 50)],
        calls=[(0, 100)],
    )
    timeline = analyze(raw).timeline
    assert timeline.t_ns == (0, 15, 40, 55, 100)
    assert [timeline.op(i) for i in range(len(timeline))] == [None, "aten::mul", None, "aten::add", None]


def test_downsampling_keeps_every_series_at_the_same_points() -> None:
    # 10,000 points: bytes rise and fall, reserved is bytes + 1,000,000 + i (each point's own
    # value), the op index is i % 3. Each bucket keeps its highest bytes; reserved and the op
    # must be those of the same points.
    from memprof.analysis.timeline import downsample_timeline
    from memprof.model.timeline import Timeline

    n = 10_000
    values = [(i * 7919) % 10_007 for i in range(n)]
    timeline = Timeline(
        t_ns=tuple(range(0, 10 * n, 10)),
        bytes=tuple(values),
        reserved=tuple(v + 1_000_000 + i for i, v in enumerate(values)),
        op_names=("a", "b", "c"),
        op_at=tuple(i % 3 for i in range(n)),
    )
    small = downsample_timeline(timeline, 400)
    assert len(small) == len(small.reserved) == len(small.op_at) == 400
    assert max(small.bytes) == max(values)  # the peak survives
    for t, b, r, op in zip(small.t_ns, small.bytes, small.reserved, small.op_at, strict=True):
        i = t // 10
        assert (b, r, op) == (values[i], values[i] + 1_000_000 + i, i % 3)
    assert small.op_names == ("a", "b", "c")


def test_an_op_index_past_the_names_is_no_op() -> None:
    # A hand-edited report may point past op_names: no op is named there, nothing raises.
    from memprof.model.timeline import Timeline

    timeline = Timeline(t_ns=(0, 1, 2), bytes=(0, 1, 0), op_names=("aten::mm",), op_at=(0, 5, -1))
    assert [timeline.op(i) for i in range(3)] == ["aten::mm", None, None]


def test_one_long_name_costs_its_own_length_not_every_names() -> None:
    # Names went into a numpy string array as wide as the longest: 100 ops and one name of a
    # million characters made 400 MB.
    import tracemalloc

    long = "aten::" + "x" * 1_000_000
    ops = [(long, 0, 1000, 1)] + [(f"aten::op{i}", 10 * i + 1, 10 * i + 5, 1) for i in range(100)]
    raw = RawProfile.from_lists(ops, [])
    times = np.arange(2, 1000, 10, dtype=np.int64)
    tracemalloc.start()
    try:
        names, index = ops_at(raw, times)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20
    assert [names[i] for i in index] == [long] * len(times)  # the outermost aten op, as peaks names it
