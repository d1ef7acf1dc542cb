"""A compiled run's own section: how many graphs torch.compile made, each graph break with its
reason and its lines (the library's and the user's), each recompile with its failed guard."""

from __future__ import annotations

from memprof.model.compiled import GraphBreak, Recompile
from memprof.model.run import RunResult
from memprof.outputs import document as doc
from memprof.outputs.context import Context

MAX_LISTED = 10
"""Breaks and recompiles listed per run (the JSON has every one)."""


def compile_section(context: Context) -> doc.Section | None:
    """One line per compiled run (graphs, breaks, recompiles), then one line per break and per
    recompile, most frequent break first. None when no run was compiled."""
    runs = [run for run in context.detail.ok_runs() if run.compile is not None]
    if not runs:
        return None
    blocks: list[doc.Block] = []
    for run in runs:
        blocks += _run_blocks(run)
    return doc.Section("compile", "Compiled graphs", tuple(blocks))


def _run_blocks(run: RunResult) -> list[doc.Block]:
    assert run.compile is not None
    section = run.compile
    blocks: list[doc.Block] = [doc.Heading(doc.words(f"{run.label}: torch.compile made {section.summary()}"))]
    lines = [break_line(b) for b in section.breaks[:MAX_LISTED]]
    lines += [recompile_line(r) for r in section.recompiles[:MAX_LISTED]]
    left = max(0, len(section.breaks) - MAX_LISTED) + max(0, len(section.recompiles) - MAX_LISTED)
    if left:
        lines.append(doc.words(f"{left} more in the JSON report"))
    if lines:
        blocks.append(doc.Items(tuple(lines), nested=True))
    return blocks


def break_line(item: GraphBreak) -> doc.Inline:
    """``graph break at modeling_gpt2.py:703 `attn_output = ...` (called from train.py:12): reason``."""
    times = f" x{item.count}" if item.count > 1 else ""
    parts: list[doc.Inline | str] = [f"graph break{times} at ", doc.name(item.source or "?")]
    if item.source_text:
        parts += [" ", doc.name(item.source_text)]
    if item.user_source:
        parts += [" (called from ", doc.name(item.user_source), ")"]
    parts.append(f": {item.reason}")
    return doc.join(*parts)


def recompile_line(item: Recompile) -> doc.Inline:
    """``recompiled step at train.py:10: guard failed: x.size()[0] == 8``."""
    guard = f": guard failed: {item.guard}" if item.guard else ""
    return doc.join("recompiled ", doc.name(item.function), " at ", doc.name(item.source), guard)
