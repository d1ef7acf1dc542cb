"""The HTML report's "At the peak" section: for each explained run, its footprint by category,
the timeline stacked by category (:func:`memprof.report.chart.stacked_chart`), every entry live
at the peak (a sortable table), an icicle of the peak by module -> source line (sizes on hover),
its modules and kernels.

Plain SVG and HTML, without any script library, offline under the report's
Content-Security-Policy. Hovering an element with a ``data-tip`` shows its text in a
tooltip (the report's script); every such element also has a ``title``, so the sizes show
where scripts do not run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from memprof.model.explanation import CATEGORIES, Category, nonzero_categories
from memprof.report.chart import Layer, stacked_chart
from memprof.report.rows import (
    AtPeakView,
    IcicleNode,
    at_peak_views,
    calls_text,
    footprint_text,
    grouping_text,
    icicle,
    module_text,
)
from memprof.text import html_text as _e
from memprof.units import format_bytes

if TYPE_CHECKING:
    from memprof.model import Report, RunResult
    from memprof.model.timeline import CategoryTimeline

SECTION_ID = "at-peak"

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


def category_chart(run: RunResult, index: int) -> str:
    """Live bytes by category over the explained call, stacked (parameters at the bottom) on the
    timeline chart's axes (:func:`memprof.report.chart.stacked_chart`); the peak marked. Empty
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
        "<figcaption>Live bytes by category over the explained call "
        "(what was live before it included); hover an area for its bytes at the peak.</figcaption></figure>"
    )


# ---- the icicle ---------------------------------------------------------------------------------


def icicle_html(run: RunResult) -> str:
    """The peak by module -> source line: each box as wide as its bytes; hover for its size."""
    root = icicle(run)
    if root is None or root.bytes <= 0:
        return ""
    return (
        f'<div class="icicle" data-run="{_e(run.label)}">{_node(root, 100.0)}</div>'
        '<p class="help">What is live at the peak by module (submodules below their module) and, '
        "last, by source line; a box is as wide as its bytes. Hover a box for its size.</p>"
    )


def _node(node: IcicleNode, width: float) -> str:
    colour = COLOURS.get(node.category, "#999999") if node.category else "#c9d6e8"
    tip = f"{node.path}: {_sized(node.bytes)}"
    bar = (
        f'<div class="bar" style="background:{colour}" data-bytes="{node.bytes}" {_tip(tip)}>'
        f"{_e(node.name)} {_e(format_bytes(node.bytes))}</div>"
    )
    kids = ""
    if node.children:
        inner = "".join(
            _node(child, child.bytes / node.bytes * 100 if node.bytes else 0.0) for child in node.children
        )
        kids = f'<div class="kids">{inner}</div>'
    return f'<div class="node" style="width:{width:.4f}%">{bar}{kids}</div>'


# ---- the tables ---------------------------------------------------------------------------------


def _size_cell(nbytes: int) -> str:
    return f'<td class="num" data-sort="{nbytes}" title="{nbytes:,} B">{_e(format_bytes(nbytes))}</td>'


def _text_cell(text: str, code: bool = False, css: str = "", then: str = "", lead: str = "") -> str:
    """A cell of ``text`` (as code); ``then``: a second line under it, after ``lead`` (the
    user's own line that called a library's: ``called from ...``)."""
    inner = f"<code>{_e(text)}</code>" if code and text else _e(text or "-")
    if then:
        inner += f'<br><span class="called">{_e(lead)}<code>{_e(then)}</code></span>'
    kind = f' class="{css}"' if css else ""
    return f'<td{kind} data-sort="{_e(text)}">{inner}</td>'


def _th(label: str, numeric: bool) -> str:
    kind = "num" if numeric else "text"
    return f'<th scope="col" data-type="{kind}" title="Click to sort">{_e(label)}</th>'


