"""The terminal's "What changed at the peak" block: an at-peak diff's summary, its largest
module and line rows, the module groups only one run holds at its peak, and where the
explanation comes from. Takes the diff's values only (:class:`RunDiff`), returns styled lines
(:mod:`memprof.report.layout`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memprof.report.layout import Column, Line, Segment, Table, paragraph
from memprof.report.rows import module_text
from memprof.units import format_bytes

if TYPE_CHECKING:
    from memprof.model.diff import RunDiff
    from memprof.model.peak_diff import ModuleDelta, SourceDelta

MODULE_ROWS = 6
SOURCE_ROWS = 5
HELD_BY_ONE = 4


def _delta(nbytes: int) -> Segment:
    """A signed size, green when it lowers memory, red when it raises it."""
    return (format_bytes(nbytes, signed=True), "green" if nbytes < 0 else "red" if nbytes > 0 else None)


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


def peak_change_lines(diff: RunDiff, width: int) -> list[Line]:
    """The block, after a blank line; nothing when the runs were not both explained."""
    change = diff.at_peak
    if change is None:
        return []
    a, b = diff.base, diff.other
    lines: list[Line] = [[], *paragraph(f"What changed at the peak, {b} vs {a}:", width, "bold")]
    lines += paragraph(change.summary, width)
    modules = [row for row in change.by_module if row.delta_bytes][:MODULE_ROWS]
    if any(row.module for row in modules):  # a run without modules has one row, "-"
        table = _table("module", a, b, shrink=True)
        for row in modules:
            table.add(
                module_cell(row, change.by_module), *_sizes(row.base_bytes, row.other_bytes, row.delta_bytes)
            )
        lines += [[], *table.lines(width)]
    sources = [row for row in change.by_source if row.delta_bytes][:SOURCE_ROWS]
    if any(row.source for row in sources):
        table = _table("line", a, b, shrink=True)
        for source in sources:
            table.add(source_cell(source), *_sizes(source.base_bytes, source.other_bytes, source.delta_bytes))
        lines += [[], *table.lines(width)]
    for held, whose, other in ((change.only_in_other, b, a), (change.only_in_base, a, b)):
        if held:
            listed = ", ".join(
                f"{module_text(row.module, row.phase)} {format_bytes(row.other_bytes or row.base_bytes)}"
                for row in held[:HELD_BY_ONE]
            )
            more = f" and {len(held) - HELD_BY_ONE} more" if len(held) > HELD_BY_ONE else ""
            lines += paragraph(f"held at {whose}'s peak, none of it at {other}'s: {listed}{more}", width)
    for note in change.notes:
        lines += paragraph(f"note: {note}", width, "dim")
    return lines


def _table(name: str, a: str, b: str, *, shrink: bool) -> Table:
    return Table(
        [
            Column(name, shrink=shrink, min_width=24),
            Column(a, "right", label=True),
            Column(b, "right", label=True),
            Column("delta", "right"),
        ]
    )


def _sizes(base: int, other: int, delta: int) -> tuple[str, str, Segment]:
    return format_bytes(base), format_bytes(other), _delta(delta)
