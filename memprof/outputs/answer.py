"""What a report concludes, for every kind of report and every format (:func:`conclusions`):
each explained run's bottom line (its peak and footprint, the categories holding most, the
largest entries with their lines), each comparison's verdict, the biggest cause of the change at
the peak (both runs explained) and its memory-and-time summary;
a recording's peak per run; an estimate's answer (how much, and whether it fits: ``NOT
RELIABLE`` first when fake execution guessed values that steered the code) or a sweep's
verdict. The terminal prints it last, so that the lines left on the screen are the answer;
Markdown and HTML show it first."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from memprof.core.units import format_bytes
from memprof.model.explanation import nonzero_categories
from memprof.model.kind import ReportKind
from memprof.model.run import peak_line
from memprof.outputs import estimate
from memprof.outputs.document import Conclusion
from memprof.outputs.rows import indexed_class, module_text

if TYPE_CHECKING:
    from memprof.model.diff import RunDiff
    from memprof.model.explanation import AtPeakEntry
    from memprof.model.report import Report
    from memprof.model.run import RunResult

TOP_CATEGORIES = 3
"""A bottom line names this many categories, most bytes first."""
TOP_ENTRIES = 2
"""A bottom line names this many entries, largest first, with their lines."""


def conclusions(report: Report, *, short: bool = False) -> tuple[Conclusion, ...]:
    """What ``report`` concludes, in order (a report of several ranks: give the detailed rank's
    report). Live runs: each explained run's :func:`bottom_line`, then each comparison's verdict
    and summary (a single run not explained: its peak; none succeeded: so). Recordings: each
    run's peak, then each comparison's verdict. An estimate: its answer (``NOT RELIABLE``
    first when fake execution guessed values that steered the code); a sweep: its verdict.
    ``short`` (the short terminal report): a comparison without each run's bottom line."""
    kind = ReportKind.of_source(report.source, swept=report.sweep is not None)
    ok = report.ok_runs()
    if kind.estimated:
        return _estimated(report)
    if kind is ReportKind.RECORDED:
        # The host's memory first, the GPUs' last: the terminal's last line is a GPU's peak.
        ok = sorted(ok, key=lambda run: 0 if (run.device or run.label).startswith("cpu") else 1)
        return tuple(Conclusion((peak_line(run),)) for run in ok) + tuple(
            Conclusion((diff.verdict,)) for diff in report.diffs
        )
    # A short report of a comparison ends with the verdict alone: each run's figures are above.
    groups = [bottom_line(run) for run in ok if run.at_peak is not None and not (short and report.diffs)]
    groups += [
        Conclusion((diff.verdict, *filter(None, [made_differently(diff)]), *_cause(diff, ok), diff.summary))
        for diff in report.diffs
    ]
    if not groups and len(ok) == 1:
        groups.append(Conclusion((_peak(ok[0]),)))
    return tuple(groups) or (Conclusion(("no run succeeded",)),)


def made_differently(diff: RunDiff) -> str | None:
    """``made differently: batch 8 -> 16``: how the two runs were made differently, but what
    their labels say already (``mode eager -> compile`` of runs labelled eager and compile),
    or None."""
    told = [change for change in diff.recipe_changes if not _labelled(change, diff.base, diff.other)]
    return f"made differently: {'; '.join(told)}" if told else None


def _labelled(change: str, base: str, other: str) -> bool:
    """Whether the runs' labels say ``change`` (``name a -> b``) already: each label is its
    value (``eager``), names it (``batch=8``) or is its function's name (``pkg.mod:no_grad``,
    and its own factory ``pkg.mod:no_grad_inputs``)."""
    values = change.partition(" ")[2].split(" -> ")
    if len(values) != 2:
        return False
    return all(
        label == value or label.endswith(f"={value}") or value.endswith((f":{label}", f":{label}_inputs"))
        for label, value in zip((base, other), values, strict=True)
    )


def _cause(diff: RunDiff, runs: list[RunResult]) -> tuple[str, ...]:
    """``biggest cause: the backward of GPT -16.0 MiB of temporaries``: the first of the rows
    that explain the change of what is live at the peak (both runs explained), else nothing;
    a module its path names only by an index gets its class (``the forward of 10 (Linear)``)."""
    change = diff.at_peak
    if change is None or not change.footprint_delta_bytes:
        return ()
    _, said, parts = change.summary.partition(": ")
    first = parts.split("; ")[0] if said else ""
    found = re.match(r"the (?:forward|backward|recompute) of (\S+) ", first)
    classes = _indexed_classes(found.group(1), runs) if found is not None else ""
    if found is not None and classes:
        first = first[: found.end(1)] + f" ({classes})" + first[found.end(1) :]
    return (f"biggest cause: {first}",) if first else ()


def _indexed_classes(label: str, runs: list[RunResult]) -> str:
    """The classes of modules named by index alone: ``10`` -> ``Linear``; ``blocks.0–3`` or
    ``2–15`` (consecutive children) -> each class once, ``Linear, GELU``."""
    found = re.fullmatch(r"(?:(?P<name>.*)\.)?(?P<first>\d+)(?:–(?P<last>\d+))?", label)
    if found is None:
        return ""
    prefix = f"{found.group('name')}." if found.group("name") else ""
    first, last = int(found.group("first")), int(found.group("last") or found.group("first"))
    names = [f"{prefix}{index}" for index in range(first, last + 1)]
    classes = [c for name in names for run in runs if (c := indexed_class(run, name))]
    return ", ".join(dict.fromkeys(classes))


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
        lines.append(
            ("largest: " if n == 0 else "then: ") + entry_line(entry, indexed_class(run, entry.module))
        )
    return tuple(lines)


def entry_line(entry: AtPeakEntry, module_class: str = "") -> str:
    """``8.0 MiB activation (aten::_log_softmax) at gpt.py:109 loss = F.cross_entropy(...)``,
    with the user's line that called a library's (``, called from train.py:13 ...``); state
    from before the call names its module, with ``module_class`` (``of 0 (Linear)``)."""
    what = entry.category + (f" x{entry.count}" if entry.count > 1 else "")
    op = f" ({entry.op})" if entry.op else ""
    head = f"{format_bytes(entry.bytes)} {what}{op}"
    if not entry.source:
        shape = f", {entry.shape} {entry.dtype}".rstrip() if entry.shape else ""
        module = f" of {module_text(entry.module, '', module_class)}" if entry.module else ""
        return f"{head}{module}, {'before the call' if entry.before_call else 'no line'}{shape}"
    line = f"{head} at {entry.source}  {entry.source_text}".rstrip()
    if entry.user_source:
        line += f", called from {entry.user_source}  {entry.user_source_text}".rstrip()
    return line
