"""Runs of several ranks side by side: one row per run, and how uneven the ranks' peaks are.

It works on any runs that carry a ``rank``, whatever made them: a torchrun job profiled live
(runs ``rank0``, ``rank1``, or ``rank0/eager``, ``rank0/compile``) or the per-rank traces of a
folder (``rank0/cuda:0``, ``rank1/cuda:1``). Runs are grouped by what their label says after
``rankN/``, device indices dropped (``cuda:0`` and ``cuda:1`` are one group, ``eager`` and
``compile`` are two); each group where two or more ranks succeeded gets its imbalance: the
highest peak over the lowest, and which ranks hold them.

Pure: no torch, no I/O, no rendering; it reads runs through :class:`RankedRun`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from memprof import fields
from memprof.units import format_bytes

OK = "ok"

_RANK_PREFIX = re.compile(r"^rank\d+(?:/|$)")
_DEVICE_INDEX = re.compile(r":\d+\b")


class RankedRun(Protocol):
    """What this module reads from a run (:class:`memprof.model.RunResult` has it all).

    ``footprint_bytes`` and ``reserved_peak_bytes`` are read when a run has them;
    ``device_counters["max_memory_reserved_bytes"]`` (a live CUDA run) stands for the latter.
    """

    @property
    def label(self) -> str: ...
    @property
    def rank(self) -> int | None: ...
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def peak_bytes(self) -> int: ...
    @property
    def wall_ms(self) -> float: ...
    @property
    def peak_op(self) -> str | None: ...
    @property
    def device_counters(self) -> dict[str, int]: ...


def group_of(label: str) -> str:
    """Which runs of different ranks are compared: ``rank1/cuda:1`` -> ``cuda``,
    ``rank0/eager`` -> ``eager``, ``rank3`` -> ``""``."""
    return _DEVICE_INDEX.sub("", _RANK_PREFIX.sub("", label))


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


def _optional_bytes(run: RankedRun, name: str, counter: str | None = None) -> int | None:
    value = getattr(run, name, None)
    if value is None and counter is not None:
        value = run.device_counters.get(counter)
    return None if value is None else int(value)


def rank_row(run: RankedRun) -> RankRow:
    """The row of one ranked run."""
    assert run.rank is not None
    ok = run.status == OK
    return RankRow(
        rank=run.rank,
        label=run.label,
        group=group_of(run.label),
        status=run.status,
        peak_bytes=run.peak_bytes if ok else None,
        footprint_bytes=_optional_bytes(run, "footprint_bytes") if ok else None,
        reserved_peak_bytes=_optional_bytes(run, "reserved_peak_bytes", "max_memory_reserved_bytes")
        if ok
        else None,
        wall_ms=run.wall_ms if ok else math.nan,
        peak_op=run.peak_op if ok else None,
        error=run.error if not ok else None,
    )


def imbalance(rows: Iterable[RankRow]) -> Imbalance | None:
    """Highest over lowest peak among the successful ``rows`` of distinct ranks (ties: the
    lowest rank); None with fewer than two ranks."""
    ok = [row for row in rows if row.ok and row.peak_bytes is not None]
    if len({row.rank for row in ok}) < 2:
        return None
    high = min(ok, key=lambda row: (-(row.peak_bytes or 0), row.rank))
    # Among the other ranks: with equal peaks, two ranks are still named.
    low = min((row for row in ok if row.rank != high.rank), key=lambda row: (row.peak_bytes or 0, row.rank))
    high_bytes, low_bytes = high.peak_bytes or 0, low.peak_bytes or 0
    return Imbalance(
        group=high.group,
        highest_rank=high.rank,
        highest_label=high.label,
        highest_peak_bytes=high_bytes,
        lowest_rank=low.rank,
        lowest_label=low.label,
        lowest_peak_bytes=low_bytes,
        ratio=high_bytes / low_bytes if low_bytes else None,
    )


def summarize(runs: Iterable[RankedRun]) -> RankSummary | None:
    """The per-rank summary of the runs that carry a rank; None when none does."""
    ranked = [run for run in runs if run.rank is not None]
    if not ranked:
        return None
    order = {id(run): index for index, run in enumerate(ranked)}
    rows = tuple(rank_row(run) for run in sorted(ranked, key=lambda run: (run.rank, order[id(run)])))
    groups = list(dict.fromkeys(row.group for row in rows))
    found = (imbalance(row for row in rows if row.group == group) for group in groups)
    return RankSummary(rows=rows, imbalances=tuple(item for item in found if item is not None))
