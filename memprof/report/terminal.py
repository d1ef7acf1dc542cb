"""The terminal summary: runs, top ops (side by side when comparing), fused kernels, notes, and
last the verdicts.

Laid out for the terminal's width (:mod:`memprof.report.layout`): no line is wider than the
terminal; narrow terminals get fewer columns, names shortened in the middle, notes on their own
line. On a terminal it is printed in colour with rich; to a pipe or a file, as plain text with
the same layout (``COLUMNS`` sets the width; 100 when nothing does).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from memprof.analysis.diff import op_note
from memprof.analysis.timing import format_wall
from memprof.report.layout import (
    DEFAULT_WIDTH,
    Column,
    Line,
    Table,
    paragraph,
    plain,
    terminal_width,
    to_text,
)
from memprof.report.rows import (
    SUMMARY_KERNELS,
    DiffTable,
    FusedRow,
    RunTable,
    conclusions,
    fused_count,
    fused_rows,
    op_tables,
)
from memprof.units import format_bytes, format_ms, format_seconds

if TYPE_CHECKING:
    from memprof.analysis.ops import OpStats
    from memprof.model import Report


def _delta(nbytes: int) -> tuple[str, str | None]:
    """A signed size, green when it lowers memory, red when it raises it."""
    return (format_bytes(nbytes, signed=True), "green" if nbytes < 0 else "red" if nbytes > 0 else None)


def heading(report: Report, width: int) -> list[Line]:
    env = report.environment
    text = f"memprof: {report.target} on {report.device} (torch {env.get('torch', '?')})"
    return paragraph(text, width, "bold")


def runs_table(report: Report, width: int) -> list[Line]:
    """One row per run; the failed runs' messages follow the table."""
    compiled = any(run.compile_seconds is not None for run in report.runs.values())
    columns = [
        Column("run", shrink=True, min_width=12),
        Column("peak", "right"),
        Column("allocated", "right", drop=2),
        Column("net", "right", drop=4),
        Column("inputs", "right", drop=5),
        Column("wall/call", "right"),
        *([Column("compile", "right", drop=3)] if compiled else []),
        Column("peak during", shrink=True, min_width=32),
    ]
    table = Table(columns)
    failures: list[Line] = []
    for label, run in report.runs.items():
        if run.failed:
            table.add(label, ("failed", "red"), *([""] * (len(columns) - 2)))
            failures += paragraph(f"{label} failed: {run.failed}", width, "red")
            continue
        cells: list[str | tuple[str, str | None]] = [
            label,
            (format_bytes(run.peak_bytes), "bold"),
            format_bytes(run.allocated_bytes),
            format_bytes(run.net_bytes, signed=True),
            format_bytes(run.inputs_bytes),
            format_wall(run.wall_ms_all, run.wall_ms),
            *([format_seconds(run.compile_seconds)] if compiled else []),
            run.peak_op or "-",
        ]
        table.add(*cells)
    return table.lines(width) + failures + _wall_legend(report, width)


def _wall_legend(report: Report, width: int) -> list[Line]:
    runs = report.ok_runs()
    if not runs:
        return []
    if any(run.wall_timing != "timed" for run in runs):
        text = "wall/call: timed with the profiler on, which slows calls unevenly"
    else:
        calls = sorted({len(run.wall_ms_all) for run in runs})
        if calls[-1] <= 1:
            text = "wall/call: one call each, timed without the profiler (a call over 1 s is timed once)"
        else:
            counts = f"{calls[0]}" if len(calls) == 1 else f"{calls[0]} to {calls[-1]}"
            text = (
                f"wall/call: median of {counts} calls timed without the profiler; ±: half the spread "
                "of the middle half of the calls"
            )
    return paragraph(text, width, "dim")


def _single_ops(table: RunTable, width: int) -> list[Line]:
    columns = [
        Column("op", shrink=True, min_width=24),
        Column("calls", "right", drop=3),
        Column("peak", "right"),
        Column("self", "right"),
        Column("total", "right", drop=4),
        Column("allocated", "right", drop=1),
        Column("cpu time", "right", drop=2),
    ]
    layout = Table(columns)
    for op in table.rows:
        layout.add(
            op.name,
            str(op.calls),
            (format_bytes(op.peak_bytes), "bold"),
            format_bytes(op.self_bytes),
            format_bytes(op.total_bytes),
            format_bytes(op.allocated_bytes),
            format_ms(op.total_us / 1000),
        )
    return layout.lines(width)


def _size(stats: OpStats | None, column: str) -> str:
    return "-" if stats is None else format_bytes(getattr(stats, column))


def _diff_ops(table: DiffTable, width: int) -> list[Line]:
    diff = table.diff
    a, b = diff.base, diff.other
    columns = [
        Column("op", shrink=True, min_width=24),
        Column(f"peak {a}", "right", label=True),
        Column(f"peak {b}", "right", label=True),
        Column("delta", "right"),
        Column(f"self {a}", "right", drop=1, label=True),
        Column(f"self {b}", "right", drop=1, label=True),
        Column("note", detach=True),
    ]
    layout = Table(columns)
    for op in table.rows:
        layout.add(
            op.name,
            _size(op.base, "peak_bytes"),
            _size(op.other, "peak_bytes"),
            _delta(op.peak_bytes_delta),
            _size(op.base, "self_bytes"),
            _size(op.other, "self_bytes"),
            (op_note(diff, op), "dim"),
        )
    return layout.lines(width)


