"""The report as a document: sections of blocks, built once per kind of report
(:mod:`memprof.outputs.build`) and rendered by each format (terminal, Markdown, HTML).

A block says *what* is shown: a heading, a paragraph, a table whose columns are typed (a size,
a count, a number, a name, plain text, a note), a list, notes, a chart, a block of code. How it
is laid out stays with each format: the terminal fits tables to its width (dropping columns,
shortening names, moving notes under their row), Markdown escapes and fences, HTML sorts,
filters, collapses long lists and draws the charts.

Text is :data:`Inline`: spans of words and of names (op names, modules, source lines), which
Markdown and HTML show as code; a :data:`BREAK` starts a new line. A :class:`Listing` is a list
a format may cut short (the terminal) or collapse (HTML).

What a part is for decides where it is drawn, and each format decides it from the part: a
paragraph's :attr:`Paragraph.purpose` (what the figures beside it mean, why a section is empty,
what a summary left out) and a column's marks (:attr:`Column.detail`, :attr:`Column.brief`,
:attr:`Column.secondary`). Charts, facts and code are drawn in HTML alone; a few parts say the
formats they are for (``only``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memprof.model.peak_diff import AtPeakDiff
    from memprof.model.run import RunResult
    from memprof.model.sweep import Sweep
    from memprof.model.timeline import Timeline

TERMINAL, MARKDOWN, HTML = "terminal", "markdown", "html"
EVERY = frozenset({TERMINAL, MARKDOWN, HTML})
SUMMARIES = frozenset({TERMINAL, MARKDOWN})
"""The formats that summarise (the terminal and Markdown) rather than show everything (HTML)."""

EXPLAINS = "explains"
"""A paragraph's purpose: what the figures beside it mean (a page says it where they are; the
summaries' readers have a legend)."""
WHY_EMPTY = "why-empty"
"""A paragraph's purpose: why a section has nothing to show (a page keeps the section; the
summaries leave it out)."""
LEFT_OUT = "left-out"
"""A paragraph's purpose: what a summary left out (a page shows everything)."""
SUBHEADING = "subheading"
"""A heading's purpose: it names a part of a section, for a page's reader to find it (the
summaries' tables run on without it)."""
DETAIL = "detail"
"""A table's purpose: a detail only a page that shows everything has room for (the summaries
show another table of the same, shorter)."""


# ---- text ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """A piece of text; ``code``: a name (an op, a module, a line of source), shown as code."""

    text: str
    code: bool = False


Inline = tuple[Span, ...]
BREAK = Span("\n")
"""A new line inside a cell or a paragraph (the line that called a library's)."""


def words(*texts: str) -> Inline:
    """Plain text."""
    return tuple(Span(text) for text in texts if text)


def name(text: str) -> Inline:
    """A name, shown as code."""
    return (Span(text, code=True),) if text else ()


def join(*parts: Inline | str) -> Inline:
    """The parts in order, strings as plain text."""
    out: list[Span] = []
    for part in parts:
        out += words(part) if isinstance(part, str) else part
    return tuple(out)


def names(items: Sequence[str], sep: str = ", ") -> Inline:
    """Names separated by ``sep``."""
    out: list[Span] = []
    for n, item in enumerate(items):
        out += [*words(sep if n else ""), Span(item, code=True)]
    return tuple(out)


def plain(text: Inline | str) -> str:
    """The text without its marks."""
    return text if isinstance(text, str) else "".join(span.text for span in text)


@dataclass(frozen=True)
class Listing:
    """``lead`` then ``items``, separated by commas: ``fuses abs, sub``. A format with little
    room shows the first ``short`` items and how many more (``short`` 0: one item, or how many:
    ``fused into 2 kernels``); HTML collapses a long list behind ``lead`` and the count
    (``fuses 23 ops``)."""

    lead: str
    items: tuple[Inline, ...]
    noun: str = "ops"
    short: int | None = None

    def inline(self, count: int | None = None) -> Inline:
        """The first ``count`` items (all when None), then ``and N more``; with ``count`` 0,
        the count alone (``fused into 2 kernels``)."""
        if count == 0 and len(self.items) > 1:
            return words(f"{self.lead}{len(self.items)} {self.noun}")
        shown = self.items if count is None else self.items[: max(count, 1)]
        out: list[Span] = list(words(self.lead))
        for n, item in enumerate(shown):
            out += [*words(", " if n else ""), *item]
        if len(self.items) > len(shown):
            out += words(f" and {len(self.items) - len(shown)} more")
        return tuple(out)


Text = Inline | Listing | str


# ---- tables -------------------------------------------------------------------------------------

SIZE, COUNT, NUMBER = "size", "count", "number"
LABEL, NAME, TEXT, CATEGORY, NOTE, BAR = "label", "name", "text", "category", "note", "bar"
SOURCE = "source"
"""Column kinds: bytes (``int`` or None), a whole count, a :class:`Value` (a time, a share), a
run's label (text, shortened when there is no room), a name (code, shortened when there is no
room), a line of source (``gpt.py:109  loss = …``: a name whose code is shortened, never its
``file:line``), plain text, a category of memory (text; HTML shows its colour), a note (under its row
when there is no room), a bar (a fraction of the largest, drawn in HTML)."""

