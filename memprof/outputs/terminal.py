"""The terminal summary: the report's document (:mod:`memprof.outputs.build`) as lines that fit
the terminal, the answer last (so that the lines left on the screen are the answer: each
explained run's bottom line, each comparison's verdict).

Laid out for the terminal's width (:mod:`memprof.outputs.layout`): no line is wider than the
terminal; narrow terminals get fewer columns, names shortened in the middle, notes on their own
line. On a terminal it is printed in colour with rich; to a pipe or a file, as plain text with
the same layout (``COLUMNS`` sets the width; 100 when nothing does). Names are shown with their
invisible and control characters escaped (:func:`memprof.core.text.visible`), before the layout.
Charts, the header's facts and torch's own tables are for HTML; the terminal leaves them out.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from memprof.core.text import visible
from memprof.core.units import format_bytes
from memprof.outputs import document as doc
from memprof.outputs import layout, peak_change
from memprof.outputs.build import LAST, Limits, build
from memprof.outputs.layout import DEFAULT_WIDTH, Line, Note, paragraph, terminal_width, to_text
from memprof.outputs.peak import categories_text
from memprof.outputs.rows import SUMMARY_KERNELS

if TYPE_CHECKING:
    from memprof.model.report import Report

ENTRIES, MODULES, KERNELS, GROUPS = 10, 6, 5, 10
"""What is live at each explained peak in the full report: this many entries, modules, kernels
and module groups."""
SHORT_TOP, SHORT_ENTRIES = 5, 6
"""The short report (the default of the commands): this many ops, and this many entries live at
the peak in all (shared between the explained runs, at least 2 each); no module or kernel
tables, no fused kernels' list."""
FULL_TOP = 15


