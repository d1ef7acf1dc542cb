"""Which rows a report shows, decided once for every format.

An op table holds a comparison's ops (when two or more runs succeeded) or a run's ops,
ordered by ``sort`` and cut to ``top``: exactly ``top`` rows, in the terminal, in Markdown and
in HTML alike (:func:`op_tables`). Fused kernels, which explain where the eager ops went, have
their own section (:func:`fused_rows`), the same in every format, whatever the tables show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memprof.analysis.ops import SORT_FIELDS, OpStats, sort_ops
from memprof.units import format_bytes

if TYPE_CHECKING:
    from memprof.analysis.diff import OpDiff, RunDiff
    from memprof.model import Report, RunResult


@dataclass(frozen=True)
class DiffTable:
    """The ops a comparison's table shows."""

    diff: RunDiff
    rows: tuple[OpDiff, ...]


@dataclass(frozen=True)
class RunTable:
    """The ops a run's table shows (a report with one successful run)."""

    run: RunResult
    rows: tuple[OpStats, ...]


def op_tables(
    report: Report, sort: str = "peak", top: int | None = None, *, every_comparison: bool = False
) -> tuple[DiffTable, ...] | tuple[RunTable, ...]:
    """The op tables of a report: the first comparison's (every comparison's with
    ``every_comparison``), or, with a single successful run, that run's."""
    if report.diffs:
        diffs = report.diffs if every_comparison else report.diffs[:1]
        return tuple(DiffTable(diff, diff_rows(diff, sort, top)) for diff in diffs)
    return tuple(RunTable(run, run_rows(run, sort, top)) for run in report.ok_runs())


def run_rows(run: RunResult, sort: str = "peak", top: int | None = None) -> tuple[OpStats, ...]:
    """A run's ops, largest first by ``sort`` (peak, self, allocated, total), at most ``top``."""
    return sort_ops(run.op_stats, sort)[:top]


def diff_rows(diff: RunDiff, sort: str = "peak", top: int | None = None) -> tuple[OpDiff, ...]:
    """A comparison's ops, by the larger of their two sizes (magnitudes) in ``sort``, at most
    ``top``; ties keep the diff's order (largest peak first)."""
    column = SORT_FIELDS[sort]

    def size(op: OpDiff) -> int:
        return max(abs(getattr(side, column)) if side is not None else 0 for side in (op.base, op.other))

    return tuple(sorted(diff.op_diffs, key=lambda op: -size(op)))[:top]


@dataclass(frozen=True)
class Replaced:
    """An aten op a fused kernel replaced, with its peak in the base run (None: not there)."""

    op: str
    base_peak_bytes: int | None


@dataclass(frozen=True)
class FusedRow:
    """A fused kernel of a compared run (``run``, compared with ``base``), its own peak (None
    when it did not run there) and the aten ops its name says it replaced."""

    run: str
    base: str
    kernel: str
    peak_bytes: int | None
    replaced: tuple[Replaced, ...]


def fused_rows(report: Report) -> tuple[FusedRow, ...]:
    """Every fused kernel of every comparison, in each comparison's order (largest peak first)."""
    rows = []
    for diff in report.diffs:
        base_peaks = {op.name: op.base.peak_bytes for op in diff.op_diffs if op.base is not None}
        for op in diff.op_diffs:
            if op.fused_ops:
                rows.append(
                    FusedRow(
                        run=diff.other,
                        base=diff.base,
                        kernel=op.name,
                        peak_bytes=op.other.peak_bytes if op.other is not None else None,
                        replaced=tuple(Replaced(part, base_peaks.get(part)) for part in op.fused_ops),
                    )
                )
    return tuple(rows)


def replaced_text(row: FusedRow, name: Callable[[str], str] = str, text: Callable[[str], str] = str) -> str:
    """``aten::abs (64.0 MiB peak in eager), aten::sub (256.0 MiB peak in eager)``: the ops a
    kernel replaced, with their peaks in the base run. ``name`` formats op names and ``text``
    the rest (escaping for HTML, say)."""
    return ", ".join(
        name(op.op)
        + (
            f" ({text(format_bytes(op.base_peak_bytes))} peak in {text(row.base)})"
            if op.base_peak_bytes is not None
            else ""
        )
        for op in row.replaced
    )
