"""The report's charts as inline SVG: the memory timeline (interactive, with the page's script,
``assets/chart.js``), bars, and a sweep.

Why drawn here rather than by a plotting library: the report must open offline, from a file, a
CI artifact or a notebook, under a Content-Security-Policy that forbids every other source. A
library that embeds itself offline (Plotly, Bokeh) adds 1-4 MB of script to every report and a
dependency to every install; matplotlib draws a static picture only. The chart needs little:
step lines on one time axis, hover, zoom, two layouts. Python draws the whole chart as SVG (so it
shows where scripts do not run, e.g. a notebook viewer), and the script (``assets/chart.js``,
about 150 lines) only moves it: zooming changes the plot's ``viewBox`` (the paths are in data
units and keep their stroke width), the x ticks are redrawn, and hovering reads the embedded
data.

What it shows: every run on one time axis (ms since its call started) and one byte scale, either
overlaid in one panel or one panel per run with a shared y axis (a toggle); hovering shows the
time, each run's live bytes and the op running there; dragging or the mouse wheel zooms to a
time range, "Reset zoom" (or a double click) shows everything again; the legend gives each
run's peak, its time as a number and its op. A run read from a recording is drawn absolute
(``start_bytes``, live at its start, added to every point, and a dashed line there) with what
the CUDA caching allocator reserved (the timeline's ``reserved``) as a thinner line.

Reusable by any section that plots bytes over time: :func:`timeline_chart` takes the series;
:func:`bar_chart` draws labelled horizontal bars (the ranks' peaks); :func:`sweep_chart`, what
each value of a sweep needs against the capacity. :mod:`memprof.outputs.peak_chart` stacks bands
on the same axes (what is live by category during an explained call).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from memprof.analysis.timeline import downsample_timeline
from memprof.core.text import html_text as _e
from memprof.core.text import visible
from memprof.core.units import format_bytes
from memprof.model.timeline import Timeline
from memprof.outputs.document import Bar, Series, TimelineChart, peak_time_ms
from memprof.outputs.layout import shorten

if TYPE_CHECKING:
    from memprof.model.sweep import Sweep

CHART_POINTS = 2000
"""Points drawn per run (each bucket's highest point kept: the peak is drawn)."""

# Geometry in SVG units (the SVG scales to its container's width).
WIDTH, LEFT, RIGHT, TOP, BOTTOM = 1100, 78, 18, 14, 40
OVERLAY_HEIGHT, PANEL_HEIGHT, PANEL_GAP = 300, 150, 26
Y_UNITS = 1000  # the plot's own y range: 0 at the top, 1000 at the bottom


COLOURS = 5
"""Runs take the theme's colours ``--mp-run-0`` to ``--mp-run-4`` in turn."""


def _colour(index: int) -> str:
    return f"mp-run-{index % COLOURS}"


def nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """Round values from ``low`` to ``high``, about ``count`` of them (steps of 1, 2 or 5 x 10^k).
    The script's ``ticks`` does the same after a zoom."""
    span = high - low
    if not span > 0:
        return [low]
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    first = math.ceil(low / step - 1e-9)
    return [i * step for i in range(first, math.floor(high / step + 1e-9) + 1)]


def format_tick_ms(value: float, step: float) -> str:
    """A time tick with as many decimals as the step needs (the script's ``tickLabel``)."""
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step > 0 else 0
    return f"{value:.{decimals}f}"


def _unit(top: float) -> tuple[str, int]:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if top >= scale:
            return unit, scale
    return "B", 1


@dataclass(frozen=True)
class Frame:
    """What every panel shares: the time range (ms) and the byte range (one scale for all)."""

    t0: float
    t1: float
    low: int
    high: int

    def y(self, nbytes: float) -> float:
        """Bytes -> the plot's own y units (0 at the top)."""
        return (self.high - nbytes) / (self.high - self.low) * Y_UNITS


def _frame(series: Sequence[Series]) -> Frame:
    ends = [s.timeline.t_ns[-1] / 1e6 for s in series if s.timeline.t_ns]
    t1 = max(ends + [0.0])
    low = min([0] + [min(s.values()) for s in series if s.timeline.bytes])
    high = max(
        [1]
        + [max(s.values()) for s in series if s.timeline.bytes]
        + [max(s.timeline.reserved) for s in series if s.timeline.reserved]
        + [s.peak_bytes + s.start_bytes for s in series]
    )
    floor = _axis_floor(series, high)
    if floor:
        return Frame(0.0, t1 if t1 > 0 else 1e-3, floor, int(high + (high - floor) * 0.08))
    return Frame(0.0, t1 if t1 > 0 else 1e-3, low, int(high * 1.08) if high > 0 else 1)


def _axis_floor(series: Sequence[Series], high: int) -> int:
    """Where the byte axis starts: 0, or just below the lowest point drawn when what was live
    from the start of every recording dwarfs what moved (8.7 GiB live, a 60 MiB peak above it:
    on an axis from 0 a flat line). The tick labels then start there, not at 0."""
    lows = [min(s.values()) for s in series if s.timeline.bytes]
    if not lows or any(s.start_bytes <= 0 for s in series):
        return 0
    bottom = min(lows)
    span = high - bottom
    if bottom <= 4 * span:
        return 0
    return int(bottom - span * 0.15)


def _path(timeline: Timeline, frame: Frame, close: bool, values: Sequence[int] | None = None) -> str:
    """A step line (the value holds until the next point) in data units: x ms, y plot units;
    ``values`` (default the timeline's bytes) at the timeline's times."""
    parts = []
    values = timeline.bytes if values is None else values
    for i, (t, b) in enumerate(zip(timeline.t_ns, values, strict=True)):
        x, y = f"{t / 1e6:.4f}".rstrip("0").rstrip("."), f"{frame.y(b):.1f}"
        parts.append(f"M{x} {y}" if i == 0 else f"H{x}V{y}")
    if parts and close:
        first = f"{timeline.t_ns[0] / 1e6:.4f}".rstrip("0").rstrip(".")
        parts.append(f"V{frame.y(0):.1f}H{first}Z")
    return "".join(parts)


def _peak_point(series: Series) -> tuple[float, int]:
    """(time in ms, bytes as drawn) of the timeline's highest point: the peak."""
    timeline = series.timeline
    index = max(range(len(timeline.bytes)), key=timeline.bytes.__getitem__)
    return timeline.t_ns[index] / 1e6, timeline.bytes[index] + series.start_bytes


def y_axis(frame: Frame, top: float, height: float) -> str:
    unit, scale = _unit(frame.high)
    parts = []
    for value in nice_ticks(frame.low / scale, frame.high / scale, 5):
        y = top + frame.y(value * scale) / Y_UNITS * height
        parts.append(
            f'<line class="mp-grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="mp-tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:g} {unit}</text>'
        )
    return "".join(parts)


def x_axis(frame: Frame, y: float, label: str) -> str:
    ticks = nice_ticks(frame.t0, frame.t1)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    width = WIDTH - LEFT - RIGHT
    parts = [f'<g class="mp-xticks" data-y="{y:.1f}">']
    for value in ticks:
        x = LEFT + (value - frame.t0) / (frame.t1 - frame.t0) * width
        parts.append(
            f'<line class="mp-axis" x1="{x:.1f}" x2="{x:.1f}" y1="{y:.1f}" y2="{y + 5:.1f}"/>'
            f'<text class="mp-tick" x="{x:.1f}" y="{y + 18:.1f}" text-anchor="middle">'
            f"{format_tick_ms(value, step)}</text>"
        )
    parts.append("</g>")
    parts.append(
        f'<text class="mp-label" x="{LEFT + width / 2:.1f}" y="{y + 34:.1f}" text-anchor="middle">'
        f"{_e(label)}</text>"
    )
    return "".join(parts)


def _plot(
    uid: str, series: Sequence[Series], indices: Sequence[int], frame: Frame, top: float, height: float
) -> str:
    """A plot area in data units: the runs' fills and lines (from the shared defs), reserved
    and live-at-start lines where known, peak marks."""
    view = f"{frame.t0} 0 {frame.t1 - frame.t0} {Y_UNITS}"
    uses = "".join(
        f'<use href="#{uid}-fill-{i}" class="mp-fill {_colour(i)}"/>'
        + (
            f'<use href="#{uid}-reserved-{i}" class="mp-reserved {_colour(i)}"/>'
            if series[i].timeline.reserved
            else ""
        )
        + (f'<use href="#{uid}-start-{i}" class="mp-start {_colour(i)}"/>' if series[i].start_bytes else "")
        + f'<use href="#{uid}-line-{i}" class="mp-line {_colour(i)}"/>'
        f'<use href="#{uid}-peak-{i}" class="mp-peak {_colour(i)}"/>'
        for i in indices
    )
    width = WIDTH - LEFT - RIGHT
    return (
        f'<rect class="mp-frame" x="{LEFT}" y="{top:.1f}" width="{width}" height="{height:.1f}"/>'
        f'<svg class="mp-plot" x="{LEFT}" y="{top:.1f}" width="{width}" height="{height:.1f}" '
        f'viewBox="{view}" preserveAspectRatio="none">{uses}</svg>'
    )


def _layout_svg(uid: str, series: Sequence[Series], frame: Frame, stacked: bool, x_label: str) -> str:
    """The overlaid panel, or one panel per run (each with its title and the shared y axis)."""
    parts = []
    if stacked:
        top = TOP
        for i, s in enumerate(series):
            parts.append(f'<text class="mp-title" x="{LEFT}" y="{top + 12:.1f}">{_e(s.label)}</text>')
            parts.append(
                y_axis(frame, top + 18, PANEL_HEIGHT) + _plot(uid, series, [i], frame, top + 18, PANEL_HEIGHT)
            )
            top += 18 + PANEL_HEIGHT + PANEL_GAP
        axis_y = top - PANEL_GAP
    else:
        parts.append(
            y_axis(frame, TOP, OVERLAY_HEIGHT)
            + _plot(uid, series, range(len(series)), frame, TOP, OVERLAY_HEIGHT)
        )
        axis_y = TOP + OVERLAY_HEIGHT
    height = axis_y + BOTTOM
    layout = "stacked" if stacked else "overlay"
    hidden = ' style="display:none"' if stacked else ""
    return (
        f'<svg class="mp-svg" data-layout="{layout}" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'width="100%" role="img" aria-hidden="true"{hidden}>'
        + "".join(parts)
        + x_axis(frame, axis_y, x_label)
        + f'<line class="mp-cursor" x1="0" x2="0" y1="{TOP}" y2="{axis_y:.1f}" style="display:none"/>'
        + f'<rect class="mp-brush" x="0" y="{TOP}" width="0" height="{axis_y - TOP:.1f}" '
        + 'style="display:none"/>'
        + "</svg>"
    )


def _defs(uid: str, series: Sequence[Series], frame: Frame) -> str:
    shapes = []
    for i, s in enumerate(series):
        t_peak, b_peak = _peak_point(s)
        values = s.values()
        shapes.append(
            f'<path id="{uid}-fill-{i}" d="{_path(s.timeline, frame, close=True, values=values)}"/>'
            f'<path id="{uid}-line-{i}" d="{_path(s.timeline, frame, close=False, values=values)}" '
            'vector-effect="non-scaling-stroke"/>'
            f'<path id="{uid}-peak-{i}" d="M{t_peak:.4f} {frame.y(b_peak):.1f}V{Y_UNITS}" '
            'vector-effect="non-scaling-stroke"/>'
        )
        if s.timeline.reserved:
            shapes.append(
                f'<path id="{uid}-reserved-{i}" '
                f'd="{_path(s.timeline, frame, close=False, values=s.timeline.reserved)}" '
                'vector-effect="non-scaling-stroke"/>'
            )
        if s.start_bytes:
            y = frame.y(s.start_bytes)
            shapes.append(
                f'<path id="{uid}-start-{i}" d="M{frame.t0:g} {y:.1f}H{frame.t1:.4f}" '
                'vector-effect="non-scaling-stroke"/>'
            )
    return (
        f'<svg class="mp-defs" width="0" height="0" aria-hidden="true"><defs>{"".join(shapes)}</defs></svg>'
    )


def _data(series: Sequence[Series], frame: Frame) -> str:
    """The points for hovering, as JSON safe inside a ``<script>`` element."""
    runs = []
    for s in series:
        t = s.timeline
        runs.append(
            {
                "label": visible(s.label),
                "t": [round(v / 1e6, 6) for v in t.t_ns],
                "b": list(s.values()),
                "r": list(t.reserved),
                "ops": [visible(name) for name in t.op_names],
                "op": list(t.op_at),
            }
        )
    text = json.dumps(
        {"t0": frame.t0, "t1": frame.t1, "left": LEFT, "width": WIDTH - LEFT - RIGHT, "runs": runs}
    )
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def legend(series: Sequence[Series]) -> str:
    """Each run's peak, when it happened and the op running there."""
    items = []
    for i, s in enumerate(series):
        when = peak_time_ms(s.timeline)
        at = f" at {when:.3f} ms" if when is not None else ""
        during = f" during <code>{_e(s.peak_op)}</code>" if s.peak_op else ""
        details = f"; {_e(s.details)}" if s.details else ""
        items.append(
            f'<li><span class="mp-swatch {_colour(i)}"></span><b>{_e(s.label)}</b>: peak '
            f"{_e(format_bytes(s.peak_bytes))}{_e(s.peak_suffix)}"
            f'<span class="mp-peak-time">{_e(at)}</span>{during}{details}</li>'
        )
    return f'<ul class="mp-legend">{"".join(items)}</ul>'


def timeline_chart(chart: TimelineChart, uid: str) -> str:
    """The chart as an HTML fragment (``uid`` makes its ids unique in a page); its script,
    ``assets/chart.js``, is included once per page by the caller. Each series is drawn from at
    most ``chart.points`` points (each bucket's highest: the peak is kept)."""
    x_label, caption, aria_label = chart.x_label, chart.caption, chart.aria_label
    series = [
        replace(s, timeline=downsample_timeline(s.timeline, chart.points))
        for s in chart.series
        if s.timeline.t_ns
    ]
    frame = _frame(series)
    label = aria_label or "; ".join(
        f"{s.label}: peak {format_bytes(s.peak_bytes)}" + (f" during {s.peak_op}" if s.peak_op else "")
        for s in series
    )
    toggle = (
        '<label><input type="checkbox" class="mp-stacked"> one panel per run (shared y axis)</label>'
        if len(series) > 1
        else ""
    )
    return (
        f'<figure class="mp-chart" id="{uid}" role="img" aria-label="{_e(label)}">'
        '<div class="mp-controls"><button type="button" class="mp-reset">Reset zoom</button>'
        f'{toggle}<span class="mp-range"></span></div>'
        f'<div class="mp-area">{_defs(uid, series, frame)}'
        f"{_layout_svg(uid, series, frame, False, x_label)}{_layout_svg(uid, series, frame, True, x_label)}"
        '<div class="mp-tooltip" role="status" style="display:none"></div></div>'
        f"{legend(series)}"
        f"<figcaption>{_e(caption)}</figcaption>"
        f'<script type="application/json" class="mp-data">{_data(series, frame)}</script></figure>'
    )


BAR_HEIGHT, BAR_GAP = 18, 8
BAR_LABEL = 48
"""A bar's label is cut in the middle to at most this many characters."""


def bar_chart(bars: Sequence[Bar], x_label: str) -> str:
    """Horizontal bars as inline SVG, top to bottom in the given order: each labelled with its
    name on the left and its size after the bar, on one byte scale; marked bars in the theme's
    red. Plain SVG, no script: it reads the same wherever the report is shown."""
    top = max([bar.value for bar in bars] + [1])
    unit, scale = _unit(top)
    labels = [shorten(bar.label, BAR_LABEL) for bar in bars]
    left = max(60, 8 + 7 * max([len(label) for label in labels] + [0]))
    right = 90  # room for the size after the longest bar
    width = WIDTH - left - right
    axis_y = TOP + len(bars) * (BAR_HEIGHT + BAR_GAP)
    high = top * 1.02
    parts = []
    for value in nice_ticks(0, high / scale, 6):
        x = left + value * scale / high * width
        parts.append(
            f'<line class="mp-grid" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{axis_y:.1f}"/>'
            f'<text class="mp-tick" x="{x:.1f}" y="{axis_y + 16:.1f}" text-anchor="middle">{value:g}</text>'
        )
    for n, bar in enumerate(bars):
        y = TOP + n * (BAR_HEIGHT + BAR_GAP)
        length = bar.value / high * width
        mark = " mp-highest" if bar.marked else ""
        parts.append(
            f'<text x="{left - 6}" y="{y + BAR_HEIGHT - 4}" text-anchor="end">{_e(labels[n])}</text>'
            f'<rect class="mp-bar{mark}" x="{left}" y="{y}" width="{length:.1f}" height="{BAR_HEIGHT}"/>'
            f'<text x="{left + length + 6:.1f}" y="{y + BAR_HEIGHT - 4}">{_e(format_bytes(bar.value))}</text>'
        )
    parts.append(
        f'<text class="mp-label" x="{left + width / 2:.1f}" y="{axis_y + 34:.1f}" text-anchor="middle">'
        f"{_e(x_label)} ({unit})</text>"
    )
    height = axis_y + BOTTOM
    return (
        f'<svg class="mp-bars" viewBox="0 0 {WIDTH} {height:.0f}" width="100%" role="img" '
        f'aria-hidden="true">{"".join(parts)}</svg>'
    )


SWEEP_HEIGHT = 260


def sweep_chart(sweep: Sweep) -> str:
    """What each swept value needs of the device, as points on a line (red where it does not
    fit), the line fitted through the listed values' footprints (dashed), the capacity (red)
    and the capacity less the reserve (red, dashed), as static SVG. Empty for fewer than two
    numeric values."""
    points = sorted(((float(p.value), p) for p in sweep.points if _number(p.value)), key=lambda vp: vp[0])
    if len(points) < 2:
        return ""
    capacity = sweep.capacity_bytes
    highest = max([p.needed_bytes for _, p in points] + [capacity or 0, 1])
    x1 = points[-1][0] * 1.05 or 1.0
    frame = Frame(0.0, x1, 0, int(highest * 1.08))
    width, height = WIDTH - LEFT - RIGHT, SWEEP_HEIGHT

    def x(value: float) -> float:
        return LEFT + value / x1 * width

    def y(nbytes: float) -> float:
        return TOP + frame.y(nbytes) / Y_UNITS * height

    parts = [f'<rect class="mp-frame" x="{LEFT}" y="{TOP}" width="{width}" height="{height}"/>']
    parts.append(y_axis(frame, TOP, height))
    axis_y = TOP + height
    for value in nice_ticks(0.0, x1):
        at = f"{x(value):.1f}"
        parts.append(
            f'<line class="mp-axis" x1="{at}" x2="{at}" y1="{axis_y}" y2="{axis_y + 5}"/>'
            f'<text class="mp-tick" x="{at}" y="{axis_y + 18}" text-anchor="middle">{value:g}</text>'
        )
    parts.append(
        f'<text class="mp-label" x="{LEFT + width / 2:.1f}" y="{axis_y + 34}" text-anchor="middle">'
        f"{_e(sweep.parameter)}</text>"
    )
    if sweep.slope_bytes is not None and sweep.intercept_bytes is not None:
        ends = [(v, sweep.intercept_bytes + sweep.slope_bytes * v) for v in (0.0, x1)]
        line = " ".join(f"{x(v):.1f},{y(min(max(b, 0), frame.high)):.1f}" for v, b in ends)
        parts.append(f'<polyline class="mp-fit" points="{line}"/>')
    if capacity:
        parts += _limit(capacity, f"capacity {format_bytes(capacity)}", "mp-capacity", y, width)
        if sweep.reserve_bytes:
            usable = capacity - sweep.reserve_bytes
            text = f"less the {format_bytes(sweep.reserve_bytes)} reserve: {format_bytes(usable)}"
            parts += _limit(usable, text, "mp-usable", y, width, below=True)
    need = " ".join(f"{x(v):.1f},{y(p.needed_bytes):.1f}" for v, p in points)
    parts.append(f'<polyline class="mp-need" points="{need}"/>')
    for value, point in points:
        over = " mp-over" if point.fits is False else ""
        tip = f"{point.label}: needs {format_bytes(point.needed_bytes)}"
        parts.append(
            f'<circle class="mp-point{over}" cx="{x(value):.1f}" cy="{y(point.needed_bytes):.1f}" r="3.5">'
            f"<title>{_e(tip)}</title></circle>"
        )
    return (
        f'<svg class="mp-sweep" viewBox="0 0 {WIDTH} {axis_y + BOTTOM}" width="100%" role="img" '
        f'aria-label="{_e(sweep.verdict or sweep.parameter)}">{"".join(parts)}</svg>'
    )


def _limit(
    nbytes: int, text: str, css: str, y: Callable[[float], float], width: float, below: bool = False
) -> list[str]:
    """A horizontal line across the plot at ``nbytes``, labelled above it at its right end (or,
    ``below``, under it at its left end, clear of the points that near it on the right)."""
    at = y(nbytes)
    x, anchor, label_y = (LEFT + 6, "start", at + 14) if below else (LEFT + width - 4, "end", at - 4)
    return [
        f'<line class="{css}" x1="{LEFT}" x2="{LEFT + width}" y1="{at:.1f}" y2="{at:.1f}"/>',
        f'<text x="{x}" y="{label_y:.1f}" text-anchor="{anchor}">{_e(text)}</text>',
    ]


def _number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False
