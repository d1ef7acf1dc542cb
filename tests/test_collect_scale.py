"""The vectorised analysis gives exactly what a slow, obviously-correct reading of the records
gives, and it handles profiles of a million allocation records in bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from memprof.analysis.nesting import _parents
from memprof.analysis.peaks import _timeline, analyze
from memprof.core.names import MEMORY_ROW, normalize_name
from memprof.core.records import RawProfile
from memprof.model.ops import ops_frame

ROOT = Path(__file__).resolve().parents[1]

NAMES = [
    "aten::add",
    "aten::empty",
    "aten::sum",
    "my_range",
    # Volatile parts normalised away (torch.compile's own ranges are collapsed into one row
    # before this analysis: tests/test_compiled_view.py).
    "graph_0_cpp_fused_add_0",
    "graph_1_cpp_fused_add_0",
    "graph_0_my_kernel",
    "graph_3_my_kernel",
]

Op = tuple[str, int, int, int, bool]


# ---- the reference: one op at a time, one record at a time -----------------------------------


def ref_parents(ops: list[Op]) -> list[int]:
    """torch's EventList._populate_cpu_children, written out: per thread, sorted by
    (start, -end), a stack of open ops; async ops take no part."""
    parent = [-1] * len(ops)
    for thread in sorted({op[3] for op in ops}):
        members = [i for i, op in enumerate(ops) if op[3] == thread and not op[4]]
        members.sort(key=lambda i: (ops[i][1], -ops[i][2]))
        stack: list[int] = []
        for i in members:
            while stack:
                top = stack[-1]
                if ops[i][1] >= ops[top][2] or ops[i][2] > ops[top][2]:
                    stack.pop()
                else:
                    parent[i] = top
                    break
            stack.append(i)
    return parent


def ref_window(mem: list[tuple[int, int]], start: int, end: int) -> tuple[int, int, int]:
    """(net, allocated, rise) of the records with start <= time <= end; rise = the highest
    live bytes inside the window minus live bytes before it, at least 0."""
    ordered = sorted(mem, key=lambda m: m[0])  # stable: ties keep their order, as recorded
    before = sum(b for t, b in ordered if t < start)
    live, highest, net, allocated = before, before, 0, 0
    for t, b in ordered:
        if start <= t <= end:
            live += b
            highest = max(highest, live)
            net += b
            allocated += max(b, 0)
    return net, allocated, max(highest - before, 0)


def ref_ops(ops: list[Op], mem: list[tuple[int, int]]) -> dict[str, dict[str, float]]:
    parent = ref_parents(ops)
    rows: dict[str, dict[str, float]] = {}
    per_op = [ref_window(mem, op[1], op[2]) for op in ops]
    for i, op in enumerate(ops):
        children = [j for j in range(len(ops)) if parent[j] == i]
        net, allocated, rise = per_op[i]
        ancestors, p = [], parent[i]
        while p >= 0:
            ancestors.append(ops[p][0])
            p = parent[p]
        duration = (op[2] - op[1]) / 1e3
        row = rows.setdefault(
            normalize_name(op[0]),
            {"calls": 0, "self_bytes": 0, "total_bytes": 0, "allocated_bytes": 0, "peak_bytes": 0}
            | {"self_us": 0.0, "total_us": 0.0},
        )
        row["calls"] += 1
        row["total_bytes"] += net
        row["self_bytes"] += 0 if op[4] else net - sum(per_op[j][0] for j in children)
        row["allocated_bytes"] += 0 if op[0] in ancestors else allocated
        row["peak_bytes"] = max(row["peak_bytes"], rise)
        row["total_us"] += duration
        row["self_us"] += duration - sum((ops[j][2] - ops[j][1]) / 1e3 for j in children)
    loose = [b for t, b in mem if not any(op[1] <= t <= op[2] for op in ops)]
    if loose:
        rows[MEMORY_ROW] = {
            "calls": len(loose),
            "self_bytes": sum(loose),
            "total_bytes": sum(loose),
            "allocated_bytes": sum(max(b, 0) for b in loose),
            "peak_bytes": max(max(loose), 0),
            "self_us": 0.0,
            "total_us": 0.0,
        }
    return rows


# ---- random profiles -----------------------------------------------------------------------


def random_tree(
    rng: np.random.Generator, start: int, end: int, thread: int, depth: int, out: list[Op]
) -> None:
    """Non-overlapping children inside [start, end], touching its ends now and then."""
    cursor = start
    while cursor <= end and depth < 4 and rng.random() < 0.7:
        child_start = cursor + int(rng.integers(0, 3))
        child_end = min(end, child_start + int(rng.integers(0, 8)))
        if child_start > end:
            break
        out.append((str(rng.choice(NAMES)), child_start, child_end, thread, bool(rng.random() < 0.05)))
        random_tree(rng, child_start, child_end, thread, depth + 1, out)
        cursor = child_end + int(rng.integers(0, 2))


def random_profile(rng: np.random.Generator) -> tuple[list[Op], list[tuple[int, int]], list[tuple[int, int]]]:
    horizon = int(rng.integers(5, 60))
    ops: list[Op] = []
    for thread in range(int(rng.integers(1, 3))):
        random_tree(rng, 0, horizon, 100 + thread, 0, ops)
    for _ in range(int(rng.integers(0, 3))):  # partial overlaps, which real traces have too
        s = int(rng.integers(0, horizon))
        ops.append((str(rng.choice(NAMES)), s, s + int(rng.integers(0, 10)), 100, False))
    order = rng.permutation(len(ops))  # kineto does not give events in time order
    ops = [ops[i] for i in order]
    mem = [
        (int(rng.integers(-2, horizon + 3)), int(rng.integers(-600, 1000)))
        for _ in range(rng.integers(0, 40))
    ]
    calls: list[tuple[int, int]] = []
    for _ in range(int(rng.integers(0, 3))):
        s = int(rng.integers(0, horizon))
        calls.append((s, s + int(rng.integers(0, horizon))))
    return ops, mem, sorted(calls)


@pytest.mark.parametrize("seed", range(8))
def test_analyze_equals_the_reference_on_random_nested_profiles(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(60):
        ops, mem, calls = random_profile(rng)
        analysis = analyze(RawProfile.from_lists(ops, mem, calls))
        expected = ref_ops(ops, mem)
        frame = ops_frame(analysis.ops)
        assert list(frame["name"]) == list(expected), (ops, mem)
        for row in frame.to_dict("records"):
            want = expected[row["name"]]
            for column in ("calls", "self_bytes", "total_bytes", "allocated_bytes", "peak_bytes"):
                assert row[column] == want[column], (column, row, want, ops, mem)
            assert row["self_us"] == pytest.approx(want["self_us"], abs=1e-9)
            assert row["total_us"] == pytest.approx(want["total_us"], abs=1e-9)

        windows = calls or ([(min(t for t, _ in mem), max(t for t, _ in mem))] if mem else [(0, 0)])
        per_call = [ref_window(mem, s, e) for s, e in windows]
        numbers = analysis.numbers
        assert numbers.peak_bytes == max(r for _, _, r in per_call)
        assert numbers.allocated_bytes == max(a for _, a, _ in per_call)
        assert numbers.net_bytes == per_call[-1][0]
        assert numbers.records == len(mem)
        assert numbers.calls == len(calls)


def ref_nested_same(ops: list[Op], parent: list[int]) -> list[bool]:
    """Whether an ancestor (by torch's parents) has the op's name."""
    out = []
    for i, op in enumerate(ops):
        p = parent[i]
        while p >= 0 and ops[p][0] != op[0]:
            p = parent[p]
        out.append(p >= 0)
    return out


def tangled_ops(rng: np.random.Generator) -> list[Op]:
    """Ops that a well-behaved trace rarely has, all at once: partial overlaps, zero-length ops,
    identical intervals, ops sharing a start or an end, async ops (some overlapping sync ones)
    and up to 40 threads; given sorted (kineto's usual order) or shuffled."""
    threads = int(rng.choice([1, 2, 5, 40]))
    horizon = int(rng.integers(1, 40))
    ops: list[Op] = []
    for _ in range(int(rng.integers(1, 80))):
        start = int(rng.integers(0, horizon))
        length = 0 if rng.random() < 0.2 else int(rng.integers(0, 15))
        thread, is_async = int(rng.integers(0, threads)), bool(rng.random() < 0.1)
        op = (str(rng.choice(NAMES[:3])), start, start + length, thread, is_async)
        ops.append(op)
        if rng.random() < 0.15:
            ops.append(op)  # the identical interval, recorded twice
    if rng.random() < 0.5:
        ops.sort(key=lambda op: (op[3], op[1], -op[2]))
    else:
        ops = [ops[i] for i in rng.permutation(len(ops))]
    return ops


@pytest.mark.parametrize("seed", range(6))
def test_nesting_equals_torchs_stack_on_tangled_ops(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    for _ in range(300):
        ops = tangled_ops(rng)
        parent, nested_same = _parents(RawProfile.from_lists(ops, []))
        want = ref_parents(ops)
        assert parent.tolist() == want, ops
        assert nested_same.tolist() == ref_nested_same(ops, want), ops


@pytest.mark.parametrize("seed", range(3))
def test_analyze_equals_the_reference_on_tangled_ops(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    for _ in range(60):
        ops = tangled_ops(rng)
        mem = [(int(rng.integers(-2, 50)), int(rng.integers(-600, 1000))) for _ in range(rng.integers(0, 30))]
        frame = ops_frame(analyze(RawProfile.from_lists(ops, mem)).ops)
        expected = ref_ops(ops, mem)
        assert list(frame["name"]) == list(expected), (ops, mem)
        for row in frame.to_dict("records"):
            want = expected[row["name"]]
            for column in ("calls", "self_bytes", "total_bytes", "allocated_bytes", "peak_bytes"):
                assert row[column] == want[column], (column, row, want, ops, mem)
            assert row["self_us"] == pytest.approx(want["self_us"], abs=1e-9)


def test_an_op_that_outlives_its_container_is_not_its_child() -> None:
    # torch's stack: y = [5, 20] starts inside x = [0, 10] and ends after it, so it pops x;
    # z = [6, 8] then nests in y only, though it also lies inside x (same name as x: not
    # "nested in a same-name op", since x is no ancestor of z).
    ops: list[Op] = [("x", 0, 10, 1, False), ("y", 5, 20, 1, False), ("x", 6, 8, 1, False)]
    parent, nested_same = _parents(RawProfile.from_lists(ops, []))
    assert parent.tolist() == [-1, -1, 1]
    assert nested_same.tolist() == [False, False, False]


def test_identical_and_zero_length_intervals_nest_as_torch_nests_them() -> None:
    # Of two identical ops, the second recorded is the child of the first. A zero-length op
    # nests in an op that ends after it, and pops an identical zero-length op before it (its
    # start is not before that one's end). An op starting where others end is none's child.
    ops: list[Op] = [
        ("a", 0, 10, 1, False),
        ("a", 0, 10, 1, False),
        ("z", 4, 4, 1, False),
        ("z", 4, 4, 1, False),
        ("e", 10, 10, 1, False),
    ]
    parent, nested_same = _parents(RawProfile.from_lists(ops, []))
    assert parent.tolist() == [-1, 0, 1, 1, -1]
    assert nested_same.tolist() == [False, True, False, False, False]


def test_a_free_at_the_exact_end_of_an_op_belongs_to_it() -> None:
    # Boundaries are inclusive on both sides, as torch matches records to ops.
    ops: list[Op] = [("aten::outer", 10, 20, 1, False), ("aten::inner", 10, 15, 1, False)]
    mem = [(10, 100), (15, -100), (20, 50), (21, -50)]
    frame = ops_frame(analyze(RawProfile.from_lists(ops, mem)).ops).set_index("name")
    assert frame.loc["aten::inner", "total_bytes"] == 0
    assert frame.loc["aten::inner", "peak_bytes"] == 100
    assert frame.loc["aten::outer", "total_bytes"] == 50
    assert frame.loc["aten::outer", "self_bytes"] == 50
    assert frame.loc[MEMORY_ROW, "total_bytes"] == -50


def ref_downsample(t: np.ndarray, b: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    buckets = np.linspace(0, len(t), max_points + 1).astype(np.int64)
    keep = [s + int(np.argmax(b[s:e])) for s, e in zip(buckets[:-1], buckets[1:], strict=True) if e > s]
    return t[keep], b[keep]


@pytest.mark.parametrize("seed", range(5))
def test_long_timelines_keep_each_buckets_first_highest_point(seed: int) -> None:
    rng = np.random.default_rng(seed)
    count = int(rng.integers(5000, 20000))
    times = np.sort(rng.integers(0, 10**6, count)).astype(np.int64)
    live = np.cumsum(rng.integers(-3, 4, count)).astype(np.int64)  # small steps: many ties
    lo, hi = np.array([0]), np.array([count])
    t, b = _timeline(times, live, times[:1], times[-1:], lo, hi, max_points=int(rng.integers(100, 4000)))
    full_t = np.concatenate(([0], times - times[0], [times[-1] - times[0]]))
    full_b = np.concatenate(([0], live, [live[-1]]))
    want_t, want_b = ref_downsample(full_t, full_b, len(t) if len(t) < len(full_t) else len(full_t))
    assert np.array_equal(t, want_t) and np.array_equal(b, want_b)
    assert b.max() == full_b.max()  # the peak survives


# ---- a million records, through collection and reporting -----------------------------------

MILLION_BOUND_BYTES = 1024**3  # 1 GiB of peak resident memory for the whole process

_MILLION_SCRIPT = textwrap.dedent(
    """
    import json, time
    import numpy as np
    from torch._C._autograd import DeviceType
    from memprof.analysis.peaks import analyze
    from memprof.core.records import CALL_MARKER
    from memprof.sources.live.kineto import raw_from_kineto
    from memprof.pipeline import build_report, build_run
    from memprof.outputs import renderer

    class Event:
        # The accessors raw_from_kineto reads from torch's _KinetoEvent.
        __slots__ = ("_name", "_start", "_end", "_bytes")
        def __init__(self, name, start, end, nbytes):
            self._name, self._start, self._end, self._bytes = name, start, end, nbytes
        def name(self): return self._name
        def device_type(self): return DeviceType.CPU
        def device_index(self): return -1
        def start_ns(self): return self._start
        def end_ns(self): return self._end
        def nbytes(self): return self._bytes
        def start_thread_id(self): return 1
        def end_thread_id(self): return 1
        def is_async(self): return False
        def is_hidden_event(self): return False

    # 100,000 steps, each an op [10i, 10i+9] holding 5 allocations then their 5 frees (one
    # record per ns), with a child op [10i+2, 10i+7] that sees allocations 2..4 and their frees.
    steps = 100_000
    rng = np.random.default_rng(0)
    events = [Event(CALL_MARKER, 0, 10 * steps, 0)]
    for i in range(steps):
        base, extra = 10 * i, i % 7
        sizes = [(j + 1) * 100 + extra for j in range(5)]
        events.append(Event("aten::step", base, base + 9, 0))
        events.append(Event("aten::inner", base + 2, base + 7, 0))
        for j, size in enumerate(sizes):
            events.append(Event("[memory]", base + j, base + j, size))
        for j, size in enumerate(reversed(sizes)):
            events.append(Event("[memory]", base + 5 + j, base + 5 + j, -size))
    shuffled = [events[k] for k in rng.permutation(len(events))]
    del events
    started = time.perf_counter()
    raw = raw_from_kineto(shuffled)
    del shuffled
    analysis = analyze(raw)
    run = build_run(analysis, label="eager", inputs_bytes=0, wall_ms=1.0)
    report = build_report(target="synthetic:million", device="cpu", runs={"eager": run})
    rendered_json = renderer("json")(report)
    rendered_csv = renderer("csv")(report)
    seconds = time.perf_counter() - started
    with open("/proc/self/status") as status:
        hwm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    rows = {r["name"]: r for r in json.loads(rendered_json)["runs"]["eager"]["ops"]}
    print(json.dumps({
        "records": analysis.numbers.records, "peak_bytes": analysis.numbers.peak_bytes,
        "allocated_bytes": analysis.numbers.allocated_bytes, "net_bytes": analysis.numbers.net_bytes,
        "peak_op": analysis.numbers.peak_op, "timeline_points": len(analysis.timeline.t_ns),
        "timeline_max": max(analysis.timeline.bytes), "ops": rows,
        "csv_lines": len(rendered_csv.splitlines()), "hwm_bytes": hwm_kb * 1024, "seconds": seconds,
    }))
    """
)


@pytest.mark.slow
def test_a_million_allocation_records_through_collection_and_reporting_in_bounded_memory() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-c", _MILLION_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    steps = 100_000
    extras = np.arange(steps) % 7
    assert result["records"] == 1_000_000
    assert result["peak_bytes"] == 1500 + 5 * 6  # the five allocations of a step with i % 7 == 6
    assert result["allocated_bytes"] == int((1500 + 5 * extras).sum())
    assert result["net_bytes"] == 0
    assert result["peak_op"] == "aten::step"  # outermost aten op running at the peak
    assert result["timeline_points"] <= 4000 and result["timeline_max"] == 1530
    step, inner = result["ops"]["aten::step"], result["ops"]["aten::inner"]
    assert (step["calls"], step["total_bytes"], step["self_bytes"], step["peak_bytes"]) == (steps, 0, 0, 1530)
    assert step["allocated_bytes"] == int((1500 + 5 * extras).sum())
    assert (inner["calls"], inner["total_bytes"], inner["peak_bytes"]) == (steps, 0, 300 + 400 + 500 + 3 * 6)
    assert inner["allocated_bytes"] == int((1200 + 3 * extras).sum())
    assert set(result["ops"]) == {"aten::step", "aten::inner"}  # no record falls outside the ops
    assert result["csv_lines"] == 3
    assert result["hwm_bytes"] < MILLION_BOUND_BYTES, f"peak RSS {result['hwm_bytes'] / 2**20:.0f} MiB"
