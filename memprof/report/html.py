"""HTML: one self-contained file (inline CSS, inline SVG chart, a small inline script).

It makes no network request: no CDN, no web font, no image file. A Content-Security-Policy
in the page forbids any other source, so it opens the same from ``file://`` offline, from a CI
artifact or an e-mail attachment. Every name is HTML-escaped: op names and ``record_function``
labels can hold ``<``, ``>``, ``&`` and quotes.

The memory timeline is drawn by matplotlib (the ``html`` extra) into SVG, without pyplot and
without touching matplotlib's global backend.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from memprof.analysis.diff import op_note
from memprof.analysis.timeline import downsample_timeline
from memprof.errors import UsageError, param
from memprof.report import estimate, recorded
from memprof.report.ranks import RankView, rank_view, size_columns
from memprof.report.recorded import memory_columns
from memprof.report.rows import DiffTable, RunTable, fused_rows, op_tables, replaced_text
from memprof.text import visible
from memprof.units import format_bytes, format_ms, format_seconds

if TYPE_CHECKING:
    from memprof.analysis.ranks import RankSummary
    from memprof.model import Report, RunResult

INSTALL_HINT = "pip install matplotlib"

# Section ids: stable anchors, also what the sample-report test compares.
SECTION_IDS = ("summary", "verdict", "runs", "timeline", "ops", "fused", "notes", "torch-table")
# A report of several ranks has one more, after the summary.
RANKS_SECTION_ID = "ranks"
RECORDED_SECTION_IDS = ("summary", "verdict", "runs", "timeline", "snapshot", "sites", "ops", "notes")
"""The sections of a report read from recordings (snapshot and sites when a snapshot is among
them, ops when a trace is)."""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def check_available() -> None:
    """Raise :class:`UsageError` (exit 2) when matplotlib, needed for the chart, is missing.

    Called before profiling, so a missing extra does not cost a whole run."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(f"the HTML report needs matplotlib for the memory timeline chart; {INSTALL_HINT}")


def _e(value: object) -> str:
    return html.escape(visible(str(value)), quote=True)


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _size_cell(value: Any, *, signed: bool = False) -> str:
    """A right-aligned size: human text, exact bytes in ``data-sort`` and the tooltip."""
    if _is_missing(value):
        return '<td class="num" data-sort="">-</td>'
    exact = int(value)
    return (
        f'<td class="num" data-sort="{exact}" title="{exact:,} B">'
        f"{_e(format_bytes(exact, signed=signed))}</td>"
    )


def _int_cell(value: Any) -> str:
    if _is_missing(value):
        return '<td class="num" data-sort="">-</td>'
    return f'<td class="num" data-sort="{int(value)}">{int(value):,}</td>'


def _ms_cell(us: Any) -> str:
    if _is_missing(us):
        return '<td class="num" data-sort="">-</td>'
    ms = float(us) / 1000
    return f'<td class="num" data-sort="{float(us):.3f}">{ms:.2f} ms</td>'


def _name_cell(name: str) -> str:
    return f'<td class="name" data-sort="{_e(name)}"><code>{_e(name)}</code></td>'


def _th(label: str, numeric: bool) -> str:
    kind = "num" if numeric else "text"
    return f'<th scope="col" data-type="{kind}" title="Click to sort">{_e(label)}</th>'


# ---------------------------------------------------------------------------------------- chart


def _unit(peak: int) -> tuple[str, int]:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if peak >= scale:
            return unit, scale
    return "B", 1


