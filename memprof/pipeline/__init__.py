"""The pipeline: where a run's result and a report are put together, for every source alike.

A source (a live profile, fake execution, a trace, a snapshot, a block of code) hands over its
records and what it observed; the assembler (:mod:`memprof.pipeline.assemble`) has the
analysis work out numbers and explanations; this module builds the
:class:`~memprof.model.RunResult` from them (:func:`build_run`, :func:`failed_run`)
and the :class:`~memprof.model.Report` with its comparisons (:func:`build_report`). A saved
report is read back the same way (:func:`load_report`): its comparisons made again, so a loaded
report is what a fresh one would be.
"""

from __future__ import annotations

from dataclasses import fields as dataclass_fields
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof.model.kind import LIVE_SOURCE
from memprof.model.report import Report
from memprof.model.run import FAILED, RunResult

if TYPE_CHECKING:
    from memprof.analysis.peaks import Analysis

_RUN_FIELDS = frozenset(field.name for field in dataclass_fields(RunResult))


def build_run(analysis: Analysis | None = None, **run: Any) -> RunResult:
    """A run's result: every number of ``analysis.numbers`` that is a field of a run (peak,
    allocated, net, peak op, records, ...), its ops, its timeline and its notes (after
    ``run["notes"]``), then what ``run`` gives (label, mode, times, what the source observed;
    a value given there wins over the analysis'). Without ``analysis``, ``run`` is all."""
    if analysis is None:
        return RunResult(**run)
    numbers = analysis.numbers
    values = {f.name: getattr(numbers, f.name) for f in dataclass_fields(numbers) if f.name in _RUN_FIELDS}
    values.update(op_stats=analysis.ops, timeline=analysis.timeline)
    notes = (*run.pop("notes", ()), *analysis.notes)
    return RunResult(**{**values, **run, "notes": notes})


def failed_run(label: str, mode: str | None, message: str, source: str = LIVE_SOURCE) -> RunResult:
    """A run whose code failed: no numbers, the failure's message in ``error``."""
    return RunResult(label=label, mode=mode, source=source, status=FAILED, peak_bytes=0, error=message)


def compared(report: Report) -> Report:
    """``report`` with its comparisons: each successful run after the first compared with the
    first (none when the runs are on different devices or ranks: a GPU is not compared with
    the host, nor one rank with another), and the ranks side by side when runs carry a rank."""
    from memprof.analysis.diff import diff_runs
    from memprof.analysis.ranks import summarize

    def diffs(runs: list[RunResult]) -> tuple[Any, ...]:
        # Only runs of one device and one rank are comparable (a per-rank view of a job is).
        if len({(run.device, run.rank) for run in runs}) > 1:
            return ()
        return tuple(diff_runs(runs[0], other) for other in runs[1:])

    runs = report.ok_runs()
    ranks = summarize(report.runs.values())
    # Each rank's own comparisons, for the rank a report of several ranks details.
    by_rank = (
        {rank: diffs([run for run in runs if run.rank == rank]) for rank in ranks.ranks}
        if ranks is not None and len(ranks.ranks) > 1
        else None
    )
    return replace(report, diffs=diffs(runs), ranks=ranks, rank_diffs=by_rank)


def build_report(**fields: Any) -> Report:
    """A report of ``fields`` (target, device, runs, environment, source, ...) with its
    comparisons."""
    return compared(Report(**fields))


def report_from_dict(data: Any, where: str = "report") -> Report:
    """The report of a JSON document (:meth:`Report.from_dict`) with its comparisons."""
    return compared(Report.from_dict(data, where))


def load_report(path: str | Path) -> Report:
    """Read a report JSON written by memprof (data only: no pickle, no eval), with its
    comparisons."""
    from memprof.core.reading import read_json

    where = "standard input" if str(path) == "-" else str(path)
    return report_from_dict(read_json(path, "report"), where=where)
