"""The memory gate's verdict as a section of the report (``gate``, first, in the formats given
the gate's result: Markdown; the terminal prints the gate's own lines after the files are
written, :mod:`memprof.outputs.gate`): the verdict, its warnings, each violation in bold with
what explains it (a table of what grew, or of the largest entries at the peak) and the
improvements."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memprof.outputs import document as doc
from memprof.outputs.peak import module_name

if TYPE_CHECKING:
    from memprof.analysis.gate import Explanation, GateResult

SECTION_ID = "gate"


def gate_section(gate: GateResult | None) -> doc.Section | None:
    """The gate's section; None without a gate."""
    if gate is None:
        return None
    blocks: list[doc.Block] = [doc.Heading(doc.words(gate.summary()))]
    if gate.warnings:
        blocks.append(doc.Items(tuple(doc.words(f"warning: {w}") for w in gate.warnings)))
    for violation in gate.violations:
        blocks.append(doc.Paragraph(doc.words(violation.line), "strong"))
        if violation.explanation is not None:
            blocks += _explanation(violation.explanation)
    if gate.improvements:
        blocks.append(doc.Items(tuple(doc.words(f"improved: {i}") for i in gate.improvements)))
    return doc.Section(SECTION_ID, "Memory gate", tuple(blocks))


def _explanation(explanation: Explanation) -> list[doc.Block]:
    """What a violation's run holds at its peak, or what grew there: its heading, its rows (bytes,
    category, module, line, op), what is left out."""
    blocks: list[doc.Block] = [doc.Paragraph(doc.words(explanation.heading.strip()))]
    if explanation.rows:
        columns = (
            doc.Column("bytes", doc.SIZE, signed=any(row.signed for row in explanation.rows)),
            doc.Column("category"),
            doc.Column("module", doc.NAME),
            doc.Column("line", doc.NAME),
            doc.Column("op", doc.NAME),
        )
        rows = tuple(
            doc.Row(
                (
                    row.bytes,
                    what.category,
                    module_name(what.module, what.phase),
                    doc.join(doc.name(what.source), " ", doc.name(what.source_text)) if what.source else "-",
                    doc.name(what.op) or "-",
                )
            )
            for row in explanation.rows
            for what in [row.what]
        )
        blocks.append(doc.Table(columns, rows, name="gate"))
    if explanation.more:
        blocks.append(doc.Paragraph(doc.words(explanation.more), "help"))
    return blocks
