"""HTML: the report's document (:mod:`memprof.outputs.build`) as one self-contained file (inline
CSS, inline SVG charts, one small inline script), or a fragment for a notebook.

It makes no network request: no CDN, no web font, no image file. A Content-Security-Policy in
the page forbids any other source, so it opens the same from ``file://`` offline, from a CI
artifact or an e-mail attachment. Every name is HTML-escaped: op names and ``record_function``
labels can hold ``<``, ``>``, ``&`` and quotes; invisible and control characters in them are
shown escaped (:func:`memprof.core.text.visible`).

The style and the script are package files (``memprof/outputs/assets``): the colours
(``theme.css``: light, or dark when the reader's system asks for it, set on the report's own
root so it reads the same inside a dark notebook), the layout (``report.css``: it fits a 1,200 px
window and a 390 px phone, a table too wide for the screen scrolling inside its own box), the
charts', and the scripts that sort and filter tables, move the timeline and show tooltips
(``format.js`` holds what they compute, tested outside a browser). Ops without memory activity
(or repeating an op they call, see :mod:`memprof.outputs.rows`) are hidden behind a toggle, a
long list in a cell is collapsed, and the charts are drawn here (:mod:`memprof.outputs.chart`
says why).
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import TYPE_CHECKING, Any

from memprof.core.text import html_text as _e
from memprof.core.units import format_bytes
from memprof.outputs import document as doc
from memprof.outputs import peak_change
from memprof.outputs.build import RECORDED_POINTS, Limits, build
from memprof.outputs.chart import bar_chart, sweep_chart, timeline_chart
from memprof.outputs.layout import shorten
from memprof.outputs.peak_chart import COLOURS, category_chart, icicle_html

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memprof.model.report import Report

CHART_POINTS = RECORDED_POINTS
"""A recorded run's chart draws at most this many points per line (each bucket's highest)."""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

NOTE_LIMIT = 80
"""A list in a cell longer than this (characters) is collapsed to its first words."""

_STYLES = ("theme.css", "report.css", "chart.css", "peak.css")
_SCRIPTS = ("format.js", "tables.js", "chart.js", "tips.js")


@functools.cache
def asset(name: str) -> str:
    """A file of ``memprof/outputs/assets`` as the page includes it: CSS without its comments
    and blank lines, each line stripped; a script as it is."""
    text = (resources.files("memprof.outputs") / "assets" / name).read_text(encoding="utf-8")
    if not name.endswith(".css"):
        return text
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.strip() for line in text.splitlines() if line.strip()) + "\n"


THEME_CSS = asset("theme.css")
"""The report's colours, set on its own root (background included), so it reads the same on
any page, a dark notebook too. Sections use only these variables."""


def limits(top: int | None = None) -> Limits:
    """What HTML shows: every op (or the ``top``), each comparison's table, the rows the
    summaries leave out behind a toggle, every entry, module and kernel at each peak."""
    return Limits(top=top, quiet=True, every_comparison=True, sites=20)


def render_html(
    report: Report, standalone: bool = True, top: int | None = None, *, rank: int | None = None
) -> str:
    """The report as HTML: a whole page (``standalone``), or a fragment for Jupyter.

    Its sections (ids) are those its kind declares (:mod:`memprof.outputs.kinds`) that have
    something to show in HTML; a report of several ranks has ``ranks`` after the summary (the
    sections below it detail one rank, the highest peak's or ``rank``; the timelines and notes
    cover every rank). Ops: every op unless ``top`` is given.
    """
    document = build(report, limits(top), rank=rank)
    sections = "".join(_section(document, section) for section in document.sections)
    script = "<script>" + "".join(asset(name) for name in _SCRIPTS) + "</script>"
    body = f'<div class="memprof-report"><h1>{_e(document.name)}</h1>{sections}{script}</div>'
    style = "<style>\n" + "".join(asset(name) for name in _STYLES) + "</style>"
    if not standalone:
        # Jupyter shows the fragment inside its own page: the style (and the colours) come along.
        return f"{style}{body}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(document.name)}</title>{style}</head>\n<body>\n{body}\n</body></html>\n"
    )


_FACTS_SAID = ("device", "torch", "date", "source", "gpu")
"""The facts a report's folded header names in its summary line."""


LEAVES_OUT = frozenset({doc.LEFT_OUT})
"""A page shows everything: what a summary left out is not said."""


LAYOUTS: doc.Layouts = {doc.PeakChange: peak_change.html_blocks}
"""The parts HTML lays out its own way."""


def drawn(column: doc.Column) -> bool:
    """Whether HTML draws ``column``: every figure, each in full (not its brief form)."""
    return doc.HTML in column.only and not column.brief


