"""The terminal summary: runs, top ops (side by side when comparing), fused kernels, verdict,
notes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memprof.analysis.diff import op_note
from memprof.report import estimate, recorded
from memprof.report.ranks import RankView, rank_view, size_columns
from memprof.report.recorded import memory_columns
from memprof.report.rows import DiffTable, FusedRow, RunTable, fused_rows, op_tables, replaced_text
from memprof.text import tabulate, visible
from memprof.units import format_bytes, format_ms, format_seconds

if TYPE_CHECKING:
    from memprof.analysis.ops import OpStats
    from memprof.analysis.ranks import RankSummary
    from memprof.model import Report, RunResult


def runs_table(report: Report) -> str:
    extra = memory_columns(report.runs.values())  # footprint, live at start, reserved: where known
    rows = []
    for label, run in report.runs.items():
        if run.failed:
            rows.append([label, "failed", *[""] * len(extra), "", "", "", "", "", run.failed])
            continue
        rows.append(
            [
                label,
                format_bytes(run.peak_bytes),
                *(format_bytes(getattr(run, attr)) for _, attr in extra),
                format_bytes(run.allocated_bytes),
                format_bytes(run.net_bytes, signed=True),
                format_bytes(run.inputs_bytes),
                format_ms(run.wall_ms),
                format_seconds(run.compile_seconds),
                run.peak_op or "-",
            ]
        )
    headers = ["run", "peak", *(header for header, _ in extra)]
    headers += ["allocated", "net", "inputs", "wall/call", "compile", "peak during"]
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def _size(stats: OpStats | None, column: str) -> str:
    return "-" if stats is None else format_bytes(getattr(stats, column))


def _single_ops(table: RunTable) -> str:
    rows = [
        [
            op.name,
            op.calls,
            format_bytes(op.peak_bytes),
            format_bytes(op.self_bytes),
            format_bytes(op.total_bytes),
            format_bytes(op.allocated_bytes),
            format_ms(op.total_us / 1000),
        ]
        for op in table.rows
    ]
    headers = ["op", "calls", "peak", "self", "total", "allocated", "cpu time"]
    return tabulate(
        rows, headers=headers, tablefmt="simple", disable_numparse=True, colalign=("left",) + ("right",) * 6
    )


def _diff_ops(table: DiffTable) -> str:
    diff = table.diff
    a, b = diff.base, diff.other
    rows = [
        [
            op.name,
            _size(op.base, "peak_bytes"),
            _size(op.other, "peak_bytes"),
            format_bytes(op.peak_bytes_delta, signed=True),
            _size(op.base, "self_bytes"),
            _size(op.other, "self_bytes"),
            op_note(diff, op),
        ]
        for op in table.rows
    ]
    headers = ["op", f"peak {a}", f"peak {b}", "delta", f"self {a}", f"self {b}", ""]
    return tabulate(
        rows,
        headers=headers,
        tablefmt="simple",
        disable_numparse=True,
        colalign=("left",) + ("right",) * 5 + ("left",),
    )


def _fused(rows: tuple[FusedRow, ...]) -> str:
    # One replaced op per line: a kernel may replace many.
    table = [
        [row.run, row.kernel, format_bytes(row.peak_bytes), replaced_text(row).replace(", ", "\n")]
        for row in rows
    ]
    headers = ["run", "fused kernel", "kernel peak", "aten ops it replaced"]
    return tabulate(
        table,
        headers=headers,
        tablefmt="simple",
        disable_numparse=True,
        colalign=("left", "left", "right", "left"),
    )


def ranks_table(summary: RankSummary) -> str:
    """One row per ranked run: peak, footprint and reserved (columns shown where known), wall
    time per call, the op at the peak; a failed run says why."""
    extra = size_columns(summary)
    rows = []
    for row in summary.rows:
        if not row.ok:
            rows.append([str(row.rank), row.label, "failed", *([""] * len(extra)), "", row.error or ""])
            continue
        sizes = [format_bytes(getattr(row, c)) if getattr(row, c) is not None else "-" for c, _ in extra]
        rows.append(
            [
                str(row.rank),
                row.label,
                format_bytes(row.peak_bytes or 0),
                *sizes,
                format_ms(row.wall_ms),
                row.peak_op or "-",
            ]
        )
    headers = ["rank", "run", "peak", *(h for _, h in extra), "wall/call", "peak during"]
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def rank_lines(view: RankView) -> list[str]:
    """Every rank's row, the imbalance of their peaks, and which rank the rest details."""
    lines = [ranks_table(view.summary)]
    if view.summary.imbalances:
        lines += ["", *(imbalance.line for imbalance in view.summary.imbalances)]
    return [*lines, "", f"Details of {view.heading}:"]