def _sortable(css: str, headers: list[tuple[str, bool]], rows: list[str]) -> str:
    head = "".join(_th(label, numeric) for label, numeric in headers)
    return (
        f'<div class="scroll tall"><table class="{css} sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def entries_table(view: AtPeakView) -> str:
    """Every entry live at the peak, then what could not be attributed (with the reason)."""
    rows = []
    for entry in view.entries:
        swatch = f'<span class="swatch" style="background:{COLOURS.get(entry.category, "#999")}"></span>'
        rows.append(
            "<tr>"
            + _size_cell(entry.bytes)
            + f'<td class="num" data-sort="{entry.count}">{entry.count}</td>'
            + f'<td class="nowrap" data-sort="{_e(entry.category)}">{swatch}{_e(entry.category)}</td>'
            + _text_cell(module_text(entry.module, entry.phase), code=True, css="nowrap")
            + _text_cell(entry.source, code=True, css="nowrap", then=entry.user_source, lead="called from ")
            + _text_cell(entry.source_text, code=True, css="statement", then=entry.user_source_text)
            + _text_cell(entry.op, code=True, css="op")
            + _text_cell(f"{entry.shape} {entry.dtype}".strip(), css="nowrap")
            + _text_cell("yes" if entry.before_call else "no")
            + "</tr>"
        )
    for u in view.unattributed:
        rows.append(
            '<tr class="unattributed">'
            + _size_cell(u.bytes)
            + f'<td class="num" data-sort="{u.count}">{u.count}</td>'
            + _text_cell("other")
            + _text_cell("")
            + f'<td colspan="3" data-sort="">not attributed: {_e(u.reason)}</td>'
            + _text_cell("")
            + _text_cell("yes" if u.before_call else "no")
            + "</tr>"
        )
    headers = [
        ("bytes", True),
        ("count", True),
        ("category", False),
        ("module", False),
        ("line", False),
        ("statement", False),
        ("op", False),
        ("shape", False),
        ("before the call", False),
    ]
    return _sortable("at-peak-entries", headers, rows)


def modules_table(view: AtPeakView) -> str:
    rows = [
        "<tr>"
        + _text_cell(m.module, code=True)
        + _text_cell(m.module_class)
        + _text_cell(m.phase)
        + f'<td class="num" data-sort="{m.calls}">{m.calls}</td>'
        + _size_cell(m.at_peak_bytes)
        + _size_cell(m.peak_bytes)
        + _size_cell(m.allocated_bytes)
        + "</tr>"
        for m in view.modules
    ]
    headers = [
        ("module", False),
        ("class", False),
        ("phase", False),
        ("calls", True),
        ("live at peak", True),
        ("peak inside", True),
        ("allocated", True),
    ]
    return _sortable("at-peak-modules", headers, rows)


def groups_table(view: AtPeakView) -> str:
    """The modules grouped by layer kind (``run.module_groups``)."""
    rows = [
        "<tr>"
        + _text_cell(g.group, code=True)
        + _text_cell(g.phase)
        + f'<td class="num" data-sort="{g.modules}">{g.modules}</td>'
        + f'<td class="num" data-sort="{g.calls}">{g.calls}</td>'
        + _size_cell(g.at_peak_bytes)
        + _size_cell(g.peak_bytes)
        + _size_cell(g.allocated_bytes)
        + "</tr>"
        for g in view.groups
    ]
    headers = [
        ("class" if grouping_text(view.groups) == "by class" else "path pattern", False),
        ("phase", False),
        ("modules", True),
        ("calls", True),
        ("live at peak", True),
        ("peak inside", True),
        ("allocated", True),
    ]
    return _sortable("at-peak-groups", headers, rows)


def kernels_table(view: AtPeakView) -> str:
    rows = [
        "<tr>"
        + _text_cell(k.name, code=True)
        + _text_cell(k.phase)
        + f'<td class="num" data-sort="{k.calls}">{k.calls}</td>'
        + _size_cell(k.allocated_bytes)
        + _size_cell(k.at_peak_bytes)
        + _text_cell(", ".join(op.removeprefix("aten::") for op in k.replaces))
        + "</tr>"
        for k in view.kernels
    ]
    headers = [
        ("kernel", False),
        ("phase", False),
        ("calls", True),
        ("produces", True),
        ("live at peak", True),
        ("eager ops it replaces", False),
    ]
    return _sortable("at-peak-kernels", headers, rows)


def _run_part(view: AtPeakView, index: int) -> str:
    run = view.run
    assert run.at_peak is not None
    chips = " ".join(
        f'<span class="chip"><span class="swatch" style="background:{COLOURS.get(name, "#999")}">'
        f"</span>{_e(name)} {_e(format_bytes(nbytes))}</span>"
        for name, nbytes in nonzero_categories(run.at_peak.by_category)
    )
    calls = calls_text(run)
    parts = [
        f"<h3>{_e(run.label)}</h3>",
        f'<p class="footprint">{_e(footprint_text(run))}</p>',
        f'<p class="categories">{chips}</p>',
        f'<p class="help">{_e(calls)}</p>' if calls else "",
        category_chart(run, index),
        "<h4>By module and line</h4>",
        icicle_html(run),
        "<h4>What is live at the peak</h4>",
        entries_table(view),
    ]
    if view.groups:
        parts += [f"<h4>Modules {_e(grouping_text(view.groups))}</h4>", groups_table(view)]
    if view.modules:
        parts += ["<h4>Modules</h4>", modules_table(view)]
    if view.kernels:
        parts += ["<h4>Kernels of compiled code</h4>", kernels_table(view)]
    return f'<div class="at-peak-run" data-run="{_e(run.label)}">{"".join(parts)}</div>'


def at_peak_section(report: Report) -> str:
    """The section of every explained run; none when no run was explained (profiled with
    ``--no-explain``, read from a recording, or from a report written before memprof explained
    peaks): like every section, it is there only when it has something to show."""
    views = at_peak_views(report, "html")
    if not views:
        return ""
    body = "".join(_run_part(view, index) for index, view in enumerate(views))
    help_text = (
        '<p class="help">Categories: parameter, gradient (.grad of parameters), optimizer_state, '
        "input (other tensors reachable from the arguments), activation (saved by autograd for "
        "backward), temporary (made during the call, none of the above), workspace (allocated "
        "inside an op, never a tensor of the program), other (buffers, module globals, what could "
        "not be attributed). Backward entries carry the forward line and module whose gradient "
        "they are.</p>"
    )
    return f'<section id="{SECTION_ID}"><h2>At the peak</h2>{body}{help_text}</section>'


CSS = """
.memprof-report .swatch{display:inline-block;width:.8em;height:.8em;margin-right:.3em;border-radius:2px;
 vertical-align:-.05em}
.memprof-report .chip{display:inline-block;margin:0 .9em .2em 0;white-space:nowrap}
.memprof-report .footprint{font-weight:600}
.memprof-report figure.category-chart{margin:.4em 0}
.memprof-report .icicle{font-size:11px;margin:.4em 0;user-select:none}
.memprof-report .icicle .node{display:flex;flex-direction:column;min-width:0;box-sizing:border-box}
.memprof-report .icicle .bar{height:20px;line-height:20px;overflow:hidden;white-space:nowrap;
 text-overflow:ellipsis;border:1px solid var(--mp-bg);padding:0 3px;box-sizing:border-box;cursor:default}
.memprof-report .icicle .kids{display:flex;flex-direction:row;width:100%}
.memprof-report .tooltip{position:fixed;pointer-events:none;background:var(--mp-fg);color:var(--mp-bg);
 font-size:12px;padding:3px 6px;border-radius:3px;display:none;z-index:10;max-width:40em}
.memprof-report tr.unattributed td{color:#7a4d00}
.memprof-report td.nowrap{white-space:nowrap}
.memprof-report .scroll.tall{max-height:32em;overflow-y:auto;border-bottom:1px solid var(--mp-border)}
.memprof-report .scroll.tall thead th{position:sticky;top:0}
.memprof-report td.statement{min-width:18em;max-width:34em}
.memprof-report td.op{min-width:16em}.memprof-report td.op code{overflow-wrap:anywhere}
"""

JS = """
(function () {
  var here = document.currentScript;
  var root = here && here.parentNode ? here.parentNode : document;
  if (root.getAttribute && root.getAttribute("data-tips")) { return; }
  if (root.setAttribute) { root.setAttribute("data-tips", "1"); }
  // With the script running, its tooltip replaces the browser's (titles stay for pages without it).
  root.querySelectorAll("[data-tip]").forEach(function (el) {
    el.removeAttribute("title");
    Array.prototype.forEach.call(el.querySelectorAll("title"), function (t) { t.remove(); });
  });
  var tip = document.createElement("div");
  tip.className = "tooltip";
  tip.setAttribute("role", "tooltip");
  root.appendChild(tip);
  root.addEventListener("mousemove", function (event) {
    var target = event.target.closest ? event.target.closest("[data-tip]") : null;
    if (!target || !root.contains(target)) { tip.style.display = "none"; return; }
    tip.textContent = target.getAttribute("data-tip");
    tip.style.display = "block";
    tip.style.left = (event.clientX + 12) + "px";
    tip.style.top = (event.clientY + 12) + "px";
  });
  root.addEventListener("mouseleave", function () { tip.style.display = "none"; });
})();
"""
