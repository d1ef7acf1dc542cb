"""The op running at each point of the timeline (shown when hovering the HTML chart): the same op
that "peak during" names, found for thousands of points at once."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.analysis.peaks import analyze, op_stack_at, responsible_op
from memprof.analysis.running import ops_at
from memprof.records import CALL_MARKER, RawProfile

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


@settings(max_examples=150, deadline=None)
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
