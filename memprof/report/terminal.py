"""The terminal summary: runs, what is live at each explained peak, top ops (side by side when
comparing), fused kernels, notes, and last the verdicts. A report of several ranks starts with
every rank's row; a report read from recordings (``memprof analyze``) has its own sections
(:func:`recorded_lines`).

Laid out for the terminal's width (:mod:`memprof.report.layout`): no line is wider than the
terminal; narrow terminals get fewer columns, names shortened in the middle, notes on their own
line. On a terminal it is printed in colour with rich; to a pipe or a file, as plain text with
the same layout (``COLUMNS`` sets the width; 100 when nothing does). Names are shown with their
invisible and control characters escaped (:func:`memprof.text.visible`), before the layout.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from memprof.analysis.diff import op_note
from memprof.model.run import peak_during
from memprof.model.timing import format_wall
from memprof.report import estimate, recorded
from memprof.report.layout import (
    DEFAULT_WIDTH,
    Column,
    Line,
    Segment,
    Table,
    paragraph,
    plain,
    shorten,
    terminal_width,
    to_text,
)
from memprof.report.peak_diff_text import peak_change_lines
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
)
from memprof.units import format_bytes, format_ms, format_seconds

if TYPE_CHECKING:
    from memprof.model import Report, RunResult
    from memprof.model.ops import OpStats

# The device-wide columns of a runs table, when some run knows them (a live CUDA run): the
# first to go when the terminal is narrow is live at start, the last the footprint (the device
# lines below the table give footprint and reserved against the device's memory anyway).
_MEMORY_DROP = {"footprint_bytes": 1, "live_at_start_bytes": 7, "reserved_peak_bytes": 2}


def _delta(nbytes: int) -> tuple[str, str | None]:
    """A signed size, green when it lowers memory, red when it raises it."""
    return (format_bytes(nbytes, signed=True), "green" if nbytes < 0 else "red" if nbytes > 0 else None)


def heading(report: Report, width: int) -> list[Line]:
    env = report.environment
    text = f"memprof: {report.target} on {report.device} (torch {env.get('torch', '?')})"
    return paragraph(text, width, "bold")


def runs_table(report: Report, width: int) -> list[Line]:
    """One row per run, with footprint, live at start and reserved peak where some run knows
    them; the failed runs' messages follow the table."""
    compiled = any(run.compile_seconds is not None for run in report.runs.values())
    extra = memory_columns(report.runs.values())
    columns = [
        Column("run", shrink=True, min_width=12),
        Column("peak", "right"),
        *(Column(header, "right", drop=_MEMORY_DROP[attr]) for header, attr in extra),
        Column("allocated", "right", drop=3),
        Column("net", "right", drop=5),
        Column("inputs", "right", drop=6),
        Column("wall/call", "right"),
        *([Column("compile", "right", drop=4)] if compiled else []),
        Column("peak during", shrink=True, min_width=32),
    ]
    table = Table(columns)
    failures: list[Line] = []
    for label, run in report.runs.items():
        if run.failed:
            table.add(label, ("failed", "red"), *([""] * (len(columns) - 2)))
            failures += paragraph(f"{label} failed: {run.failed}", width, "red")
            continue
        cells: list[str | Segment] = [
            label,
            (format_bytes(run.peak_bytes), "bold"),
            *(format_bytes(getattr(run, attr)) for _, attr in extra),
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
    if any(run.wall_timing == "profiled" for run in runs):
        text = "wall/call: timed with the profiler on, which slows calls unevenly"
    elif all(run.wall_timing == "warm-up" for run in runs):
        text = "wall/call: the warm-up call's, without the profiler (a call over 1 s is timed once)"
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


def device_lines(report: Report, width: int) -> list[Line]:
    """Each run's memory against its device's (when known), after a blank line."""
    lines = [line for run in report.ok_runs() if (line := recorded.device_line(run))]
    return [[], *(row for line in lines for row in paragraph(line, width))] if lines else []


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
        chain = table.chains.get(op.name, "")
        layout.add(
            op.name,
            _size(op.base, "peak_bytes"),
            _size(op.other, "peak_bytes"),
            _delta(op.peak_bytes_delta),
            _size(op.base, "self_bytes"),
            _size(op.other, "self_bytes"),
            ("; ".join(part for part in (chain, op_note(diff, op)) if part), "dim"),
        )
    return layout.lines(width)


def at_peak_section(report: Report, width: int) -> list[Line]:
    """Each explained run's "At the peak" (:func:`at_peak_lines`), after a blank line."""
    lines: list[Line] = []
    for view in at_peak_views(report, "terminal"):
        lines += [[], *at_peak_lines(view, width)]
    return lines


def at_peak_lines(view: AtPeakView, width: int) -> list[Line]:
    """An explained run's "At the peak": the footprint and its categories, the largest entries
    (bytes, category, module, op, and the line that made each: under its row when the terminal
    is narrow), the modules holding most, and the kernels of compiled code."""
    run = view.run
    assert run.at_peak is not None
    lines = paragraph(f"At the peak of {run.label}: {footprint_text(run)}", width, "bold")
    lines += paragraph(f"by category: {categories_text(run.at_peak.by_category)}", width)
    calls = calls_text(run)
    if calls:
        lines += paragraph(calls, width)
    table = Table(
        [
            Column("bytes", "right"),
            Column("category"),
            Column("module", shrink=True, min_width=16),
            Column("line", detach=True),
            Column("op", shrink=True, min_width=20),
        ]
    )
    for entry in view.entries:
        table.add(
            (format_bytes(entry.bytes), "bold"),
            entry.category + (f" x{entry.count}" if entry.count > 1 else ""),
            module_text(entry.module, entry.phase),
            line_text(entry, 32),
            shorten(entry.op, 40) or "-",
        )
    for u in view.unattributed:
        table.add(format_bytes(u.bytes), "other", "-", f"not attributed: {u.reason}", "-")
    lines += [[], *table.lines(width)]
    if view.hidden_entries:
        lines += paragraph(
            f"... {view.hidden_entries} more entries, {format_bytes(view.hidden_bytes)} in all "
            "(the JSON, HTML and at-peak CSV reports list every one)",
            width,
            "dim",
        )
    if view.groups:
        lines += [[], *_groups_table(view, width)]
    elif view.modules:
        lines += [[], *_modules_table(view, width)]
    if view.kernels:
        lines += [[], *_kernels_table(view, width)]
    return lines


def _groups_table(view: AtPeakView, width: int) -> list[Line]:
    """The modules grouped by layer kind (``run.module_groups``)."""
    rows = [(group_text(g), g.calls, g.at_peak_bytes, g.peak_bytes, g.allocated_bytes) for g in view.groups]
    lines = _module_rows(f"modules {grouping_text(view.groups)}", rows, width)
    if view.hidden_groups:
        more = f"... {view.hidden_groups} more groups (the JSON and HTML reports list every one)"
        lines += paragraph(more, width, "dim")
    return lines


def _modules_table(view: AtPeakView, width: int) -> list[Line]:
    rows = [
        (
            module_text(m.module, m.phase if m.phase != "forward" else "", m.module_class),
            m.calls,
            m.at_peak_bytes,
            m.peak_bytes,
            m.allocated_bytes,
        )
        for m in view.modules
    ]
    return _module_rows("module (submodules included)", rows, width)


def _module_rows(header: str, rows: list[tuple[str, int, int, int, int]], width: int) -> list[Line]:
    """(name, calls, live at peak, peak inside, allocated) rows under ``header``."""
    table = Table(
        [
            Column(header, shrink=True, min_width=16),
            Column("calls", "right", drop=2),
            Column("live at peak", "right"),
            Column("peak inside", "right"),
            Column("allocated", "right", drop=1),
        ]
    )
    for name, calls, at_peak, peak, allocated in rows:
        table.add(
            name, str(calls), (format_bytes(at_peak), "bold"), format_bytes(peak), format_bytes(allocated)
        )
    return table.lines(width)


def _kernels_table(view: AtPeakView, width: int) -> list[Line]:
    table = Table(
        [
            Column("kernel", shrink=True, min_width=24),
            Column("calls", "right", drop=1),
            Column("produces", "right"),
            Column("live at peak", "right"),
            Column("eager ops it replaces", detach=True),
        ]
    )
    for k in view.kernels:
        table.add(
            shorten(k.name, 48) + (" (backward)" if k.phase == "backward" else ""),
            str(k.calls),
            format_bytes(k.allocated_bytes),
            (format_bytes(k.at_peak_bytes), "bold"),
            # Nothing under the row of a kernel that replaced no eager op (an extern kernel).
            (", ".join(op.removeprefix("aten::") for op in k.replaces), "dim"),
        )
    return table.lines(width)


def op_section(
    report: Report, sort: str, top: int, width: int, *, skip_empty: bool = False, chains: bool = False
) -> list[Line]:
    """The top ops by ``sort``: exactly ``top`` rows (fewer when there are fewer ops), and a
    line saying which ops were left out as carrying nothing (see :mod:`memprof.report.rows`).
    ``skip_empty``: no table for a run without ops (a snapshot's); ``chains``: a comparison's
    wrappers shown, each with what it wraps."""
    lines: list[Line] = []
    for table in op_tables(report, sort, top, chains=chains):
        if isinstance(table, DiffTable):
            title = f"Top {top} ops by {sort} bytes, {table.diff.base} vs {table.diff.other}:"
            body = _diff_ops(table, width)
        elif skip_empty and not table.run.op_stats:
            continue
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


def conclusion_section(groups: tuple[tuple[str, ...], ...], width: int) -> list[Line]:
    """Each comparison's verdict and summary (``groups``, from
    :func:`memprof.report.rows.conclusions`), in order, a blank line between comparisons."""
    lines: list[Line] = []
    for group in groups:
        lines.append([])
        verdict, *rest = group
        lines += paragraph(verdict, width, "bold")
        for line in rest:
            lines += paragraph(line, width)
    return lines


# ---------------------------------------------------------------------------------------------
# Reports of several ranks


def ranks_table(view: RankView, width: int) -> list[Line]:
    """One row per ranked run: peak, footprint and reserved (columns shown where known), wall
    time per call, the op at the peak; the failed runs' messages follow the table."""
    summary = view.summary
    extra = size_columns(summary)
    drops = {"footprint_bytes": 2, "reserved_peak_bytes": 1}
    columns = [
        Column("rank", "right"),
        Column("run", shrink=True, min_width=12),
        Column("peak", "right"),
        *(Column(heading, "right", drop=drops.get(column, 1)) for column, heading in extra),
        Column("wall/call", "right", drop=3),
        Column("peak during", shrink=True, min_width=24),
    ]
    table = Table(columns)
    failures: list[Line] = []
    for row in summary.rows:
        if not row.ok:
            table.add(str(row.rank), row.label, ("failed", "red"), *([""] * (len(columns) - 3)))
            failures += paragraph(f"{row.label} failed: {row.error or ''}", width, "red")
            continue
        table.add(
            str(row.rank),
            row.label,
            (format_bytes(row.peak_bytes or 0), "bold"),
            *(format_bytes(getattr(row, column)) for column, _ in extra),
            format_ms(row.wall_ms),
            row.peak_op or "-",
        )
    return table.lines(width) + failures


def rank_section(view: RankView, width: int) -> list[Line]:
    """Every rank's row, the imbalance of their peaks, and which rank the rest details."""
    lines = ranks_table(view, width)
    if view.summary.imbalances:
        lines += [[], *(row for i in view.summary.imbalances for row in paragraph(i.line, width, "bold"))]
    return [*lines, [], *paragraph(f"Details of {view.heading}:", width, "bold")]


# ---------------------------------------------------------------------------------------------
# The summary


def terminal_lines(
    report: Report,
    *,
    sort: str = "peak",
    top: int = 15,
    width: int = DEFAULT_WIDTH,
    rank: int | None = None,
    chains: bool = False,
) -> list[Line]:
    """The summary as styled lines, at most ``width`` characters each. A report of several
    ranks starts with every rank's row and their imbalance, then details one rank's runs (the
    highest peak's, or ``rank``); its notes cover every rank. ``chains``: see :func:`op_section`."""
    if report.recorded:
        return recorded_lines(report, sort=sort, top=top, width=width, rank=rank, chains=chains)
    if estimate.is_estimate(report):
        return estimate_lines(report, sort=sort, top=top, width=width, chains=chains)
    everything, view = report, rank_view(report, rank)
    lines = heading(report, width)
    if view is not None:
        lines += [[], *rank_section(view, width)]
        report = view.report
    return [
        *lines,
        [],
        *runs_table(report, width),
        *device_lines(report, width),
        *at_peak_section(report, width),
        *op_section(report, sort, top, width, chains=chains),
        *fused_section(report, top, width),
        *notes_section(everything, width),
        *conclusion_section(conclusions(report), width),
        *(line for diff in report.diffs[:1] for line in peak_change_lines(diff, width)),
    ]


def diff_lines(
    report: Report, *, sort: str = "peak", top: int = 15, width: int = DEFAULT_WIDTH, chains: bool = False
) -> list[Line]:
    """What ``memprof diff`` prints for a report of two runs: the runs, their ops side by side,
    the fused kernels, notes, the verdict and what changed at the peak (without each run's
    own "At the peak" section: ``--json``, ``--markdown`` and ``--html`` keep those)."""
    return [
        *heading(report, width),
        [],
        *runs_table(report, width),
        *device_lines(report, width),
        *op_section(report, sort, top, width, chains=chains),
        *fused_section(report, top, width),
        *notes_section(report, width),
        *conclusion_section(conclusions(report), width),
        *(line for diff in report.diffs[:1] for line in peak_change_lines(diff, width)),
    ]


def render_terminal(
    report: Report,
    *,
    sort: str = "peak",
    top: int = 15,
    rank: int | None = None,
    width: int | None = None,
    chains: bool = False,
) -> str:
    """The summary printed by ``memprof run``, ``memprof compare`` and ``memprof analyze``, as
    plain text at most ``width`` characters wide (default
    :data:`memprof.report.layout.DEFAULT_WIDTH`); ``rank``: which rank of a report of several
    ranks to detail; ``chains``: a comparison's wrappers shown, each with what it wraps."""
    width = width or DEFAULT_WIDTH
    return plain(terminal_lines(report, sort=sort, top=top, width=width, rank=rank, chains=chains))


def print_terminal(
    report: Report, *, sort: str = "peak", top: int = 15, rank: int | None = None, chains: bool = False
) -> None:
    """Print the summary to stdout at the terminal's width: in colour on a terminal (rich),
    plain text otherwise."""
    print_lines(terminal_lines(report, sort=sort, top=top, width=terminal_width(), rank=rank, chains=chains))


def print_lines(lines: list[Line]) -> None:
    """Print styled lines to stdout: in colour on a terminal (rich), plain text otherwise."""
    width = terminal_width()
    if sys.stdout.isatty():
        from rich.console import Console

        Console(width=width, soft_wrap=True, highlight=False).print(to_text(lines), end="")
    else:
        sys.stdout.write(plain(lines))
        sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# Runs read from recordings (memprof analyze): chrome traces and CUDA memory snapshots

# The recorded runs table drops, when narrow, allocated first, then live at start, reserved.
_RECORDED_DROP = {"allocated_bytes": 3, "live_at_start_bytes": 2, "reserved_peak_bytes": 1}


def recorded_runs_table(report: Report, width: int) -> list[Line]:
    """One row per run: its peak above the recording's start, footprint, live at start, reserved
    peak, allocated, and the op (or, for a snapshot, the allocation site) at the peak."""
    columns = [
        Column("run", shrink=True, min_width=12),
        *(
            Column(header, "right", drop=_RECORDED_DROP.get(attr, 0))
            for header, attr in recorded.RECORDED_COLUMNS
        ),
        Column("peak during", shrink=True, min_width=24),
    ]
    table = Table(columns)
    for label, run in report.runs.items():
        sizes = [format_bytes(getattr(run, attr)) for _, attr in recorded.RECORDED_COLUMNS]
        table.add(label, (sizes[0], "bold"), *sizes[1:], peak_during(run))
    return table.lines(width)


# The what-if table's columns (recorded.WHAT_IF_HEADERS, in order): the settings and the reserve
# always; the out-of-memory verdict last to go.
_WHAT_IF_DROPS = (0, 0, 3, 2, 5, 4, 1)


def snapshot_sections(run: RunResult, width: int) -> list[Line]:
    """A snapshot run's details: the reserve, trace, fragmentation, model check, out-of-memory
    events; the sites live at the peak; the what-if replays."""
    lines: list[Line] = [[], *paragraph(f"{run.label}, snapshot:", width, "bold")]
    for line in recorded.snapshot_lines(run):
        lines += paragraph(line, width, indent="  ", hanging="    ")
    sites = recorded.site_rows(run)
    if sites:
        table = Table(
            [
                Column("site", shrink=True, min_width=30),
                Column("bytes", "right"),
                Column("of peak", "right"),
                Column("blocks", "right", drop=1),
            ]
        )
        for row in sites:
            table.add(row.site, format_bytes(row.bytes), row.share, f"{row.count:,}")
        lines += [[], *paragraph(f"{recorded.sites_title(run)}:", width, "bold"), *table.lines(width)]
    what_if = recorded.what_if_rows(run)
    if what_if:
        headers = recorded.WHAT_IF_HEADERS
        columns = [
            Column(header, "left" if n == 0 else "right", drop=drop, shrink=n == 0, min_width=24)
            for n, (header, drop) in enumerate(zip(headers, _WHAT_IF_DROPS, strict=True))
        ]
        table = Table(columns)
        for cells in what_if:
            table.add(*cells)
        lines += [[], *paragraph(f"{recorded.what_if_title(run)}:", width, "bold"), *table.lines(width)]
    return lines


def recorded_lines(
    report: Report,
    *,
    sort: str = "peak",
    top: int = 15,
    width: int = DEFAULT_WIDTH,
    rank: int | None = None,
    chains: bool = False,
) -> list[Line]:
    """The summary of a report read from recordings: what was read, the runs, each run's share
    of its device, snapshot details, each run's top ops, notes, and last each run's peak (and
    each comparison's verdict). Per-rank recordings start with every rank's row and their
    imbalance, then detail one rank (the highest peak's, or ``rank``)."""
    lines = paragraph(f"memprof: {recorded.source_line(report)}", width, "bold")
    view = rank_view(report, rank)
    if view is not None:
        lines += [[], *rank_section(view, width)]
        report = view.report
    lines += [[], *recorded_runs_table(report, width), *device_lines(report, width)]
    for run in report.ok_runs():
        if run.snapshot is not None:
            lines += snapshot_sections(run, width)
    lines += op_section(report, sort, top, width, skip_empty=True, chains=chains)
    lines += notes_section(report, width)
    return lines + conclusion_section(recorded.conclusions(report), width)


# ---------------------------------------------------------------------------------------------
# Estimates (memprof estimate)

# The estimate runs table (estimate.RUN_HEADERS) drops, when narrow, live at start first, then
# net, allocated, reserved peak; never the footprint (the one-line answer's figure).
_ESTIMATE_DROPS = (0, 0, 0, 4, 1, 2, 3, 0)


def estimate_runs_table(report: Report, width: int) -> list[Line]:
    """One row per estimated run, without times (nothing real ran); failed runs' messages follow."""
    columns = [
        Column(
            header,
            "left" if n in (0, 7) else "right",
            drop=drop,
            shrink=n in (0, 7),
            min_width=32 if n == 7 else 12,
        )
        for n, (header, drop) in enumerate(zip(estimate.RUN_HEADERS, _ESTIMATE_DROPS, strict=True))
    ]
    table = Table(columns)
    failures: list[Line] = []
    for run in report.runs.values():
        if run.failed:
            table.add(run.label, ("failed", "red"), *([""] * (len(columns) - 2)))
            failures += paragraph(f"{run.label} failed: {run.failed}", width, "red")
            continue
        label, peak, *rest = estimate.run_cells(run)
        table.add(label, (peak, "bold"), *rest)
    return table.lines(width) + failures


def sweep_section(report: Report, width: int) -> list[Line]:
    """A sweep's table (values in order, then the search's) and its verdict."""
    assert report.sweep is not None
    sweep = report.sweep
    headers = estimate.sweep_headers(sweep)
    # When narrow, the search's words move under their row first, then the line's column goes.
    columns = [
        Column(
            header,
            "left" if n == 0 or n >= len(headers) - 2 else "right",
            drop=1 if header == "line" else 0,
            shrink=n == 0,
            min_width=12,
            detach=n == len(headers) - 1,
        )
        for n, header in enumerate(headers)
    ]
    table = Table(columns)
    for row in estimate.sweep_rows(sweep):
        table.add(*estimate.sweep_cells(row, sweep))
    return [[], *paragraph(estimate.sweep_title(sweep), width, "bold"), *table.lines(width)]


def estimate_lines(
    report: Report, *, sort: str = "peak", top: int = 15, width: int = DEFAULT_WIDTH, chains: bool = False
) -> list[Line]:
    """The summary printed by ``memprof estimate``: the runs, the sweep's table or the top ops
    of a single estimate, what ops allocate inside, notes, and last the one-line answer (or the
    sweep's verdict)."""
    lines = paragraph(f"memprof: {estimate.title(report)}", width, "bold")
    lines += [[], *estimate_runs_table(report, width)]
    if report.sweep is not None:
        lines += sweep_section(report, width)
    else:
        lines += op_section(report, sort, top, width, chains=chains)
        for run in report.ok_runs()[:1]:
            line = estimate.workspace_line(run)
            lines += [[], *paragraph(line, width)] if line else []
    notes = [
        row
        for whose, note in estimate.notes(report)
        for row in paragraph(f"note ({whose}): {note}", width, "yellow")
    ]
    lines += [[], *notes] if notes else []
    return lines + conclusion_section(estimate.conclusions(report), width)
