"""Runs of several ranks side by side, as a report holds them: one row per run and how uneven
the ranks' peaks are (:class:`RankSummary`); :func:`memprof.analysis.ranks.summarize` makes it."""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core import fields
from memprof.core.units import format_bytes

OK = "ok"


@dataclass(frozen=True, kw_only=True)
class RankRow:
    """One run of one rank: its peak, footprint and reserved bytes where known, wall time per
    call and the op running at its peak; a failed run has ``status`` "failed" and ``error``."""

    rank: int = fields.count(required=True)
    label: str = fields.text(required=True)
    group: str = fields.text(default="")
    status: str = fields.text(default=OK)
    peak_bytes: int | None = fields.size(default=None, nullable=True)
    footprint_bytes: int | None = fields.size(default=None, nullable=True)
    reserved_peak_bytes: int | None = fields.size(default=None, nullable=True)
    wall_ms: float = fields.number()
    peak_op: str | None = fields.maybe_text()
    error: str | None = fields.maybe_text(omit=lambda row: row.error is None)

    @property
    def ok(self) -> bool:
        return self.status == OK


@dataclass(frozen=True, kw_only=True)
class Imbalance:
    """The highest and the lowest peak among the ranks' runs of one ``group``; ``ratio`` is
    highest over lowest (None when the lowest is 0 B)."""

    group: str = fields.text(default="")
    highest_rank: int = fields.count(required=True)
    highest_label: str = fields.text(required=True)
    highest_peak_bytes: int = fields.size(required=True)
    lowest_rank: int = fields.count(required=True)
    lowest_label: str = fields.text(required=True)
    lowest_peak_bytes: int = fields.size(required=True)
    ratio: float | None = fields.ratio()

    @property
    def line(self) -> str:
        """``imbalance: rank 1's peak 7.5 MiB is 1.76x rank 0's 4.3 MiB (highest over lowest
        peak)``; sizes in exact bytes where they would print the same."""
        where = f" ({self.group})" if self.group else ""
        high, low = format_bytes(self.highest_peak_bytes), format_bytes(self.lowest_peak_bytes)
        if self.ratio is None:
            if self.highest_peak_bytes == 0:
                return f"imbalance{where}: none, every rank's peak is 0 B"
            high_rank, low_rank = self.highest_rank, self.lowest_rank
            return f"imbalance{where}: rank {high_rank}'s peak {high}; rank {low_rank}'s is 0 B"
        if self.highest_peak_bytes == self.lowest_peak_bytes:
            return f"imbalance{where}: none, every rank's peak is {high}"
        times = f"{self.ratio:.2f}x"
        if high == low and self.highest_peak_bytes != self.lowest_peak_bytes:
            high, low = f"{self.highest_peak_bytes:,} B", f"{self.lowest_peak_bytes:,} B"
            times = f"{self.ratio:.4f}x"
        return (
            f"imbalance{where}: rank {self.highest_rank}'s peak {high} is {times} "
            f"rank {self.lowest_rank}'s {low} (highest over lowest peak)"
        )


@dataclass(frozen=True, kw_only=True)
class RankSummary:
    """Every ranked run as a row (by rank, then in the runs' order) and one imbalance per
    group of runs where two or more ranks succeeded."""

    rows: tuple[RankRow, ...] = fields.items(RankRow)
    imbalances: tuple[Imbalance, ...] = fields.items(Imbalance)

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks present, in order."""
        return tuple(sorted({row.rank for row in self.rows}))

    @property
    def highest_rank(self) -> int:
        """The rank with the highest peak of any of its successful runs (the lowest such rank
        on a tie); the first rank when none succeeded."""
        ok = [row for row in self.rows if row.ok and row.peak_bytes is not None]
        if not ok:
            return self.ranks[0]
        return min(ok, key=lambda row: (-(row.peak_bytes or 0), row.rank)).rank

    def known(self, column: str) -> bool:
        """Whether any row knows ``column`` (``footprint_bytes``, ``reserved_peak_bytes``)."""
        return any(getattr(row, column) is not None for row in self.rows)