def _section(document: doc.Document, section: doc.Section) -> str:
    blocks = doc.laid_out(section.shown(doc.HTML, LEAVES_OUT), LAYOUTS)
    if not blocks:
        return ""
    title = f"<h2>{_e(section.title)}</h2>" if section.title and doc.HTML in section.titled else ""
    return (
        f'<section id="{section.id}">{title}{"".join(_block(document, block) for block in blocks)}</section>'
    )


# ---- blocks --------------------------------------------------------------------------------------


def _block(document: doc.Document, block: doc.Block) -> str:
    if isinstance(block, doc.Table):
        return table_html(block)
    if isinstance(block, doc.Heading):
        level = min(max(block.level, 3), 4)
        lead = f'<p class="footprint">{inline(block.lead)}</p>' if block.lead else ""
        return f"<h{level}>{inline(block.text)}</h{level}>{lead}"
    if isinstance(block, doc.Paragraph):
        css = {"strong": "verdict", "help": "help", "empty": "empty"}.get(block.role, "")
        if block.role == "strong":
            return f'<div class="conclusion"><p class="verdict">{inline(block.text)}</p></div>'
        return f'<p class="{css}">{inline(block.text)}</p>' if css else f"<p>{inline(block.text)}</p>"
    if isinstance(block, doc.Items):
        return '<ul class="facts">' + "".join(f"<li>{inline(line)}</li>" for line in block.lines) + "</ul>"
    if isinstance(block, doc.Facts):
        # Folded, so that the answer comes first on a phone's screen; its summary says the most.
        rows = "".join(f"<dt>{_e(label)}</dt><dd>{_e(value)}</dd>" for label, value in block.items)
        said = ", ".join(f"{label} {value}" for label, value in block.items if label in _FACTS_SAID)
        summary = f"<summary>{_e(said or 'Where it ran')}</summary>"
        return f'<details class="env">{summary}<dl class="env">{rows}</dl></details>'
    if isinstance(block, doc.Categories):
        return f'<p class="categories">{_chips(block.by_category)}</p>'
    if isinstance(block, doc.Notes):
        items = "".join(f"<li><b>{_e(whose)}</b>: {_e(note)}</li>" for whose, note in block.items)
        return f"<ul>{items}</ul>"
    if isinstance(block, doc.Answer):
        return "".join(
            '<div class="conclusion">'
            + f'<p class="verdict">{_e(first)}</p>'
            + "".join(f'<p class="summary-line">{_e(line)}</p>' for line in rest)
            + "</div>"
            for first, *rest in (group.lines for group in block.first_first)
        )
    if isinstance(block, doc.Code):
        return f"<details><summary>{_e(block.label)}</summary><pre>{_e(block.text)}</pre></details>"
    return _chart(document, block)


def _chart(document: doc.Document, block: doc.Block) -> str:
    if isinstance(block, doc.TimelineChart):
        return timeline_chart(block, document.uid)
    if isinstance(block, doc.CategoryChart):
        return category_chart(block.run, block.index, block.caption)
    if isinstance(block, doc.Icicle):
        return icicle_html(block.run)
    if isinstance(block, doc.Bars):
        label = "; ".join(f"{bar.label}: {format_bytes(bar.value)}" for bar in block.bars)
        return (
            f'<figure class="mp-bars-chart" id="{block.chart_id}" role="img" aria-label="{_e(label)}">'
            f"{bar_chart(block.bars, block.x_label)}<figcaption>{_e(block.caption)}</figcaption></figure>"
        )
    if isinstance(block, doc.SweepChart):
        svg = sweep_chart(block.sweep)
        return (
            f'<figure class="mp-sweep-chart">{svg}<figcaption>{_e(SWEEP_CAPTION)}</figcaption></figure>'
            if svg
            else ""
        )
    raise TypeError(f"no HTML for {type(block).__name__}")


SWEEP_CAPTION = (
    "What each value needs of the device (the reserve on CUDA, else the footprint), the line through "
    "the listed values' footprints (dashed), the capacity and, dashed, the capacity less the reserve "
    "kept for what lies outside the caching allocator; a red point does not fit."
)


def _chips(by_category: Mapping[str, int]) -> str:
    from memprof.model.explanation import nonzero_categories

    return " ".join(
        f'<span class="chip"><span class="swatch" style="background:{COLOURS.get(name, "#999")}">'
        f"</span>{_e(name)} {_e(format_bytes(nbytes))}</span>"
        for name, nbytes in nonzero_categories(by_category)
    )


def inline(text: doc.Inline | doc.Listing | str) -> str:
    """Text with its names as code, a line break as ``<br>``; a long list collapsed behind its
    lead and count (``fuses 23 ops``)."""
    if isinstance(text, str):
        return _e(text)
    if isinstance(text, doc.Listing):
        full = inline(text.inline())
        if len(doc.plain(text.inline())) <= NOTE_LIMIT:
            return full
        if len(text.items) == 1:
            summary = f"{_e(text.lead)}<code>{_e(shorten(doc.plain(text.items[0]), 32))}</code>"
        else:
            summary = _e(f"{text.lead}{len(text.items)} {text.noun}")
        return f'<details class="note"><summary>{summary}</summary>{full}</details>'
    parts, called = [], False
    for span in text:
        if span is doc.BREAK or span.text == doc.BREAK.text:
            parts.append('<br><span class="called">')
            called = True
        elif span.code:
            parts.append(f"<code>{_e(span.text)}</code>")
        else:
            parts.append(_e(span.text))
    return "".join(parts) + ("</span>" if called else "")


