"""The memory gate's text: the lines the commands and the pytest plugin print for a
:class:`memprof.analysis.gate.GateResult` (evaluated before any output), e.g.::

    eager peak 834.0 MiB exceeds baseline 795.4 MiB by 4.9% (tolerance 2%)
      what grew: ...
    memprof gate: FAILED, 1 violation (baseline 1)

The report's own section of the gate (Markdown) is :mod:`memprof.outputs.gate_section`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memprof.core.text import one_line
from memprof.core.units import format_bytes
from memprof.outputs.rows import module_text

if TYPE_CHECKING:
    from memprof.analysis.gate import Contributor, Explanation, GateResult

_LINE_LIMIT = 1000  # an explanation's heading quotes names (a summary of modules and lines)


def gate_lines(result: GateResult) -> list[str]:
    """Everything to print, in order: warnings, violations (each with its explanation),
    improvements, the summary."""
    return [
        *(f"warning: {w}" for w in result.warnings),
        *violation_lines(result),
        *(f"improved: {i}" for i in result.improvements),
        result.summary(),
    ]


def violation_lines(result: GateResult) -> list[str]:
    """Each violation's line, then its explanation's lines (indented)."""
    return [
        line
        for v in result.violations
        for line in (v.line, *(explanation_lines(v.explanation) if v.explanation is not None else ()))
    ]


def explanation_lines(explanation: Explanation) -> list[str]:
    """The heading, one line per row (columns aligned), and what is left out, each indented
    two spaces."""
    cells = [contributor_cells(row) for row in explanation.rows]
    widths = [max((len(row[i]) for row in cells), default=0) for i in range(3)]
    rows = [
        "  ".join(
            [row[0].rjust(widths[0]), row[1].ljust(widths[1]), row[2].ljust(widths[2])]
            + [cell for cell in row[3:] if cell]
        ).rstrip()
        for row in cells
    ]
    more = [explanation.more] if explanation.more else []
    said = [one_line(explanation.heading, _LINE_LIMIT), *rows, *more]
    return [f"  {line}" for line in said]


def contributor_cells(row: Contributor) -> tuple[str, str, str, str, str]:
    """``+8.0 MiB``, ``temporary``, ``GPT (backward)``, ``gpt.py:109 loss = F.cross_entropy(…``,
    ``aten::mm``: each one short line, whatever the names hold (empty where unknown)."""
    what = row.what
    line = f"{one_line(what.source, 80)} {one_line(what.source_text, 40)}".strip() if what.source else ""
    return (
        format_bytes(row.bytes, signed=row.signed),
        one_line(what.category),
        one_line(module_text(what.module, what.phase), 80),
        line,
        one_line(what.op, 80),
    )
