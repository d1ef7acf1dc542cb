"""The document of a report (:class:`memprof.outputs.document.Document`), built once for every
format: the sections its kind declares (:mod:`memprof.outputs.kinds`), in that order, each there
only when it has something to show.

A report of several ranks (``RANKS``) shows every rank side by side, then one rank in detail
(the highest peak's, or the one asked for) as a report of its own kind; its timelines and notes
cover every rank. How much of each list a format shows is the format's :class:`Limits`.

A new section is one builder (the context in, a section or None out), registered by its id
(:func:`memprof.outputs.kinds.register_section`; the built-in ones: :data:`BUILDERS`), and its
id in the sections of the kinds that show it; every format then shows it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from memprof.core.units import format_bytes, format_ms, format_seconds
from memprof.model.kind import ReportKind
from memprof.model.run import peak_during, peak_line
from memprof.model.timing import format_spread, format_wall
from memprof.outputs import document as doc
from memprof.outputs import estimate, kinds, recorded
from memprof.outputs.answer import conclusions, made_differently
from memprof.outputs.compiled import compile_section
from memprof.outputs.context import Context, Limits
from memprof.outputs.gate_section import gate_section
from memprof.outputs.ops import fused_section, ops_section
from memprof.outputs.peak import at_peak_section
from memprof.outputs.peak_change import SECTION_ID as PEAK_DIFF
from memprof.outputs.peak_change import peak_change_section
from memprof.outputs.ranks import RankView, rank_view, size_columns

if TYPE_CHECKING:
    from memprof.analysis.gate import GateResult
    from memprof.model.report import Report
    from memprof.model.run import RunResult

ANSWER = "verdict"
LAST = (PEAK_DIFF, ANSWER)
"""The sections the terminal shows last, in this order (what changed at the peak, then the
verdict: the lines left on the screen are the answer and the biggest cause)."""


def build(
    report: Report, limits: Limits | None = None, *, rank: int | None = None, gate: GateResult | None = None
) -> doc.Document:
    """The document of ``report``, with ``limits`` (default: everything); ``rank``: which rank
    of a report of several ranks to detail (default: the highest peak's); ``gate``: the memory
    gate's result, its section first."""
    view = rank_view(report, rank)
    detail = view.report if view is not None else report
    context = Context(report, detail, view, limits or Limits(), gate)
    kind = kinds.kind_of(detail)
    sections = tuple(
        section
        for section_id in kinds.sections_of(report, detail if view is not None else None)
        if (section := kinds.SECTIONS[section_id](context)) is not None
    )
    return doc.Document(
        kind=kind.name,
        name=_name(context, kind),
        title=_title(context, kind),
        uid=_uid(report),
        sections=sections,
    )


def _uid(report: Report) -> str:
    """Ids unique to this report's charts (two reports in one notebook do not clash), and the
    same at every rendering of the same report."""
    digest = hashlib.sha1(f"{report.target}|{report.created}|{list(report.runs)}".encode()).hexdigest()
    return f"mp{digest[:10]}"


# ---- the summary ---------------------------------------------------------------------------------


def _name(context: Context, kind: kinds.Kind) -> str:
    """The report's name (a page's title): ``memprof: pkg.mod:f``, ``memprof diff: a.json vs
    b.json``, ``memprof estimate: pkg.mod:f``."""
    report = context.report
    if report.diff_of:
        return "memprof diff: " + " vs ".join(report.diff_of)
    return kind.page + report.target


def _title(context: Context, kind: kinds.Kind) -> tuple:
    report = context.report
    if report.diff_of:
        made = f"{report.target} on {report.device}"
        return doc.join(f"memprof diff: {' vs '.join(report.diff_of)} (", doc.name(made), ")")
    if kind.title is not None:
        return doc.words(kind.title(report))
    if context.kind is ReportKind.RECORDED:
        return doc.words(f"memprof: {recorded.source_line(report)}")
    if context.kind.estimated:
        return doc.words(f"memprof: {estimate.title(report)}")
    torch_version = report.environment.get("torch", "?")
    return doc.join("memprof: ", doc.name(report.target), f" on {report.device} (torch {torch_version})")


def _summary(context: Context) -> doc.Section:
    report = context.report
    if context.kind is ReportKind.RECORDED:
        items = recorded.facts(report)
    elif context.kind.estimated:
        items = estimate.facts(report)
    else:
        env = report.environment
        device = f"{report.device} ({env['device_name']})" if env.get("device_name") else report.device
        items = [("target", report.target), ("device", device), *_environment(report)]
    return doc.Section("summary", "", (doc.Facts(tuple(items)),))


_KNOWN = ("torch", "python", "platform", "device_name", "cpu_count")


def _environment(report: Report) -> list[tuple[str, str]]:
    """torch, python, platform, CPUs, the date and anything else the environment records."""
    env = report.environment
    items = [(key, env.get(key, "?")) for key in ("torch", "python", "platform")]
    if env.get("cpu_count"):
        items.append(("CPUs", env["cpu_count"]))
    items.append(("date", report.created or "?"))
    return items + [(key, value) for key, value in sorted(env.items()) if key not in _KNOWN]


# ---- ranks ---------------------------------------------------------------------------------------


def _ranks(context: Context) -> doc.Section | None:
    """Every rank's row, the imbalance of their peaks, the peaks as bars, and which rank the
    sections below detail."""
    view = context.view
    if view is None:
        return None
    summary = view.summary
    drops = {"footprint_bytes": 2, "reserved_peak_bytes": 1}
    columns = (
        doc.Column("rank", doc.NUMBER),
        doc.Column("run", doc.LABEL, width=12),
        doc.Column("peak", doc.SIZE, strong=True),
        *(doc.Column(heading, doc.SIZE, drop=drops.get(attr, 1)) for attr, heading in size_columns(summary)),
        doc.Column("wall/call", doc.NUMBER, drop=3),
        doc.Column("peak during", doc.NAME),
    )
    rows = []
    for row in summary.rows:
        rank = doc.Value(str(row.rank), row.rank)
        if not row.ok:
            rows.append(doc.Row((rank, row.label), failure=row.error or ""))
            continue
        sizes = tuple(getattr(row, attr) for attr, _ in size_columns(summary))
        wall = doc.Value(format_ms(row.wall_ms), row.wall_ms)
        rows.append(doc.Row((rank, row.label, row.peak_bytes, *sizes, wall, doc.name(row.peak_op or "-"))))
    blocks: list = [doc.Table(columns, tuple(rows), name="runs")]
    blocks += [doc.Paragraph(doc.words(i.line), "strong") for i in summary.imbalances]
    blocks.append(_rank_bars(view))
    blocks.append(doc.Heading(doc.words(f"Details of {view.heading}")))
    blocks.append(
        doc.Paragraph(
            doc.words("The sections below detail this rank; the timelines and notes cover every rank."),
            "help",
            purpose=doc.EXPLAINS,
        )
    )
    return doc.Section(
        "ranks", "Ranks", tuple(block for block in blocks if block is not None), titled=_TITLED
    )


_TITLED = frozenset({doc.HTML, doc.MARKDOWN})


def _rank_bars(view: RankView) -> doc.Bars | None:
    rows = [row for row in view.summary.rows if row.ok and row.peak_bytes is not None]
    if not rows:
        return None
    highest = {(i.group, i.highest_label) for i in view.summary.imbalances}
    bars = tuple(doc.Bar(row.label, row.peak_bytes or 0, (row.group, row.label) in highest) for row in rows)
    return doc.Bars(
        "rank-peaks-chart",
        bars,
        x_label="peak above each call's start",
        caption="Peak of each rank's run; the highest of each group in red.",
    )


# ---- the verdict ---------------------------------------------------------------------------------


def _verdict(context: Context) -> doc.Section:
    return doc.Section(ANSWER, "", (doc.Answer(conclusions(context.detail, short=context.limits.short)),))


# ---- runs ----------------------------------------------------------------------------------------

# A live run's device-wide columns and the rest, by how soon a narrow terminal drops them.
_LIVE_DROP = {
    "footprint_bytes": 1,
    "reserved_peak_bytes": 2,
    "compile": 3,  # a compiled run's cost: kept before what it allocated in all
    "allocated_bytes": 4,
    "net_bytes": 5,
    "inputs_bytes": 6,
    "live_at_start_bytes": 7,
}
_RECORDED_DROP = {"allocated_bytes": 3, "live_at_start_bytes": 2, "reserved_peak_bytes": 1}
_ESTIMATE_DROP = {"live_at_start_bytes": 4, "net_bytes": 3, "allocated_bytes": 2, "reserved_peak_bytes": 1}


def _runs(context: Context) -> doc.Section:
    """One row per run: its figures by kind (live: times; recorded: above the recording's start;
    estimated: no times), the failed runs' messages, what the columns mean, each run's memory
    against its device's."""
    kind, report = context.kind, context.detail
    if kind is ReportKind.RECORDED:
        table, help_text = _recorded_runs(report), recorded.RUNS_HELP
    elif kind.estimated:
        table, help_text = estimate.runs_table(report), estimate.RUNS_HELP
    else:
        table, help_text = _live_runs(report), _live_help(report)
    # How the runs were made differently comes first (batch 8 -> 16): it may be the whole story.
    made = [line for diff in report.diffs if (line := made_differently(diff))]
    blocks: list = [doc.Paragraph(doc.words(line), "strong") for line in made[:1]]
    blocks.append(table)
    if kind is ReportKind.RUN and (legend := _wall_legend(report)):
        blocks.append(doc.Paragraph(doc.words(legend), "help", only=frozenset({doc.TERMINAL})))
    blocks.append(doc.Paragraph(doc.words(help_text), "help", purpose=doc.EXPLAINS))
    lines = (
        [] if kind.estimated else [line for run in report.ok_runs() if (line := recorded.device_line(run))]
    )
    if lines:
        blocks.append(doc.Items(tuple(doc.words(line) for line in lines)))
    return doc.Section("runs", "Runs", tuple(blocks))


def _live_runs(report: Report) -> doc.Table:
    compiled = any(run.compile_seconds is not None for run in report.runs.values())
    extra = recorded.memory_columns(report.runs.values())
    columns = (
        doc.Column("run", doc.LABEL, width=12),
        doc.Column("peak", doc.SIZE, strong=True),
        *(doc.Column(header, doc.SIZE, drop=_LIVE_DROP[attr]) for header, attr in extra),
        doc.Column("peak at", doc.NUMBER, detail=True),
        doc.Column("allocated", doc.SIZE, drop=_LIVE_DROP["allocated_bytes"]),
        doc.Column("net", doc.SIZE, signed=True, delta=True, drop=5),
        # Not "inputs": it holds the model and the optimizer state too, where the input category
        # at the peak is the input tensors alone.
        doc.Column("args", doc.SIZE, drop=6, secondary=True),
        doc.Column("wall/call", doc.NUMBER),
        *([doc.Column("compile", doc.NUMBER, drop=_LIVE_DROP["compile"])] if compiled else []),
        doc.Column("peak during", doc.NAME, width=30, brief=True),
        _DURING[1],
    )
    rows = []
    for label, run in report.runs.items():
        if run.failed:
            rows.append(doc.Row((label,), failure=run.failed))
            continue
        when = doc.peak_time_ms(run.timeline)
        wall = doc.Value(
            format_wall(run.wall_ms_all, run.wall_ms),
            run.wall_ms,
            f"{format_spread(run.wall_ms_all)}, {_TIMED.get(run.wall_timing, 'with the profiler on')}",
        )
        cells = (
            label,
            run.peak_bytes,
            *(getattr(run, attr) for _, attr in extra),
            doc.Value("-" if when is None else f"{when:.3f} ms", when),
            run.allocated_bytes,
            run.net_bytes,
            run.inputs_bytes,
            wall,
            *([doc.Value(format_seconds(run.compile_seconds), run.compile_seconds)] if compiled else []),
            *_during(run),
        )
        rows.append(doc.Row(cells))
    return doc.Table(columns, tuple(rows), name="runs")


_TIMED = {"timed": "timed without the profiler", "warm-up": "the warm-up call's, without the profiler"}
"""How a run's wall time was taken (``RunResult.wall_timing``), said on hover."""


def _recorded_runs(report: Report) -> doc.Table:
    columns = (
        doc.Column("run", doc.LABEL, width=12),
        *(
            doc.Column(header, doc.SIZE, strong=n == 0, drop=_RECORDED_DROP.get(attr, 0))
            for n, (header, attr) in enumerate(recorded.RECORDED_COLUMNS)
        ),
        *_DURING,
    )
    rows = [
        doc.Row((label, *(getattr(run, attr) for _, attr in recorded.RECORDED_COLUMNS), *_during(run)))
        for label, run in report.runs.items()
    ]
    return doc.Table(columns, tuple(rows), name="runs")


_DURING = (
    doc.Column("peak during", doc.NAME, width=24, brief=True),
    doc.Column("peak during", doc.NAME, detail=True),
)
"""The op at the peak: the summaries name it, HTML gives the stack of ops running there."""


def _during(run: RunResult) -> tuple:
    op = doc.name(peak_during(run)) if run.peak_op else doc.name("-")
    outer = run.peak_op_stack[:-1]
    if not outer:
        return op, op
    # HTML: the op, then the ops it ran inside, outermost first (folded when long, so that a
    # row stays a line or two on a phone).
    inside = doc.Listing(f"{doc.plain(op)} inside ", tuple(doc.name(name) for name in outer), noun="ranges")
    return op, inside


_MEANING = {
    "footprint_bytes": "footprint: everything live at the peak, what was live before the call included "
    "(explained runs; else torch.cuda.max_memory_allocated)",
    "live_at_start_bytes": "live at start: allocated when the call began",
    "reserved_peak_bytes": "reserved peak: the most the CUDA caching allocator held from the device",
}


def _live_help(report: Report) -> str:
    meaning = "".join(
        f" {_MEANING[attr]}." for _, attr in recorded.memory_columns(report.runs.values()) if attr in _MEANING
    )
    return (
        "peak: most live bytes above the call's start, from the allocator's own records (and the frees "
        "of tensors made before the call); peak at: when, in ms since the call started; allocated: all "
        "bytes allocated; net: left allocated at the end; args: the tensors the call was given (the "
        "model and optimizer state it reaches included, not the input category alone), live when the "
        "first call started and not in the peak; wall/call: the median of the "
        "calls timed without the profiler, ± half the spread of their middle half (hover for every "
        f"figure).{meaning}"
    )


_TIMED_ONCE = "a call that takes the time budget alone is timed once"


def _wall_legend(report: Report) -> str | None:
    runs = report.ok_runs()
    if not runs:
        return None
    if any(run.wall_timing == "profiled" for run in runs):
        return "wall/call: timed with the profiler on, which slows calls unevenly"
    if all(run.wall_timing == "warm-up" for run in runs):
        return f"wall/call: the warm-up call's, without the profiler ({_TIMED_ONCE})"
    calls = sorted({len(run.wall_ms_all) for run in runs})
    if calls[-1] <= 1:
        return f"wall/call: one call each, timed without the profiler ({_TIMED_ONCE})"
    counts = f"{calls[0]}" if len(calls) == 1 else f"{calls[0]} to {calls[-1]}"
    return (
        f"wall/call: median of {counts} calls timed without the profiler; ±: half the spread of the "
        "middle half of the calls"
    )


# ---- timelines -----------------------------------------------------------------------------------

CHART_POINTS = 2000
"""Points drawn per run of a live report (each bucket's highest point kept: the peak is drawn)."""
RECORDED_POINTS = 800
"""A recorded run's chart draws at most this many points per line (each bucket's highest)."""
CHART_PANELS = 24
"""At most this many recorded runs are drawn."""

_CAPTION = (
    "Live bytes above the start of each run's first measured call, every run on one scale. Hover "
    "for the time, the live bytes and the op running; drag across a time range (or Ctrl/Shift + "
    "scroll) to zoom, double-click to reset."
)


def _timeline(context: Context) -> doc.Section | None:
    """Bytes over time of every run (every rank's): live runs above their first call's start,
    recorded runs absolute with what the allocator reserved. (Estimates have none: the fake
    run's clock is not the call's.)"""
    if context.kind is ReportKind.RECORDED:
        return _recorded_timeline(context.report)
    runs = [r for r in context.report.ok_runs() if r.timeline.t_ns]
    title = "Memory timeline"
    if not runs:
        empty = "No allocations were recorded, so there is no timeline to draw."
        return doc.Section(
            "timeline", title, (doc.Paragraph(doc.words(empty), "empty", purpose=doc.WHY_EMPTY),)
        )
    series = tuple(doc.Series(r.label, r.timeline, r.peak_bytes, r.peak_op) for r in runs)
    calls = "; ".join(f"{r.label}: {_calls(r)}" for r in runs)
    chart = doc.TimelineChart(
        series,
        x_label="time since the call started (ms)",
        caption=f"{_CAPTION} The calls drawn: {calls}.",
        points=CHART_POINTS,
    )
    return doc.Section("timeline", title, (chart,))


def _calls(run: RunResult) -> str:
    count = len(run.call_numbers) or run.repeat
    return "its one measured call" if count <= 1 else f"its {count} measured calls, one after another"


def _recorded_timeline(report: Report) -> doc.Section:
    title = "Memory over time"
    drawn = [r for r in report.ok_runs() if r.timeline.t_ns]
    runs = ([r for r in drawn if r.device != "cpu"] or drawn)[:CHART_PANELS]
    if not runs:
        empty = "No run has a timeline (a snapshot without history or times)."
        return doc.Section(
            "timeline", title, (doc.Paragraph(doc.words(empty), "empty", purpose=doc.WHY_EMPTY),)
        )
    caption = (
        "Allocated bytes over time, absolute (what was live at the start included, dashed), and what "
        "the CUDA caching allocator reserved (the thin line), every run on one scale, from each "
        "recording's first memory event. Hover for the time and the bytes; drag across a time range "
        "(or Ctrl/Shift + scroll) to zoom, double-click to reset."
    )
    if len(drawn) > len(runs):
        caption += (
            f" {len(drawn) - len(runs)} more run(s) not drawn (host memory, or beyond {CHART_PANELS} runs)."
        )
    chart = doc.TimelineChart(
        tuple(_recorded_series(run) for run in runs),
        x_label="time since the recording's first memory event (ms)",
        caption=caption,
        points=RECORDED_POINTS,
        aria_label="; ".join(peak_line(r) for r in runs),
    )
    return doc.Section("timeline", title, (chart,))


def _recorded_series(run: RunResult) -> doc.Series:
    """A recorded run's line: absolute (live at start added), reserved where recorded."""
    start = run.live_at_start_bytes or 0
    details = []
    if start:
        details.append(f"{format_bytes(start)} live at start (dashed)")
    if run.timeline.reserved and run.reserved_peak_bytes is not None:
        details.append(f"reserved peak {format_bytes(run.reserved_peak_bytes)} (thin line)")
    return doc.Series(
        run.label,
        run.timeline,
        run.peak_bytes,
        peak_during(run) if run.peak_op else None,
        start_bytes=start,
        peak_suffix=" above start",
        details=", ".join(details),
    )


# ---- notes, torch's tables, the legend -------------------------------------------------------------


def _notes(context: Context) -> doc.Section | None:
    items = estimate.notes(context.report)
    if not items:
        return None
    # The short terminal report of live runs shows each note on one line (the full report,
    # Markdown and HTML whole); an estimate's notes say what it could not model: always whole.
    brief = context.limits.short and context.kind is ReportKind.RUN
    blocks = (doc.Notes(tuple(items), brief=brief),)
    return doc.Section("notes", "Notes", blocks, titled=_TITLED)


def _torch_tables(context: Context) -> doc.Section | None:
    tables = tuple(
        doc.Code(label, run.torch_table) for label, run in context.report.runs.items() if run.torch_table
    )
    return doc.Section("torch-table", "torch.profiler table", tables) if tables else None


def _legend(context: Context) -> doc.Section:
    """What the figures mean, said once at the end of a summary (Markdown)."""
    if context.kind is ReportKind.RECORDED:
        text = recorded.LEGEND
    elif context.kind.estimated:
        text = estimate.LEGEND
    else:
        text = "peak: most live bytes above the call's start (allocator records); sizes are 1024-based"
        if any(run.footprint_bytes is not None for run in context.detail.runs.values()):
            text += "; footprint: everything live at the peak, what was live before the call included"
        ok = context.detail.ok_runs()
        if len(ok) >= 2:
            text += f"; delta = {ok[1].label} - {ok[0].label}"
        text += "."
    return doc.Section(
        "legend", "", (doc.Paragraph(doc.words(text), "help", only=frozenset({doc.MARKDOWN})),)
    )


BUILDERS: dict[str, Callable[[Context], doc.Section | None]] = {
    "summary": _summary,
    "gate": lambda context: gate_section(context.gate),
    "ranks": _ranks,
    "verdict": _verdict,
    "runs": _runs,
    "compile": compile_section,
    "timeline": _timeline,
    "estimate": lambda context: estimate.section(context.detail),
    "snapshot": lambda context: recorded.snapshot_section(context.detail),
    "sites": lambda context: recorded.sites_section(context.detail, context.limits.sites),
    "peak-diff": peak_change_section,
    "at-peak": lambda context: at_peak_section(context),
    "ops": lambda context: ops_section(context),
    "fused": lambda context: fused_section(context),
    "notes": _notes,
    "torch-table": _torch_tables,
    "legend": _legend,
}
"""Each section's builder, by id: a section with nothing to show is None."""

for _id, _builder in BUILDERS.items():
    kinds.register_section(_id, _builder)
