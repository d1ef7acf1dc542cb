"""Markdown (GitHub-flavoured): a short summary for ``$GITHUB_STEP_SUMMARY`` or a PR comment.

Heading with target, device and torch; each verdict in bold with its memory-and-time summary;
one row per run; the top ops by peak with both runs and the delta (without the rows that carry
nothing: see :mod:`memprof.report.rows`); the fused kernels and the ops they replaced. Names go
in code spans (``|`` escaped, backticks fenced), other text has Markdown's special characters
escaped, so no name can break the table or inject markup. A size or a time never wraps between
its number and its unit (``210.2\u00a0MiB``: a non-breaking space).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from memprof.analysis.diff import op_note
from memprof.analysis.timing import format_wall
from memprof.report.rows import (
    SUMMARY_KERNELS,
    DiffTable,
    FusedRow,
    RunTable,
    conclusions,
    fused_count,
    fused_rows,
    op_tables,
    replaced_text,
)
from memprof.units import format_bytes, format_seconds

if TYPE_CHECKING:
    from memprof.model import Report

TOP_OPS = 10

# Characters that start markup anywhere in a line; `#`, `+`, `-`, `>` only matter first.
_SPECIAL_RE = re.compile(r"([\\`*_\[\]<|~])")
_SPACES_RE = re.compile(r"[ \t\n\r\f\v]+")


def escape_text(text: str) -> str:
    """Plain text for Markdown: special characters backslash-escaped, one line."""
    # Runs of whitespace become one space; a non-breaking space (kept sizes whole) stays.
    one_line = " ".join(part for part in _SPACES_RE.split(str(text)) if part)
    escaped = _SPECIAL_RE.sub(r"\\\1", one_line.replace("&", "&amp;"))
    return "\\" + escaped if escaped[:1] in {"#", "+", "-", ">"} else escaped


def code(text: str) -> str:
    """A code span safe inside a GFM table cell.

    The fence is one backtick longer than the longest run of backticks inside; ``|`` becomes
    ``\\|`` (GFM splits table cells before it parses code spans, and renders ``\\|`` as ``|``).
    """
    text = " ".join(str(text).split()).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


NBSP = "\u00a0"
_UNIT_RE = re.compile(r"(\d) (B|KiB|MiB|GiB|TiB|ms|us|s)\b")


def unbreakable(text: str) -> str:
    """Sizes and times kept whole: the space between a number and its unit made non-breaking."""
    return _UNIT_RE.sub(rf"\1{NBSP}\2", text)


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
    rows = []
    for label, run in report.runs.items():
        if run.failed:
            rows.append([escape_text(label), "failed", "", "", "", "", escape_text(run.failed)])
            continue
        rows.append(
            [
                escape_text(label),
                _size(run.peak_bytes),
                _size(run.allocated_bytes),
                _size(run.net_bytes, signed=True),
                unbreakable(format_wall(run.wall_ms_all, run.wall_ms)),
                unbreakable(format_seconds(run.compile_seconds)),
                code(run.peak_op) if run.peak_op else "-",
            ]
        )
    headers = ["run", "peak", "allocated", "net", "wall/call", "compile", "peak during"]
    return _table(headers, rows, "lrrrrrl")


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


def _op_section(report: Report, top: int) -> list[str]:
    lines = []
    for table in op_tables(report, "peak", top):
        if isinstance(table, DiffTable):
            pair = f"{escape_text(table.diff.base)} vs {escape_text(table.diff.other)}"
            lines += [f"### Top {top} ops by peak, {pair}", "", *_diff_ops(table), ""]
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


def render_markdown(report: Report, top: int = TOP_OPS) -> str:
    """The Markdown summary of ``report``: the ``top`` ops by peak (both runs when comparing)."""
    torch_version = report.environment.get("torch", "?")
    lines = [
        f"## memprof: {code(report.target)} on {escape_text(report.device)} "
        f"(torch {escape_text(torch_version)})",
        "",
        *_conclusions(report),
        *_runs_table(report),
        "",
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
    notes = [
        f"- {escape_text(run.label)}: {escape_text(note)}"
        for run in report.runs.values()
        for note in run.notes
    ]
    if notes:
        lines += ["### Notes", "", *notes, ""]
    ok = report.ok_runs()
    legend = "peak: most live bytes above the call's start (allocator records); sizes are 1024-based"
    if len(ok) >= 2:
        legend += f"; delta = {escape_text(ok[1].label)} - {escape_text(ok[0].label)}"
    lines.append(f"<sub>{legend}.</sub>")
    return "\n".join(lines) + "\n"
