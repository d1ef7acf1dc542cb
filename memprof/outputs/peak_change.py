"""What changed at the peak between two explained runs (the report's ``peak-diff`` section): one
part, :class:`memprof.outputs.document.PeakChange`, the first comparison's at-peak diff, which each
format lays out its own way (:data:`LAYOUTS`): its summary, then its largest module and line rows
with both runs' bytes and the change (the terminal, Markdown), or every row by module and phase,
line, op and category (HTML); the module groups only one run holds at its peak; and where the
explanation comes from. Nothing unless both runs were explained.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memprof.core.units import format_bytes
from memprof.outputs import document as doc
from memprof.outputs.peak import module_name
from memprof.outputs.rows import module_text

if TYPE_CHECKING:
    from memprof.model.diff import RunDiff
    from memprof.model.peak_diff import AtPeakDiff, ModuleDelta, SourceDelta
    from memprof.outputs.context import Context

SECTION_ID = "peak-diff"

ROWS = {doc.TERMINAL: (6, 5), doc.MARKDOWN: (8, 8)}
"""The summaries' rows: this many modules and lines, largest change first (HTML: every one)."""
HELD_BY_ONE = 4
"""The terminal names this many module groups held at one run's peak alone."""


def peak_change_section(context: Context) -> doc.Section | None:
    """The section for the first comparison of the detailed live runs; None unless both runs
    were explained (an estimate's comparisons are its sweep's, told by the sweep's table)."""
    diffs = context.detail.diffs
    diff: RunDiff | None = diffs[0] if diffs else None
    change = diff.at_peak if diff is not None else None
    if diff is None or change is None:
        return None
    if context.limits.short and not context.report.diff_of:
        return (
            None  # the short report of runs: the verdict's biggest cause says it (a diff's is its question)
        )
    part = doc.PeakChange(change, diff.base, diff.other)
    return doc.Section(SECTION_ID, _title(part), (part,), titled=frozenset({doc.MARKDOWN, doc.HTML}))


def _title(part: doc.PeakChange) -> str:
    return f"What changed at the peak, {part.other} vs {part.base}"


def terminal_blocks(part: doc.PeakChange) -> list[doc.Block]:
    """The terminal's: a heading, the summary, the largest rows, held by one run, the notes."""
    summary: list[doc.Block] = [
        doc.Heading(doc.words(_title(part))),
        doc.Paragraph(doc.words(part.change.summary)),
    ]
    return summary + _terminal(part.change, part.base, part.other)


def markdown_blocks(part: doc.PeakChange) -> list[doc.Block]:
    """Markdown's: the summary, the change by category, the largest rows, the notes."""
    change = part.change
    blocks: list[doc.Block] = [doc.Paragraph(doc.words(change.summary))]
    categories = ", ".join(
        f"{name} {format_bytes(delta, signed=True)}" for name, delta in change.by_category.items() if delta
    )
    if categories:
        blocks.append(doc.Paragraph(doc.words(f"by category: {categories}")))
    return blocks + _markdown(change, part.base, part.other)


def html_blocks(part: doc.PeakChange) -> list[doc.Block]:
    """HTML's: the summary, then every row, sortable."""
    strong = doc.Paragraph(doc.words(part.change.summary), "strong")
    return [strong, *_html(part.change, part.base, part.other)]


LAYOUTS = {doc.TERMINAL: terminal_blocks, doc.MARKDOWN: markdown_blocks, doc.HTML: html_blocks}
"""Each format's layout of a :class:`~memprof.outputs.document.PeakChange`."""


# ---- the summaries -------------------------------------------------------------------------------


def _columns(name: str, a: str, b: str, kind: str = doc.NAME) -> tuple[doc.Column, ...]:
    return (
        doc.Column(name, kind, width=24),
        doc.Column(a, doc.SIZE, label=True),
        doc.Column(b, doc.SIZE, label=True),
        doc.Column("delta", doc.SIZE, signed=True, delta=True),
    )


def _sizes(row: ModuleDelta | SourceDelta) -> tuple[int, int, int]:
    return row.base_bytes, row.other_bytes, row.delta_bytes


def _terminal(change: AtPeakDiff, a: str, b: str) -> list[doc.Block]:
    """The largest module and line rows, the groups held at one peak alone, the notes."""
    module_rows, source_rows = ROWS[doc.TERMINAL]
    blocks: list[doc.Block] = []
    modules = [row for row in change.by_module if row.delta_bytes][:module_rows]
    if any(row.module for row in modules):  # a run without modules has one row, "-"
        rows = tuple(doc.Row((module_cell(row, change.by_module), *_sizes(row))) for row in modules)
        blocks.append(doc.Table(_columns("module", a, b), rows, name="peak-diff-modules"))
    sources = [row for row in change.by_source if row.delta_bytes][:source_rows]
    if any(row.source for row in sources):
        rows = tuple(doc.Row((source_cell(row), *_sizes(row))) for row in sources)
        blocks.append(doc.Table(_columns("line", a, b, doc.SOURCE), rows, name="peak-diff-lines"))
    for held, whose, other in ((change.only_in_other, b, a), (change.only_in_base, a, b)):
        if held:
            listed = ", ".join(
                f"{module_text(row.module, row.phase)} {format_bytes(row.other_bytes or row.base_bytes)}"
                for row in held[:HELD_BY_ONE]
            )
            more = f" and {len(held) - HELD_BY_ONE} more" if len(held) > HELD_BY_ONE else ""
            text = f"held at {whose}'s peak, none of it at {other}'s: {listed}{more}"
            blocks.append(doc.Paragraph(doc.words(text)))
    blocks += [doc.Paragraph(doc.words(f"note: {note}"), "help") for note in change.notes]
    return blocks


