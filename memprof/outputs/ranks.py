"""What a report of several ranks shows, for every format: the per-rank table and the
imbalance of all ranks, then one rank's runs in detail (the rank with the highest peak, or the
one asked for), rendered like any report. No rendering here."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from memprof.core.errors import UsageError, param

if TYPE_CHECKING:
    from memprof.model.ranks import RankSummary
    from memprof.model.report import Report


# The sizes a rank's row shows where some run knows them: (RankRow field, column heading).
SIZE_COLUMNS = (("footprint_bytes", "footprint"), ("reserved_peak_bytes", "reserved"))


def size_columns(summary: RankSummary) -> list[tuple[str, str]]:
    """The optional size columns that some row of ``summary`` knows."""
    return [(column, heading) for column, heading in SIZE_COLUMNS if summary.known(column)]


@dataclass(frozen=True)
class RankView:
    """``summary`` of every rank; ``rank``, whose runs ``report`` holds (the highest peak's,
    unless ``chosen``: asked for)."""

    summary: RankSummary
    rank: int
    chosen: bool
    report: Report

    @property
    def heading(self) -> str:
        """``rank 1 (the highest peak; --rank=K shows another)``, in the caller's spelling."""
        why = "as asked" if self.chosen else f"the highest peak; {param('rank')}=K shows another"
        return f"rank {self.rank} ({why})"


def rank_view(report: Report, rank: int | None = None) -> RankView | None:
    """The view of a report whose runs carry two or more ranks (None for any other report,
    unless ``rank`` is asked for: then a :class:`UsageError` says there are none). ``rank`` not among the
    report's ranks is a :class:`UsageError` (exit 2) listing them."""
    summary = report.ranks
    if summary is None:
        if rank is not None:
            raise UsageError(
                f"{param('rank', rank)}: this report has no ranks (it is not from a distributed job "
                "or a folder of per-rank traces)"
            )
        return None
    if rank is None and len(summary.ranks) < 2:
        return None  # one rank (one trace of a job, a job of one): nothing to set beside it
    if rank is not None and rank not in summary.ranks:
        listed = ", ".join(str(r) for r in summary.ranks)
        raise UsageError(f"{param('rank', rank)}: the report's ranks are {listed}")
    shown = summary.highest_rank if rank is None else rank
    runs = {label: run for label, run in report.runs.items() if run.rank == shown}
    # Made by the pipeline with the report (Report.rank_diffs): the document computes nothing.
    diffs = (report.rank_diffs or {}).get(shown, ())
    view = replace(report, runs=runs, diffs=diffs, ranks=None, rank_diffs=None)
    return RankView(summary=summary, rank=shown, chosen=rank is not None, report=view)