def timeline_svg(runs: list[RunResult]) -> str:
    """The memory timeline as inline SVG: one panel per run (their scales can differ by 100x),
    live bytes over time since the call started, the peak marked with the op running there."""
    import io

    import matplotlib
    from matplotlib.figure import Figure

    drawn = [r for r in runs if r.timeline.t_ns]
    fig = Figure(figsize=(11.0, 0.6 + 2.3 * len(drawn)), layout="constrained")
    axes = fig.subplots(len(drawn), 1, squeeze=False)[:, 0]
    colours = ("#1f6fb4", "#d9661f", "#2a9d4b", "#9b3fb5", "#8c564b")
    for index, (ax, run) in enumerate(zip(axes, drawn, strict=True)):
        # The analysis keeps at most MAX_POINTS; a timeline from elsewhere is reduced the same way.
        timeline = downsample_timeline(run.timeline)
        ns, values = timeline.t_ns, timeline.bytes
        top = max(max(values), run.peak_bytes, 1)
        unit, scale = _unit(top)
        ms = [t / 1e6 for t in ns]
        ys = [v / scale for v in values]
        colour = colours[index % len(colours)]
        ax.step(ms, ys, where="post", color=colour, linewidth=1.4)
        ax.fill_between(ms, ys, step="post", color=colour, alpha=0.15, linewidth=0)
        peak_index = max(range(len(values)), key=values.__getitem__)
        px, py = ms[peak_index], ys[peak_index]
        ax.plot([px], [py], marker="v", color="#b00020", markersize=8, linestyle="none")
        label = f"peak {format_bytes(run.peak_bytes)}"
        if run.peak_op:
            label += f" during {visible(run.peak_op)}"
        right_half = px > (ms[-1] - ms[0]) / 2 + ms[0] if len(ms) > 1 else False
        ax.annotate(
            label,
            (px, py),
            xytext=(-8 if right_half else 8, -14),
            textcoords="offset points",
            ha="right" if right_half else "left",
            va="top",
            fontsize=9,
            color="#b00020",
            parse_math=False,
        )
        ax.set_ylim(0, top / scale * 1.12)
        ax.set_ylabel(f"live {unit}", parse_math=False)
        ax.set_title(visible(run.label), loc="left", fontsize=10, parse_math=False)
        ax.grid(True, color="#dddddd", linewidth=0.6)
        ax.spines[["top", "right"]].set_visible(False)
    axes[-1].set_xlabel("time since the call started (ms)")
    buffer = io.StringIO()
    # fonttype "none": text stays <text> (no font files, no outlines); a fixed hash salt keeps
    # the ids, and so the sample reports, identical from one rendering to the next.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "memprof"}):
        fig.savefig(
            buffer, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None}
        )
    svg = buffer.getvalue()
    # Drop the XML declaration and the DOCTYPE (which names a DTD URL): inline SVG needs neither.
    return svg[svg.index("<svg") :].strip()


def rank_peaks_svg(summary: RankSummary) -> str:
    """The ranks' peaks as inline SVG: one horizontal bar per successful ranked run, the
    highest of each group of runs marked."""
    import io

    import matplotlib
    from matplotlib.figure import Figure

    rows = [row for row in summary.rows if row.ok and row.peak_bytes is not None]
    highest = {(i.group, i.highest_label) for i in summary.imbalances}
    unit, scale = _unit(max([row.peak_bytes or 0 for row in rows] + [1]))
    fig = Figure(figsize=(11.0, 0.8 + 0.32 * len(rows)), layout="constrained")
    ax = fig.subplots()
    positions = list(range(len(rows)))[::-1]  # rank 0 on top
    values = [(row.peak_bytes or 0) / scale for row in rows]
    colours = ["#b00020" if (row.group, row.label) in highest else "#1f6fb4" for row in rows]
    ax.barh(positions, values, color=colours, height=0.6)
    ax.set_yticks(positions, [visible(row.label) for row in rows], parse_math=False)  # a label is not TeX
    for position, value, row in zip(positions, values, rows, strict=True):
        ax.annotate(
            f" {format_bytes(row.peak_bytes or 0)}",
            (value, position),
            va="center",
            fontsize=9,
            parse_math=False,
        )
    ax.set_xlim(0, max(values + [1e-9]) * 1.15)
    ax.set_xlabel(f"peak ({unit}) above each call's start", parse_math=False)
    ax.grid(True, axis="x", color="#dddddd", linewidth=0.6)
    ax.spines[["top", "right"]].set_visible(False)
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "memprof"}):
        fig.savefig(
            buffer, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None}
        )
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :].strip()


# ---------------------------------------------------------------------------------------- parts


def _summary(report: Report) -> str:
    env = report.environment
    items = [
        ("target", report.target),
        ("device", f"{report.device} ({env['device_name']})" if env.get("device_name") else report.device),
        ("torch", env.get("torch", "?")),
        ("python", env.get("python", "?")),
        ("platform", env.get("platform", "?")),
    ]
    if env.get("cpu_count"):
        items.append(("CPUs", env["cpu_count"]))
    items.append(("date", report.created or "?"))
    known = {"torch", "python", "platform", "device_name", "cpu_count"}
    items += [(key, value) for key, value in sorted(env.items()) if key not in known]
    rows = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items)
    return f'<section id="summary"><dl class="env">{rows}</dl></section>'


def _verdict(report: Report) -> str:
    verdicts = [d.verdict for d in report.diffs]
    ok = report.ok_runs()
    if estimate.is_estimate(report):
        answer = estimate.answer(report)
        verdicts = [answer] if answer else [report.sweep.verdict] if report.sweep is not None else []
    if not verdicts:
        if len(ok) == 1:
            run = ok[0]
            during = f" during {run.peak_op}" if run.peak_op else ""
            verdicts = [f"{run.label}: peak {format_bytes(run.peak_bytes)} above the call's start{during}"]
        else:
            verdicts = ["no run succeeded"]
    lines = "".join(f'<p class="verdict">{_e(v)}</p>' for v in verdicts)
    return f'<section id="verdict">{lines}</section>'


