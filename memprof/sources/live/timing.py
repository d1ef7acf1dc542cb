"""Timing a call outside the profiler, with a time budget (like ``timeit``'s autorange).

The profiler's bookkeeping (one event per op, memory records) slows calls down, unevenly: a call
with many small ops slows more than one with a few large ones, so times taken inside the profile
can reorder variants. Wall times therefore come from calls timed here, after the profiled calls
(and the call that explains the peak), with nothing recording; the memory numbers come from the
profiled calls only, which follow the warm-up directly.

How many calls: at least :data:`MIN_CALLS` and at least ``budget_s`` seconds of them, so a short
call is timed many times; but no more than :data:`MAX_CALLS` calls or ``5 * budget_s`` seconds
(at least 1 s). A call that alone takes the budget is timed once, as ``timeit``'s autorange
times it once, and is not called once more for its time when a warm-up call already timed it
(:mod:`memprof.sources.live.run`: the last warm-up call that compiled nothing, not the first on a
GPU). A budget of 0 times nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MIN_CALLS = 5
MAX_CALLS = 1000
DEFAULT_BUDGET_S = 0.2


@dataclass(frozen=True)
class Timed:
    """Each timed call's wall time (ms), and the error that stopped the timing, if one did;
    ``warm_up``: the time is the last warm-up call's (a call that takes the budget alone, so it
    would be timed once, and was, unprofiled, before the profiled calls)."""

    walls_ms: tuple[float, ...]
    error: BaseException | None = None
    warm_up: bool = False


def timed_once(seconds: float, budget_s: float) -> bool:
    """Whether a call of ``seconds`` takes the budget alone, and so is timed once."""
    return seconds >= budget_s


def stop_after(budget_s: float) -> float:
    """The most seconds spent timing for a budget: five budgets, at least one second."""
    return max(1.0, 5 * budget_s)


def time_calls(
    call: Callable[[], Any],
    budget_s: float = DEFAULT_BUDGET_S,
    clock: Callable[[], float] = time.perf_counter,
) -> Timed:
    """Call ``call()`` repeatedly and time each call (``call`` waits for the device itself).

    A call that raises ends the timing (the profiled call that follows fails the same way and
    says how much memory was reached); the error is returned, not raised: ``sys.exit()`` in the
    call included, Ctrl-C excepted.
    """
    if budget_s <= 0:
        return Timed(())
    walls: list[float] = []
    start = clock()
    limit = stop_after(budget_s)
    while True:
        before = clock()
        try:
            result = call()
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # sys.exit() included: the user's code failing
            return Timed(tuple(walls), error)
        after = clock()
        del result  # the output is freed before the next call, as between profiled calls
        walls.append((after - before) * 1e3)
        elapsed = after - start
        once = len(walls) == 1 and timed_once(elapsed, budget_s)
        enough = len(walls) >= MIN_CALLS and elapsed >= budget_s
        if once or enough or len(walls) >= MAX_CALLS or elapsed >= limit:
            return Timed(tuple(walls))