def render_terminal(report: Report, *, sort: str = "peak", top: int = 15, rank: int | None = None) -> str:
    """The summary printed by ``memprof run``, ``memprof compare`` and ``memprof analyze``. A
    report of several ranks starts with every rank's row and their imbalance, then details one
    rank's runs (the highest peak's, or ``rank``)."""
    if report.recorded:
        return render_recorded(report, sort=sort, top=top, rank=rank)
    if estimate.is_estimate(report):
        return render_estimate(report, sort=sort, top=top)
    env = report.environment
    lines = [f"memprof: {report.target} on {report.device} (torch {env.get('torch', '?')})", ""]
    everything, view = report, rank_view(report, rank)
    if view is not None:
        lines += [*rank_lines(view), ""]
        report = view.report
    lines.append(runs_table(report))
    lines += device_lines(report)
    for table in op_tables(report, sort, top):
        if isinstance(table, DiffTable):
            title = f"Top {top} ops by {sort} bytes, {table.diff.base} vs {table.diff.other}:"
            lines += ["", title, _diff_ops(table)]
        else:
            lines += ["", f"Top {top} ops of {table.run.label} by {sort} bytes:", _single_ops(table)]
    for extra in report.diffs[1:]:
        lines.append(f"{extra.other}: {extra.verdict}")
    fused = fused_rows(report)
    if fused:
        lines += ["", "Fused kernels:", _fused(fused)]
    verdict = report.verdict()
    if verdict:
        lines += ["", verdict]
    # Memory next to time for every comparison: most techniques trade one for the other.
    lines += [diff.summary for diff in report.diffs]
    for run in everything.runs.values():
        for note in run.notes:
            lines.append(f"note ({run.label}): {note}")
    return visible("\n".join(lines)) + "\n"


# ---------------------------------------------------------------------------------------------
# Runs read from recordings (memprof analyze): chrome traces and CUDA memory snapshots


def device_lines(report: Report) -> list[str]:
    """Each run's memory against its device's (when known), after a blank line."""
    lines = [line for run in report.ok_runs() if (line := recorded.device_line(run))]
    return ["", *lines] if lines else []


def recorded_runs_table(report: Report) -> str:
    """One row per run: its peak above the recording's start, footprint, live at start, reserved
    peak, allocated, and the op (or, for a snapshot, the allocation site) at the peak."""
    columns = recorded.RECORDED_COLUMNS
    rows = []
    for label, run in report.runs.items():
        sizes = [format_bytes(getattr(run, attr)) for _, attr in columns]
        rows.append([label, *sizes, recorded.peak_during(run)])
    headers = ["run", *(header for header, _ in columns), "peak during"]
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def snapshot_sections(run: RunResult) -> list[str]:
    """A snapshot run's details: the reserve, trace, fragmentation, model check, out-of-memory
    events; the sites live at the peak; the what-if replays."""
    lines = ["", f"{run.label}, snapshot:"]
    lines += [f"  {line}" for line in recorded.snapshot_lines(run)]
    sites = recorded.site_rows(run)
    if sites:
        table = [[row.site, format_bytes(row.bytes), row.share, f"{row.count:,}"] for row in sites]
        lines += ["", f"{recorded.sites_title(run)}:"]
        lines.append(
            tabulate(
                table,
                headers=["site", "bytes", "of peak", "blocks"],
                tablefmt="simple",
                disable_numparse=True,
                colalign=("left", "right", "right", "right"),
            )
        )
    what_if = recorded.what_if_rows(run)
    if what_if:
        lines += ["", f"{recorded.what_if_title(run)}:"]
        lines.append(
            tabulate(
                what_if,
                headers=list(recorded.WHAT_IF_HEADERS),
                tablefmt="simple",
                disable_numparse=True,
                colalign=("left",) + ("right",) * (len(recorded.WHAT_IF_HEADERS) - 1),
            )
        )
    return lines


