"""Markdown (GitHub-flavoured): the report's document (:mod:`memprof.outputs.build`) as a short
summary for ``$GITHUB_STEP_SUMMARY`` or a PR comment: the answer first, then the runs, what is
live at each explained peak, the top ops, the fused kernels, notes, and what the figures mean.

Names go in code spans (``|`` escaped, backticks fenced), other text has Markdown's special
characters escaped, so no name can break the table or inject markup; invisible and control
characters are shown escaped (:func:`memprof.core.text.visible`). A size or a time never wraps
between its number and its unit (``210.2\\u00a0MiB``: a non-breaking space).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from memprof.core.text import visible
from memprof.core.units import format_bytes
from memprof.outputs import document as doc
from memprof.outputs import peak_change
from memprof.outputs.build import Limits, build
from memprof.outputs.layout import NUMBER_UNIT
from memprof.outputs.peak import categories_text
from memprof.outputs.rows import SUMMARY_KERNELS

if TYPE_CHECKING:
    from memprof.analysis.gate import GateResult
    from memprof.model.report import Report

TOP_OPS = 10
ENTRIES, MODULES, KERNELS, GROUPS = 5, 5, 3, 10
"""What is live at each explained peak: this many entries, modules, kernels and module groups."""

# Characters that start markup anywhere in a line; `#`, `+`, `-`, `>` only matter first.
_SPECIAL_RE = re.compile(r"([\\`*_\[\]<|~])")
_SPACES_RE = re.compile(r"[ \t\n\r\f\v]+")
_LEADING = {"#", "+", "-", ">"}
NBSP = "\u00a0"


def escape_text(text: str) -> str:
    """Plain text for Markdown: special characters backslash-escaped, one line."""
    one_line = _escaped(text).strip(" ")
    return "\\" + one_line if one_line[:1] in _LEADING else one_line


def _escaped(text: str) -> str:
    """``text`` on one line, runs of whitespace as one space (a non-breaking space, which
    keeps sizes whole, stays), special characters escaped."""
    shown = visible(str(text), keep="\n" + NBSP)
    return _SPECIAL_RE.sub(r"\\\1", _SPACES_RE.sub(" ", shown).replace("&", "&amp;"))


def code(text: str) -> str:
    """A code span safe inside a GFM table cell.

    The fence is one backtick longer than the longest run of backticks inside; ``|`` becomes
    ``\\|`` (GFM splits table cells before it parses code spans, and renders ``\\|`` as ``|``).
    """
    text = " ".join(visible(str(text)).split()).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def unbreakable(text: str) -> str:
    """Sizes and times kept whole: the space between a number and its unit made non-breaking."""
    return NUMBER_UNIT.sub(rf"\1{NBSP}\2", text)


def inline(text: doc.Inline | doc.Listing | str) -> str:
    """Text with its names as code spans, the rest escaped, a line break as ``<br>``."""
    if isinstance(text, doc.Listing):
        text = text.inline()
    spans = doc.words(text) if isinstance(text, str) else text
    parts = []
    for span in spans:
        if span is doc.BREAK or span.text == doc.BREAK.text:
            parts.append("<br>")
        elif span.code:
            parts.append(code(span.text))
        else:
            parts.append(_escaped(unbreakable(span.text)))
    out = "".join(parts).strip(" ")
    if out == "-":
        return out
    return "\\" + out if out[:1] in _LEADING else out


# ---- blocks --------------------------------------------------------------------------------------


def _block(block: doc.Block) -> list[str]:
    if isinstance(block, doc.Table):
        return [*table_lines(block), ""]
    if isinstance(block, doc.Heading):
        lead = [inline(block.lead), ""] if block.lead else []
        return ["#" * block.level + " " + inline(block.text), "", *lead]
    if isinstance(block, doc.Paragraph):
        text = inline(block.text)
        return [{"strong": f"**{text}**", "help": f"<sub>{text}</sub>"}.get(block.role, text), ""]
    if isinstance(block, doc.Items):
        return [*(f"- {inline(line)}" for line in block.lines), ""]
    if isinstance(block, doc.Categories):
        return [inline(f"by category: {categories_text(block.by_category)}"), ""]
    if isinstance(block, doc.Notes):
        return [*(f"- {escape_text(whose)}: {escape_text(note)}" for whose, note in block.items), ""]
    if isinstance(block, doc.Answer):
        lines: list[str] = []
        for group in block.first_first:
            first, *rest = group.lines
            lines += [f"**{escape_text(unbreakable(first))}**", ""]
            if rest:
                lines += ["  \n".join(escape_text(unbreakable(line)) for line in rest), ""]
        return lines
    return []  # charts, facts, code: HTML's


LEAVES_OUT = frozenset({doc.EXPLAINS, doc.WHY_EMPTY, doc.SUBHEADING, doc.DETAIL})
"""A summary: what the figures mean is the legend's, a section with nothing to show is left out,
its tables run on without subheadings, and it has no room for the page's detail tables."""


