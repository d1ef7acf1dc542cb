"""HTML: one self-contained file (inline CSS, inline SVG chart, a small inline script).

It makes no network request: no CDN, no web font, no image file. A Content-Security-Policy
in the page forbids any other source, so it opens the same from ``file://`` offline, from a CI
artifact or an e-mail attachment. Every name is HTML-escaped: op names and ``record_function``
labels can hold ``<``, ``>``, ``&`` and quotes; invisible and control characters in them are
shown escaped (:func:`memprof.text.visible`).

The page fits 1,200 px: names and headers wrap, long notes are collapsed, ops without memory
activity (or repeating an op they call, see :mod:`memprof.report.rows`) are hidden behind a
toggle, and a filter box narrows each op table by name. The memory timeline is drawn here, as
SVG with a small script (:mod:`memprof.report.chart` says why, and what it does). The report
sets its own background and colours (:data:`THEME_CSS`, light, or dark when the reader's system
asks for it), so it reads the same inside a dark notebook.

A report of several ranks adds a ranks section (every rank's row, the imbalance, the peaks as
bars); a report read from recordings (``memprof analyze``) has its own sections
(:func:`recorded_sections`): allocated and reserved bytes over time, snapshots, allocation
sites.
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any

from memprof.analysis.diff import op_note
from memprof.model.run import peak_during
from memprof.model.timing import format_spread, format_wall
from memprof.report import estimate, recorded
from memprof.report.chart import CHART_CSS, CHART_JS, Bar, Series, bar_chart, peak_time_ms, timeline_chart
from memprof.report.layout import shorten
from memprof.report.peak_diff_html import peak_change_html
from memprof.report.peak_html import CSS as PEAK_CSS
from memprof.report.peak_html import JS as PEAK_JS
from memprof.report.peak_html import at_peak_section
from memprof.report.ranks import RankView, rank_view, size_columns
from memprof.report.recorded import memory_columns
from memprof.report.rows import DiffTable, RunTable, conclusions, fused_rows, op_tables, replaced_text
from memprof.text import html_text as _e
from memprof.units import format_bytes, format_ms, format_seconds

if TYPE_CHECKING:
    from memprof.model import Report, RunResult
    from memprof.model.diff import OpDiff, RunDiff

# Section ids: stable anchors, also what the sample-report test compares. A report has only the
# sections it has something for (no empty "Notes"); these are all there can be, in order.
SECTION_IDS = ("summary", "verdict", "runs", "timeline", "at-peak", "ops", "fused", "notes", "torch-table")
# A report of several ranks has one more, after the summary.
RANKS_SECTION_ID = "ranks"
RECORDED_SECTION_IDS = ("summary", "verdict", "runs", "timeline", "snapshot", "sites", "ops", "notes")
"""The sections of a report read from recordings (snapshot and sites when a snapshot is among
them, ops when a trace is, notes when there are any)."""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

NOTE_LIMIT = 80
"""A note longer than this (characters) is collapsed to its first words."""


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


def collapsible(summary: str, full: str) -> str:
    """``full`` (HTML) behind a one-line ``summary`` (HTML) the reader can open."""
    return f'<details class="note"><summary>{summary}</summary>{full}</details>'


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
    """Each comparison's verdict and its memory-and-time summary (the lines every format ends
    with), or the single run's peak; an estimate's answer (or its sweep's verdict)."""
    groups = []
    said = estimate.conclusions(report) if estimate.is_estimate(report) else conclusions(report)
    for verdict, *rest in said:
        lines = "".join(f'<p class="summary-line">{_e(line)}</p>' for line in rest)
        groups.append(f'<div class="conclusion"><p class="verdict">{_e(verdict)}</p>{lines}</div>')
    return f'<section id="verdict">{"".join(groups)}</section>'


def _wall_cell(run: Any) -> str:
    """The median wall time, ± half the middle half's spread; every call's figures on hover."""
    where = {
        "timed": "timed without the profiler",
        "warm-up": "the warm-up call's, without the profiler",
    }.get(run.wall_timing, "with the profiler on")
    title = f"{format_spread(run.wall_ms_all)}, {where}"
    sort = "" if _is_missing(run.wall_ms) else f"{run.wall_ms:.6f}"
    text = format_wall(run.wall_ms_all, run.wall_ms)
    return f'<td class="num" data-sort="{sort}" title="{_e(title)}">{_e(text)}</td>'


def _runs(report: Report) -> str:
    extra = memory_columns(report.runs.values())  # footprint, live at start, reserved: where known
    headers = ["run", "peak", *(h for h, _ in extra), "peak at", "allocated", "net", "inputs", "wall/call"]
    headers += ["compile", "peak during"]
    head = "".join(f'<th scope="col">{h}</th>' for h in headers)
    rows = []
    for label, run in report.runs.items():
        if run.failed:
            rows.append(
                f'<tr class="failed"><th scope="row">{_e(label)}</th>'
                f'<td colspan="{len(headers) - 1}">failed: {_e(run.failed)}</td></tr>'
            )
            continue
        stack = " &gt; ".join(f"<code>{_e(s)}</code>" for s in run.peak_op_stack) or (
            f"<code>{_e(run.peak_op)}</code>" if run.peak_op else "-"
        )
        when = peak_time_ms(run.timeline)
        rows.append(
            f'<tr><th scope="row">{_e(label)}</th>{_size_cell(run.peak_bytes)}'
            f"{''.join(_size_cell(getattr(run, attr)) for _, attr in extra)}"
            f'<td class="num">{"-" if when is None else f"{when:.3f} ms"}</td>'
            f"{_size_cell(run.allocated_bytes)}{_size_cell(run.net_bytes, signed=True)}"
            f"{_size_cell(run.inputs_bytes)}{_wall_cell(run)}"
            f'<td class="num">{_e(format_seconds(run.compile_seconds))}</td>'
            f'<td class="name">{stack}</td></tr>'
        )
    return (
        '<section id="runs"><h2>Runs</h2>'
        f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        "<p class=\"help\">peak: most live bytes above the call's start, from the allocator's own "
        "records (and the frees of tensors made before the call); peak at: when, in ms since the call "
        "started; allocated: all bytes allocated; net: left allocated at the end; inputs: what was "
        "live when the first call started (arguments, model, optimizer state), not in the peak; "
        "wall/call: the median of the calls timed without the profiler, ± half the spread of their "
        f"middle half (hover for every figure).{_memory_help(extra)}</p>"
        f"{_device_paragraphs(report)}</section>"
    )


def _memory_help(extra: tuple[tuple[str, str], ...]) -> str:
    """What the device-wide columns mean, for those shown."""
    meaning = {
        "footprint_bytes": "footprint: everything live at the peak, what was live before the call "
        "included (explained runs; else torch.cuda.max_memory_allocated)",
        "live_at_start_bytes": "live at start: allocated when the call began",
        "reserved_peak_bytes": "reserved peak: the most the CUDA caching allocator held from the device",
    }
    return "".join(f" {meaning[attr]}." for _, attr in extra if attr in meaning)


def _uid(report: Report) -> str:
    """Ids unique to this report's chart (two reports in one notebook do not clash), and the
    same at every rendering of the same report."""
    digest = hashlib.sha1(f"{report.target}|{report.created}|{list(report.runs)}".encode()).hexdigest()
    return f"mp{digest[:10]}"


def _timeline(report: Report) -> str:
    runs = [r for r in report.ok_runs() if r.timeline.t_ns]
    if not runs:
        body = '<p class="empty">No allocations were recorded, so there is no timeline to draw.</p>'
    else:
        series = [Series(r.label, r.timeline, r.peak_bytes, r.peak_op) for r in runs]
        body = timeline_chart(series, _uid(report))
    return f'<section id="timeline"><h2>Memory timeline</h2>{body}</section>'


def _hidden_attrs(name: str, hidden: dict[str, str]) -> str:
    why = hidden.get(name)
    return f' class="quiet" title="hidden: {_e(why)}"' if why else ""


def _filter_controls(hidden: dict[str, str]) -> str:
    toggle = (
        f'<label><input type="checkbox" class="mp-show-quiet"> show {len(hidden)} more op'
        f"{'s' if len(hidden) > 1 else ''} (no memory activity, repeating or wrapping an op they "
        "call)</label>"
        if hidden
        else ""
    )
    return (
        '<div class="mp-table-controls"><input type="search" class="mp-filter" '
        f'placeholder="Filter ops by name" aria-label="Filter ops by name">{toggle}</div>'
    )


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
        f"<tr{_hidden_attrs(op.name, table.hidden)}>"
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
    return _filter_controls(table.hidden) + (
        f'<table class="ops sortable" data-run="{_e(table.run.label)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _side(stats: Any, column: str) -> Any:
    return None if stats is None else getattr(stats, column)


def note_html(diff: RunDiff, op: OpDiff) -> str:
    """The op's note (what fused it, where it ran), collapsed when long: ``fuses 23 ops: abs,
    add, … `` opens to the whole list."""
    code = lambda name: f"<code>{_e(name)}</code>"  # noqa: E731
    full = op_note(diff, op, name=code, text=_e)
    plain = op_note(diff, op)
    if len(plain) <= NOTE_LIMIT:
        return full
    if op.fused_ops:
        return collapsible(f"fuses {len(op.fused_ops)} ops", full)
    if len(op.fused_into) == 1:
        return collapsible(f"fused into <code>{_e(shorten(op.fused_into[0], 32))}</code>", full)
    return collapsible(f"fused into {len(op.fused_into)} kernels", full)


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
        rows.append(
            f"<tr{_hidden_attrs(op.name, table.hidden)}>"
            + _name_cell(op.name)
            + _size_cell(_side(op.base, "peak_bytes"))
            + _size_cell(_side(op.other, "peak_bytes"))
            + _size_cell(op.peak_bytes_delta, signed=True)
            + _size_cell(_side(op.base, "self_bytes"), signed=True)
            + _size_cell(_side(op.other, "self_bytes"), signed=True)
            + _size_cell(_side(op.base, "allocated_bytes"))
            + _size_cell(_side(op.other, "allocated_bytes"))
            + f'<td class="note" data-sort="{_e(op_note(diff, op))}">{note_html(diff, op)}</td>'
            + "</tr>"
        )
    return _filter_controls(table.hidden) + (
        f'<table class="ops sortable" data-base="{_e(a)}" data-other="{_e(b)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _ops(report: Report, top: int | None) -> str:
    parts = ['<section id="ops"><h2>Ops</h2>']
    tables = op_tables(report, "peak", top, every_comparison=True, keep_hidden=True)
    for table in tables:
        if isinstance(table, DiffTable):
            parts.append(f"<h3>{_e(table.diff.other)} vs {_e(table.diff.base)}</h3>")
            parts.append(_diff_ops_table(table))
        else:
            parts.append(f"<h3>{_e(table.run.label)}</h3>")
            parts.append(_single_ops_table(table))
    delta = (
        " Deltas are the later run minus the first, an absent op counting 0."
        if tables and isinstance(tables[0], DiffTable)
        else ""
    )
    parts.append(
        '<p class="help">Click a column header to sort (again to reverse). peak: the most live bytes '
        "above the op's start while it ran (its children included); self: net bytes the op itself "
        f"left allocated (negative when it freed); allocated: all bytes it allocated.{delta}</p></section>"
    )
    return "".join(parts)


def _fused(report: Report) -> str:
    rows = []
    for row in fused_rows(report):
        replaced = replaced_text(row, name=lambda op: f"<code>{_e(op)}</code>", text=_e)
        if len(row.replaced) > 4:
            replaced = collapsible(f"{len(row.replaced)} ops", replaced)
        rows.append(
            f"<tr><td>{_e(row.run)}</td>{_name_cell(row.kernel)}{_size_cell(row.peak_bytes)}"
            f'<td class="name">{replaced}</td></tr>'
        )
    if rows:
        body = (
            '<table class="fused"><thead><tr><th scope="col">run</th><th scope="col">fused kernel</th>'
            '<th scope="col">kernel peak</th><th scope="col">aten ops it replaced (their peak in the '
            f"base run)</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    elif report.diffs and any(run.mode == "compile" for run in report.ok_runs()):
        body = '<p class="empty">No fused kernels in these runs.</p>'
    else:
        return ""
    return f'<section id="fused"><h2>Fused kernels</h2>{body}</section>'


def _estimate_runs(report: Report) -> str:
    """An estimate's runs (no times: nothing real ran, and the fake run's clock is not the
    call's)."""
    headers = estimate.RUN_HEADERS
    head = "".join(f'<th scope="col">{_e(h)}</th>' for h in headers)
    rows = []
    for run in report.runs.values():
        cells = estimate.run_cells(run)
        if run.failed:
            rows.append(
                f'<tr class="failed"><th scope="row">{_e(run.label)}</th>'
                f'<td colspan="{len(headers) - 1}">failed: {_e(run.failed)}</td></tr>'
            )
            continue
        sizes = "".join(f'<td class="num">{_e(cell)}</td>' for cell in cells[1:-1])
        during = f"<code>{_e(run.peak_op)}</code>" if run.peak_op else "-"
        rows.append(f'<tr><th scope="row">{_e(run.label)}</th>{sizes}<td class="name">{during}</td></tr>')
    return (
        '<section id="runs"><h2>Runs</h2>'
        f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        '<p class="help">estimated on fake tensors: peak: most live bytes above the call\'s start; '
        "footprint: every live byte then, what was live before the call included; live at start: live "
        "when the call began; reserved peak (CUDA): the most the caching-allocator model holds from the "
        "device; allocated: all bytes allocated; net: left allocated at the end.</p></section>"
    )


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
            f"<h3>{_e(estimate.sweep_title(sweep).rstrip(':'))}</h3>"
            f'<table class="sweep"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
            f'<p class="verdict">{_e(sweep.verdict)}</p>'
        )
    lines = [line for run in report.ok_runs() if (line := estimate.workspace_line(run))]
    parts += [f"<p>{_e(line)}</p>" for line in lines[:1]]
    return f'<section id="estimate"><h2>Estimate</h2>{"".join(parts)}</section>'


def _notes(report: Report) -> str:
    items = [
        f"<li><b>{_e(run.label)}</b>: {_e(note)}</li>" for run in report.runs.values() for note in run.notes
    ]
    if not items:
        return ""
    return f'<section id="notes"><h2>Notes</h2><ul>{"".join(items)}</ul></section>'


def _torch_tables(report: Report) -> str:
    tables = [
        f"<details><summary>{_e(label)}</summary><pre>{_e(run.torch_table)}</pre></details>"
        for label, run in report.runs.items()
        if run.torch_table
    ]
    if not tables:
        return ""
    return f'<section id="torch-table"><h2>torch.profiler table</h2>{"".join(tables)}</section>'


THEME_CSS = """
.memprof-report{--mp-bg:#ffffff;--mp-fg:#1b1b1b;--mp-muted:#555555;--mp-border:#d9d9d9;--mp-grid:#ececec;
 --mp-head-bg:#f3f3f3;--mp-plot-bg:#ffffff;--mp-accent:#1f6fb4;--mp-verdict-bg:#eef4fb;--mp-code-bg:#f5f5f5;
 --mp-bad:#b00020;--mp-run-0:#1f6fb4;--mp-run-1:#d9661f;--mp-run-2:#2a9d4b;--mp-run-3:#9b3fb5;--mp-run-4:#8c564b;
 background:var(--mp-bg);color:var(--mp-fg);color-scheme:light}
@media (prefers-color-scheme: dark){.memprof-report{--mp-bg:#16181c;--mp-fg:#e8e8e8;--mp-muted:#a8adb4;
 --mp-border:#3a3f47;--mp-grid:#2a2e35;--mp-head-bg:#22262c;--mp-plot-bg:#1b1e23;--mp-accent:#6cb4ff;
 --mp-verdict-bg:#1f2a38;--mp-code-bg:#23272e;--mp-bad:#ff6b81;--mp-run-0:#6cb4ff;--mp-run-1:#ffa657;
 --mp-run-2:#56d364;--mp-run-3:#d2a8ff;--mp-run-4:#e0a899;color-scheme:dark}}
"""
"""The report's colours, set on its own root (background included), so it reads the same on
any page, a dark notebook too. Sections use only these variables."""

_CSS = """
.memprof-report{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
 max-width:1200px;box-sizing:border-box;margin:0 auto;padding:4px 16px 32px}
.memprof-report *{box-sizing:border-box}
.memprof-report h1{font-size:1.5em;margin:.6em 0 .2em;color:var(--mp-fg)}
.memprof-report h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid var(--mp-border);
 padding-bottom:.2em;color:var(--mp-fg)}
.memprof-report h3{font-size:1em;margin:1em 0 .3em;color:var(--mp-fg)}
.memprof-report dl.env{display:grid;grid-template-columns:max-content 1fr;gap:.1em 1em;margin:0}
.memprof-report dt{color:var(--mp-muted)}.memprof-report dd{margin:0;overflow-wrap:anywhere}
.memprof-report .conclusion{background:var(--mp-verdict-bg);border-left:4px solid var(--mp-accent);
 padding:.45em .8em;margin:.6em 0}
.memprof-report .verdict{font-size:1.15em;font-weight:600;margin:0}
.memprof-report .summary-line{margin:.2em 0 0}
.memprof-report table{border-collapse:collapse;margin:.3em 0;font-variant-numeric:tabular-nums;width:100%}
.memprof-report th,.memprof-report td{padding:.25em .5em;border-bottom:1px solid var(--mp-border);
 text-align:left;vertical-align:top;color:var(--mp-fg)}
.memprof-report thead th{background:var(--mp-head-bg);font-weight:600}
.memprof-report td.num{text-align:right;white-space:nowrap}
.memprof-report td.name code,.memprof-report td.note code,
.memprof-report .mp-legend code{overflow-wrap:anywhere}
.memprof-report .verdict,.memprof-report .summary-line,.memprof-report li{overflow-wrap:anywhere}
.memprof-report table.ops td.name{min-width:14em}
.memprof-report td.note{min-width:10em;max-width:22em}
.memprof-report details.note summary{cursor:pointer;color:var(--mp-accent)}
.memprof-report table.sortable th{cursor:pointer;user-select:none}
.memprof-report table.sortable th::after{content:" \\2195";color:var(--mp-muted)}
.memprof-report table.sortable th[aria-sort=ascending]::after{content:" \\25B2";color:var(--mp-fg)}
.memprof-report table.sortable th[aria-sort=descending]::after{content:" \\25BC";color:var(--mp-fg)}
.memprof-report table.ops tr.quiet{display:none}
.memprof-report table.ops.show-quiet tr.quiet{display:table-row;color:var(--mp-muted)}
.memprof-report table.ops tr.filtered,.memprof-report table.ops.show-quiet tr.quiet.filtered{display:none}
.memprof-report .mp-table-controls{display:flex;gap:1.2em;align-items:center;flex-wrap:wrap;margin:.3em 0}
.memprof-report input.mp-filter{font:inherit;color:var(--mp-fg);background:var(--mp-bg);
 border:1px solid var(--mp-border);border-radius:3px;padding:.15em .4em;min-width:16em}
.memprof-report tr.failed td{color:var(--mp-bad)}
.memprof-report figcaption,.memprof-report .help,.memprof-report .empty{color:var(--mp-muted);font-size:.92em}
.memprof-report pre{font-size:12px;overflow:auto;background:var(--mp-code-bg);color:var(--mp-fg);padding:.6em}
.memprof-report code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.95em;
 color:var(--mp-fg)}
.memprof-report summary{color:var(--mp-fg)}
.memprof-report a{color:var(--mp-accent)}
.memprof-report h4{font-size:.95em;margin:.8em 0 .3em;color:var(--mp-fg)}
.memprof-report .device{margin:.3em 0}
.memprof-report ul.facts{padding-left:1.2em;margin:.3em 0}
.memprof-report .bar{background:var(--mp-accent);height:.8em;display:inline-block;vertical-align:middle}
.memprof-report td.bar-cell{width:22%;min-width:6em}
.memprof-report table.sites td.name{min-width:14em}
.memprof-report figure.mp-bars-chart{margin:.4em 0}
.memprof-report .mp-bars{display:block;width:100%;height:auto}
"""

# Sorting: numbers by their exact ``data-sort`` value (bytes, not the rounded text), text by
# locale; empty cells (an op absent from a run) stay last in either direction. The filter box
# hides rows whose op name does not contain its text; the toggle shows the quiet rows.
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
    var controls = table.previousElementSibling;
    if (!controls || !controls.classList.contains("mp-table-controls")) { return; }
    var filter = controls.querySelector(".mp-filter"), quiet = controls.querySelector(".mp-show-quiet");
    filter.addEventListener("input", function () {
      var text = filter.value.trim().toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        var name = row.cells[0].textContent.toLowerCase();
        row.classList.toggle("filtered", text !== "" && name.indexOf(text) < 0);
      });
    });
    if (quiet) {
      quiet.addEventListener("change", function () { table.classList.toggle("show-quiet", quiet.checked); });
    }
  });
})();
"""


def render_html(
    report: Report, standalone: bool = True, top: int | None = None, *, rank: int | None = None
) -> str:
    """The report as HTML: a whole page (``standalone``), or a fragment for Jupyter.

    Sections (ids), each only when it has something to show: summary, verdict, runs, timeline
    (the interactive chart), peak-diff (what changed at the peak between the first two runs,
    when both were explained), at-peak (what is live at each explained run's peak: the timeline
    stacked by category, an icicle, tables; a line saying so when no run was explained), ops
    (sortable, filterable tables: every op unless ``top`` is given; ops without memory activity
    or repeating an op they call behind a toggle), fused, notes, torch-table (torch's own table,
    collapsible). A report of several ranks adds ``ranks`` after the summary (every rank's row,
    the imbalance, the peaks as bars); its verdict, ops and fused kernels detail one rank (the
    highest peak's, or ``rank``), its runs, timelines and notes cover every rank. A report read
    from recordings has :data:`RECORDED_SECTION_IDS` instead (and ``ranks`` for per-rank
    recordings).
    """
    title = f"memprof: {report.target}"
    view = rank_view(report, rank)
    detail = view.report if view is not None else report
    ranks = _ranks(view) if view is not None else ""
    sections = (
        recorded_sections(report, top, ranks=ranks, detail=detail)
        if report.recorded
        else _summary(report)
        + ranks
        + _verdict(detail)
        + (
            _estimate_runs(report) + _estimate(report)
            if estimate.is_estimate(report)
            else _runs(report) + _timeline(report) + peak_change_html(detail) + at_peak_section(report)
        )
        + _ops(detail, top)
        + _fused(detail)
        + _notes(report)
        + _torch_tables(report)
    )
    script = f"<script>{_JS}{CHART_JS}{PEAK_JS}</script>"
    body = f'<div class="memprof-report"><h1>{_e(title)}</h1>{sections}{script}</div>'
    style = f"<style>{THEME_CSS}{_CSS}{CHART_CSS}{PEAK_CSS}</style>"
    if not standalone:
        # Jupyter shows the fragment inside its own page: the style (and the colours) come along.
        return f"{style}{body}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title>{style}</head>\n<body>\n{body}\n</body></html>\n"
    )


# ---------------------------------------------------------------------------------------------
# Reports of several ranks


def _ranks(view: RankView) -> str:
    """Every rank's row, the imbalance of their peaks, the peaks as bars, and which rank the
    op tables below detail."""
    detailed, covered = (
        (" and op tables", ", snapshots")
        if view.report.recorded
        else (
            ", op tables and fused kernels",
            "",
        )
    )
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
    lines = "".join(
        f'<div class="conclusion"><p class="verdict">{_e(i.line)}</p></div>' for i in view.summary.imbalances
    )
    return (
        f'<section id="{RANKS_SECTION_ID}"><h2>Ranks</h2>{lines}'
        f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        f'{_rank_peaks(view)}<p class="help">The verdict{detailed} below detail '
        f"{_e(view.heading)}; the runs, timelines{covered} and notes cover every rank.</p></section>"
    )


def _rank_peaks(view: RankView) -> str:
    """The peak of each rank's successful runs as bars, the highest of each group marked."""
    rows = [row for row in view.summary.rows if row.ok and row.peak_bytes is not None]
    if not rows:
        return ""
    highest = {(i.group, i.highest_label) for i in view.summary.imbalances}
    bars = [Bar(row.label, row.peak_bytes or 0, (row.group, row.label) in highest) for row in rows]
    label = "; ".join(f"{row.label}: {format_bytes(row.peak_bytes or 0)}" for row in rows)
    return (
        f'<figure class="mp-bars-chart" id="rank-peaks-chart" role="img" aria-label="{_e(label)}">'
        f"{bar_chart(bars, 'peak above each call' + chr(39) + 's start')}<figcaption>Peak of each rank's "
        "run; the highest of each group in red.</figcaption></figure>"
    )


# ---------------------------------------------------------------------------------------------
# Runs read from recordings (memprof analyze): chrome traces and CUDA memory snapshots

CHART_POINTS = 800
"""A recorded run's chart draws at most this many points per line (each bucket's highest)."""
CHART_PANELS = 24
"""At most this many recorded runs are drawn."""


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


def _recorded_series(run: RunResult) -> Series:
    """A recorded run's line: absolute (live at start added), reserved where recorded."""
    start = run.live_at_start_bytes or 0
    details = []
    if start:
        details.append(f"{format_bytes(start)} live at start (dashed)")
    if run.timeline.reserved and run.reserved_peak_bytes is not None:
        details.append(f"reserved peak {format_bytes(run.reserved_peak_bytes)} (thin line)")
    return Series(
        run.label,
        run.timeline,
        run.peak_bytes,
        peak_during(run) if run.peak_op else None,
        start_bytes=start,
        peak_suffix=" above start",
        details=", ".join(details),
    )


def _recorded_timeline(report: Report) -> str:
    runs = _chart_runs(report)
    if not runs:
        body = '<p class="empty">No run has a timeline (a snapshot without history or times).</p>'
    else:
        hidden = len([r for r in report.ok_runs() if r.timeline.t_ns]) - len(runs)
        caption = (
            "Allocated bytes over time, absolute (what was live at the start included, dashed), and "
            "what the CUDA caching allocator reserved (the thin line), every run on one scale. Hover for "
            "the time and the bytes; drag across a time range (or Ctrl/Shift + scroll) to zoom, "
            "double-click to reset."
        )
        if hidden:
            caption += f" {hidden} more run(s) not drawn (host memory, or beyond {CHART_PANELS} runs)."
        body = timeline_chart(
            [_recorded_series(run) for run in runs],
            _uid(report),
            points=CHART_POINTS,
            x_label="time since the recording's first memory event (ms)",
            caption=caption,
            aria_label="; ".join(recorded.peak_line(r) for r in runs),
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
            f'<table class="sites sortable"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
        )
    body = "".join(parts) or (
        '<p class="empty">No allocation was live at a peak above the start (a snapshot without '
        "history: torch.cuda.memory._record_memory_history records it).</p>"
    )
    return f'<section id="sites"><h2>Allocation sites at the peak</h2>{body}</section>'


def _recorded_ops(report: Report, top: int | None) -> str:
    parts = ['<section id="ops"><h2>Ops</h2>']
    for table in op_tables(report, "peak", top, every_comparison=True, keep_hidden=True):
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


def _recorded_verdict(report: Report) -> str:
    groups = "".join(
        f'<div class="conclusion"><p class="verdict">{_e(line)}</p></div>'
        for group in recorded.conclusions(report)
        for line in group
    )
    return f'<section id="verdict">{groups}</section>'


def recorded_sections(
    report: Report, top: int | None = None, ranks: str = "", detail: Report | None = None
) -> str:
    """The sections of a report read from recordings: :data:`RECORDED_SECTION_IDS` (snapshot and
    sites only when a snapshot is among them, ops only when a trace is, notes only when there
    are any); ``ranks``, the per-rank section when the recordings carry ranks, follows the
    summary, and ``detail`` (the runs of the rank it details) has the verdict and op tables."""
    detail = report if detail is None else detail
    runs = report.ok_runs()
    snapshots = any(run.snapshot is not None for run in runs)
    return (
        _recorded_summary(report)
        + ranks
        + _recorded_verdict(detail)
        + _recorded_runs(report)
        + _recorded_timeline(report)
        + (_snapshots(report) + _sites(report) if snapshots else "")
        + (_recorded_ops(detail, top) if any(run.op_stats for run in detail.ok_runs()) else "")
        + _notes(report)
    )