def render_recorded(report: Report, *, sort: str = "peak", top: int = 15, rank: int | None = None) -> str:
    """The summary printed by ``memprof analyze``: what was read, the runs, each run's share of
    its device, snapshot details, each run's top ops, notes. Per-rank recordings start with
    every rank's row and their imbalance, then detail one rank (the highest peak's, or ``rank``)."""
    lines = [f"memprof: {recorded.source_line(report)}", ""]
    view = rank_view(report, rank)
    if view is not None:
        lines += [*rank_lines(view), ""]
        report = view.report
    lines.append(recorded_runs_table(report))
    lines += device_lines(report)
    for run in report.ok_runs():
        if run.snapshot is not None:
            lines += snapshot_sections(run)
    for table in op_tables(report, sort, top):
        if isinstance(table, DiffTable):  # recordings of one device, compared (before / after)
            title = f"Top {top} ops by {sort} bytes, {table.diff.base} vs {table.diff.other}:"
            lines += ["", title, _diff_ops(table)]
        elif table.rows:
            lines += ["", f"Top {top} ops of {table.run.label} by {sort} bytes:", _single_ops(table)]
    if report.diffs:
        lines += ["", *(diff.verdict for diff in report.diffs)]
    lines.append("")
    for run in report.runs.values():
        lines += [f"note ({run.label}): {note}" for note in run.notes]
    return visible("\n".join(lines).rstrip("\n")) + "\n"


# ---------------------------------------------------------------------------------------------
# Estimates (memprof estimate)


def sweep_table(report: Report) -> str:
    assert report.sweep is not None
    sweep = report.sweep
    rows = [estimate.sweep_cells(row, sweep) for row in estimate.sweep_rows(sweep)]
    headers = estimate.sweep_headers(sweep)
    return tabulate(
        rows,
        headers=list(headers),
        tablefmt="simple",
        disable_numparse=True,
        colalign=("left",) + ("right",) * (len(headers) - 3) + ("left", "left"),
    )


def render_estimate(report: Report, *, sort: str = "peak", top: int = 15) -> str:
    """The summary printed by ``memprof estimate``: the runs, the one-line answer (or the
    sweep's table and verdict), the top ops of a single estimate, what ops allocate inside,
    notes."""
    runs = tabulate(
        [estimate.run_cells(run) for run in report.runs.values()],
        headers=list(estimate.RUN_HEADERS),
        tablefmt="simple",
        disable_numparse=True,
    )
    lines = [f"memprof: {estimate.title(report)}", "", runs]
    answer = estimate.answer(report)
    if answer:
        lines += ["", answer]
    if report.sweep is not None:
        lines += ["", estimate.sweep_title(report.sweep), sweep_table(report), "", report.sweep.verdict]
    else:
        for table in op_tables(report, sort, top):
            if isinstance(table, RunTable):
                lines += ["", f"Top {top} ops of {table.run.label} by {sort} bytes:", _single_ops(table)]
    for run in report.ok_runs()[:1] if report.sweep is None else ():
        line = estimate.workspace_line(run)
        if line:
            lines += ["", line]
    lines.append("")
    lines += [f"note ({whose}): {note}" for whose, note in estimate.notes(report)]
    return visible("\n".join(lines).rstrip("\n")) + "\n"
