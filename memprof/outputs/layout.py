"""Text laid out for a terminal's width: tables that fit, names shortened in the middle, wrapped
paragraphs. Shared by every section of the terminal report (and any new one).

Names come from the profiled code or from files (op names, run labels, notes): every cell,
header and paragraph is passed through :func:`memprof.core.text.visible` here, before it is measured,
so an invisible or control character shows as its escape (``\\u202e``) and cannot break the
alignment, the line or the terminal.

Everything here produces :data:`Line` values, lists of ``(text, style)`` segments: printed as
plain text (pipes, CI logs, tests) the styles are dropped; on a terminal :mod:`rich` renders
them in colour (:func:`to_text`). The layout is the same either way, so what a terminal shows
is what a log holds.

How a table meets a width (:meth:`Table.lines`), in order, until it fits:

1. a note column (``detach``) moves under its row, on lines of its own (wrapped; or, for lines
   of source, ``clip``, each cut at the edge);
2. name columns (``shrink``) are shortened in the middle, down to their ``min_width``;
3. columns are dropped, least important first (highest ``drop`` number; 0 = never; columns
   with the same number go together), and the table says which;
4. headers holding a run's label (``peak checkpointed_step``) are shortened in the middle,
   down to their cells' width;
5. name columns are shortened further, down to 8 characters.

A column of source lines (``source``: ``gpt.py:109  loss = F.cross_entropy(…``) is shortened
from the end of its code, never into its ``file:line``.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memprof.core.text import visible

Segment = tuple[str, "str | None"]
Line = list[Segment]

ELLIPSIS = "…"
GAP = 2
DEFAULT_WIDTH = 100
"""The width of output that goes to a pipe or a file, when ``COLUMNS`` does not say."""
_HARD_MIN = 8


def terminal_width(stream: Any = None) -> int:
    """``COLUMNS`` when set, else the terminal's width when ``stream`` (default stdout) is
    one, else :data:`DEFAULT_WIDTH`."""
    return known_width(stream) or DEFAULT_WIDTH


def known_width(stream: Any = None) -> int | None:
    """``COLUMNS`` when set, else the terminal's width when ``stream`` (default stdout) is
    one, else None (a pipe or a file: a log, where no width is known)."""
    text = os.environ.get("COLUMNS", "")
    if text.strip().isdigit() and int(text) > 0:
        return int(text)
    stream = sys.stdout if stream is None else stream
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        pass
    return None


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle (``autograd::engine::e…
    AddmmBackward0``): both ends of an op name tell which it is."""
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    head = (width - 1) // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def cut_source(text: str, width: int) -> str:
    """A source line's cell (``gpt.py:109  loss = …``) in ``width`` characters: its code cut at
    the end, its ``file:line`` (before the first two spaces) never cut; where even that has no
    room, its directories go first (``…/gpt.py:109``), never the file's name and line."""
    if len(text) <= width:
        return text
    where, gap, _ = text.partition("  ")
    if not gap:
        return shorten(text, width)
    if len(where) + len(gap) + 1 < width:
        return clip(text, width)
    if len(where) <= width:
        return where
    # Whole directories go, from the first: ``…/examples/gpt.py:109``.
    cut = next((n for n, char in enumerate(where) if char == "/" and len(where) - n < width), None)
    return ELLIPSIS + (where[cut:] if cut is not None else where[-(width - 1) :])


def location_width(text: str, *, short: bool = False) -> int:
    """How many characters of a source line's cell its ``file:line`` holds (``short``: its
    file's name and line alone, after ``…/``)."""
    where = text.partition("  ")[0]
    return len(where) if not short or "/" not in where else len(where.rsplit("/", 1)[1]) + 2


