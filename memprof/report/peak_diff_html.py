"""The HTML report's "What changed at the peak" section: the first comparison's at-peak diff
(:mod:`memprof.analysis.peak_diff`) as its summary and sortable tables by module and phase,
line, op and category, each row with both runs' bytes and the change, and the module groups
only one run holds at its peak."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memprof.report.rows import module_text
from memprof.text import html_text as _e
from memprof.units import format_bytes

if TYPE_CHECKING:
    from memprof.model import Report
    from memprof.model.diff import RunDiff

SECTION_ID = "peak-diff"


def _size(nbytes: int, *, signed: bool = False) -> str:
    return (
        f'<td class="num" data-sort="{nbytes}" title="{nbytes:,} B">'
        f"{_e(format_bytes(nbytes, signed=signed))}</td>"
    )


def _text(value: str, code: bool = False) -> str:
    shown = f"<code>{_e(value)}</code>" if code and value else _e(value or "-")
    return f'<td class="name" data-sort="{_e(value)}">{shown}</td>'


def _table(headers: Sequence[str], rows: list[str], base: str, other: str) -> str:
    heads = [*headers, base, other, "delta"]
    numeric = [False] * len(headers) + [True] * 3
    head = "".join(
        f'<th scope="col" data-type="{"num" if num else "text"}" title="Click to sort">{_e(label)}</th>'
        for label, num in zip(heads, numeric, strict=True)
    )
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _sides(base: int, other: int, delta: int) -> str:
    return _size(base) + _size(other) + _size(delta, signed=True)


def peak_change_html(report: Report) -> str:
    """The section for the report's first comparison; empty unless both runs were explained."""
    diff: RunDiff | None = report.diffs[0] if report.diffs else None
    change = diff.at_peak if diff is not None else None
    if diff is None or change is None:
        return ""
    a, b = diff.base, diff.other
    modules = [
        f"<tr>{_text(module_text(r.module, r.phase))}"
        f"{_text('yes' if r.submodules else 'no')}{_sides(r.base_bytes, r.other_bytes, r.delta_bytes)}</tr>"
        for r in change.by_module
    ]
    sources = [
        f"<tr>{_text(r.source, code=True)}{_text(r.source_text, code=True)}{_text(r.user_source, code=True)}"
        f"{_sides(r.base_bytes, r.other_bytes, r.delta_bytes)}</tr>"
        for r in change.by_source
    ]
    ops = [
        f"<tr>{_text(r.op, code=True)}{_sides(r.base_bytes, r.other_bytes, r.delta_bytes)}</tr>"
        for r in change.by_op
    ]
    categories = "".join(
        f"<tr>{_text(name)}{_size(delta, signed=True)}</tr>" for name, delta in change.by_category.items()
    )
    held = [
        f"<li>held at {_e(whose)}'s peak, none of it at {_e(other)}'s: "
        + ", ".join(
            f"{_e(module_text(r.module, r.phase))} {_e(format_bytes(r.other_bytes or r.base_bytes))}"
            for r in rows
        )
        + "</li>"
        for rows, whose, other in ((change.only_in_other, b, a), (change.only_in_base, a, b))
        if rows
    ]
    notes = [f"<li>{_e(note)}</li>" for note in change.notes]
    return (
        f'<section id="{SECTION_ID}"><h2>What changed at the peak, {_e(b)} vs {_e(a)}</h2>'
        f'<p class="verdict">{_e(change.summary)}</p>'
        + (f"<ul>{''.join(held + notes)}</ul>" if held or notes else "")
        + "<h3>By module and phase</h3>"
        + _table(["module", "submodules included"], modules, a, b)
        + "<h3>By line</h3>"
        + _table(["line", "statement", "called from"], sources, a, b)
        + "<h3>By op</h3>"
        + _table(["op"], ops, a, b)
        + "<h3>By category</h3>"
        + f'<table class="sortable"><thead><tr><th scope="col" data-type="text">category</th>'
        f'<th scope="col" data-type="num">delta</th></tr></thead><tbody>{categories}</tbody></table>'
        + '<p class="help">Bytes live at each peak (the footprint), by what made them; each table adds up '
        f"to the change of the footprint, {_e(format_bytes(change.footprint_delta_bytes, signed=True))}.</p>"
        + "</section>"
    )