def _ranks(view: RankView) -> str:
    """Every rank's row, the imbalance of their peaks, the peaks as bars, and which rank the
    op tables below detail."""
    import importlib.util

    extra = size_columns(view.summary)
    headers = ["rank", "run", "peak", *(heading for _, heading in extra), "wall/call", "peak during"]
    head = "".join(f'<th scope="col">{h}</th>' for h in headers)
    rows = []
    for row in view.summary.rows:
        if not row.ok:
            rows.append(
                f'<tr class="failed"><td class="num">{row.rank}</td><th scope="row">{_e(row.label)}</th>'
                f'<td colspan="{len(headers) - 2}">failed: {_e(row.error or "")}</td></tr>'
            )
            continue
        sizes = "".join(_size_cell(getattr(row, column)) for column, _ in extra)
        during = f"<code>{_e(row.peak_op)}</code>" if row.peak_op else "-"
        rows.append(
            f'<tr><td class="num">{row.rank}</td><th scope="row">{_e(row.label)}</th>'
            f'{_size_cell(row.peak_bytes)}{sizes}<td class="num">{_e(format_ms(row.wall_ms))}</td>'
            f'<td class="name">{during}</td></tr>'
        )
    lines = "".join(f'<p class="verdict">{_e(i.line)}</p>' for i in view.summary.imbalances)
    chart = ""
    if importlib.util.find_spec("matplotlib") is not None and any(r.ok for r in view.summary.rows):
        label = "; ".join(f"{r.label}: {format_bytes(r.peak_bytes or 0)}" for r in view.summary.rows if r.ok)
        chart = (
            f'<figure class="chart" id="rank-peaks-chart" role="img" aria-label="{_e(label)}">'
            f"{rank_peaks_svg(view.summary)}<figcaption>Peak of each rank's run; the highest of "
            "each group in red.</figcaption></figure>"
        )
    return (
        f'<section id="{RANKS_SECTION_ID}"><h2>Ranks</h2>{lines}'
        f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        f'{chart}<p class="help">The verdict, op tables and fused kernels below detail '
        f"{_e(view.heading)}; the runs, timelines and notes cover every rank.</p></section>"
    )


def _runs(report: Report) -> str:
    extra = memory_columns(report.runs.values())  # footprint, live at start, reserved: where known
    headers = ["run", "peak", *(h for h, _ in extra), "allocated", "net", "inputs", "wall/call", "compile"]
    head = "".join(f'<th scope="col">{h}</th>' for h in [*headers, "peak during"])
    rows = []
    for label, run in report.runs.items():
        if run.failed:
            rows.append(
                f'<tr class="failed"><th scope="row">{_e(label)}</th>'
                f'<td colspan="{len(headers)}">failed: {_e(run.failed)}</td></tr>'
            )
            continue
        compile_s = format_seconds(run.compile_seconds)
        stack = " &gt; ".join(f"<code>{_e(s)}</code>" for s in run.peak_op_stack) or (
            f"<code>{_e(run.peak_op)}</code>" if run.peak_op else "-"
        )
        rows.append(
            f'<tr><th scope="row">{_e(label)}</th>'
            f"{_size_cell(run.peak_bytes)}{''.join(_size_cell(getattr(run, attr)) for _, attr in extra)}"
            f"{_size_cell(run.allocated_bytes)}"
            f"{_size_cell(run.net_bytes, signed=True)}{_size_cell(run.inputs_bytes)}"
            f'<td class="num">{_e(format_ms(run.wall_ms))}</td><td class="num">{_e(compile_s)}</td>'
            f'<td class="name">{stack}</td></tr>'
        )
    return (
        '<section id="runs"><h2>Runs</h2>'
        f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        "<p class=\"help\">peak: most live bytes above the call's start, from the allocator's own "
        "records; allocated: all bytes allocated; net: left allocated at the end; inputs: the "
        "arguments' tensors (allocated before the call, not in the peak).</p>"
        f"{_device_paragraphs(report)}</section>"
    )