NUMERIC = frozenset({SIZE, COUNT, NUMBER})


@dataclass(frozen=True)
class Value:
    """A number as shown (``371.3 ms ±18.8%``), with what it sorts by and what hovering shows."""

    text: str
    sort: float | int | None = None
    title: str = ""


@dataclass(frozen=True)
class Column:
    """A column of a :class:`Table`: what it holds and how a format may show it."""

    header: str
    kind: str = TEXT
    """What its cells are (:data:`SIZE`, :data:`NAME`, ...)."""
    signed: bool = False
    """Sizes that may be negative, shown with their sign."""
    strong: bool = False
    """The figure the table is about."""
    delta: bool = False
    """A change: its sign is always shown, coloured where a format has colours."""
    only: frozenset[str] = EVERY
    """The formats that show it."""
    label: bool = False
    """The header holds a run's label (a narrow terminal may shorten it)."""
    verbatim: bool = False
    """Its notes are lines of source: cut at the edge rather than wrapped where there is no room."""
    drop: int = 0
    """For a narrow terminal: 0, kept at any width; else dropped, the highest first."""
    width: int = 24
    """For a narrow terminal: a name is shortened down to this many characters."""
    full: str = ""
    """The header where there is room for it (HTML)."""
    detail: bool = False
    """A figure only a page that shows everything has room for (the summaries leave it out)."""
    brief: bool = False
    """A short form of what a :attr:`detail` column shows in full (the page leaves it out)."""
    secondary: bool = False
    """A figure the narrowest summary (Markdown) leaves out; a terminal drops it by width."""

    @property
    def numeric(self) -> bool:
        return self.kind in NUMERIC


@dataclass(frozen=True)
class Row:
    """A row's cells, one per column. ``failure``: a run that failed, its message instead of
    its figures (``cells`` then holds the label alone); ``hidden``: why the summaries leave the
    row out (HTML shows it behind a toggle); ``mark``: what kind of row it is (``unattributed``)."""

    cells: tuple[Any, ...]
    failure: str | None = None
    hidden: str = ""
    mark: str = ""


@dataclass(frozen=True)
class Table:
    """Rows under columns. ``name``: what it lists (``ops``, ``runs``, ``at-peak-entries``);
    ``sortable``: a reader may sort it; ``filter``: a reader may filter its rows by name, and
    show the hidden ones (HTML); ``data``: what else the table says of itself (HTML
    ``data-*``)."""

    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    name: str = ""
    sortable: bool = False
    filter: bool = False
    data: tuple[tuple[str, str], ...] = ()
    only: frozenset[str] = EVERY
    purpose: str = ""
    """:data:`DETAIL` when a format may leave it out for that."""


# ---- other blocks -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heading:
    """A heading over what follows (level 3, or 4 under it); ``lead``: a line that belongs with
    it (the terminal says both on one line)."""

    text: Inline
    level: int = 3
    lead: Inline = ()
    only: frozenset[str] = EVERY
    purpose: str = ""
    """:data:`SUBHEADING` when a format may leave it out for that."""


@dataclass(frozen=True)
class Paragraph:
    """Text. ``role``: ``text``; ``strong`` (a line that matters most); ``help`` (what the
    figures mean, what was left out); ``empty`` (why a section has nothing to show)."""

    text: Inline
    role: str = "text"
    only: frozenset[str] = EVERY
    purpose: str = ""
    """What it is for (:data:`EXPLAINS`, :data:`WHY_EMPTY`, :data:`LEFT_OUT`), if a format may
    leave it out for it."""


@dataclass(frozen=True)
class Items:
    """Lines of a list (a device's share, a snapshot's facts); ``nested``: under the heading
    before it (the terminal indents it)."""

    lines: tuple[Inline, ...]
    nested: bool = False
    only: frozenset[str] = EVERY


@dataclass(frozen=True)
class Facts:
    """The report's what and where: (label, value) pairs (the target, the device, torch...)."""

    items: tuple[tuple[str, str], ...]
    only: frozenset[str] = frozenset({HTML})


@dataclass(frozen=True)
class Categories:
    """What is live at a peak by category, the categories that hold bytes."""

    by_category: Mapping[str, int]
    only: frozenset[str] = EVERY


@dataclass(frozen=True)
class Notes:
    """The runs' notes: (whose, note); ``brief``: the terminal shows each on one line, cut at
    its edge (the short report)."""

    items: tuple[tuple[str, str], ...]
    only: frozenset[str] = EVERY
    brief: bool = False


@dataclass(frozen=True)
class Conclusion:
    """One answer: its first line (a verdict, a run's bottom line) and the lines that go with it."""

    lines: tuple[str, ...]