def limits(
    sort: str = "peak", top: int | None = None, *, chains: bool = False, full: bool = True, explained: int = 1
) -> Limits:
    """What the terminal shows. ``full``: exactly ``top`` ops (default :data:`FULL_TOP`) by
    ``sort`` bytes (with ``chains``, a comparison's wrappers each with what it wraps), the
    largest entries, modules, kernels and module groups at each peak, at most
    :data:`SUMMARY_KERNELS` fused kernels. Short: ``top`` ops (default :data:`SHORT_TOP`),
    :data:`SHORT_ENTRIES` entries shared by the ``explained`` runs, the module groups asked
    for, and what changed at the peak as its sentence."""
    if full:
        top = top or FULL_TOP
        return Limits(
            top=top,
            sort=sort,
            entries=ENTRIES,
            modules=MODULES,
            kernels=KERNELS,
            groups=GROUPS,
            fused=min(top, SUMMARY_KERNELS),
            chains=chains,
        )
    return Limits(
        top=top or SHORT_TOP,
        sort=sort,
        entries=max(2, SHORT_ENTRIES // max(explained, 1)),
        modules=0,
        kernels=0,
        groups=GROUPS,
        fused=0,
        chains=chains,
        short=True,
    )


def _limits(report: Report, sort: str, top: int | None, chains: bool, full: bool) -> Limits:
    explained = sum(1 for run in report.ok_runs() if run.at_peak is not None)
    return limits(sort, top, chains=chains, full=full, explained=explained)


LEAVES_OUT = frozenset({doc.EXPLAINS, doc.WHY_EMPTY, doc.SUBHEADING, doc.DETAIL})
"""A summary: what the figures mean is the legend's, a section with nothing to show is left out,
its tables run on without subheadings, and it has no room for the page's detail tables."""


LAYOUTS: doc.Layouts = {doc.PeakChange: peak_change.terminal_blocks}
"""The parts the terminal lays out its own way."""


def drawn(column: doc.Column) -> bool:
    """Whether the terminal draws ``column``: the summary's figures, and no bars (HTML draws them)."""
    return doc.TERMINAL in column.only and not column.detail and column.kind != doc.BAR


def document_lines(document: doc.Document, width: int, *, leave_out: tuple[str, ...] = ()) -> list[Line]:
    """The document as styled lines, at most ``width`` characters each: its title, every
    section's blocks (but those of ``leave_out``), the answer and what changed at the peak last."""
    lines = paragraph(_text(document.title), width, "bold")
    kept = [s for s in document.sections if s.id not in leave_out]
    sections = [s for s in kept if s.id not in LAST]
    sections += [s for last in LAST for s in kept if s.id == last]
    for section in sections:
        previous: doc.Block | None = None
        for block in doc.laid_out(section.shown(doc.TERMINAL, LEAVES_OUT), LAYOUTS):
            body = _block(block, width)
            if body and not _attached(block, previous):
                lines.append([])
            lines += body
            previous = block
    return lines


def _attached(block: doc.Block, previous: doc.Block | None) -> bool:
    """Whether ``block`` goes right under the block before it, without a blank line: whatever
    follows a heading, a table's legend, a heading's own paragraphs, strong lines together."""
    if previous is None:
        return False
    if isinstance(previous, doc.Heading):
        return True
    if isinstance(block, doc.Paragraph):
        return block.role in ("help", "text", "empty") or (
            block.role == "strong" and isinstance(previous, doc.Paragraph) and previous.role == "strong"
        )
    return isinstance(block, doc.Categories)


def _block(block: doc.Block, width: int) -> list[Line]:
    if isinstance(block, doc.Table):
        return table_lines(block, width)
    if isinstance(block, doc.Heading):
        lead = f" {_text(block.lead)}" if block.lead else ""
        return paragraph(f"{_text(block.text)}:{lead}", width, "bold")
    if isinstance(block, doc.Paragraph):
        style = {"strong": "bold", "help": "dim", "empty": "dim"}.get(block.role)
        return paragraph(_text(block.text), width, style)
    if isinstance(block, doc.Items):
        indent, hanging = ("  ", "    ") if block.nested else ("", "  ")
        return [row for line in block.lines for row in paragraph(_text(line), width, None, hanging, indent)]
    if isinstance(block, doc.Categories):
        return paragraph(f"by category: {categories_text(block.by_category)}", width)
    if isinstance(block, doc.Notes):
        if block.brief:
            return [
                [(layout.clip(visible(f"note ({whose}): {note}"), width), "yellow")]
                for whose, note in block.items
            ]
        return [
            row
            for whose, note in block.items
            for row in paragraph(f"note ({whose}): {note}", width, "yellow")
        ]
    if isinstance(block, doc.Answer):
        lines: list[Line] = []
        for n, group in enumerate(block.groups):
            first, *rest = group.lines
            lines += [[]] if n else []
            lines += paragraph(first, width, "bold")
            lines += [row for line in rest for row in paragraph(line, width)]
        return lines
    return []  # charts, facts, code: HTML's


def _text(text: doc.Inline | doc.Listing | str) -> str:
    """Text as the terminal shows it, a line break as ``; ``."""
    if isinstance(text, doc.Listing):
        text = text.inline(text.short)
    return doc.plain(text).replace(doc.BREAK.text, "; ")


# ---- tables --------------------------------------------------------------------------------------


def table_lines(table: doc.Table, width: int) -> list[Line]:
    """A document table laid out in ``width``: its columns for the terminal, the failed runs'
    messages after it."""
    shown = [n for n, column in enumerate(table.columns) if drawn(column)]
    columns = [table.columns[n] for n in shown]
    laid = layout.Table([_column(column) for column in columns])
    failures: list[Line] = []
    for row in table.rows:
        if row.failure is not None:
            given = [_cell(columns[n], cell) for n, cell in enumerate(row.cells) if n < len(columns)]
            laid.add(*given, ("failed", "red"), *([""] * (len(columns) - len(given) - 1)))
            failures += paragraph(f"{row.cells[-1]} failed: {row.failure}", width, "red")
            continue
        laid.add(*(_cell(column, row.cells[n]) for n, column in zip(shown, columns, strict=True)))
    return laid.lines(width) + failures


def _column(column: doc.Column) -> layout.Column:
    shrink = column.kind in (doc.NAME, doc.LABEL, doc.SOURCE)
    return layout.Column(
        column.header,
        "right" if column.numeric else "left",
        drop=column.drop,
        shrink=shrink,
        min_width=column.width if shrink else 24,
        detach=column.kind == doc.NOTE,
        label=column.label,
        clip=column.verbatim,
        source=column.kind == doc.SOURCE,
    )


def _cell(column: doc.Column, value: Any) -> str | tuple[str, str | None] | Note:
    kind = column.kind
    if kind == doc.SIZE:
        if value is None:
            return "-"
        style = "bold" if column.strong else None
        if column.delta:
            style = "green" if value < 0 else "red" if value > 0 else None
        # The terminal shows the sign of a change (a delta, what was left allocated) alone.
        return (format_bytes(value, signed=column.delta), style)
    if kind == doc.COUNT:
        return "-" if value is None else f"{value:,}"
    if kind == doc.NUMBER:
        return value.text if isinstance(value, doc.Value) else str(value)
    if kind == doc.NOTE:
        if isinstance(value, doc.Listing):
            value = value.inline(value.short)
        text = doc.plain(value) if not isinstance(value, str) else value
        # Nothing under the row of a note that says nothing (a kernel that replaced no eager op).
        return Note(tuple(text.split(doc.BREAK.text)) if text != "-" else ())
    return _text(value)


# ---- the summary ---------------------------------------------------------------------------------


def terminal_lines(
    report: Report,
    *,
    sort: str = "peak",
    top: int | None = None,
    width: int = DEFAULT_WIDTH,
    rank: int | None = None,
    chains: bool = False,
    full: bool = True,
) -> list[Line]:
    """The summary as styled lines, at most ``width`` characters each. A report of several
    ranks starts with every rank's row and their imbalance, then details one rank's runs (the
    highest peak's, or ``rank``); its notes cover every rank. ``chains``: a comparison's
    wrappers shown, each with what it wraps; ``full``: everything, else the short report (see
    :func:`limits`)."""
    return document_lines(build(report, _limits(report, sort, top, chains, full), rank=rank), width)


def diff_lines(
    report: Report,
    *,
    sort: str = "peak",
    top: int | None = None,
    width: int = DEFAULT_WIDTH,
    chains: bool = False,
    full: bool = True,
) -> list[Line]:
    """What ``memprof diff`` prints for a report of two runs: the runs, their ops side by side,
    the fused kernels, notes, what changed at the peak and the verdict (without each run's own
    "At the peak" section: ``--json``, ``--markdown`` and ``--html`` keep those)."""
    document = build(report, _limits(report, sort, top, chains, full))
    return document_lines(document, width, leave_out=("at-peak",))


def render_terminal(
    report: Report,
    *,
    sort: str = "peak",
    top: int | None = None,
    rank: int | None = None,
    width: int | None = None,
    chains: bool = False,
    full: bool = True,
) -> str:
    """The summary printed by ``memprof run``, ``memprof compare``, ``memprof estimate`` and
    ``memprof analyze``, as plain text at most ``width`` characters wide (default
    :data:`memprof.outputs.layout.DEFAULT_WIDTH`); ``rank``: which rank of a report of several
    ranks to detail; ``chains``: a comparison's wrappers shown, each with what it wraps;
    ``full`` (default): everything, else the short report the commands print by default."""
    width = width or DEFAULT_WIDTH
    lines = terminal_lines(report, sort=sort, top=top, width=width, rank=rank, chains=chains, full=full)
    return layout.plain(lines)


def print_terminal(
    report: Report,
    *,
    sort: str = "peak",
    top: int | None = None,
    rank: int | None = None,
    chains: bool = False,
    full: bool = True,
) -> None:
    """Print the summary to stdout at the terminal's width: in colour on a terminal (rich),
    plain text otherwise."""
    width = terminal_width()
    print_lines(terminal_lines(report, sort=sort, top=top, width=width, rank=rank, chains=chains, full=full))


def print_lines(lines: list[Line]) -> None:
    """Print styled lines to stdout: in colour on a terminal (rich), plain text otherwise."""
    width = terminal_width()
    if sys.stdout.isatty():
        from rich.console import Console

        Console(width=width, soft_wrap=True, highlight=False).print(to_text(lines), end="")
    else:
        sys.stdout.write(layout.plain(lines))
        sys.stdout.flush()
