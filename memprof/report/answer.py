"""What a report concludes, for every kind of report and every format (:func:`conclusions`):
each explained run's bottom line (its peak and footprint, the categories holding most, the
largest entries with their lines), each comparison's verdict and its memory-and-time summary;
a recording's peak per run; an estimate's answer (how much, and whether it fits: ``NOT
RELIABLE`` first when fake execution guessed values that steered the code) or a sweep's
verdict. The terminal prints it last, so that the lines left on the screen are the answer;
Markdown and HTML show it first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memprof.model.explanation import nonzero_categories
from memprof.model.kind import ReportKind
from memprof.model.run import peak_line
from memprof.report import estimate
from memprof.report.document import Conclusion
from memprof.units import format_bytes

if TYPE_CHECKING:
    from memprof.model import Report, RunResult
    from memprof.model.explanation import AtPeakEntry

TOP_CATEGORIES = 3
"""A bottom line names this many categories, most bytes first."""
TOP_ENTRIES = 2
"""A bottom line names this many entries, largest first, with their lines."""


def conclusions(report: Report) -> tuple[Conclusion, ...]:
    """What ``report`` concludes, in order (a report of several ranks: give the detailed rank's
    report). Live runs: each explained run's :func:`bottom_line`, then each comparison's verdict
    and summary (a single run not explained: its peak; none succeeded: so). Recordings: each
    run's peak, then each comparison's verdict. An estimate: its answer (``NOT RELIABLE``
    first when fake execution guessed values that steered the code); a sweep: its verdict."""
    kind = ReportKind.of_source(report.source, swept=report.sweep is not None)
    ok = report.ok_runs()
    if kind.estimated:
        return _estimated(report)
    if kind is ReportKind.RECORDED:
        return tuple(Conclusion((peak_line(run),)) for run in ok) + tuple(
            Conclusion((diff.verdict,)) for diff in report.diffs
        )
    groups = [bottom_line(run) for run in ok if run.at_peak is not None]
    groups += [Conclusion((diff.verdict, diff.summary)) for diff in report.diffs]
    if not groups and len(ok) == 1:
        groups.append(Conclusion((_peak(ok[0]),)))
    return tuple(groups) or (Conclusion(("no run succeeded",)),)


def _estimated(report: Report) -> tuple[Conclusion, ...]:
    said = estimate.answer(report) or (report.sweep.verdict if report.sweep is not None else None)
    if not said:
        return (Conclusion(("no estimate succeeded",)),) if not report.ok_runs() else ()
    # The answer alone, last on a terminal (what is live at the peak is its own section above).
    return (Conclusion((said,)),)


def _peak(run: RunResult) -> str:
    """``eager: peak 38.0 MiB above the call's start during aten::mm``."""
    during = f" during {run.peak_op}" if run.peak_op else ""
    return f"{run.label}: peak {format_bytes(run.peak_bytes)} above the call's start{during}"


def bottom_line(run: RunResult) -> Conclusion:
    """An explained run's answer: its peak, its footprint and the categories holding most of
    it, and its largest entries with the lines that made them."""
    return Conclusion((_peak(run), *_explained(run)))


def _explained(run: RunResult) -> tuple[str, ...]:
    """The footprint and the categories holding most of it, then the largest entries with
    their lines."""
    at_peak = run.at_peak
    if at_peak is None:
        return ()
    parts = sorted(nonzero_categories(at_peak.by_category), key=lambda part: -part[1])[:TOP_CATEGORIES]
    most = ", ".join(f"{category} {format_bytes(nbytes)}" for category, nbytes in parts)
    footprint = run.footprint_bytes if run.footprint_bytes is not None else at_peak.footprint_bytes
    lines = [f"footprint {format_bytes(footprint)}" + (f", most of it {most}" if most else "")]
    for n, entry in enumerate(at_peak.entries[:TOP_ENTRIES]):
        lines.append(("largest: " if n == 0 else "then: ") + entry_line(entry))
    return tuple(lines)


def entry_line(entry: AtPeakEntry) -> str:
    """``8.0 MiB activation (aten::_log_softmax) at gpt.py:109 loss = F.cross_entropy(...)``,
    with the user's line that called a library's (``, called from train.py:13 ...``)."""
    what = entry.category + (f" x{entry.count}" if entry.count > 1 else "")
    op = f" ({entry.op})" if entry.op else ""
    head = f"{format_bytes(entry.bytes)} {what}{op}"
    if not entry.source:
        shape = f", {entry.shape} {entry.dtype}".rstrip() if entry.shape else ""
        module = f" of {entry.module}" if entry.module else ""
        return f"{head}{module}, {'before the call' if entry.before_call else 'no line'}{shape}"
    line = f"{head} at {entry.source}  {entry.source_text}".rstrip()
    if entry.user_source:
        line += f", called from {entry.user_source}  {entry.user_source_text}".rstrip()
    return line
