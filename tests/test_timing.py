"""Wall times: how many calls are timed (a budget, like timeit), their spread, and the noise
rule every format's summary line follows."""

from __future__ import annotations

import dataclasses

import pytest

from memprof.analysis.diff import diff_runs
from memprof.model import RunResult
from memprof.model.timing import Spread, format_spread, format_wall, iqr, within_noise
from memprof.pipeline import build_report
from memprof.sources.live.timing import MAX_CALLS, MIN_CALLS, time_calls


class FakeClock:
    """A clock that each call of the workload moves by ``step`` seconds (exact binary
    fractions, so the counts below are exact)."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def work(self) -> None:
        self.calls += 1
        self.now += self.step


@pytest.mark.parametrize(
    ("step", "budget", "calls"),
    [
        (1 / 64, 0.25, 16),  # short calls: until the budget is spent (16 x 1/64 s = 0.25 s)
        (1 / 1024, 0.0, 0),  # no budget: nothing is timed
        (1 / 2**20, 0.25, MAX_CALLS),  # very short calls: at most 1,000
        (1 / 8, 0.25, MIN_CALLS),  # 2 calls would fill the budget: still 5
        (3 / 16, 0.2, MIN_CALLS),  # just under the budget: 5 calls, 0.9375 s
        (1 / 4, 0.25, 1),  # a call that takes the budget alone: timed once
        (2.0, 0.25, 1),  # and a longer one
        (1 / 8, 1.0, 8),  # a budget of 1 s: 8 calls; the cap is 5 s
    ],
)
def test_how_many_calls_are_timed(step: float, budget: float, calls: int) -> None:
    clock = FakeClock(step)
    timed = time_calls(clock.work, budget, clock=clock)
    assert clock.calls == calls and len(timed.walls_ms) == calls
    assert all(wall == step * 1e3 for wall in timed.walls_ms) and timed.error is None


def test_a_call_that_raises_ends_the_timing_and_is_returned() -> None:
    clock = FakeClock(1 / 64)

    def fails_third_time() -> None:
        clock.work()
        if clock.calls == 3:
            raise RuntimeError("boom")

    timed = time_calls(fails_third_time, 0.25, clock=clock)
    assert len(timed.walls_ms) == 2 and isinstance(timed.error, RuntimeError)


def test_spread_quartiles_and_the_wall_cell() -> None:
    spread = Spread.of([10.0, 12.0, 11.0, 14.0, 13.0])
    assert spread == Spread(calls=5, low_ms=10.0, q1_ms=11.0, median_ms=12.0, q3_ms=13.0, high_ms=14.0)
    assert spread.half_iqr_fraction == pytest.approx(1 / 12)
    assert format_wall([10.0, 12.0, 11.0, 14.0, 13.0], 12.0) == "12.0 ms ±8.3%"
    assert format_wall([12.0], 12.0) == "12.0 ms"  # one call: no spread to show
    assert format_wall([], float("nan")) == "-"
    assert format_spread([10.0, 12.0, 11.0, 14.0, 13.0]) == (
        "5 calls: 10.0 ms to 14.0 ms, middle half 11.0 ms to 13.0 ms"
    )
    assert Spread.of([]) is None and iqr([5.0]) == () and iqr([4.0, 6.0]) == (4.5, 5.5)


def test_the_noise_rule() -> None:
    assert within_noise((10.0, 12.0), (11.5, 13.0)) is True  # the middle halves overlap
    assert within_noise((10.0, 12.0), (12.0, 13.0)) is True  # touching counts as overlapping
    assert within_noise((10.0, 12.0), (12.5, 13.0)) is False
    assert within_noise((), (12.5, 13.0)) is None  # a single call has no spread


def run(label: str, walls: list[float]) -> RunResult:
    import statistics

    return RunResult(
        label=label,
        peak_bytes=100,
        wall_ms=statistics.median(walls),
        wall_ms_all=tuple(walls),
        wall_timing="timed",
    )


def test_summary_says_within_noise_when_the_spreads_overlap() -> None:
    base = run("a", [10.0, 10.2, 10.4, 10.6, 10.8])
    close = run("b", [10.3, 10.5, 10.7, 10.9, 11.1])  # median +2.9%; 10.5-10.9 overlaps 10.2-10.6
    far = run("c", [12.0, 12.2, 12.4, 12.6, 12.8])  # +19.2%, well apart
    assert diff_runs(base, close).summary == "b vs a: peak +0.0%, wall time within noise (10.4 ms -> 10.7 ms)"
    assert diff_runs(base, far).summary == "c vs a: peak +0.0%, wall time +19.2% (10.4 ms -> 12.4 ms)"
    single = dataclasses.replace(close, wall_ms_all=(10.7,))
    # One call on a side: no spread to compare with, the percentage as measured.
    assert diff_runs(base, single).summary == "b vs a: peak +0.0%, wall time +2.9% (10.4 ms -> 10.7 ms)"


def test_a_report_keeps_each_timed_call_and_the_diff_their_middle_halves() -> None:

    report = build_report(target="m:f", runs={"a": run("a", [10.0, 11.0, 12.0]), "b": run("b", [20.0, 21.0])})
    document = report.to_dict()
    assert document["runs"]["a"]["wall_ms_all"] == [10.0, 11.0, 12.0]
    assert document["runs"]["a"]["wall_timing"] == "timed"
    assert document["diff"]["wall_ms_iqr_base"] == [10.5, 11.5]
    assert document["diff"]["wall_ms_iqr_other"] == [20.25, 20.75]


def test_a_call_that_takes_the_budget_alone_takes_its_time_from_the_warm_up_call() -> None:
    """A call that takes the time budget alone would be timed once: the warm-up call, made
    without the profiler before the profiled one, already was, so it is not made a third time
    (CPU)."""
    import time

    import torch

    import memprof

    made: list[float] = []

    def slow() -> torch.Tensor:
        made.append(time.perf_counter())
        time.sleep(0.11)
        return torch.ones(256)

    run = memprof.profile(slow, device="cpu", explain=False, time_budget=0.1).runs["eager"]
    assert len(made) == 2  # the warm-up call and the profiled one: no call made for the time
    assert run.wall_timing == "warm-up" and len(run.wall_ms_all) == 1
    assert 110 <= run.wall_ms < 1000
    # With the warm-up off, the profiled call is the first: the call is timed after it, once.
    made.clear()
    run = memprof.profile(slow, device="cpu", explain=False, warmup=0, time_budget=0.1).runs["eager"]
    assert len(made) == 2 and run.wall_timing == "timed" and len(run.wall_ms_all) == 1
