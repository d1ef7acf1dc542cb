"""The charts of "At the peak" in the HTML report: the timeline of the explained call stacked by
category (:func:`category_chart`, on the timeline chart's axes) and an icicle of the peak by
module -> source line (:func:`icicle_html`), each category in its colour (:data:`COLOURS`).

Plain SVG and HTML, without any script library, offline under the report's
Content-Security-Policy. Hovering an element with a ``data-tip`` shows its text in a
tooltip (the page's script, ``assets/tips.js``); every such element also has a ``title``, so
the sizes show where scripts do not run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memprof.core.text import html_text as _e
from memprof.core.units import format_bytes
from memprof.model.explanation import CATEGORIES, Category
from memprof.outputs.chart import BOTTOM, LEFT, RIGHT, TOP, WIDTH, Y_UNITS, Frame, x_axis, y_axis
from memprof.outputs.peak import IcicleNode, icicle

if TYPE_CHECKING:
    from memprof.model.run import RunResult
    from memprof.model.timeline import CategoryTimeline

COLOURS = {category.value: category.colour for category in Category}
"""One colour per category, the same in the chart, the table and the icicle."""

CHART_POINTS = 600
"""Points drawn per category (each bucket keeps its highest total; the peak is kept)."""


def _tip(text: str) -> str:
    """Attributes that show ``text`` on hover: the report's tooltip, and ``title`` without it."""
    return f'data-tip="{_e(text)}" title="{_e(text)}"'


def _sized(nbytes: int) -> str:
    return f"{format_bytes(nbytes)} ({nbytes:,} B)"


# ---- the timeline stacked by category -----------------------------------------------------------


def _reduced(timeline: CategoryTimeline, names: list[str]) -> tuple[list[int], list[list[int]]]:
    """At most :data:`CHART_POINTS` points: each bucket's highest total, and the peak."""
    t = list(timeline.t_ns)
    series = [list(timeline.bytes[name]) for name in names]
    count = len(t)
    if count <= CHART_POINTS:
        return t, series
    totals = [sum(values[i] for values in series) for i in range(count)]
    peak = max(range(count), key=totals.__getitem__)
    keep = {peak, 0, count - 1}
    size = count / CHART_POINTS
    for bucket in range(CHART_POINTS):
        lo, hi = int(bucket * size), max(int((bucket + 1) * size), int(bucket * size) + 1)
        keep.add(max(range(lo, min(hi, count)), key=totals.__getitem__))
    chosen = sorted(keep)
    return [t[i] for i in chosen], [[values[i] for i in chosen] for values in series]


def category_chart(run: RunResult, index: int, caption: str) -> str:
    """Live bytes by category over the explained call, stacked (parameters at the bottom) on the
    timeline chart's axes (:func:`memprof.outputs.chart.stacked_chart`); the peak marked. Empty
    when the run has no such timeline."""
    timeline = run.timeline.by_category
    if timeline is None or len(timeline.t_ns) < 2:
        return ""
    names = [name for name in CATEGORIES if any(timeline.bytes.get(name, ()))]
    if not names:
        return ""
    t, series = _reduced(timeline, names)
    at_peak: Mapping[str, int] = run.at_peak.by_category if run.at_peak is not None else {}
    layers = [
        Layer(name, COLOURS[name], values, f"{name}: {_sized(at_peak.get(name, 0))} at the peak")
        for name, values in zip(names, series, strict=True)
    ]
    peak = max(sum(values[i] for values in series) for i in range(len(t)))
    label = f"{run.label}: live bytes by category; peak {format_bytes(peak)}"
    return (
        f'<figure class="chart category-chart" id="category-chart-{index}" role="img" '
        f'aria-label="{_e(label)}">{stacked_chart([v - t[0] for v in t], layers)}'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


# ---- the icicle ---------------------------------------------------------------------------------


def icicle_html(run: RunResult) -> str:
    """The peak by module -> source line: each box as wide as its bytes; hover for its size."""
    root = icicle(run)
    if root is None or root.bytes <= 0:
        return ""
    return f'<div class="icicle" data-run="{_e(run.label)}">{_node(root, 100.0)}</div>'


def ink(colour: str) -> str:
    """The text colour that reads on ``colour`` (``#rrggbb``): near-black on a light one,
    white on a dark one (the higher WCAG contrast)."""

    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(int(colour[i : i + 2], 16)) for i in (1, 3, 5))
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#111111" if (luminance + 0.05) / (0.0056 + 0.05) >= 1.05 / (luminance + 0.05) else "#ffffff"


def _node(node: IcicleNode, width: float) -> str:
    tip = f"{node.path}: {_sized(node.bytes)}"
    if node.category:
        colour = COLOURS.get(node.category, "#999999")
        look = f'class="bar" style="background:{colour};color:{ink(colour)}"'
    else:  # a module: the theme's own box colour, light or dark
        look = 'class="bar module"'
    bar = (
        f'<div {look} data-bytes="{node.bytes}" {_tip(tip)}>'
        f"{_e(node.name)} {_e(format_bytes(node.bytes))}</div>"
    )
    kids = ""
    if node.children:
        inner = "".join(
            _node(child, child.bytes / node.bytes * 100 if node.bytes else 0.0) for child in node.children
        )
        kids = f'<div class="kids">{inner}</div>'
    return f'<div class="node" style="width:{width:.4f}%">{bar}{kids}</div>'


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
    frame = Frame(0.0, span / 1e6, 0, int(max(totals) * 1.08) or 1)
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
        f"{y_axis(frame, TOP, height)}{''.join(bands)}{x_axis(frame, axis_y, x_label)}{mark}</svg>"
    )