def op_section(report: Report, sort: str, top: int, width: int) -> list[Line]:
    """The top ops by ``sort``: exactly ``top`` rows (fewer when there are fewer ops), and a
    line saying which ops were left out as carrying nothing (see :mod:`memprof.report.rows`)."""
    lines: list[Line] = []
    for table in op_tables(report, sort, top):
        if isinstance(table, DiffTable):
            title = f"Top {top} ops by {sort} bytes, {table.diff.base} vs {table.diff.other}:"
            body = _diff_ops(table, width)
        else:
            title = f"Top {top} ops of {table.run.label} by {sort} bytes:"
            body = _single_ops(table, width)
        lines += [[], *paragraph(title, width, "bold"), *body]
        lines += paragraph(table.left_out.sentence(), width, "dim") if len(table.left_out) else []
    return lines


def fused_section(report: Report, top: int, width: int) -> list[Line]:
    """At most ``top`` (and :data:`memprof.report.rows.SUMMARY_KERNELS`) fused kernels, most
    memory first: each kernel with its own peak, and the
    ops it replaced with their peaks in the base run (the three largest, then how many more)."""
    rows = fused_rows(report, min(top, SUMMARY_KERNELS))
    if not rows:
        return []
    lines: list[Line] = []
    runs = list(dict.fromkeys((row.run, row.base) for row in rows))
    for run, base in runs:
        title = f"Fused kernels of {run}, and the {base} ops each replaced (their peak in {base}):"
        table = Table(
            [
                Column("kernel", shrink=True, min_width=30),
                Column("peak", "right"),
                Column("replaced", detach=True),
            ]
        )
        for row in (r for r in rows if r.run == run):
            table.add(row.kernel, format_bytes(row.peak_bytes), (_replaced_summary(row), "dim"))
        lines += [[], *paragraph(title, width, "bold"), *table.lines(width)]
    more = fused_count(report) - len(rows)
    if more > 0:
        lines += paragraph(
            f"and {more} more fused kernels (the HTML and JSON reports list them all)", width, "dim"
        )
    return lines


def _replaced_summary(row: FusedRow, listed: int = 3) -> str:
    """``aten::sum 490.2 MiB, aten::abs 244.1 MiB, aten::sub 244.1 MiB and 2 more``."""
    ops = sorted(row.replaced, key=lambda op: -(op.base_peak_bytes or 0))
    named = [
        op.op + (f" {format_bytes(op.base_peak_bytes)}" if op.base_peak_bytes is not None else "")
        for op in ops[:listed]
    ]
    more = f" and {len(ops) - listed} more" if len(ops) > listed else ""
    return ", ".join(named) + more


def notes_section(report: Report, width: int) -> list[Line]:
    lines: list[Line] = []
    for run in report.runs.values():
        for note in run.notes:
            lines += paragraph(f"note ({run.label}): {note}", width, "yellow")
    return [[], *lines] if lines else []


def conclusion_section(report: Report, width: int) -> list[Line]:
    """Each comparison's verdict and summary, in order, a blank line between comparisons."""
    lines: list[Line] = []
    for group in conclusions(report):
        lines.append([])
        verdict, *rest = group
        lines += paragraph(verdict, width, "bold")
        for line in rest:
            lines += paragraph(line, width)
    return lines


def terminal_lines(
    report: Report, *, sort: str = "peak", top: int = 15, width: int = DEFAULT_WIDTH
) -> list[Line]:
    """The summary as styled lines, at most ``width`` characters each."""
    return [
        *heading(report, width),
        [],
        *runs_table(report, width),
        *op_section(report, sort, top, width),
        *fused_section(report, top, width),
        *notes_section(report, width),
        *conclusion_section(report, width),
    ]


def render_terminal(report: Report, *, sort: str = "peak", top: int = 15, width: int | None = None) -> str:
    """The summary printed by ``memprof run`` and ``memprof compare``, as plain text at most
    ``width`` characters wide (default :data:`memprof.report.layout.DEFAULT_WIDTH`)."""
    return plain(terminal_lines(report, sort=sort, top=top, width=width or DEFAULT_WIDTH))


def print_terminal(report: Report, *, sort: str = "peak", top: int = 15) -> None:
    """Print the summary to stdout at the terminal's width: in colour on a terminal (rich),
    plain text otherwise."""
    width = terminal_width()
    lines = terminal_lines(report, sort=sort, top=top, width=width)
    if sys.stdout.isatty():
        from rich.console import Console

        Console(width=width, soft_wrap=True, highlight=False).print(to_text(lines), end="")
    else:
        sys.stdout.write(plain(lines))
        sys.stdout.flush()