def clip(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut at the end (a line of source)."""
    if len(text) <= width:
        return text
    return text[: width - 1] + ELLIPSIS if width > 0 else ""


# A size or a time is never split from its unit (``10.7 GiB``): the space between them is held
# by a no-break space while wrapping (never in the text itself: visible() escapes those).
NUMBER_UNIT = re.compile(r"(\d) (B|KiB|MiB|GiB|TiB|ms|us|s)\b")
"""A number and its unit (``10.7 GiB``): the space between them is never a place to break."""
_HOLD = "\u00a0"


def wrap(text: str, width: int, indent: str = "", hanging: str = "  ") -> list[str]:
    """``text`` wrapped to ``width`` at spaces, never between a number and its unit; later
    lines start with ``hanging``. A word too long for a line (a kernel name) is shortened in
    the middle rather than broken."""
    room = max(width - len(hanging), _HARD_MIN)
    words = [_shorten_word(word, room) for word in NUMBER_UNIT.sub(rf"\1{_HOLD}\2", text).split(" ")]
    # A long name after a short lead (``fused into cpp_fused_…``) is shortened to end the first
    # line rather than take a line of its own.
    head = len(indent) + len(" ".join(words[:-1])) + 1
    if len(words) > 1 and head <= width // 3 and head + len(words[-1]) > width and len(words[-1]) > room // 2:
        words[-1] = shorten(words[-1], max(width - head, _HARD_MIN))
    lines = textwrap.wrap(
        " ".join(words),
        width=max(width, _HARD_MIN),
        initial_indent=indent,
        subsequent_indent=hanging,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [line.replace(_HOLD, " ") for line in lines] or [indent.rstrip()]


_LOCATION = re.compile(r"\.py:\d+[,;:)]?$")
"""A word that ends with a source file's line (``memprof/examples/gpt.py:109``)."""


def _shorten_word(word: str, room: int) -> str:
    """A word in ``room`` characters: shortened in the middle, but a ``file:line`` from its
    start (``…/examples/gpt.py:109``), its file's name and line kept."""
    if len(word) <= room or not _LOCATION.search(word):
        return shorten(word, room)
    cut = next((n for n, char in enumerate(word) if char == "/" and len(word) - n < room), None)
    return ELLIPSIS + (word[cut:] if cut is not None else word[-(room - 1) :])


def paragraph(
    text: str, width: int, style: str | None = None, hanging: str = "  ", indent: str = ""
) -> list[Line]:
    """:func:`wrap` as styled lines (``text`` shown :func:`~memprof.core.text.visible`)."""
    return [[(line, style)] for line in wrap(visible(text), width, indent=indent, hanging=hanging)]


@dataclass(frozen=True)
class Column:
    """A table column: ``header``, ``align`` ("left"/"right"), ``drop`` (0: kept at any width,
    else dropped in descending order when the table is too wide), ``shrink`` (a name: shortened
    in the middle down to ``min_width``), ``detach`` (a note: moves under its row when too
    wide), ``label`` (the header holds a run's label and may be shortened), ``clip`` (a
    detached note's lines are lines of source: each cut at the edge, not wrapped), ``source``
    (its cells are source lines, ``file:line  code``: the code is cut, never the ``file:line``)."""

    header: str
    align: str = "left"
    drop: int = 0
    shrink: bool = False
    min_width: int = 24
    detach: bool = False
    label: bool = False
    clip: bool = False
    source: bool = False


@dataclass(frozen=True)
class Note:
    """A note cell of several lines (a library's line, then the user's line that called it):
    under its row, each on a line of its own; in the row, joined by ``; ``."""

    lines: tuple[str, ...]
    style: str | None = None

    @property
    def text(self) -> str:
        return "; ".join(line for line in self.lines if line)


@dataclass
class Table:
    """Rows of cells (text, ``(text, style)``, or a :class:`Note`) under :class:`Column`
    headers."""

    columns: Sequence[Column]
    rows: list[list[str | Segment | Note]] = field(default_factory=list)

    def add(self, *cells: str | Segment | Note) -> None:
        """A row: one cell per column, each shown :func:`~memprof.core.text.visible` (a line break
        in a name included: a row stays one line)."""
        assert len(cells) == len(self.columns), (cells, self.columns)
        self.rows.append([_escaped(cell) for cell in cells])

    def lines(self, width: int) -> list[Line]:
        """The table laid out in at most ``width`` characters (see the module's docstring)."""
        return _Layout(self, width).render()


def _escaped(cell: str | Segment | Note) -> str | Segment | Note:
    if isinstance(cell, str):
        return visible(cell, keep="")
    if isinstance(cell, Note):
        return Note(tuple(visible(line, keep="") for line in cell.lines), cell.style)
    return (visible(cell[0], keep=""), cell[1])


def _text(cell: str | Segment | Note) -> str:
    if isinstance(cell, Note):
        return cell.text
    return cell if isinstance(cell, str) else cell[0]


def _style(cell: str | Segment | Note) -> str | None:
    if isinstance(cell, Note):
        return cell.style
    return None if isinstance(cell, str) else cell[1]


class _Layout:
    def __init__(self, table: Table, width: int) -> None:
        self.table = table
        self.width = width
        self.keep = list(range(len(table.columns)))
        self.detached: int | None = None
        self.headers = [visible(c.header, keep="") for c in table.columns]
        self.natural = [
            max([len(self.headers[i])] + [len(_text(row[i])) for row in table.rows])
            for i in range(len(table.columns))
        ]
        self.widths = list(self.natural)
        self.dropped: list[str] = []
        self._fit()

    def _total(self) -> int:
        shown = [i for i in self.keep if i != self.detached]
        return sum(self.widths[i] for i in shown) + GAP * max(len(shown) - 1, 0)

    def _cells_width(self, i: int) -> int:
        return max([0] + [len(_text(row[i])) for row in self.table.rows])

    def _fit(self) -> None:
        columns = self.table.columns
        notes = [i for i, c in enumerate(columns) if c.detach]
        if self._total() > self.width and notes:
            self.detached = notes[0]
        self._shrink_names(lambda c: c.min_width, short=False)
        # Columns that share a ``drop`` number go together (a pair of runs' figures).
        ranks = sorted({c.drop for c in columns if c.drop})
        while self._total() > self.width and ranks:
            rank = ranks.pop()
            for i, column in enumerate(columns):
                if column.drop == rank and i in self.keep:
                    self.keep.remove(i)
                    self.dropped.append(self.headers[i])
        for i in self.keep:
            if columns[i].label and self._total() > self.width:
                self._shorten_header(i)
        self._shrink_names(lambda c: _HARD_MIN, short=True)
        self._grow_names()

    def _shorten_header(self, i: int) -> None:
        """``peak checkpointed_step`` -> ``peak chec…_step``: the label is cut in the middle,
        the word before it kept, down to the cells' width (at least 10)."""
        header = visible(self.table.columns[i].header, keep="")
        word, _, label = header.partition(" ")
        excess = self._total() - self.width
        width = max(self._cells_width(i), 10, len(word) + 4, self.widths[i] - excess)
        if width < len(header):
            self.widths[i] = width
            self.headers[i] = f"{word} {shorten(label, width - len(word) - 1)}"

    def _shrink_names(self, floor: object, *, short: bool) -> None:
        for i in self.keep:
            column = self.table.columns[i]
            excess = self._total() - self.width
            if column.shrink and excess > 0:
                lowest = max(floor(column), len(self.headers[i]), self._location(i, short))  # type: ignore[operator]
                self.widths[i] = min(self.widths[i], max(lowest, self.widths[i] - excess))

    def _location(self, i: int, short: bool) -> int:
        """The widest ``file:line`` of a column of source lines (never cut; ``short``: the
        file's name and line), else 0."""
        if not self.table.columns[i].source:
            return 0
        return max([0] + [location_width(_text(row[i]), short=short) for row in self.table.rows])

    def _grow_names(self) -> None:
        # After dropping columns there may be room again for whole names.
        for i in self.keep:
            if self.table.columns[i].shrink and self.widths[i] < self.natural[i]:
                room = self.width - self._total()
                self.widths[i] = min(self.natural[i], self.widths[i] + max(room, 0))

    def _cell(self, i: int, cell: str | Segment | Note) -> Segment:
        cut = cut_source if self.table.columns[i].source else shorten
        text = cut(_text(cell), self.widths[i])
        pad = self.widths[i] - len(text)
        text = " " * pad + text if self.table.columns[i].align == "right" else text + " " * pad
        return (text, _style(cell))

    def _row(self, cells: Sequence[str | Segment | Note], style: str | None = None) -> Line:
        line: Line = []
        for n, i in enumerate(i for i in self.keep if i != self.detached):
            if n:
                line.append((" " * GAP, None))
            text, cell_style = self._cell(i, cells[i])
            line.append((text, cell_style or style))
        return _rstrip(line)

    def _note(self, cell: str | Segment | Note) -> list[Line]:
        """A detached note under its row: each of its lines wrapped, or cut at the edge."""
        style = _style(cell) or "dim"
        lines = cell.lines if isinstance(cell, Note) else (_text(cell),)
        clipped = self.table.columns[self.detached or 0].clip
        out: list[Line] = []
        for n, line in enumerate(lines):
            indent = "    " + "  " * bool(n)
            if clipped:
                out.append([(clip(indent + line, self.width), style)])
            else:
                out += [[(text, style)] for text in wrap(line, self.width, indent=indent, hanging=indent)]
        return out

    def render(self) -> list[Line]:
        shown = [i for i in self.keep if i != self.detached]
        out = [self._row(self.headers, "bold")]
        out.append(_rstrip([("  ".join("-" * self.widths[i] for i in shown), "dim")]))
        for row in self.table.rows:
            out.append(self._row(row))
            if self.detached is not None and _text(row[self.detached]):
                out += self._note(row[self.detached])
        if self.dropped:
            out += paragraph(
                f"(left out at {self.width} columns: {', '.join(self.dropped)})", self.width, "dim"
            )
        return out


def _rstrip(line: Line) -> Line:
    """The line without trailing spaces (a right-padded last cell)."""
    while line and not line[-1][0].strip():
        line = line[:-1]
    if line:
        text, style = line[-1]
        line = [*line[:-1], (text.rstrip(), style)]
    return line


def plain(lines: Sequence[Line]) -> str:
    """The lines as plain text, styles dropped, each ending with a newline."""
    return "".join("".join(text for text, _ in line) + "\n" for line in lines)


def to_text(lines: Sequence[Line]) -> object:
    """The lines as one :class:`rich.text.Text` (imported here: only a terminal needs rich)."""
    from rich.text import Text

    text = Text()
    for line in lines:
        for segment, style in line:
            text.append(segment, style=style or "")
        text.append("\n")
    return text
