"""The terminal summary: runs, top ops (side by side when comparing), verdict, notes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd
from tabulate import tabulate

from memprof.analysis.diff import op_note
from memprof.units import format_bytes, format_ms, format_seconds

if TYPE_CHECKING:
    from memprof.model import Report, RunResult

SORT_COLUMNS = {"peak": "peak_bytes", "self": "self_bytes", "allocated": "allocated_bytes"}


def runs_table(report: Report) -> str:
    rows = []
    for label, run in report.runs.items():
        if run.failed:
            rows.append([label, "failed", "", "", "", "", "", run.failed])
            continue
        rows.append(
            [
                label,
                format_bytes(run.peak_bytes),
                format_bytes(run.allocated_bytes),
                format_bytes(run.net_bytes, signed=True),
                format_bytes(run.inputs_bytes),
                format_ms(run.wall_ms),
                format_seconds(run.compile_seconds),
                run.peak_op or "-",
            ]
        )
    headers = ["run", "peak", "allocated", "net", "inputs", "wall/call", "compile", "peak during"]
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def _single_ops(run: RunResult, sort: str, top: int) -> str:
    ops = run.ops_sorted(sort).head(top)
    rows = [
        [
            row.name,
            row.calls,
            format_bytes(row.peak_bytes),
            format_bytes(row.self_bytes),
            format_bytes(row.total_bytes),
            format_bytes(row.allocated_bytes),
            format_ms(row.total_us / 1000),
        ]
        for row in ops.itertuples(index=False)
    ]
    headers = ["op", "calls", "peak", "self", "total", "allocated", "cpu time"]
    return tabulate(
        rows, headers=headers, tablefmt="simple", disable_numparse=True, colalign=("left",) + ("right",) * 6
    )


def _diff_ops(report: Report, sort: str, top: int) -> str:
    diff = report.diff
    assert diff is not None
    a, b = diff.base, diff.other
    ops = diff.ops
    column = SORT_COLUMNS[sort]
    key = ops[[f"{column}_{a}", f"{column}_{b}"]].abs().fillna(0).max(axis=1)
    ordered = ops.loc[key.sort_values(ascending=False, kind="stable").index]
    # Fused kernels explain where the eager ops went: always show them, even when they allocate nothing.
    kernels = ordered[ordered["fused_ops"].map(bool)]
    shown = ordered.head(top)
    ops = pd.concat([shown, kernels[~kernels.index.isin(shown.index)]])

    def size(value: float) -> str:
        return "-" if isinstance(value, float) and math.isnan(value) else format_bytes(int(value))

    rows = []
    for row in ops.to_dict("records"):
        note = op_note(row)
        rows.append(
            [
                row["name"],
                size(row[f"peak_bytes_{a}"]),
                size(row[f"peak_bytes_{b}"]),
                format_bytes(row["peak_bytes_delta"], signed=True),
                size(row[f"self_bytes_{a}"]),
                size(row[f"self_bytes_{b}"]),
                note,
            ]
        )
    headers = ["op", f"peak {a}", f"peak {b}", "delta", f"self {a}", f"self {b}", ""]
    return tabulate(
        rows,
        headers=headers,
        tablefmt="simple",
        disable_numparse=True,
        colalign=("left",) + ("right",) * 5 + ("left",),
    )


def render_terminal(report: Report, *, sort: str = "peak", top: int = 15) -> str:
    """The summary printed by ``memprof run`` and ``memprof compare``."""
    env = report.environment
    lines = [f"memprof: {report.target} on {report.device} (torch {env.get('torch', '?')})", ""]
    lines.append(runs_table(report))
    ok = report.ok_runs()
    if len(ok) >= 2:
        lines += [
            "",
            f"Top {top} ops by {sort} bytes, {ok[0].label} vs {ok[1].label}:",
            _diff_ops(report, sort, top),
        ]
        for extra in report.diffs()[1:]:
            lines.append(f"{extra.other}: {extra.verdict}")
    elif ok:
        lines += ["", f"Top {top} ops of {ok[0].label} by {sort} bytes:", _single_ops(ok[0], sort, top)]
    verdict = report.verdict()
    if verdict:
        lines += ["", verdict]
    # Memory next to time for every comparison: most techniques trade one for the other.
    lines += [diff.summary for diff in report.diffs()]
    for run in report.runs.values():
        for note in run.notes:
            lines.append(f"note ({run.label}): {note}")
    return "\n".join(lines) + "\n"