LAYOUTS: doc.Layouts = {doc.PeakChange: peak_change.markdown_blocks}
"""The parts Markdown lays out its own way."""


def drawn(column: doc.Column) -> bool:
    """Whether Markdown draws ``column``: the narrowest summary's figures, and no bars."""
    return doc.MARKDOWN in column.only and not (column.detail or column.secondary) and column.kind != doc.BAR


def table_lines(table: doc.Table) -> list[str]:
    """A GFM table of the columns Markdown shows; a failed run's message in the last column."""
    shown = [n for n, column in enumerate(table.columns) if drawn(column)]
    columns = [table.columns[n] for n in shown]
    lines = [
        "| " + " | ".join(escape_text(column.header) for column in columns) + " |",
        "|" + "|".join("---:" if column.numeric else "---" for column in columns) + "|",
    ]
    for row in table.rows:
        if row.failure is not None:
            given = [_cell(columns[n], cell) for n, cell in enumerate(row.cells) if n < len(columns)]
            filler = [""] * (len(columns) - len(given) - 2)
            cells = [*given, "failed", *filler, escape_text(row.failure)]
        else:
            cells = [_cell(column, row.cells[n]) for n, column in zip(shown, columns, strict=True)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _cell(column: doc.Column, value: Any) -> str:
    if column.kind == doc.SIZE:
        return "-" if value is None else unbreakable(format_bytes(value, signed=column.signed))
    if column.kind == doc.COUNT:
        return "-" if value is None else f"{value:,}"
    if column.kind == doc.NUMBER:
        text = value.text if isinstance(value, doc.Value) else str(value)
        return text if text == "-" else escape_text(unbreakable(text))
    if column.kind == doc.LABEL:
        return escape_text(value)
    return inline(value)


# ---- the summary ---------------------------------------------------------------------------------


def limits(top: int = TOP_OPS) -> Limits:
    """What Markdown shows: the ``top`` ops by peak, the largest entries, modules, kernels and
    module groups at each peak, at most :data:`SUMMARY_KERNELS` fused kernels."""
    return Limits(
        top=top,
        entries=ENTRIES,
        modules=MODULES,
        kernels=KERNELS,
        groups=GROUPS,
        fused=min(top, SUMMARY_KERNELS),
    )


def render_markdown(
    report: Report, top: int = TOP_OPS, *, rank: int | None = None, gate: GateResult | None = None
) -> str:
    """The Markdown summary of ``report``: the ``top`` ops by peak (both runs when comparing).
    A report of several ranks starts with every rank's row and their imbalance, then details
    one rank's runs (the highest peak's, or ``rank``); its notes cover every rank. ``gate``:
    the memory gate's result, shown first (each violation with what explains it)."""
    document = build(report, limits(top), rank=rank, gate=gate)
    lines = [f"## {inline(document.title)}", ""]
    for section in document.sections:
        blocks = doc.laid_out(section.shown(doc.MARKDOWN, LEAVES_OUT), LAYOUTS)
        if not blocks:
            continue
        if doc.MARKDOWN in section.titled:
            lines += [f"### {escape_text(section.title)}", ""]
        for block in blocks:
            lines += _block(block)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"
