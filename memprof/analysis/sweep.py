"""A sweep of one inputs-factory parameter (``sweep=("batch", [8, 16, 32])``): the line through the
bytes each value needs, and the largest value that fits a capacity. Pure: the estimates are
made by the caller (:func:`memprof.library.api.estimate`), which asks :func:`next_value` what to
estimate next.

The fit is linear least squares on the exact integer bytes (rational arithmetic, no rounding
until the result); it is called linear when every listed value's bytes are within
``LINEAR_TOLERANCE`` of the line (three values or more: two always lie on a line).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from memprof.model.sweep import Sweep

LINEAR_TOLERANCE = 0.01
"""The largest relative distance of a measured point from the line for the fit to count as
linear."""

MAX_SEARCH = 8
"""Estimates the search for the largest fitting value may add to the listed ones."""


@dataclass(frozen=True)
class Line:
    """``y = intercept + slope x x``, exact, and the largest relative distance of a point from it."""

    slope: Fraction
    intercept: Fraction
    max_residual: float

    def at(self, x: int | float) -> int:
        return max(0, round(self.intercept + self.slope * Fraction(x)))


def fit_line(xs: list[int | float], ys: list[int]) -> Line | None:
    """Least squares through (x, y); None with fewer than two distinct x."""
    if len(set(xs)) < 2:
        return None
    fx = [Fraction(x) for x in xs]
    fy = [Fraction(y) for y in ys]
    mean_x, mean_y = Fraction(sum(fx), len(fx)), Fraction(sum(fy), len(fy))
    sxx = sum(((x - mean_x) ** 2 for x in fx), Fraction(0))
    sxy = sum(((x - mean_x) * (y - mean_y) for x, y in zip(fx, fy, strict=True)), Fraction(0))
    slope = sxy / sxx
    intercept = mean_y - slope * mean_x
    residuals = [
        abs(float(y - (intercept + slope * x))) / max(float(y), 1.0) for x, y in zip(fx, fy, strict=True)
    ]
    return Line(slope, intercept, max(residuals))


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def line_value(line: Line, capacity_bytes: int) -> int | None:
    """The largest whole value at which the line stays within ``capacity_bytes`` (None when
    the line does not grow with the value: any value would do, none is the largest)."""
    if line.slope <= 0:
        return None
    return int((Fraction(capacity_bytes) - line.intercept) // line.slope)


def next_value(
    fits: dict[int, bool], needs: dict[int, int], capacity_bytes: int, line_guess: int | None
) -> int | None:
    """The next whole value to estimate in the search for the largest that fits, given what was
    estimated so far (value -> fits, value -> bytes needed) and the line's guess: the guess
    first; then, between the largest value that fits and the smallest above it that does not,
    where the straight line through those two reaches the capacity (halfway when that lands on
    either end), until they are adjacent. When nothing above the largest fitting value was seen
    to fail and that value is the line's guess, the one after it is estimated too, so that the
    largest is known, not read off. None when the search is done."""
    fitting = [v for v, ok in fits.items() if ok]
    failing = [v for v, ok in fits.items() if not ok]
    low = max(fitting) if fitting else None
    high = min((v for v in failing if low is None or v > low), default=None)
    if line_guess is not None and line_guess not in fits and line_guess >= 1:
        if (low is None or line_guess > low) and (high is None or line_guess < high):
            return line_guess
    if high is None:
        if low is not None and low == line_guess and low + 1 not in fits:
            return low + 1
        return None
    if low is None:
        low = 0  # nothing fits yet: look below the smallest value that does not (1 and up)
    if high - low <= 1:
        return None
    below, above = needs.get(low, 0), needs[high]
    if above > below:
        guess = low + int((capacity_bytes - below) * (high - low) // (above - below))
        if low < guess < high:
            return guess
    return (low + high) // 2


def verdict(sweep: Sweep) -> str:
    """The sweep in one or two sentences: how the bytes needed grow with the parameter, and
    with a capacity the largest value that fits."""
    from memprof.core.units import format_bytes

    what = "reserved" if sweep.needed == "reserved_peak_bytes" else "footprint"
    parts = []
    if sweep.slope_bytes is not None and sweep.intercept_bytes is not None:
        growth = (
            f"footprint = {format_bytes(sweep.intercept_bytes)} + {format_bytes(sweep.slope_bytes)} "
            f"per unit of {sweep.parameter}"
        )
        if sweep.linear is None:
            parts.append(f"{growth} (a line through two values; linearity not checked)")
        elif sweep.linear:
            within = f"{100 * (sweep.max_residual or 0):.2f}%"
            parts.append(f"{growth} (linear: every value within {within} of the line)")
        else:
            parts.append(
                f"not linear in {sweep.parameter}: a value is {100 * (sweep.max_residual or 0):.1f}% off "
                f"the best line ({growth}); no value beyond those estimated is inferred"
            )
    if sweep.capacity_bytes is not None:
        capacity = format_bytes(sweep.capacity_bytes)
        if sweep.reserve_bytes:
            capacity += f" less a {format_bytes(sweep.reserve_bytes)} reserve"
        if not sweep.reliable:
            parts.append(
                f"no {sweep.parameter} is said to fit {capacity}: the estimates guessed values that "
                "steer the program"
            )
        elif sweep.largest_fitting_label is None:
            smallest = min(sweep.points, key=lambda p: p.needed_bytes)
            parts.append(
                f"no {sweep.parameter} fits {capacity}: the smallest need, {smallest.label}, is "
                f"{format_bytes(smallest.needed_bytes)}"
            )
        else:
            how = (
                f"; {sweep.parameter}={_next(sweep.largest_fitting)} does not"
                if sweep.verified
                else " (the largest of those estimated)"
            )
            parts.append(
                f"largest {sweep.parameter} that fits {capacity}: {sweep.largest_fitting_label}, "
                f"{format_bytes(sweep.largest_fitting_bytes)} {what}{how}"
            )
    said = "; ".join(parts)
    return said if sweep.reliable else f"NOT RELIABLE: {said}"


def _next(value: str | None) -> str:
    return str(int(value) + 1) if value is not None and value.lstrip("-").isdigit() else "?"
