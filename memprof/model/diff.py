"""Two runs compared, as a report holds it: per-op deltas and the verdict (:class:`RunDiff`).
:func:`memprof.analysis.diff.diff_runs` makes one.

A diff's columns are fixed (``base``, ``other``, ``*_delta``) whatever the runs are called; the
labels are data (:attr:`RunDiff.base`, :attr:`RunDiff.other`), so a run labelled ``delta`` or
``base`` cannot collide with a computed column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from memprof.core import fields
from memprof.core.units import format_bytes, format_ms, format_percent
from memprof.model.ops import OP_COLUMNS, OpStats
from memprof.model.peak_diff import AtPeakDiff
from memprof.model.timing import within_noise

if TYPE_CHECKING:
    import pandas as pd


BOTH, BASE_ONLY, OTHER_ONLY = "both", "base only", "other only"
"""Where an op ran: :attr:`OpDiff.presence`."""


_SIDE_COLUMNS = OP_COLUMNS[1:]


def _delta(other: OpStats | None, base: OpStats | None, column: str) -> int:
    return (getattr(other, column) if other else 0) - (getattr(base, column) if base else 0)


@dataclass(frozen=True, kw_only=True)
class OpDiff:
    """One op name in either run: its numbers in the base and the other run (None where it did
    not run), the deltas other - base (an absent side counting 0), ``fused_ops`` (for a fused
    kernel of the other run: the aten ops its name lists) and ``fused_into`` (for an op: the
    other run's kernels that list it)."""

    name: str = fields.text(required=True)
    presence: str = fields.text(choices=(BOTH, BASE_ONLY, OTHER_ONLY))
    base: OpStats | None = fields.nested(OpStats, default=None, nullable=True)
    other: OpStats | None = fields.nested(OpStats, default=None, nullable=True)
    peak_bytes_delta: int = fields.signed_size(init=False)
    self_bytes_delta: int = fields.signed_size(init=False)
    allocated_bytes_delta: int = fields.signed_size(init=False)
    fused_into: tuple[str, ...] = fields.items(fields.TEXT)
    fused_ops: tuple[str, ...] = fields.items(fields.TEXT)

    def __post_init__(self) -> None:
        for column in ("peak_bytes", "self_bytes", "allocated_bytes"):
            object.__setattr__(self, f"{column}_delta", _delta(self.other, self.base, column))


@dataclass(frozen=True, kw_only=True)
class RunDiff:
    """``other`` compared with ``base``: their peaks and wall times, and one :class:`OpDiff` per
    op name in ``op_diffs`` (largest peak in either run first). ``verdict``, ``summary`` and the
    ratios are derived from those numbers. ``at_peak``: what is live at each peak, compared
    (:mod:`memprof.analysis.peak_diff`), when both runs were explained. ``recipe_changes``: how
    the runs were made differently, a setting of the inputs factory, the target, inputs, mode or
    device, each as its name, the base's value and the other's
    (:func:`memprof.model.recipe.recipe_changes`), when both runs record how they were made."""

    base: str = fields.text(required=True)
    other: str = fields.text(required=True)
    base_peak_bytes: int = fields.size()
    other_peak_bytes: int = fields.size()
    peak_bytes_delta: int = fields.signed_size(init=False)
    peak_ratio: float | None = fields.ratio(init=False)
    verdict: str = fields.text(init=False, default="")
    base_wall_ms: float = fields.number(key="wall_ms_base")
    other_wall_ms: float = fields.number(key="wall_ms_other")
    # The middle half (first and third quartiles) of each run's timed calls; empty with fewer
    # than two calls. They decide whether the wall-time difference is within noise.
    base_wall_iqr_ms: tuple[float, ...] = fields.items(fields.NUMBER, key="wall_ms_iqr_base")
    other_wall_iqr_ms: tuple[float, ...] = fields.items(fields.NUMBER, key="wall_ms_iqr_other")
    wall_ratio: float | None = fields.ratio(init=False)
    summary: str = fields.text(init=False, default="")
    op_diffs: tuple[OpDiff, ...] = fields.items(OpDiff, key="ops")
    at_peak: AtPeakDiff | None = fields.optional(AtPeakDiff)
    recipe_changes: tuple[str, ...] = fields.items(fields.TEXT, omit=lambda diff: not diff.recipe_changes)

    def __post_init__(self) -> None:
        derived = {
            "peak_bytes_delta": self.other_peak_bytes - self.base_peak_bytes,
            "peak_ratio": None if self.base_peak_bytes == 0 else self.other_peak_bytes / self.base_peak_bytes,
            "wall_ratio": _wall_ratio(self.base_wall_ms, self.other_wall_ms),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "verdict", self._verdict())
        object.__setattr__(self, "summary", self._summary())

    @property
    def wall_within_noise(self) -> bool | None:
        """True when the middle halves of the two runs' timed calls overlap (the wall-time
        difference is within noise); None when either run has fewer than two timed calls."""
        return within_noise(self.base_wall_iqr_ms, self.other_wall_iqr_ms)

    def _summary(self) -> str:
        """Memory next to time, e.g. ``channels_last vs contiguous: peak -12.3%, wall time +4.0%
        (10.1 ms -> 10.5 ms)``: most techniques trade one for the other. A wall-time difference
        inside the calls' spread reads ``wall time within noise``."""
        peak, wall = self.peak_ratio, self.wall_ratio
        peak_text = format_percent(peak - 1) if peak is not None else "n/a"
        wall_text = format_percent(wall - 1) if wall is not None else "n/a"
        if wall is not None and self.wall_within_noise:
            wall_text = "within noise"
        span = (
            f" ({format_ms(self.base_wall_ms)} -> {format_ms(self.other_wall_ms)})"
            if wall is not None
            else ""
        )
        return f"{self.other} vs {self.base}: peak {peak_text}, wall time {wall_text}{span}"

    def _verdict(self) -> str:
        subject = "torch.compile" if (self.base, self.other) == ("eager", "compile") else self.other
        versus = "" if subject == "torch.compile" else f" vs {self.base}"
        delta = self.peak_bytes_delta
        span = f"{format_bytes(self.base_peak_bytes)} -> {format_bytes(self.other_peak_bytes)}"
        pct = format_percent(self.peak_ratio - 1) if self.peak_ratio is not None else "n/a"
        if delta < 0:
            return f"{subject} lowers peak memory{versus} by {format_bytes(-delta)} ({pct}): {span}"
        if delta > 0:
            return f"{subject} raises peak memory{versus} by {format_bytes(delta)} ({pct}): {span}"
        return f"{subject} leaves peak memory{versus} unchanged: {span}"

    def label(self, presence: str) -> str:
        """``presence`` in the runs' own words: ``eager only``, ``compile only`` or ``both``."""
        return {BASE_ONLY: f"{self.base} only", OTHER_ONLY: f"{self.other} only"}.get(presence, presence)

    @cached_property
    def ops(self) -> pd.DataFrame:
        """The per-op diff as a DataFrame, for Python users: ``name``, ``presence``,
        ``base_<column>`` and ``other_<column>`` for each op column (NaN where the op did not
        run), ``peak_bytes_delta``, ``self_bytes_delta``, ``allocated_bytes_delta``,
        ``fused_into``, ``fused_ops``. ``frame.attrs`` holds the labels (``base``, ``other``)."""
        import pandas as pd

        rows = [_frame_row(op) for op in self.op_diffs]
        columns = [
            "name",
            "presence",
            *(f"{side}_{c}" for side in ("base", "other") for c in _SIDE_COLUMNS),
            "peak_bytes_delta",
            "self_bytes_delta",
            "allocated_bytes_delta",
            "fused_into",
            "fused_ops",
        ]
        frame = pd.DataFrame(rows, columns=columns)
        frame.attrs.update(base=self.base, other=self.other)
        return frame


def _frame_row(op: OpDiff) -> dict[str, Any]:
    row: dict[str, Any] = {"name": op.name, "presence": op.presence}
    for side, stats in (("base", op.base), ("other", op.other)):
        for column in _SIDE_COLUMNS:
            row[f"{side}_{column}"] = getattr(stats, column) if stats is not None else math.nan
    row.update(
        peak_bytes_delta=op.peak_bytes_delta,
        self_bytes_delta=op.self_bytes_delta,
        allocated_bytes_delta=op.allocated_bytes_delta,
        fused_into=list(op.fused_into),
        fused_ops=list(op.fused_ops),
    )
    return row


def _wall_ratio(base_ms: float, other_ms: float) -> float | None:
    """other / base wall time per call (medians); None when either is unknown or base is 0."""
    if not (math.isfinite(base_ms) and math.isfinite(other_ms)) or base_ms <= 0:
        return None
    return other_ms / base_ms