# ---- tables --------------------------------------------------------------------------------------


def table_html(table: doc.Table) -> str:
    """A table of the columns HTML shows, in a box that scrolls when it is wider than the
    screen; a sortable table's cells carry what they sort by (exact bytes); a filterable one
    comes with a filter box and a toggle for the rows the summaries leave out."""
    shown = [n for n, column in enumerate(table.columns) if drawn(column)]
    columns = [table.columns[n] for n in shown]
    head = "".join(_th(column, table.sortable) for column in columns)
    rows = "".join(_row(table, row, columns, shown) for row in table.rows)
    data = "".join(f' data-{key}="{_e(value)}"' for key, value in table.data)
    css = f"{table.name} sortable" if table.sortable else table.name
    tall = " tall" if table.name.startswith("at-peak") else ""
    html = (
        f'<div class="scroll{tall}"><table class="{css}"{data}><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )
    return (_controls(table) if table.filter else "") + html


def _th(column: doc.Column, sortable: bool) -> str:
    label = _e(column.full or column.header)
    if not sortable:
        return f'<th scope="col">{label}</th>'
    kind = "num" if column.numeric else "text"
    return f'<th scope="col" data-type="{kind}" title="Click to sort">{label}</th>'


def _row(table: doc.Table, row: doc.Row, columns: list[doc.Column], shown: list[int]) -> str:
    if row.failure is not None:
        given = [_cell(columns[n], cell) for n, cell in enumerate(row.cells) if n < len(columns)]
        span = len(columns) - len(given)
        return f'<tr class="failed">{"".join(given)}<td colspan="{span}">failed: {_e(row.failure)}</td></tr>'
    attrs = f' class="quiet" title="hidden: {_e(row.hidden)}"' if row.hidden else ""
    attrs = f' class="{row.mark}"' if row.mark else attrs
    return (
        f"<tr{attrs}>"
        + "".join(_cell(column, row.cells[n]) for n, column in zip(shown, columns, strict=True))
        + "</tr>"
    )


def _cell(column: doc.Column, value: Any) -> str:
    kind = column.kind
    if kind == doc.SIZE:
        if value is None:
            return '<td class="num" data-sort="">-</td>'
        text = _e(format_bytes(value, signed=column.signed))
        return f'<td class="num" data-sort="{int(value)}" title="{int(value):,} B">{text}</td>'
    if kind == doc.COUNT:
        return (
            '<td class="num" data-sort="">-</td>'
            if value is None
            else f'<td class="num" data-sort="{value}">{value:,}</td>'
        )
    if kind == doc.NUMBER:
        value = value if isinstance(value, doc.Value) else doc.Value(str(value))
        sort = "" if value.sort is None or value.sort != value.sort else f"{value.sort}"
        title = f' title="{_e(value.title)}"' if value.title else ""
        return f'<td class="num" data-sort="{sort}"{title}>{_e(value.text)}</td>'
    if kind == doc.LABEL:
        return f'<th scope="row">{_e(value)}</th>'
    if kind == doc.BAR:
        return f'<td class="bar-cell"><span class="bar" style="width:{100 * value:.1f}%"></span></td>'
    if kind == doc.CATEGORY:
        swatch = f'<span class="swatch" style="background:{COLOURS.get(value.split()[0], "#999")}"></span>'
        return f'<td class="nowrap" data-sort="{_e(value)}">{swatch}{_e(value)}</td>'
    content = value if not isinstance(value, str) else doc.words(value)
    sort = _e(doc.plain(content.inline() if isinstance(content, doc.Listing) else content))
    css = {doc.NAME: "name", doc.NOTE: "note"}.get(kind)
    return f'<td{f" class={chr(34)}{css}{chr(34)}" if css else ""} data-sort="{sort}">{inline(content)}</td>'


def _controls(table: doc.Table) -> str:
    hidden = sum(1 for row in table.rows if row.hidden)
    toggle = (
        f'<label><input type="checkbox" class="mp-show-quiet"> show {hidden} more op'
        f"{'s' if hidden > 1 else ''} (no memory activity, repeating or wrapping an op they call)</label>"
        if hidden
        else ""
    )
    return (
        '<div class="mp-table-controls"><input type="search" class="mp-filter" '
        f'placeholder="Filter ops by name" aria-label="Filter ops by name">{toggle}</div>'
    )
