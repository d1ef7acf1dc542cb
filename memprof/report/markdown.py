"""Markdown (GitHub-flavoured): a short summary for ``$GITHUB_STEP_SUMMARY`` or a PR comment.

Heading with target, device and torch; the verdict in bold; one row per run; the top ops by
peak with both runs and the delta. Names go in code spans (``|`` escaped, backticks fenced),
other text has Markdown's special characters escaped, so no name can break the table or
inject markup.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from memprof.analysis.diff import op_note
from memprof.units import format_bytes, format_ms, format_seconds

if TYPE_CHECKING:
    from memprof.model import Report, RunResult

TOP_OPS = 10

# Characters that start markup anywhere in a line; `#`, `+`, `-`, `>` only matter first.
_SPECIAL_RE = re.compile(r"([\\`*_\[\]<|~])")


def escape_text(text: str) -> str:
    """Plain text for Markdown: special characters backslash-escaped, one line."""
    escaped = _SPECIAL_RE.sub(r"\\\1", " ".join(str(text).split()).replace("&", "&amp;"))
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


def _size(value: Any, *, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format_bytes(int(value), signed=signed)


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
                format_ms(run.wall_ms),
                format_seconds(run.compile_seconds),
                code(run.peak_op) if run.peak_op else "-",
            ]
        )
    headers = ["run", "peak", "allocated", "net", "wall/call", "compile", "peak during"]
    return _table(headers, rows, "lrrrrrl")


def _single_ops(run: RunResult, top: int) -> list[str]:
    rows = [
        [
            code(str(row.name)),
            str(int(row.calls)),
            _size(row.peak_bytes),
            _size(row.self_bytes, signed=True),
            _size(row.allocated_bytes),
        ]
        for row in run.ops_sorted("peak").head(top).itertuples(index=False)
    ]
    return _table(["op", "calls", "peak", "self", "allocated"], rows, "lrrrr")


def _diff_ops(report: Report, top: int) -> list[str]:
    diff = report.diff
    assert diff is not None
    a, b = diff.base, diff.other
    rows = []
    for row in diff.ops.head(top).to_dict("records"):
        note = op_note(row, name=code, text=escape_text)
        rows.append(
            [
                code(str(row["name"])),
                _size(row[f"peak_bytes_{a}"]),
                _size(row[f"peak_bytes_{b}"]),
                _size(row["peak_bytes_delta"], signed=True),
                note,
            ]
        )
    headers = ["op", f"peak {escape_text(a)}", f"peak {escape_text(b)}", "delta", "note"]
    return _table(headers, rows, "lrrrl")


def render_markdown(report: Report, top: int = TOP_OPS) -> str:
    """The Markdown summary of ``report``: the ``top`` ops by peak (both runs when comparing)."""
    torch_version = report.environment.get("torch", "?")
    lines = [
        f"## memprof: {code(report.target)} on {escape_text(report.device)} "
        f"(torch {escape_text(torch_version)})",
        "",
    ]
    verdicts = [d.verdict for d in report.diffs()]
    ok = report.ok_runs()
    if not verdicts and len(ok) == 1:
        during = f" during {ok[0].peak_op}" if ok[0].peak_op else ""
        verdicts = [f"{ok[0].label}: peak {format_bytes(ok[0].peak_bytes)} above the call's start{during}"]
    for verdict in verdicts:
        lines += [f"**{escape_text(verdict)}**", ""]
    lines += [*_runs_table(report), ""]
    if len(ok) >= 2:
        lines += [f"### Top {top} ops by peak, {escape_text(ok[0].label)} vs {escape_text(ok[1].label)}", ""]
        lines += [*_diff_ops(report, top), ""]
    elif ok:
        lines += [f"### Top {top} ops of {escape_text(ok[0].label)} by peak", ""]
        lines += [*_single_ops(ok[0], top), ""]
    notes = [
        f"- {escape_text(run.label)}: {escape_text(note)}"
        for run in report.runs.values()
        for note in run.notes
    ]
    if notes:
        lines += ["### Notes", "", *notes, ""]
    legend = "peak: most live bytes above the call's start (allocator records); sizes are 1024-based"
    if len(ok) >= 2:
        legend += f"; delta = {escape_text(ok[1].label)} - {escape_text(ok[0].label)}"
    lines.append(f"<sub>{legend}.</sub>")
    return "\n".join(lines) + "\n"
