"""The memory timeline as an interactive chart: inline SVG and a small inline script.

Why drawn here rather than by a plotting library: the report must open offline, from a file, a
CI artifact or a notebook, under a Content-Security-Policy that forbids every other source. A
library that embeds itself offline (Plotly, Bokeh) adds 1-4 MB of script to every report and a
dependency to every install; matplotlib draws a static picture only. The chart needs little:
step lines on one time axis, hover, zoom, two layouts. Python draws the whole chart as SVG (so it
shows where scripts do not run, e.g. a notebook viewer), and the script (about 150 lines) only
moves it: zooming changes the plot's ``viewBox`` (the paths are in data units and keep their
stroke width), the x ticks are redrawn, and hovering reads the embedded data.

What it shows: every run on one time axis (ms since its call started) and one byte scale, either
overlaid in one panel or one panel per run with a shared y axis (a toggle); hovering shows the
time, each run's live bytes and the op running there; dragging or the mouse wheel zooms to a
time range, "Reset zoom" (or a double click) shows everything again; the legend gives each
run's peak, its time as a number and its op. A run read from a recording is drawn absolute
(``start_bytes``, live at its start, added to every point, and a dashed line there) with what
the CUDA caching allocator reserved (the timeline's ``reserved``) as a thinner line.

Reusable by any section that plots bytes over time: :func:`timeline_chart` takes the series;
:func:`bar_chart` draws labelled horizontal bars (the ranks' peaks); :func:`stacked_chart`, bands
stacked on the same axes (what is live by category during an explained call).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memprof.analysis.timeline import downsample_timeline
from memprof.model.timeline import Timeline
from memprof.report.layout import shorten
from memprof.text import html_text as _e
from memprof.text import visible
from memprof.units import format_bytes

CHART_POINTS = 2000
"""Points drawn per run (each bucket's highest point kept: the peak is drawn)."""

# Geometry in SVG units (the SVG scales to its container's width).
WIDTH, LEFT, RIGHT, TOP, BOTTOM = 1100, 78, 18, 14, 40
OVERLAY_HEIGHT, PANEL_HEIGHT, PANEL_GAP = 300, 150, 26
Y_UNITS = 1000  # the plot's own y range: 0 at the top, 1000 at the bottom


COLOURS = 5
"""Runs take the theme's colours ``--mp-run-0`` to ``--mp-run-4`` in turn."""


@dataclass(frozen=True)
class Series:
    """One run's line: its label, timeline, peak (bytes) and the op running at the peak.

    ``start_bytes``: live at the start, added to every point (the line is then absolute) and
    drawn as a dashed line; ``peak_suffix`` follows the peak in the legend (`` above start``);
    ``details``: more for the legend (plain text). The timeline's ``reserved`` bytes, when it
    has them, are drawn as a thinner line."""

    label: str
    timeline: Timeline
    peak_bytes: int
    peak_op: str | None = None
    start_bytes: int = 0
    peak_suffix: str = ""
    details: str = ""

    def values(self) -> tuple[int, ...]:
        """The line's bytes: each point's live bytes plus ``start_bytes``."""
        return tuple(b + self.start_bytes for b in self.timeline.bytes)


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
class _Frame:
    """What every panel shares: the time range (ms) and the byte range (one scale for all)."""

    t0: float
    t1: float
    low: int
    high: int

    def y(self, nbytes: float) -> float:
        """Bytes -> the plot's own y units (0 at the top)."""
        return (self.high - nbytes) / (self.high - self.low) * Y_UNITS


def _frame(series: Sequence[Series]) -> _Frame:
    ends = [s.timeline.t_ns[-1] / 1e6 for s in series if s.timeline.t_ns]
    t1 = max(ends + [0.0])
    low = min([0] + [min(s.values()) for s in series if s.timeline.bytes])
    high = max(
        [1]
        + [max(s.values()) for s in series if s.timeline.bytes]
        + [max(s.timeline.reserved) for s in series if s.timeline.reserved]
        + [s.peak_bytes + s.start_bytes for s in series]
    )
    return _Frame(0.0, t1 if t1 > 0 else 1e-3, low, int(high * 1.08) if high > 0 else 1)


def _path(timeline: Timeline, frame: _Frame, close: bool, values: Sequence[int] | None = None) -> str:
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


def peak_time_ms(timeline: Timeline) -> float | None:
    """When the timeline reaches its highest point (ms since the call started), if it has points."""
    if not timeline.bytes:
        return None
    index = max(range(len(timeline.bytes)), key=timeline.bytes.__getitem__)
    return timeline.t_ns[index] / 1e6


def _y_axis(frame: _Frame, top: float, height: float) -> str:
    unit, scale = _unit(frame.high)
    parts = []
    for value in nice_ticks(frame.low / scale, frame.high / scale, 5):
        y = top + frame.y(value * scale) / Y_UNITS * height
        parts.append(
            f'<line class="mp-grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="mp-tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:g} {unit}</text>'
        )
    return "".join(parts)


def _x_axis(frame: _Frame, y: float, label: str) -> str:
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
    uid: str, series: Sequence[Series], indices: Sequence[int], frame: _Frame, top: float, height: float
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


def _layout_svg(uid: str, series: Sequence[Series], frame: _Frame, stacked: bool, x_label: str) -> str:
    """The overlaid panel, or one panel per run (each with its title and the shared y axis)."""
    parts = []
    if stacked:
        top = TOP
        for i, s in enumerate(series):
            parts.append(f'<text class="mp-title" x="{LEFT}" y="{top + 12:.1f}">{_e(s.label)}</text>')
            parts.append(
                _y_axis(frame, top + 18, PANEL_HEIGHT)
                + _plot(uid, series, [i], frame, top + 18, PANEL_HEIGHT)
            )
            top += 18 + PANEL_HEIGHT + PANEL_GAP
        axis_y = top - PANEL_GAP
    else:
        parts.append(
            _y_axis(frame, TOP, OVERLAY_HEIGHT)
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
        + _x_axis(frame, axis_y, x_label)
        + f'<line class="mp-cursor" x1="0" x2="0" y1="{TOP}" y2="{axis_y:.1f}" style="display:none"/>'
        + f'<rect class="mp-brush" x="0" y="{TOP}" width="0" height="{axis_y - TOP:.1f}" '
        + 'style="display:none"/>'
        + "</svg>"
    )


def _defs(uid: str, series: Sequence[Series], frame: _Frame) -> str:
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


def _data(series: Sequence[Series], frame: _Frame) -> str:
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


CAPTION = (
    "Live bytes above the call's start, every run on one scale. Hover for the time, the live bytes "
    "and the op running; drag across a time range (or Ctrl/Shift + scroll) to zoom, double-click to "
    "reset."
)


def timeline_chart(
    series: Sequence[Series],
    uid: str,
    *,
    points: int = CHART_POINTS,
    x_label: str = "time since the call started (ms)",
    caption: str = CAPTION,
    aria_label: str | None = None,
) -> str:
    """The chart as an HTML fragment (``uid`` makes its ids unique in a page); its script,
    :data:`CHART_JS`, is included once per page by the caller. Each series is drawn from at
    most ``points`` points (each bucket's highest: the peak is kept)."""
    series = [replace(s, timeline=downsample_timeline(s.timeline, points)) for s in series if s.timeline.t_ns]
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


@dataclass(frozen=True)
class Bar:
    """One bar of :func:`bar_chart`: its label, its size in bytes, and whether to mark it."""

    label: str
    value: int
    marked: bool = False


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


@dataclass(frozen=True)
class Layer:
    """One band of :func:`stacked_chart`: its category (``name``), its ``colour`` (CSS), its
    bytes at each point, and the text shown when it is hovered (``tip``)."""

    name: str
    colour: str
    values: Sequence[int]
    tip: str = ""


STACKED_HEIGHT = 240


def stacked_chart(
    t_ns: Sequence[int], layers: Sequence[Layer], x_label: str = "time since the call started (ms)"
) -> str:
    """Bands stacked bottom up in the order given, on the timeline's axes (sizes on the left,
    ms since the first point below), as static SVG: step areas (a value holds until the next
    point), the highest total marked as the peak. A band's ``tip`` shows on hover (``data-tip``,
    read by the page's script, and a ``<title>`` where no script runs). The last point holds a
    little longer than its moment, so a peak at the very end shows. Empty for fewer than two
    points."""
    count = len(t_ns)
    if count < 2 or not layers:
        return ""
    totals = [sum(layer.values[i] for layer in layers) for i in range(count)]
    start, span = t_ns[0], max(t_ns[-1] - t_ns[0], 1) * 1.02
    frame = _Frame(0.0, span / 1e6, 0, int(max(totals) * 1.08) or 1)
    width, height = WIDTH - LEFT - RIGHT, STACKED_HEIGHT
    axis_y = TOP + height

    def x(t: float) -> str:
        return f"{LEFT + (t - start) / span * width:.1f}"

    def y(nbytes: int) -> str:
        return f"{TOP + frame.y(nbytes) / Y_UNITS * height:.1f}"

    below = [0] * count
    bands = []
    for layer in layers:
        above = [b + v for b, v in zip(below, layer.values, strict=True)]
        outline = [f"M{x(t_ns[0])} {y(above[0])}"]
        outline += [f"H{x(t_ns[k])}V{y(above[k])}" for k in range(1, count)]
        outline.append(f"H{LEFT + width:.1f}V{y(below[-1])}H{x(t_ns[-1])}")
        outline += [f"V{y(below[k - 1])}H{x(t_ns[k - 1])}" for k in range(count - 1, 0, -1)]
        tip = f' data-tip="{_e(layer.tip)}"><title>{_e(layer.tip)}</title></path>' if layer.tip else "/>"
        bands.append(
            f'<path class="category" data-category="{_e(layer.name)}" d="{"".join(outline)}Z" '
            f'fill="{_e(layer.colour)}"{tip}'
        )
        below = above
    peak = max(range(count), key=totals.__getitem__)
    px = float(x(t_ns[peak]))
    # The label stays inside the plot: to the left of a peak near the right edge.
    anchor = "end" if px > WIDTH - RIGHT - 60 else ("start" if px < LEFT + 60 else "middle")
    mark = (
        f'<line class="mp-peak-mark" x1="{px:.1f}" x2="{px:.1f}" y1="{TOP}" y2="{axis_y:.1f}"/>'
        f'<text class="mp-peak-label" x="{px:.1f}" y="{max(float(y(totals[peak])) - 4, TOP + 10):.1f}" '
        f'text-anchor="{anchor}">peak {_e(format_bytes(totals[peak]))}</text>'
    )
    return (
        f'<svg class="mp-stacked" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} '
        f'{axis_y + BOTTOM:.0f}" width="100%">'
        f'<rect class="mp-frame" x="{LEFT}" y="{TOP}" width="{width}" height="{height}"/>'
        f"{_y_axis(frame, TOP, height)}{''.join(bands)}{_x_axis(frame, axis_y, x_label)}{mark}</svg>"
    )


# A fill is never stroked: its path is in data units without non-scaling-stroke, so a stroke
# would be one millisecond wide (hundreds of pixels on a short trace); ``.mp-chart .mp-fill``
# outranks the run colours' stroke.
# The chart's styles: colours come from the report's theme (``--mp-*`` variables).
CHART_CSS = """
.memprof-report .mp-chart{margin:.4em 0}
.memprof-report .mp-area{position:relative}
.memprof-report .mp-svg{display:block;width:100%;height:auto;user-select:none;cursor:crosshair}
.memprof-report .mp-defs{position:absolute;width:0;height:0;overflow:hidden}
.memprof-report .mp-frame{fill:var(--mp-plot-bg);stroke:var(--mp-border)}
.memprof-report .mp-grid{stroke:var(--mp-grid);stroke-width:1}
.memprof-report .mp-axis{stroke:var(--mp-muted)}
.memprof-report .mp-tick,.memprof-report .mp-label{fill:var(--mp-muted);font-size:12px}
.memprof-report .mp-title{fill:var(--mp-fg);font-size:13px;font-weight:600}
.memprof-report .mp-line{fill:none;stroke-width:1.6}
.memprof-report .mp-fill{stroke:none;fill-opacity:.14}
.memprof-report .mp-peak{fill:none;stroke-width:1.2;stroke-dasharray:4 3}
.memprof-report .mp-cursor{stroke:var(--mp-fg);stroke-width:1;stroke-dasharray:2 2}
.memprof-report .mp-brush{fill:var(--mp-accent);fill-opacity:.15;stroke:var(--mp-accent)}
.memprof-report .mp-run-0{stroke:var(--mp-run-0);fill:var(--mp-run-0);background:var(--mp-run-0)}
.memprof-report .mp-run-1{stroke:var(--mp-run-1);fill:var(--mp-run-1);background:var(--mp-run-1)}
.memprof-report .mp-run-2{stroke:var(--mp-run-2);fill:var(--mp-run-2);background:var(--mp-run-2)}
.memprof-report .mp-run-3{stroke:var(--mp-run-3);fill:var(--mp-run-3);background:var(--mp-run-3)}
.memprof-report .mp-run-4{stroke:var(--mp-run-4);fill:var(--mp-run-4);background:var(--mp-run-4)}
.memprof-report .mp-line.mp-run-0,.memprof-report .mp-line.mp-run-1,.memprof-report .mp-line.mp-run-2,
.memprof-report .mp-line.mp-run-3,.memprof-report .mp-line.mp-run-4,.memprof-report .mp-peak{fill:none}
.memprof-report .mp-chart .mp-fill{stroke:none}
.memprof-report .mp-reserved,.memprof-report .mp-start{fill:none}
.memprof-report .mp-reserved{stroke-width:1;stroke-opacity:.6}
.memprof-report .mp-start{stroke-width:1;stroke-dasharray:7 4;stroke-opacity:.8}
.memprof-report .mp-stacked{display:block;width:100%;height:auto}
.memprof-report .mp-peak-mark{stroke:var(--mp-bad);stroke-width:1.2;stroke-dasharray:4 3}
.memprof-report .mp-peak-label{fill:var(--mp-bad);font-size:12px}
.memprof-report .mp-bars .mp-bar{fill:var(--mp-run-0)}
.memprof-report .mp-bars .mp-bar.mp-highest{fill:var(--mp-bad)}
.memprof-report .mp-bars text{fill:var(--mp-fg);font-size:12px}
.memprof-report .mp-controls{display:flex;gap:1em;align-items:center;flex-wrap:wrap;font-size:.92em;
 margin:.2em 0}
.memprof-report .mp-controls button{font:inherit;color:var(--mp-fg);background:var(--mp-head-bg);
 border:1px solid var(--mp-border);border-radius:3px;padding:.1em .6em;cursor:pointer}
.memprof-report .mp-range{color:var(--mp-muted)}
.memprof-report .mp-tooltip{position:absolute;pointer-events:none;background:var(--mp-bg);color:var(--mp-fg);
 border:1px solid var(--mp-border);border-radius:3px;padding:.3em .5em;font-size:12px;white-space:nowrap;
 box-shadow:0 1px 4px rgba(0,0,0,.25);z-index:2}
.memprof-report .mp-legend{list-style:none;padding:0;margin:.3em 0;display:flex;flex-wrap:wrap;gap:.2em 1.5em}
.memprof-report .mp-swatch{display:inline-block;width:.8em;height:.8em;margin-right:.35em;border-radius:2px}
"""

# Zoom rewrites each plot's viewBox and the x ticks; hover reads the embedded points. Bytes are
# formatted as memprof.units.format_bytes does; ticks as nice_ticks/format_tick_ms do.
CHART_JS = """
(function () {
  var here = document.currentScript;
  var root = here && here.parentNode ? here.parentNode : document;
  var SVG = "http://www.w3.org/2000/svg";
  function bytes(n) {
    var sign = n < 0 ? "-" : "", size = Math.abs(n);
    var units = [["TiB", 1099511627776], ["GiB", 1073741824], ["MiB", 1048576], ["KiB", 1024]];
    for (var i = 0; i < units.length; i++) {
      if (size >= units[i][1]) { return sign + (size / units[i][1]).toFixed(1) + " " + units[i][0]; }
    }
    return sign + Math.floor(size) + " B";
  }
  function ticks(lo, hi, count) {
    var span = hi - lo;
    if (!(span > 0)) { return [lo]; }
    var raw = span / count, mag = Math.pow(10, Math.floor(Math.log10(raw))), step = 10 * mag;
    [1, 2, 5, 10].some(function (m) { if (m * mag >= raw * (1 - 1e-9)) { step = m * mag; return true; } });
    var out = [];
    for (var i = Math.ceil(lo / step - 1e-9); i <= Math.floor(hi / step + 1e-9); i++) { out.push(i * step); }
    return out;
  }
  function tickLabel(v, step) {
    return v.toFixed(step > 0 ? Math.max(0, -Math.floor(Math.log10(step) + 1e-9)) : 0);
  }
  function el(name, attrs, text) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }
  function bind(fig) {
    if (fig.getAttribute("data-bound")) { return; }
    fig.setAttribute("data-bound", "1");
    var data = JSON.parse(fig.querySelector("script.mp-data").textContent);
    var svgs = Array.prototype.slice.call(fig.querySelectorAll("svg.mp-svg"));
    var area = fig.querySelector(".mp-area"), tip = fig.querySelector(".mp-tooltip");
    var rangeText = fig.querySelector(".mp-range"), view = [data.t0, data.t1], drag = null;
    function at(svg, clientX) {
      var box = svg.getBoundingClientRect(), x = (clientX - box.left) * svg.viewBox.baseVal.width / box.width;
      var f = (x - data.left) / data.width;
      return {x: x, f: f, t: view[0] + f * (view[1] - view[0])};
    }
    function drawTicks(svg) {
      var g = svg.querySelector("g.mp-xticks"), y = Number(g.getAttribute("data-y"));
      while (g.firstChild) { g.removeChild(g.firstChild); }
      var ts = ticks(view[0], view[1], 6), step = ts.length > 1 ? ts[1] - ts[0] : 1;
      ts.forEach(function (v) {
        var x = (data.left + (v - view[0]) / (view[1] - view[0]) * data.width).toFixed(1);
        g.appendChild(el("line", {"class": "mp-axis", x1: x, x2: x, y1: y, y2: y + 5}));
        var label = tickLabel(v, step);
        g.appendChild(el("text", {"class": "mp-tick", x: x, y: y + 18, "text-anchor": "middle"}, label));
      });
    }
    function setView(a, b) {
      var full = data.t1 - data.t0;
      if (!(b - a > full * 1e-6)) { return; }
      a = Math.max(data.t0, a); b = Math.min(data.t1, b);
      view = [a, b];
      fig.querySelectorAll("svg.mp-plot").forEach(function (plot) {
        plot.setAttribute("viewBox", a + " 0 " + (b - a) + " 1000");
      });
      svgs.forEach(drawTicks);
      var zoomed = a > data.t0 || b < data.t1;
      rangeText.textContent = zoomed ? "showing " + a.toFixed(3) + " to " + b.toFixed(3) + " ms" : "";
      fig.setAttribute("data-view", a + "," + b);
    }
    function pointAt(run, t) {
      var lo = 0, hi = run.t.length - 1;
      if (hi < 0 || t < run.t[0]) { return -1; }
      while (lo < hi) {
        var mid = (lo + hi + 1) >> 1;
        if (run.t[mid] <= t) { lo = mid; } else { hi = mid - 1; }
      }
      return lo;
    }
    function hover(svg, event) {
      var p = at(svg, event.clientX), cursor = svg.querySelector(".mp-cursor");
      if (p.f < 0 || p.f > 1) { cursor.style.display = "none"; tip.style.display = "none"; return; }
      cursor.setAttribute("x1", p.x); cursor.setAttribute("x2", p.x); cursor.style.display = "";
      while (tip.firstChild) { tip.removeChild(tip.firstChild); }
      var head = document.createElement("div");
      head.className = "mp-tip-time"; head.textContent = p.t.toFixed(3) + " ms";
      tip.appendChild(head);
      data.runs.forEach(function (run, i) {
        var k = pointAt(run, p.t), line = document.createElement("div");
        var op = k >= 0 && run.op.length && run.op[k] >= 0 && run.op[k] < run.ops.length
          ? ", " + run.ops[run.op[k]] : "";
        var live = k >= 0 ? bytes(run.b[k]) : "-";
        if (k >= 0 && run.r.length) { live += " allocated, " + bytes(run.r[k]) + " reserved"; }
        line.className = "mp-tip-run";
        line.textContent = run.label + ": " + live + op;
        tip.appendChild(line);
      });
      var box = area.getBoundingClientRect(), left = event.clientX - box.left + 14;
      tip.style.display = "";
      if (left + tip.offsetWidth > box.width) {
        left = Math.max(0, event.clientX - box.left - tip.offsetWidth - 14);
      }
      tip.style.left = left + "px";
      tip.style.top = Math.max(0, event.clientY - box.top + 10) + "px";
    }
    svgs.forEach(function (svg) {
      var brush = svg.querySelector(".mp-brush");
      svg.addEventListener("mousemove", function (event) {
        hover(svg, event);
        if (drag && drag.svg === svg) {
          var x = at(svg, event.clientX).x, x0 = Math.min(drag.x, x), x1 = Math.max(drag.x, x);
          brush.setAttribute("x", x0); brush.setAttribute("width", x1 - x0); brush.style.display = "";
        }
      });
      svg.addEventListener("mouseleave", function () {
        svg.querySelector(".mp-cursor").style.display = "none"; tip.style.display = "none";
      });
      svg.addEventListener("mousedown", function (event) {
        var p = at(svg, event.clientX);
        if (event.button === 0 && p.f >= 0 && p.f <= 1) {
          drag = {svg: svg, x: p.x, t: p.t};
          event.preventDefault();
        }
      });
      svg.addEventListener("mouseup", function (event) {
        if (!drag || drag.svg !== svg) { return; }
        var p = at(svg, event.clientX), start = drag;
        drag = null; brush.style.display = "none";
        if (Math.abs(p.x - start.x) > 4) { setView(Math.min(start.t, p.t), Math.max(start.t, p.t)); }
      });
      svg.addEventListener("wheel", function (event) {
        if (!(event.ctrlKey || event.shiftKey || event.metaKey)) { return; }
        event.preventDefault();
        var p = at(svg, event.clientX), factor = event.deltaY < 0 ? 0.8 : 1.25;
        var c = Math.min(Math.max(p.t, view[0]), view[1]);
        setView(c - (c - view[0]) * factor, c + (view[1] - c) * factor);
      }, {passive: false});
      svg.addEventListener("dblclick", function () { setView(data.t0, data.t1); });
    });
    document.addEventListener("mouseup", function () {
      if (drag) { drag.svg.querySelector(".mp-brush").style.display = "none"; drag = null; }
    });
    fig.querySelector(".mp-reset").addEventListener("click", function () { setView(data.t0, data.t1); });
    var toggle = fig.querySelector(".mp-stacked");
    if (toggle) {
      toggle.addEventListener("change", function () {
        svgs.forEach(function (svg) {
          var stacked = svg.getAttribute("data-layout") === "stacked";
          svg.style.display = stacked === toggle.checked ? "" : "none";
        });
      });
    }
    setView(data.t0, data.t1);
  }
  root.querySelectorAll("figure.mp-chart").forEach(bind);
})();
"""