def _timeline(report: Report) -> str:
    import importlib.util

    runs = [r for r in report.ok_runs() if r.timeline.t_ns]
    if runs and importlib.util.find_spec("matplotlib") is None:
        # Only reachable from Jupyter: files check for matplotlib before anything runs.
        body = f'<p class="empty">The chart needs matplotlib: <code>{_e(INSTALL_HINT)}</code></p>'
    elif not runs:
        body = '<p class="empty">No allocations were recorded, so there is no timeline to draw.</p>'
    else:
        caption = "Live bytes above the call's start over time" + (
            ", one panel per run; ▼ marks each run's peak and the op running there."
            if len(runs) > 1
            else "; ▼ marks the peak and the op running there."
        )
        label = "; ".join(
            f"{r.label}: peak {format_bytes(r.peak_bytes)}" + (f" during {r.peak_op}" if r.peak_op else "")
            for r in runs
        )
        body = (
            f'<figure class="chart" id="timeline-chart" role="img" aria-label="{_e(label)}">'
            f"{timeline_svg(runs)}<figcaption>{_e(caption)}</figcaption></figure>"
        )
    return f'<section id="timeline"><h2>Memory timeline</h2>{body}</section>'


def _single_ops_table(table: RunTable) -> str:
    columns = [
        ("op", False),
        ("calls", True),
        ("peak", True),
        ("self", True),
        ("total", True),
        ("allocated", True),
        ("cpu self", True),
        ("cpu total", True),
    ]
    head = "".join(_th(label, numeric) for label, numeric in columns)
    rows = [
        "<tr>"
        + _name_cell(op.name)
        + _int_cell(op.calls)
        + _size_cell(op.peak_bytes)
        + _size_cell(op.self_bytes, signed=True)
        + _size_cell(op.total_bytes, signed=True)
        + _size_cell(op.allocated_bytes)
        + _ms_cell(op.self_us)
        + _ms_cell(op.total_us)
        + "</tr>"
        for op in table.rows
    ]
    return (
        f'<div class="scroll"><table class="ops sortable" data-run="{_e(table.run.label)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _side(stats: Any, column: str) -> Any:
    return None if stats is None else getattr(stats, column)


def _diff_ops_table(table: DiffTable) -> str:
    diff = table.diff
    a, b = diff.base, diff.other
    columns = [
        ("op", False),
        (f"peak {a}", True),
        (f"peak {b}", True),
        ("peak delta", True),
        (f"self {a}", True),
        (f"self {b}", True),
        (f"allocated {a}", True),
        (f"allocated {b}", True),
        ("note", False),
    ]
    head = "".join(_th(label, numeric) for label, numeric in columns)
    rows = []
    for op in table.rows:
        note = op_note(diff, op)
        rows.append(
            "<tr>"
            + _name_cell(op.name)
            + _size_cell(_side(op.base, "peak_bytes"))
            + _size_cell(_side(op.other, "peak_bytes"))
            + _size_cell(op.peak_bytes_delta, signed=True)
            + _size_cell(_side(op.base, "self_bytes"), signed=True)
            + _size_cell(_side(op.other, "self_bytes"), signed=True)
            + _size_cell(_side(op.base, "allocated_bytes"))
            + _size_cell(_side(op.other, "allocated_bytes"))
            + f'<td class="note" data-sort="{_e(note)}">{_e(note)}</td>'
            + "</tr>"
        )
    return (
        f'<div class="scroll"><table class="ops sortable" data-base="{_e(a)}" data-other="{_e(b)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _ops(report: Report, top: int | None) -> str:
    parts = ['<section id="ops"><h2>Ops</h2>']
    for table in op_tables(report, "peak", top, every_comparison=True):
        if isinstance(table, DiffTable):
            parts.append(f"<h3>{_e(table.diff.other)} vs {_e(table.diff.base)}</h3>")
            parts.append(_diff_ops_table(table))
        else:
            parts.append(f"<h3>{_e(table.run.label)}</h3>")
            parts.append(_single_ops_table(table))
    parts.append(
        '<p class="help">Click a column header to sort (again to reverse). peak: the most live bytes '
        "above the op's start while it ran (its children included); self: net bytes the op itself "
        "left allocated (negative when it freed); allocated: all bytes it allocated. Deltas are "
        "the second run minus the first, an absent op counting 0.</p></section>"
    )
    return "".join(parts)


def _fused(report: Report) -> str:
    rows = [
        f"<tr><td>{_e(row.run)}</td>{_name_cell(row.kernel)}{_size_cell(row.peak_bytes)}"
        f'<td class="name">{replaced_text(row, name=lambda op: f"<code>{_e(op)}</code>", text=_e)}</td></tr>'
        for row in fused_rows(report)
    ]
    if rows:
        body = (
            '<table class="fused"><thead><tr><th scope="col">run</th><th scope="col">fused kernel</th>'
            '<th scope="col">kernel peak</th><th scope="col">aten ops it replaced</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>"
        )
    elif report.diffs:
        body = '<p class="empty">No fused kernels in these runs.</p>'
    else:
        body = (
            '<p class="empty">Fused kernels are listed when a compiled run is compared with eager '
            f"(<code>{_e(param('mode', 'both'))}</code>).</p>"
        )
    return f'<section id="fused"><h2>Fused kernels</h2>{body}</section>'


def _estimate(report: Report) -> str:
    """An estimate's sweep (its table and verdict) and what ops allocate inside; an estimate's
    timeline is left out (its clock is the fake run's, not the real call's)."""
    parts = []
    if report.sweep is not None:
        sweep = report.sweep
        headers = estimate.sweep_headers(sweep)
        numeric = {"value", "footprint", "line", "reserved"}
        head = "".join(f'<th scope="col">{_e(h)}</th>' for h in headers)
        body = "".join(
            "<tr>"
            + "".join(
                f'<td class="num">{_e(cell)}</td>' if header in numeric else f"<td>{_e(cell)}</td>"
                for header, cell in zip(headers, estimate.sweep_cells(row, sweep), strict=True)
            )
            + "</tr>"
            for row in estimate.sweep_rows(sweep)
        )
        parts.append(
            f"<h3>{_e(estimate.sweep_title(report.sweep).rstrip(':'))}</h3>"
            f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
            f'<p class="verdict">{_e(report.sweep.verdict)}</p>'
        )
    lines = [line for run in report.ok_runs() if (line := estimate.workspace_line(run))]
    parts += [f"<p>{_e(line)}</p>" for line in lines[:1]]
    return f'<section id="estimate"><h2>Estimate</h2>{"".join(parts)}</section>'


def _notes(report: Report) -> str:
    items = [
        f"<li><b>{_e(run.label)}</b>: {_e(note)}</li>" for run in report.runs.values() for note in run.notes
    ]
    body = f"<ul>{''.join(items)}</ul>" if items else '<p class="empty">None.</p>'
    return f'<section id="notes"><h2>Notes</h2>{body}</section>'


def _torch_tables(report: Report) -> str:
    tables = [
        f"<details><summary>{_e(label)}</summary><pre>{_e(run.torch_table)}</pre></details>"
        for label, run in report.runs.items()
        if run.torch_table
    ]
    body = "".join(tables) or (
        '<p class="empty">Not kept in this report: torch\'s table is kept when it is asked for while '
        "profiling, as writing an HTML report does (a report loaded from JSON has none).</p>"
    )
    return f'<section id="torch-table"><h2>torch.profiler table</h2>{body}</section>'


_CSS = """
.memprof-report{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1b1b;
 max-width:1200px;margin:0 auto;padding:0 16px 32px}
.memprof-report h1{font-size:1.5em;margin:.6em 0 .2em}
.memprof-report h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.memprof-report h3{font-size:1em;margin:1em 0 .3em}
.memprof-report dl.env{display:grid;grid-template-columns:max-content 1fr;gap:.1em 1em;margin:0}
.memprof-report dt{color:#555}.memprof-report dd{margin:0}
.memprof-report .verdict{font-size:1.15em;font-weight:600;background:#f2f6fb;border-left:4px solid #1f6fb4;
 padding:.5em .8em;margin:.6em 0}
.memprof-report table{border-collapse:collapse;margin:.3em 0;font-variant-numeric:tabular-nums}
.memprof-report th,.memprof-report td{padding:.25em .6em;border-bottom:1px solid #e4e4e4;text-align:left;
 vertical-align:top}
.memprof-report td.num{text-align:right;white-space:nowrap}
.memprof-report td.name{min-width:16em}.memprof-report td.name code{overflow-wrap:anywhere}
.memprof-report .scroll{overflow-x:auto}
.memprof-report table.sortable th{cursor:pointer;user-select:none;white-space:nowrap;background:#f6f6f6}
.memprof-report table.sortable th::after{content:" \\2195";color:#aaa}
.memprof-report table.sortable th[aria-sort=ascending]::after{content:" \\25B2";color:#333}
.memprof-report table.sortable th[aria-sort=descending]::after{content:" \\25BC";color:#333}
.memprof-report tr.failed td{color:#b00020}
.memprof-report figure.chart{margin:.4em 0}.memprof-report figure.chart svg{max-width:100%;height:auto}
.memprof-report figcaption,.memprof-report .help,.memprof-report .empty{color:#555;font-size:.92em}
.memprof-report pre{font-size:12px;overflow:auto;background:#f8f8f8;padding:.6em}
.memprof-report .bar{background:#1f6fb4;height:.8em;display:inline-block;vertical-align:middle}
.memprof-report td.bar-cell{min-width:12em}
.memprof-report ul.facts{padding-left:1.2em;margin:.3em 0}
.memprof-report code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.95em}
"""

# Sorting: numbers by their exact ``data-sort`` value (bytes, not the rounded text), text by
# locale; empty cells (an op absent from a run) stay last in either direction.
_JS = """
(function () {
  var here = document.currentScript;
  var root = here && here.parentNode ? here.parentNode : document;
  root.querySelectorAll("table.sortable").forEach(function (table) {
    if (table.getAttribute("data-bound")) { return; }
    table.setAttribute("data-bound", "1");
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.tabIndex = 0;
      function sort() {
        var numeric = th.getAttribute("data-type") === "num";
        var first = numeric ? "descending" : "ascending";
        var second = numeric ? "ascending" : "descending";
        var dir = th.getAttribute("aria-sort") === first ? second : first;
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir);
        var sign = dir === "ascending" ? 1 : -1;
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r1, r2) {
          var x = r1.cells[col].getAttribute("data-sort");
          var y = r2.cells[col].getAttribute("data-sort");
          if (x === null) { x = r1.cells[col].textContent; }
          if (y === null) { y = r2.cells[col].textContent; }
          if (x === "" || y === "") { return x === y ? 0 : (x === "" ? 1 : -1); }
          if (numeric) { return sign * (Number(x) - Number(y)); }
          return sign * x.localeCompare(y);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sort(); }
      });
    });
  });
})();
"""


def render_html(
    report: Report, standalone: bool = True, top: int | None = None, *, rank: int | None = None
) -> str:
    """The report as HTML: a whole page (``standalone``), or a fragment for Jupyter.

    Sections (ids): summary, verdict, runs, timeline (chart), ops (sortable tables, every op
    unless ``top`` is given), fused, notes, torch-table (torch's own table, collapsible). A
    report of several ranks adds ``ranks`` after the summary (every rank's row, the imbalance,
    the peaks as bars); its verdict, ops and fused kernels detail one rank (the highest peak's,
    or ``rank``), its runs, timelines and notes cover every rank. A report read from recordings
    has :data:`RECORDED_SECTION_IDS` instead (and ``ranks`` for per-rank recordings).
    """
    if standalone:
        check_available()
    title = f"memprof: {report.target}"
    view = rank_view(report, rank)
    detail = view.report if view is not None else report
    ranks = _ranks(view) if view is not None else ""
    sections = (
        recorded_sections(report, top, ranks=ranks)
        if report.recorded
        else _summary(report)
        + ranks
        + _verdict(detail)
        + _runs(report)
        + (_estimate(report) if estimate.is_estimate(report) else _timeline(report))
        + _ops(detail, top)
        + _fused(detail)
        + _notes(report)
        + _torch_tables(report)
    )
    body = f'<div class="memprof-report"><h1>{_e(title)}</h1>{sections}<script>{_JS}</script></div>'

    if not standalone:
        # Jupyter shows the fragment inside its own page: the style comes along.
        return f"<style>{_CSS}</style>{body}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


# ---------------------------------------------------------------------------------------------
# Runs read from recordings (memprof analyze): chrome traces and CUDA memory snapshots

CHART_POINTS = 800
"""A recorded run's chart draws at most this many points per line (each bucket's highest)."""
CHART_PANELS = 24


def _device_paragraphs(report: Report) -> str:
    lines = [line for run in report.ok_runs() if (line := recorded.device_line(run))]
    return "".join(f'<p class="device">{_e(line)}</p>' for line in lines)


def _recorded_summary(report: Report) -> str:
    assert report.source is not None
    items: list[tuple[str, str]] = [("read", recorded.source_line(report))]
    for file in report.source.files:
        about = [file.kind]
        if file.rank is not None:
            about.append(f"rank {file.rank}")
        if file.torch_version:
            about.append(f"torch {file.torch_version}")
        about.append("runs " + ", ".join(file.runs))
        items.append((file.path, "; ".join(about)))
    names = {run.device: run.device_name for run in report.ok_runs() if run.device_name}
    items += [(device or "?", name) for device, name in names.items()]
    items.append(("analysed", report.created or "?"))
    rows = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items)
    return f'<section id="summary"><dl class="env">{rows}</dl></section>'


def _recorded_runs(report: Report) -> str:
    columns = recorded.RECORDED_COLUMNS
    head = "".join(f'<th scope="col">{_e(h)}</th>' for h in ["run", *(h for h, _ in columns), "peak during"])
    rows = []
    for label, run in report.runs.items():
        stack = " &gt; ".join(f"<code>{_e(s)}</code>" for s in run.peak_op_stack) or (
            f"<code>{_e(run.peak_op)}</code>" if run.peak_op else "-"
        )
        cells = "".join(_size_cell(getattr(run, attr)) for _, attr in columns)
        rows.append(f'<tr><th scope="row">{_e(label)}</th>{cells}<td class="name">{stack}</td></tr>')
    return (
        '<section id="runs"><h2>Runs</h2>'
        f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        f"{_device_paragraphs(report)}"
        '<p class="help">peak above start: the most live bytes above what was live when the recording '
        "began; footprint: everything live at that moment (the allocator's Total Allocated; for a "
        "snapshot, block sizes as max_memory_allocated counts them); live at start: allocated before "
        "the recording began; reserved peak: the most the CUDA caching allocator held from the device; "
        "allocated: all bytes allocated during the recording. A snapshot's peak and live at start are "
        "requested bytes, as its trace records them.</p></section>"
    )


def _chart_runs(report: Report) -> list[RunResult]:
    """The runs a recorded report draws: those with a timeline, GPUs only when there are any."""
    runs = [r for r in report.ok_runs() if r.timeline.t_ns]
    devices = [r for r in runs if r.device != "cpu"]
    return (devices or runs)[:CHART_PANELS]


def recorded_timeline_svg(runs: list[RunResult]) -> str:
    """The allocated and reserved bytes of each run over time as inline SVG, one panel per run:
    allocated (absolute, what was live at the start included), reserved where recorded, a
    dashed line at live at start, the peak marked with the op (or site) at it."""
    import io

    import matplotlib
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11.0, 0.6 + 2.3 * len(runs)), layout="constrained")
    axes = fig.subplots(len(runs), 1, squeeze=False)[:, 0]
    for ax, run in zip(axes, runs, strict=True):
        timeline = downsample_timeline(run.timeline, CHART_POINTS)
        start = run.live_at_start_bytes or 0
        allocated = [b + start for b in timeline.bytes]
        top = max([*allocated, *timeline.reserved, 1])
        unit, scale = _unit(top)
        ms = [t / 1e6 for t in timeline.t_ns]
        ys = [v / scale for v in allocated]
        ax.step(ms, ys, where="post", color="#1f6fb4", linewidth=1.4, label="allocated")
        ax.fill_between(ms, ys, step="post", color="#1f6fb4", alpha=0.15, linewidth=0)
        if timeline.reserved:
            reserved = [v / scale for v in timeline.reserved]
            ax.step(ms, reserved, where="post", color="#d9661f", linewidth=1.2, label="reserved")
        if start:
            ax.axhline(start / scale, color="#777777", linewidth=0.9, linestyle="--", label="live at start")
        peak_index = max(range(len(ys)), key=ys.__getitem__)
        ax.plot(
            [ms[peak_index]], [ys[peak_index]], marker="v", color="#b00020", markersize=8, linestyle="none"
        )
        label = f"peak {format_bytes(run.peak_bytes)} above start"
        if run.peak_op:
            label += (
                f" at {recorded.peak_during(run)}" if run.mode == "snapshot" else f" during {run.peak_op}"
            )
        right_half = len(ms) > 1 and ms[peak_index] > (ms[-1] + ms[0]) / 2
        ax.annotate(
            label,
            (ms[peak_index], ys[peak_index]),
            xytext=(-8 if right_half else 8, -14),
            textcoords="offset points",
            ha="right" if right_half else "left",
            va="top",
            fontsize=9,
            color="#b00020",
            parse_math=False,
        )
        ax.set_ylim(0, top / scale * 1.12)
        ax.set_ylabel(unit, parse_math=False)
        ax.set_title(run.label, loc="left", fontsize=10, parse_math=False)
        ax.legend(loc="best", fontsize=8, frameon=False)
        ax.grid(True, color="#dddddd", linewidth=0.6)
        ax.spines[["top", "right"]].set_visible(False)
    axes[-1].set_xlabel("time since the recording's first memory event (ms)")
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "memprof"}):
        fig.savefig(
            buffer, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None}
        )
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :].strip()