@dataclass(frozen=True)
class Answer:
    """What the report concludes (:func:`memprof.outputs.answer.conclusions`), one group per
    run or comparison, in the order the terminal prints them (last, the one that matters most:
    a comparison's verdict, a GPU's peak); a page that shows the answer first shows them
    :attr:`first_first`."""

    groups: tuple[Conclusion, ...]
    only: frozenset[str] = EVERY

    @property
    def first_first(self) -> tuple[Conclusion, ...]:
        """The groups, the one that matters most first (Markdown and HTML)."""
        return tuple(reversed(self.groups))


@dataclass(frozen=True)
class Code:
    """Text shown as it is (torch.profiler's own table), under ``label``, collapsed."""

    label: str
    text: str
    only: frozenset[str] = frozenset({HTML})


# ---- charts (drawn in HTML) --------------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    """One run's line on a timeline: its label, timeline, peak (bytes) and the op running at
    the peak. ``start_bytes``: live at the start, added to every point (the line is then
    absolute) and drawn as a dashed line; ``peak_suffix`` follows the peak in the legend;
    ``details``: more for the legend. The timeline's ``reserved`` bytes, when it has them, are
    drawn as a thinner line."""

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


def peak_time_ms(timeline: Timeline) -> float | None:
    """When a timeline reaches its highest point (ms since its start), if it has points."""
    if not timeline.bytes:
        return None
    index = max(range(len(timeline.bytes)), key=timeline.bytes.__getitem__)
    return timeline.t_ns[index] / 1e6


@dataclass(frozen=True)
class TimelineChart:
    """Bytes over time of every run in ``series``, on one scale (interactive in HTML)."""

    series: tuple[Series, ...]
    x_label: str
    caption: str
    """What the chart shows (which calls), and how to read it."""
    points: int
    """The most points drawn per run (each bucket keeps its highest: the peak is drawn)."""
    aria_label: str = ""
    only: frozenset[str] = frozenset({HTML})


@dataclass(frozen=True)
class CategoryChart:
    """An explained run's live bytes by category over the call it explains, stacked."""

    run: RunResult
    index: int
    caption: str
    only: frozenset[str] = frozenset({HTML})


@dataclass(frozen=True)
class Icicle:
    """What is live at a run's peak by module, then source line: each box as wide as its bytes."""

    run: RunResult
    only: frozenset[str] = frozenset({HTML})


@dataclass(frozen=True)
class Bar:
    """One bar of :class:`Bars`: its label, its size in bytes, and whether to mark it."""

    label: str
    value: int
    marked: bool = False


@dataclass(frozen=True)
class Bars:
    """Labelled horizontal bars on one byte scale (the ranks' peaks)."""

    chart_id: str
    bars: tuple[Bar, ...]
    x_label: str
    caption: str
    only: frozenset[str] = frozenset({HTML})


@dataclass(frozen=True)
class SweepChart:
    """A sweep: the bytes each value needs, the line through the listed values, the capacity
    and the capacity less the reserve."""

    sweep: Sweep
    only: frozenset[str] = frozenset({HTML})


@dataclass(frozen=True)
class PeakChange:
    """What changed at the peak between two explained runs (``base``, ``other``: their labels),
    which each format lays out its own way (:func:`laid_out`)."""

    change: AtPeakDiff
    base: str
    other: str
    only: frozenset[str] = EVERY


Block = (
    Heading
    | Paragraph
    | Items
    | Facts
    | Categories
    | Notes
    | Answer
    | Table
    | Code
    | TimelineChart
    | CategoryChart
    | Icicle
    | Bars
    | SweepChart
    | PeakChange
)


Layouts = Mapping[type, Callable[[Any], "list[Block]"]]
"""A format's own layouts of the parts it lays out its own way, by the part's type."""


def laid_out(blocks: Sequence[Block], layouts: Layouts) -> list[Block]:
    """``blocks``, each part of a type of ``layouts`` replaced by the blocks of a format's own
    layout of it (where formats truly differ, the format decides from the part's type)."""
    out: list[Block] = []
    for block in blocks:
        layout = layouts.get(type(block))
        out += layout(block) if layout is not None else [block]
    return out


# ---- the document -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """A part of the report: ``id`` (a stable anchor), ``title`` (a heading in the formats of
    ``titled``), its blocks."""

    id: str
    title: str
    blocks: tuple[Block, ...]
    titled: frozenset[str] = frozenset({HTML})

    def shown(self, fmt: str, leaves_out: frozenset[str] = frozenset()) -> tuple[Block, ...]:
        """The blocks ``fmt`` shows: those for it, but those whose purpose it ``leaves_out``."""
        return tuple(
            block
            for block in self.blocks
            if fmt in block.only and getattr(block, "purpose", "") not in leaves_out
        )


@dataclass(frozen=True)
class Document:
    """A report as every format shows it: ``name`` (the page's title), ``title`` (its first
    line), ``uid`` (unique to the report, the same at every rendering), and its sections in
    order (its kind's: :mod:`memprof.outputs.kinds`)."""

    kind: str
    """The report's kind (:attr:`memprof.outputs.kinds.Kind.name`)."""
    name: str
    title: Inline
    uid: str
    sections: tuple[Section, ...] = field(default_factory=tuple)

    def section(self, section_id: str) -> Section | None:
        return next((s for s in self.sections if s.id == section_id), None)
