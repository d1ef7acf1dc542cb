"""Markdown (GitHub-flavoured): a short summary for ``$GITHUB_STEP_SUMMARY`` or a PR comment.

Heading with target, device and torch; each verdict in bold with its memory-and-time summary;
one row per run; what is live at each explained peak (largest entries, modules, kernels); the
top ops by peak with both runs and the delta (without the rows that carry nothing: see
:mod:`memprof.report.rows`); the fused kernels and the ops they replaced. Names go
in code spans (``|`` escaped, backticks fenced), other text has Markdown's special characters
escaped, so no name can break the table or inject markup; invisible and control characters
are shown escaped (:func:`memprof.text.visible`). A size or a time never wraps between its
number and its unit (``210.2\u00a0MiB``: a non-breaking space).

A report of several ranks starts with every rank's row and their imbalance, then details one
rank; a report read from recordings (``memprof analyze``) has its own summary
(:func:`render_recorded_markdown`).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from memprof.analysis.diff import op_note
from memprof.model.explanation import AtPeakEntry
from memprof.model.run import peak_during
from memprof.model.timing import format_wall
from memprof.report import estimate, recorded
from memprof.report.layout import NUMBER_UNIT
from memprof.report.ranks import RankView, rank_view, size_columns
from memprof.report.recorded import memory_columns
from memprof.report.rows import (
    SUMMARY_KERNELS,
    AtPeakView,
    DiffTable,
    FusedRow,
    RunTable,
    at_peak_views,
    calls_text,
    categories_text,
    conclusions,
    footprint_text,
    fused_count,
    fused_rows,
    group_text,
    grouping_text,
    line_text,
    module_text,
    op_tables,
    replaced_text,
)
from memprof.text import visible
from memprof.units import format_bytes, format_ms, format_seconds

if TYPE_CHECKING:
    from memprof.gate import Explanation, GateResult
    from memprof.model import Report, RunResult
    from memprof.model.diff import RunDiff

TOP_OPS = 10

# Characters that start markup anywhere in a line; `#`, `+`, `-`, `>` only matter first.
_SPECIAL_RE = re.compile(r"([\\`*_\[\]<|~])")
_SPACES_RE = re.compile(r"[ \t\n\r\f\v]+")


def escape_text(text: str) -> str:
    """Plain text for Markdown: special characters backslash-escaped, one line."""
    # Runs of whitespace become one space; a non-breaking space (kept sizes whole) stays.
    shown = visible(str(text), keep="\n" + NBSP)
    one_line = " ".join(part for part in _SPACES_RE.split(shown) if part)
    escaped = _SPECIAL_RE.sub(r"\\\1", one_line.replace("&", "&amp;"))
    return "\\" + escaped if escaped[:1] in {"#", "+", "-", ">"} else escaped


def code(text: str) -> str:
    """A code span safe inside a GFM table cell.

    The fence is one backtick longer than the longest run of backticks inside; ``|`` becomes
    ``\\|`` (GFM splits table cells before it parses code spans, and renders ``\\|`` as ``|``).
    """
    text = " ".join(visible(str(text)).split()).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


NBSP = "\u00a0"


def unbreakable(text: str) -> str:
    """Sizes and times kept whole: the space between a number and its unit made non-breaking."""
    return NUMBER_UNIT.sub(rf"\1{NBSP}\2", text)


def _size(value: Any, *, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return unbreakable(format_bytes(int(value), signed=signed))


def _table(headers: list[str], rows: list[list[str]], align: str) -> list[str]:
    marks = {"l": "---", "r": "---:"}
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _runs_table(report: Report) -> list[str]:
    extra = memory_columns(report.runs.values())  # footprint, live at start, reserved: where known
    rows = []
    for label, run in report.runs.items():
        if run.failed:
            rows.append(
                [escape_text(label), "failed", *[""] * len(extra), "", "", "", "", escape_text(run.failed)]
            )
            continue
        rows.append(
            [
                escape_text(label),
                _size(run.peak_bytes),
                *(_size(getattr(run, attr)) for _, attr in extra),
                _size(run.allocated_bytes),
                _size(run.net_bytes, signed=True),
                unbreakable(format_wall(run.wall_ms_all, run.wall_ms)),
                unbreakable(format_seconds(run.compile_seconds)),
                code(run.peak_op) if run.peak_op else "-",
            ]
        )
    headers = ["run", "peak", *(header for header, _ in extra), "allocated", "net", "wall/call", "compile"]
    return _table([*headers, "peak during"], rows, "l" + "r" * (len(headers) - 1) + "l")


def _single_ops(table: RunTable) -> list[str]:
    rows = [
        [
            code(op.name),
            str(op.calls),
            _size(op.peak_bytes),
            _size(op.self_bytes, signed=True),
            _size(op.allocated_bytes),
        ]
        for op in table.rows
    ]
    return _table(["op", "calls", "peak", "self", "allocated"], rows, "lrrrr")


def _diff_ops(table: DiffTable) -> list[str]:
    diff = table.diff
    a, b = diff.base, diff.other
    rows = [
        [
            code(op.name),
            _size(op.base.peak_bytes if op.base is not None else None),
            _size(op.other.peak_bytes if op.other is not None else None),
            _size(op.peak_bytes_delta, signed=True),
            op_note(diff, op, name=code, text=escape_text),
        ]
        for op in table.rows
    ]
    headers = ["op", f"peak {escape_text(a)}", f"peak {escape_text(b)}", "delta", "note"]
    return _table(headers, rows, "lrrrl")


def _fused(rows: tuple[FusedRow, ...]) -> list[str]:
    table = [
        [
            escape_text(row.run),
            code(row.kernel),
            _size(row.peak_bytes),
            replaced_text(row, name=code, text=lambda words: escape_text(unbreakable(words))),
        ]
        for row in rows
    ]
    return _table(["run", "fused kernel", "kernel peak", "aten ops it replaced"], table, "llrl")


def _conclusions(report: Report) -> list[str]:
    lines = []
    for verdict, *rest in conclusions(report):
        lines += [f"**{escape_text(unbreakable(verdict))}**", ""]
        lines += [f"{escape_text(unbreakable(line))}" for line in rest]
        lines += [""] if rest else []
    return lines


def _op_section(report: Report, top: int, *, skip_empty: bool = False) -> list[str]:
    """The top ops of the first comparison, or of each run; ``skip_empty``: no table for a run
    without ops (a snapshot's)."""
    lines = []
    for table in op_tables(report, "peak", top):
        if isinstance(table, DiffTable):
            pair = f"{escape_text(table.diff.base)} vs {escape_text(table.diff.other)}"
            lines += [f"### Top {top} ops by peak, {pair}", "", *_diff_ops(table), ""]
        elif skip_empty and not table.run.op_stats:
            continue
        else:
            lines += [
                f"### Top {top} ops of {escape_text(table.run.label)} by peak",
                "",
                *_single_ops(table),
                "",
            ]
        if len(table.left_out):
            lines += [f"<sub>{table.left_out.sentence(name=code)}</sub>", ""]
    return lines


def _module_cell(module: str, phase: str, module_class: str = "") -> str:
    """``lm_head`` as code, then its class, `` (backward)``, `` (recompute)`` or
    ``(optimizer)`` as text; ``-`` for none."""
    if not module:
        text = module_text(module, phase)
        return "-" if text == "-" else escape_text(text)
    kind = f" ({escape_text(module_class)})" if module_class and module_class != module else ""
    return code(module) + kind + (f" ({phase})" if phase in ("backward", "recompute") else "")


def _line_cell(entry: AtPeakEntry) -> str:
    """The statement that made an entry, and the user's own line that called it."""
    if not entry.source:
        return escape_text(line_text(entry))
    cell = f"{code(entry.source)} {code(entry.source_text)}"
    if entry.user_source:
        cell += f"<br>called from {code(entry.user_source)} {code(entry.user_source_text)}"
    return cell


def _after(text: str) -> str:
    """`` x2 (backward)`` after a code span: a space, then the text escaped (none when empty)."""
    return " " + escape_text(text) if text.strip() else ""


def _groups(view: AtPeakView) -> list[str]:
    """The modules grouped by layer kind (``run.module_groups``)."""
    rows = [
        [
            code(g.group) + _after(group_text(g).removeprefix(g.group)),
            str(g.calls),
            _size(g.at_peak_bytes),
            _size(g.peak_bytes),
        ]
        for g in view.groups
    ]
    headers = [f"modules {grouping_text(view.groups)}", "calls", "live at peak", "peak inside"]
    lines = _table(headers, rows, "lrrr")
    if view.hidden_groups:
        lines += ["", escape_text(f"... {view.hidden_groups} more groups.")]
    return lines


def _at_peak(view: AtPeakView) -> list[str]:
    """An explained run's footprint and categories, its largest entries and its modules."""
    run = view.run
    assert run.at_peak is not None
    lines = [
        f"### At the peak of {escape_text(run.label)}",
        "",
        escape_text(
            unbreakable(f"{footprint_text(run)}; by category: {categories_text(run.at_peak.by_category)}")
        ),
        "",
    ]
    calls = calls_text(run)
    if calls:
        lines += [escape_text(unbreakable(calls)), ""]
    rows = [
        [
            _size(entry.bytes),
            escape_text(entry.category + (f" x{entry.count}" if entry.count > 1 else "")),
            _module_cell(entry.module, entry.phase),
            _line_cell(entry),
            code(entry.op) if entry.op else "-",
        ]
        for entry in view.entries
    ]
    rows += [
        [_size(u.bytes), "other", "-", escape_text(f"not attributed: {u.reason}"), "-"]
        for u in view.unattributed
    ]
    lines += _table(["bytes", "category", "module", "line", "op"], rows, "rllll")
    if view.hidden_entries:
        lines += [
            "",
            escape_text(f"... {view.hidden_entries} more entries, {_size(view.hidden_bytes)} in all."),
        ]
    if view.groups:
        lines += ["", *_groups(view)]
    elif view.modules:
        modules = [
            [
                _module_cell(m.module, m.phase, m.module_class),
                str(m.calls),
                _size(m.at_peak_bytes),
                _size(m.peak_bytes),
            ]
            for m in view.modules
        ]
        lines += ["", *_table(["module", "calls", "live at peak", "peak inside"], modules, "lrrr")]
    if view.kernels:
        kernels = [
            [
                code(k.name),
                escape_text(k.phase),
                _size(k.allocated_bytes),
                _size(k.at_peak_bytes),
                ", ".join(code(op.removeprefix("aten::")) for op in k.replaces) or "-",
            ]
            for k in view.kernels
        ]
        lines += [
            "",
            *_table(
                ["kernel", "phase", "produces", "live at peak", "eager ops it replaces"], kernels, "llrrl"
            ),
        ]
    return [*lines, ""]


def _ranks(view: RankView) -> list[str]:
    """Every rank's row and the imbalance of their peaks, then the heading of the rank detailed."""
    extra = size_columns(view.summary)
    rows = []
    for row in view.summary.rows:
        if row.ok:
            sizes = [_size(getattr(row, column)) for column, _ in extra]
            during = code(row.peak_op) if row.peak_op else "-"
            cells = [_size(row.peak_bytes), *sizes, unbreakable(format_ms(row.wall_ms)), during]
        else:
            cells = ["failed", *([""] * len(extra)), "", escape_text(row.error or "")]
        rows.append([str(row.rank), escape_text(row.label), *cells])
    headers = ["rank", "run", "peak", *(heading for _, heading in extra), "wall/call", "peak during"]
    lines = ["### Ranks", "", *_table(headers, rows, "rlr" + "r" * len(extra) + "rl"), ""]
    for imbalance in view.summary.imbalances:
        lines += [f"**{escape_text(unbreakable(imbalance.line))}**", ""]
    return [*lines, f"### Details of {escape_text(view.heading)}", ""]


def _device_lines(report: Report) -> list[str]:
    """Each run's memory against its device's, when known."""
    lines = [
        f"- {escape_text(unbreakable(line))}"
        for run in report.ok_runs()
        if (line := recorded.device_line(run))
    ]
    return [*lines, ""] if lines else []


def _notes(report: Report) -> list[str]:
    notes = [
        f"- {escape_text(run.label)}: {escape_text(note)}"
        for run in report.runs.values()
        for note in run.notes
    ]
    return ["### Notes", "", *notes, ""] if notes else []


def render_markdown(
    report: Report, top: int = TOP_OPS, *, rank: int | None = None, gate: GateResult | None = None
) -> str:
    """The Markdown summary of ``report``: the ``top`` ops by peak (both runs when comparing).
    A report of several ranks starts with every rank's row and their imbalance, then details
    one rank's runs (the highest peak's, or ``rank``); its notes cover every rank. ``gate``:
    the memory gate's result, shown first (each violation with what explains it)."""
    if report.recorded:
        return _with_gate(render_recorded_markdown(report, top, rank=rank), gate)
    if estimate.is_estimate(report):
        return _with_gate(render_estimate_markdown(report, top), gate)
    torch_version = report.environment.get("torch", "?")
    lines = [
        f"## memprof: {code(report.target)} on {escape_text(report.device)} "
        f"(torch {escape_text(torch_version)})",
        "",
        *gate_section(gate),
    ]
    everything, view = report, rank_view(report, rank)
    if view is not None:
        lines += _ranks(view)
        report = view.report
    lines += [
        *_conclusions(report),
        *_runs_table(report),
        "",
        *(line for diff in report.diffs[:1] for line in peak_change_section(diff)),
        *_device_lines(report),
        *(line for view in at_peak_views(report, "markdown") for line in _at_peak(view)),
        *_op_section(report, top),
    ]
    fused = fused_rows(report, min(top, SUMMARY_KERNELS))
    if fused:
        lines += ["### Fused kernels", "", *_fused(fused), ""]
        more = fused_count(report) - len(fused)
        if more > 0:
            lines += [
                f"<sub>and {more} more fused kernels (the HTML and JSON reports list them all).</sub>",
                "",
            ]
    lines += _notes(everything)
    ok = report.ok_runs()
    legend = "peak: most live bytes above the call's start (allocator records); sizes are 1024-based"
    if any(run.footprint_bytes is not None for run in report.runs.values()):
        legend += "; footprint: everything live at the peak, what was live before the call included"
    if len(ok) >= 2:
        legend += f"; delta = {escape_text(ok[1].label)} - {escape_text(ok[0].label)}"
    lines.append(f"<sub>{legend}.</sub>")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# The memory gate, and what changed at the peak


def _with_gate(markdown: str, gate: GateResult | None) -> str:
    """A summary with the gate's section after its heading."""
    if gate is None:
        return markdown
    heading, _, rest = markdown.partition("\n\n")
    return "\n".join([heading, "", *gate_section(gate), rest])


def gate_section(gate: GateResult | None) -> list[str]:
    """The gate's verdict, its warnings, each violation in bold with what explains it (a
    table of what grew, or of the largest entries at the peak), and the improvements."""
    if gate is None:
        return []
    lines = [f"### {escape_text(gate.summary())}", ""]
    lines += [f"- warning: {escape_text(w)}" for w in gate.warnings]
    lines += [""] if gate.warnings else []
    for violation in gate.violations:
        lines += [f"**{escape_text(unbreakable(violation.line))}**", ""]
        if violation.explanation is not None:
            lines += _explanation(violation.explanation)
    lines += [f"- improved: {escape_text(i)}" for i in gate.improvements]
    return [*lines, ""] if gate.improvements else lines


def _explanation(explanation: Explanation) -> list[str]:
    lines = [escape_text(unbreakable(explanation.heading.strip())), ""]
    if explanation.rows:
        rows = [
            [
                _size(row.bytes, signed=row.signed),
                escape_text(row.category),
                _module_cell(row.module, row.phase),
                f"{code(row.source)} {code(row.source_text)}" if row.source else "-",
                code(row.op) if row.op else "-",
            ]
            for row in explanation.rows
        ]
        lines += [*_table(["bytes", "category", "module", "line", "op"], rows, "rllll"), ""]
    if explanation.more:
        lines += [f"<sub>{escape_text(unbreakable(explanation.more))}</sub>", ""]
    return lines


PEAK_CHANGE_ROWS = 8


def _change_cells(base: int, other: int) -> list[str]:
    """Both runs' bytes and the change."""
    return [_size(base), _size(other), _size(other - base, signed=True)]


def peak_change_section(diff: RunDiff) -> list[str]:
    """What changed at the peak: the summary, the categories, the largest module and line
    rows (both runs and the change); nothing unless both runs were explained."""
    change = diff.at_peak
    if change is None:
        return []
    a, b = escape_text(diff.base), escape_text(diff.other)
    categories = ", ".join(
        f"{name} {format_bytes(delta, signed=True)}" for name, delta in change.by_category.items() if delta
    )
    lines = [
        f"### What changed at the peak, {b} vs {a}",
        "",
        escape_text(unbreakable(change.summary)),
        "",
        *([escape_text(unbreakable(f"by category: {categories}")), ""] if categories else []),
    ]
    modules = [
        [_module_cell(r.module, r.phase), *_change_cells(r.base_bytes, r.other_bytes)]
        for r in change.by_module
        if r.delta_bytes
    ][:PEAK_CHANGE_ROWS]
    if any(r.module for r in change.by_module):  # a run without modules has one row, "-"
        lines += [*_table(["module", a, b, "delta"], modules, "lrrr"), ""]
    sources = [
        [
            f"{code(r.source)} {code(r.source_text)}" if r.source else escape_text("no line"),
            *_change_cells(r.base_bytes, r.other_bytes),
        ]
        for r in change.by_source
        if r.delta_bytes
    ][:PEAK_CHANGE_ROWS]
    if sources:
        lines += [*_table(["line", a, b, "delta"], sources, "lrrr"), ""]
    lines += [f"- {escape_text(note)}" for note in change.notes]
    return [*lines, ""] if change.notes else lines


# ---------------------------------------------------------------------------------------------
# Runs read from recordings (memprof analyze): chrome traces and CUDA memory snapshots


def _recorded_runs_table(report: Report) -> list[str]:
    columns = recorded.RECORDED_COLUMNS
    rows = [
        [
            escape_text(label),
            *(_size(getattr(run, attr)) for _, attr in columns),
            code(peak_during(run)) if run.peak_op else "-",
        ]
        for label, run in report.runs.items()
    ]
    headers = ["run", *(header for header, _ in columns), "peak during"]
    return _table(headers, rows, "l" + "r" * len(columns) + "l")


def _snapshot(run: RunResult) -> list[str]:
    """A snapshot run's details, its sites at the peak, its what-if replays."""
    lines = [f"### {escape_text(run.label)}: snapshot", ""]
    lines += [f"- {escape_text(unbreakable(line))}" for line in recorded.snapshot_lines(run)]
    lines.append("")
    sites = recorded.site_rows(run)
    if sites:
        rows = [[code(row.site), _size(row.bytes), row.share, f"{row.count:,}"] for row in sites]
        lines += [f"#### {escape_text(unbreakable(recorded.sites_title(run)))}", ""]
        lines += [*_table(["site", "bytes", "of peak", "blocks"], rows, "lrrr"), ""]
    what_if = recorded.what_if_rows(run)
    if what_if:
        rows = [[code(row[0]), *(escape_text(unbreakable(cell)) for cell in row[1:])] for row in what_if]
        headers = list(recorded.WHAT_IF_HEADERS)
        lines += [f"#### {escape_text(recorded.what_if_title(run))}", ""]
        lines += [*_table(headers, rows, "l" + "r" * (len(headers) - 1)), ""]
    return lines


def render_recorded_markdown(report: Report, top: int = TOP_OPS, *, rank: int | None = None) -> str:
    """The Markdown summary of a report read from recordings: what was read, each run's peak in
    bold, the runs, each run's share of its device, snapshot details, top ops, notes. Per-rank
    recordings start with every rank's row and their imbalance, then detail one rank."""
    lines = [f"## memprof: {escape_text(recorded.source_line(report))}", ""]
    view = rank_view(report, rank)
    if view is not None:
        lines += _ranks(view)
        report = view.report
    lines += [
        f"**{escape_text(unbreakable(line))}**  " for group in recorded.conclusions(report) for line in group
    ]
    lines += ["", *_recorded_runs_table(report), "", *_device_lines(report)]
    for run in report.ok_runs():
        if run.snapshot is not None:
            lines += _snapshot(run)
    lines += _op_section(report, top, skip_empty=True)
    lines += _notes(report)
    lines.append(
        "<sub>peak above start: the most live bytes above what was live when the recording began; "
        "footprint: everything live at that moment; reserved peak: the most the CUDA caching allocator "
        "held; snapshots count requested bytes, their footprint and reserve block sizes; sizes are "
        "1024-based.</sub>"
    )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Estimates (memprof estimate)


def render_estimate_markdown(report: Report, top: int = TOP_OPS) -> str:
    """An estimate: the answer (or the sweep's verdict) in bold, the runs, the sweep's table or
    the top ops, what ops allocate inside, notes."""
    lines = [f"## memprof: {escape_text(estimate.title(report))}", ""]
    for verdict, *_ in estimate.conclusions(report):
        lines += [f"**{escape_text(unbreakable(verdict))}**", ""]
    rows = [
        [
            escape_text(unbreakable(cell)) if i < 7 else code(cell) if cell != "-" else "-"
            for i, cell in enumerate(cells)
        ]
        for cells in (estimate.run_cells(run) for run in report.runs.values())
    ]
    headers = [escape_text(h) for h in estimate.RUN_HEADERS]
    lines += [*_table(headers, rows, "l" + "r" * 6 + "l"), ""]
    if report.sweep is not None:
        sweep = report.sweep
        rows = [
            [escape_text(unbreakable(cell)) for cell in estimate.sweep_cells(r, sweep)]
            for r in estimate.sweep_rows(sweep)
        ]
        headers = [escape_text(h) for h in estimate.sweep_headers(sweep)]
        align = "lr" + "r" * (len(headers) - 4) + "ll"
        lines += [f"### {escape_text(estimate.sweep_title(sweep).rstrip(':'))}", ""]
        lines += [*_table(headers, rows, align), ""]
    else:
        lines += _op_section(report, top)
        said = dict.fromkeys(line for run in report.ok_runs() if (line := estimate.workspace_line(run)))
        lines += [*(f"- {escape_text(unbreakable(line))}" for line in said), *([""] if said else [])]
    notes = [f"- {escape_text(whose)}: {escape_text(note)}" for whose, note in estimate.notes(report)]
    if notes:
        lines += ["### Notes", "", *notes, ""]
    legend = (
        "estimated on fake tensors; peak: most live bytes above the call's start; footprint: all live "
        "bytes then; sizes are 1024-based"
    )
    lines.append(f"<sub>{legend}.</sub>")
    return "\n".join(lines) + "\n"