def _recorded_timeline(report: Report) -> str:
    import importlib.util

    runs = _chart_runs(report)
    if runs and importlib.util.find_spec("matplotlib") is None:
        body = f'<p class="empty">The chart needs matplotlib: <code>{_e(INSTALL_HINT)}</code></p>'
    elif not runs:
        body = '<p class="empty">No run has a timeline (a snapshot without history or times).</p>'
    else:
        hidden = len([r for r in report.ok_runs() if r.timeline.t_ns]) - len(runs)
        caption = (
            "Allocated (blue, absolute: what was live at the start included) and reserved (orange) bytes "
            "over time, one panel per run; the dashed line is live at start, ▼ the peak."
        )
        if hidden:
            caption += f" {hidden} more run(s) not drawn (host memory, or beyond {CHART_PANELS} panels)."
        label = "; ".join(recorded.peak_line(r) for r in runs)
        body = (
            f'<figure class="chart" id="timeline-chart" role="img" aria-label="{_e(label)}">'
            f"{recorded_timeline_svg(runs)}<figcaption>{_e(caption)}</figcaption></figure>"
        )
    return f'<section id="timeline"><h2>Memory over time</h2>{body}</section>'


def _what_if_table(run: RunResult) -> str:
    rows = recorded.what_if_rows(run)
    if not rows:
        return ""
    head = "".join(f'<th scope="col">{_e(h)}</th>' for h in recorded.WHAT_IF_HEADERS)
    body = "".join(
        f"<tr><td><code>{_e(row[0])}</code></td>" + "".join(f'<td class="num">{_e(c)}</td>' for c in row[1:])
        for row in rows
    )
    return (
        f"<h4>{_e(recorded.what_if_title(run))}</h4>"
        f'<table class="what-if"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _snapshots(report: Report) -> str:
    parts = []
    for run in report.ok_runs():
        if run.snapshot is None:
            continue
        facts = "".join(f"<li>{_e(line)}</li>" for line in recorded.snapshot_lines(run))
        parts.append(f'<h3>{_e(run.label)}</h3><ul class="facts">{facts}</ul>{_what_if_table(run)}')
    body = "".join(parts)
    return f'<section id="snapshot"><h2>Snapshots</h2>{body}</section>'


def _sites(report: Report) -> str:
    parts = []
    for run in report.ok_runs():
        rows = recorded.site_rows(run, top=recorded.TOP_SITES * 2)
        if not rows:
            continue
        largest = max(row.bytes for row in rows) or 1
        body = "".join(
            f'<tr>{_name_cell(row.site)}{_size_cell(row.bytes)}<td class="num">{_e(row.share)}</td>'
            f'{_int_cell(row.count)}<td class="bar-cell"><span class="bar" '
            f'style="width:{100 * row.bytes / largest:.1f}%"></span></td></tr>'
            for row in rows
        )
        head = "".join(
            _th(h, numeric) for h, numeric in (("site", False), ("bytes", True), ("of peak", True))
        )
        head += _th("blocks", True) + '<th scope="col"></th>'
        parts.append(
            f"<h3>{_e(recorded.sites_title(run, recorded.TOP_SITES * 2))}</h3>"
            f'<div class="scroll"><table class="sites sortable"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>"
        )
    body = "".join(parts) or (
        '<p class="empty">No allocation was live at a peak above the start (a snapshot without '
        "history: torch.cuda.memory._record_memory_history records it).</p>"
    )
    return f'<section id="sites"><h2>Allocation sites at the peak</h2>{body}</section>'


def _recorded_ops(report: Report, top: int | None) -> str:
    parts = ['<section id="ops"><h2>Ops</h2>']
    for table in op_tables(report, "peak", top, every_comparison=True):
        if isinstance(table, DiffTable):  # recordings of one device, compared (before / after)
            parts += [f"<h3>{_e(table.diff.other)} vs {_e(table.diff.base)}</h3>", _diff_ops_table(table)]
        elif table.rows:
            parts += [f"<h3>{_e(table.run.label)}</h3>", _single_ops_table(table)]
    parts.append(
        '<p class="help">Ops of each device\'s memory events, matched by time (a snapshot has none: its '
        "sites are above). Click a column header to sort (again to reverse). peak: the most live bytes "
        "above the op's start while it ran (its children included); self: net bytes the op itself left "
        "allocated (negative when it freed); allocated: all bytes it allocated.</p></section>"
    )
    return "".join(parts)


def recorded_sections(report: Report, top: int | None = None, ranks: str = "") -> str:
    """The sections of a report read from recordings: :data:`RECORDED_SECTION_IDS` (snapshot and
    sites only when a snapshot is among them, ops only when a trace is); ``ranks``, the per-rank
    section when the recordings carry ranks, follows the summary."""
    runs = report.ok_runs()
    lines = [recorded.peak_line(run) for run in runs] + [diff.verdict for diff in report.diffs]
    verdict = "".join(f'<p class="verdict">{_e(line)}</p>' for line in lines)
    snapshots = any(run.snapshot is not None for run in runs)
    return (
        _recorded_summary(report)
        + ranks
        + f'<section id="verdict">{verdict}</section>'
        + _recorded_runs(report)
        + _recorded_timeline(report)
        + (_snapshots(report) + _sites(report) if snapshots else "")
        + (_recorded_ops(report, top) if any(run.op_stats for run in runs) else "")
        + _notes(report)
    )