def _markdown(change: AtPeakDiff, a: str, b: str) -> list[doc.Block]:
    """The largest module and line rows (names as code), the notes as a list."""
    module_rows, source_rows = ROWS[doc.MARKDOWN]
    blocks: list[doc.Block] = []
    modules = [row for row in change.by_module if row.delta_bytes][:module_rows]
    if any(row.module for row in change.by_module):  # a run without modules has one row, "-"
        rows = tuple(doc.Row((module_name(row.module, row.phase), *_sizes(row))) for row in modules)
        blocks.append(doc.Table(_columns("module", a, b), rows, name="peak-diff-modules"))
    sources = [row for row in change.by_source if row.delta_bytes][:source_rows]
    if sources:
        rows = tuple(doc.Row((_line(row), *_sizes(row))) for row in sources)
        blocks.append(doc.Table(_columns("line", a, b), rows, name="peak-diff-lines"))
    if change.notes:
        blocks.append(doc.Items(tuple(doc.words(note) for note in change.notes)))
    return blocks


def module_cell(row: ModuleDelta, rows: Sequence[ModuleDelta]) -> str:
    """``blocks.3 (recompute)``; ``blocks.3 itself`` for a module's own bytes when its
    submodules have rows of their own; ``-`` for no module."""
    split = not row.submodules and any(other.module.startswith(row.module + ".") for other in rows)
    return module_text(row.module + (" itself" if split and row.module else ""), row.phase)


def source_cell(row: SourceDelta) -> str:
    """``gpt.py:109  loss = F.cross_entropy(…``, then the user's line that called it."""
    if not row.source:
        return "no line (state from before the call, or not attributed)"
    statement = row.source_text if len(row.source_text) <= 32 else row.source_text[:31] + "…"
    text = f"{row.source}  {statement}".rstrip()
    if row.user_source:
        text += f", called from {row.user_source}"
    return text


def _line(row: SourceDelta) -> doc.Inline:
    return (
        doc.join(doc.name(row.source), " ", doc.name(row.source_text)) if row.source else doc.words("no line")
    )


# ---- HTML ----------------------------------------------------------------------------------------


def _html(change: AtPeakDiff, a: str, b: str) -> list[doc.Block]:
    """Every row by module and phase, line, op and category, sortable; the groups held at one
    peak alone and the notes as a list above them."""
    held = [
        doc.words(
            f"held at {whose}'s peak, none of it at {other}'s: "
            + ", ".join(
                f"{module_text(row.module, row.phase)} {format_bytes(row.other_bytes or row.base_bytes)}"
                for row in rows
            )
        )
        for rows, whose, other in ((change.only_in_other, b, a), (change.only_in_base, a, b))
        if rows
    ]
    blocks: list[doc.Block] = []
    if held or change.notes:
        blocks.append(doc.Items((*held, *(doc.words(note) for note in change.notes))))
    sides = _columns("", a, b)[1:]
    # Every row named: what has no module, line or op says so.
    modules = tuple(
        doc.Row((r.module or "no module", r.phase or "-", "yes" if r.submodules else "no", *_sizes(r)))
        for r in change.by_module
    )
    sources = tuple(
        doc.Row(
            (
                doc.name(r.source) or doc.words("no line"),
                doc.name(r.source_text),
                doc.name(r.user_source),
                *_sizes(r),
            )
        )
        for r in change.by_source
    )
    ops = tuple(
        doc.Row((doc.name(r.op) or doc.words("no op"), r.base_bytes, r.other_bytes, r.delta_bytes))
        for r in change.by_op
    )
    categories = tuple(doc.Row((name, delta)) for name, delta in change.by_category.items())
    text, name = doc.Column("module", doc.TEXT), doc.Column("line", doc.NAME)
    phase = doc.Column("phase", doc.TEXT)
    tables = (
        ("By module and phase", (text, phase, doc.Column("submodules included"), *sides), modules),
        (
            "By line",
            (name, doc.Column("statement", doc.NAME), doc.Column("called from", doc.NAME), *sides),
            sources,
        ),
        ("By op", (doc.Column("op", doc.NAME), *sides), ops),
        ("By category", (doc.Column("category"), sides[-1]), categories),
    )
    for heading, columns, rows in tables:
        blocks += [
            doc.Heading(doc.words(heading)),
            doc.Table(columns, rows, name="peak-diff", sortable=True),
        ]
    total = format_bytes(change.footprint_delta_bytes, signed=True)
    help_text = (
        "Bytes live at each peak (the footprint), by what made them; each table adds up to the change of "
        f"the footprint, {total}."
    )
    return [*blocks, doc.Paragraph(doc.words(help_text), "help")]
