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
from typing import Protocol

from memprof.model.ranks import OK, Imbalance, RankRow, RankSummary

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
