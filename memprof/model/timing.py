"""Wall times: the spread of a run's timed calls and whether two runs differ beyond it.

Pure: no torch, no I/O. The calls themselves are timed by :mod:`memprof.sources.live.timing`,
outside the profiler.

The noise rule: two runs' wall times are *within noise* of each other when the middle halves
of their calls (first to third quartile) overlap; then no percentage is claimed. With a single
call on either side there is no spread to compare, and the percentage is given as measured.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from memprof.core.units import format_ms


@dataclass(frozen=True)
class Spread:
    """How a run's timed calls spread: their count, the fastest, the first quartile, the
    median, the third quartile and the slowest, in milliseconds."""

    calls: int
    low_ms: float
    q1_ms: float
    median_ms: float
    q3_ms: float
    high_ms: float

    @staticmethod
    def of(samples_ms: Sequence[float]) -> Spread | None:
        """The spread of the finite samples; None when there are none."""
        values = sorted(float(v) for v in samples_ms if math.isfinite(v))
        if not values:
            return None
        if len(values) == 1:
            q1 = q3 = values[0]
        else:
            # "inclusive": quartiles interpolated between the samples themselves, so two
            # samples give their own values, never a guess beyond them.
            q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return Spread(len(values), values[0], q1, statistics.median(values), q3, values[-1])

    @property
    def half_iqr_fraction(self) -> float:
        """Half the interquartile range as a fraction of the median (0 for one call)."""
        if self.median_ms <= 0:
            return 0.0
        return (self.q3_ms - self.q1_ms) / 2 / self.median_ms


def iqr(samples_ms: Sequence[float]) -> tuple[float, ...]:
    """(first quartile, third quartile) of two or more timed calls; () for fewer."""
    spread = Spread.of(samples_ms)
    return (spread.q1_ms, spread.q3_ms) if spread is not None and spread.calls >= 2 else ()


def within_noise(base_iqr: Sequence[float], other_iqr: Sequence[float]) -> bool | None:
    """True when two runs' middle halves (``iqr``) overlap: the difference of their medians
    is within the noise. None when either has no spread (fewer than two timed calls)."""
    if len(base_iqr) != 2 or len(other_iqr) != 2:
        return None
    (b1, b3), (o1, o3) = base_iqr, other_iqr
    return b1 <= o3 and o1 <= b3


def format_wall(samples_ms: Sequence[float], median_ms: float) -> str:
    """``311.5 ms ±0.4%``: the median and half the interquartile range relative to it;
    ``311.5 ms`` alone for a single call; ``-`` when unknown."""
    spread = Spread.of(samples_ms)
    if spread is None or spread.calls < 2 or not math.isfinite(median_ms):
        return format_ms(median_ms)
    return f"{format_ms(median_ms)} ±{spread.half_iqr_fraction * 100:.1f}%"


def format_spread(samples_ms: Sequence[float]) -> str:
    """``43 calls: 4.5-4.9 ms, middle half 4.6-4.8 ms`` (for tooltips and detailed reports);
    ``1 call`` or ``no timed call``."""
    spread = Spread.of(samples_ms)
    if spread is None:
        return "no timed call"
    if spread.calls == 1:
        return "1 call"
    return (
        f"{spread.calls} calls: {format_ms(spread.low_ms)} to {format_ms(spread.high_ms)}, "
        f"middle half {format_ms(spread.q1_ms)} to {format_ms(spread.q3_ms)}"
    )
