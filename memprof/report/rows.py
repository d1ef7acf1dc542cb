"""Which rows a report shows, decided once for every format.

An op table holds a comparison's ops (when two or more runs succeeded) or a run's ops,
ordered by ``sort`` and cut to ``top``: exactly ``top`` rows, in the terminal, in Markdown and
in HTML alike (:func:`op_tables`). Fused kernels, which explain where the eager ops went, have
their own section (:func:`fused_rows`), the same in every format, whatever the tables show.
What is live at an explained run's peak (:func:`at_peak_views`) shows the largest entries and
modules: 10 and 6 in the terminal, 5 in Markdown, all in HTML.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memprof.analysis.explanation import nonzero_categories
from memprof.analysis.ops import SORT_FIELDS, OpStats, sort_ops
from memprof.units import format_bytes

if TYPE_CHECKING:
    from memprof.analysis.diff import OpDiff, RunDiff
    from memprof.analysis.explanation import AtPeakEntry, KernelStats, ModuleStats, Unattributed
    from memprof.model import Report, RunResult


@dataclass(frozen=True)
class DiffTable:
    """The ops a comparison's table shows."""

    diff: RunDiff
    rows: tuple[OpDiff, ...]


@dataclass(frozen=True)
class RunTable:
    """The ops a run's table shows (a report with one successful run)."""

    run: RunResult
    rows: tuple[OpStats, ...]


def op_tables(
    report: Report, sort: str = "peak", top: int | None = None, *, every_comparison: bool = False
) -> tuple[DiffTable, ...] | tuple[RunTable, ...]:
    """The op tables of a report: the first comparison's (every comparison's with
    ``every_comparison``), or, with a single successful run, that run's."""
    if report.diffs:
        diffs = report.diffs if every_comparison else report.diffs[:1]
        return tuple(DiffTable(diff, diff_rows(diff, sort, top)) for diff in diffs)
    return tuple(RunTable(run, run_rows(run, sort, top)) for run in report.ok_runs())


def run_rows(run: RunResult, sort: str = "peak", top: int | None = None) -> tuple[OpStats, ...]:
    """A run's ops, largest first by ``sort`` (peak, self, allocated, total), at most ``top``."""
    return sort_ops(run.op_stats, sort)[:top]


def diff_rows(diff: RunDiff, sort: str = "peak", top: int | None = None) -> tuple[OpDiff, ...]:
    """A comparison's ops, by the larger of their two sizes (magnitudes) in ``sort``, at most
    ``top``; ties keep the diff's order (largest peak first)."""
    column = SORT_FIELDS[sort]

    def size(op: OpDiff) -> int:
        return max(abs(getattr(side, column)) if side is not None else 0 for side in (op.base, op.other))

    return tuple(sorted(diff.op_diffs, key=lambda op: -size(op)))[:top]


@dataclass(frozen=True)
class Replaced:
    """An aten op a fused kernel replaced, with its peak in the base run (None: not there)."""

    op: str
    base_peak_bytes: int | None


@dataclass(frozen=True)
class FusedRow:
    """A fused kernel of a compared run (``run``, compared with ``base``), its own peak (None
    when it did not run there) and the aten ops its name says it replaced."""

    run: str
    base: str
    kernel: str
    peak_bytes: int | None
    replaced: tuple[Replaced, ...]


def fused_rows(report: Report) -> tuple[FusedRow, ...]:
    """Every fused kernel of every comparison, in each comparison's order (largest peak first)."""
    rows = []
    for diff in report.diffs:
        base_peaks = {op.name: op.base.peak_bytes for op in diff.op_diffs if op.base is not None}
        for op in diff.op_diffs:
            if op.fused_ops:
                rows.append(
                    FusedRow(
                        run=diff.other,
                        base=diff.base,
                        kernel=op.name,
                        peak_bytes=op.other.peak_bytes if op.other is not None else None,
                        replaced=tuple(Replaced(part, base_peaks.get(part)) for part in op.fused_ops),
                    )
                )
    return tuple(rows)


def replaced_text(row: FusedRow, name: Callable[[str], str] = str, text: Callable[[str], str] = str) -> str:
    """``aten::abs (64.0 MiB peak in eager), aten::sub (256.0 MiB peak in eager)``: the ops a
    kernel replaced, with their peaks in the base run. ``name`` formats op names and ``text``
    the rest (escaping for HTML, say)."""
    return ", ".join(
        name(op.op)
        + (
            f" ({text(format_bytes(op.base_peak_bytes))} peak in {text(row.base)})"
            if op.base_peak_bytes is not None
            else ""
        )
        for op in row.replaced
    )


# ---- what is live at the peak -------------------------------------------------------------------

AT_PEAK_ROWS = {"terminal": (10, 6, 5), "markdown": (5, 5, 3), "html": (None, None, None)}
"""Per format: how many at-peak entries, modules and kernels each explained run shows (None:
all), largest first."""


@dataclass(frozen=True)
class AtPeakView:
    """What an explained run's "At the peak" section shows: its largest entries (and every line
    memprof could not attribute), its modules by bytes live at the peak, its kernels (compiled
    runs), and how many entries are left out."""

    run: RunResult
    entries: tuple[AtPeakEntry, ...]
    unattributed: tuple[Unattributed, ...]
    modules: tuple[ModuleStats, ...]
    kernels: tuple[KernelStats, ...]
    hidden_entries: int
    hidden_bytes: int


def at_peak_views(report: Report, fmt: str) -> tuple[AtPeakView, ...]:
    """The at-peak section of every successful run that was explained, cut to ``fmt``'s
    lengths (:data:`AT_PEAK_ROWS`)."""
    entries, modules, kernels = AT_PEAK_ROWS[fmt]
    views = []
    for run in report.ok_runs():
        at_peak = run.at_peak
        if at_peak is None:
            continue
        shown = at_peak.entries[:entries]
        hidden = at_peak.entries[len(shown) :]
        ordered = sorted(run.module_stats, key=lambda m: (-m.at_peak_bytes, -m.peak_bytes))
        views.append(
            AtPeakView(
                run=run,
                entries=shown,
                unattributed=at_peak.unattributed,
                modules=tuple(ordered[:modules]),
                kernels=run.kernels[:kernels],
                hidden_entries=len(hidden),
                hidden_bytes=sum(e.bytes for e in hidden),
            )
        )
    return tuple(views)


def footprint_text(run: RunResult) -> str:
    """``footprint 52.2 MiB = 14.2 MiB live at the start + 38.0 MiB peak above it``."""
    if run.footprint_bytes is None or run.live_at_start_bytes is None:
        return f"peak {format_bytes(run.peak_bytes)} above the call's start"
    call = f" (call {run.peak_call} of {len(run.call_numbers)})" if len(run.call_numbers) > 1 else ""
    return (
        f"footprint {format_bytes(run.footprint_bytes)} = {format_bytes(run.live_at_start_bytes)} live at "
        f"the start + {format_bytes(run.peak_bytes)} peak above it{call}"
    )


def categories_text(by_category: Mapping[str, int]) -> str:
    """``parameter 3.5 MiB, optimizer_state 7.1 MiB, ...``: the categories holding bytes."""
    parts = nonzero_categories(by_category)
    return ", ".join(f"{name} {format_bytes(nbytes)}" for name, nbytes in parts) or "nothing"


def calls_text(run: RunResult) -> str | None:
    """Each measured call's peak and live bytes at its start, when there are several."""
    if len(run.call_numbers) < 2:
        return None
    parts = [
        f"{c.call}: {format_bytes(c.peak_bytes)} above {format_bytes(c.live_at_start_bytes)}"
        for c in run.call_numbers
    ]
    return "each call's peak above live at its start: " + ", ".join(parts)


def module_text(module: str, phase: str) -> str:
    """``lm_head``, ``GPT (backward)``, ``(optimizer)``; ``-`` for none."""
    if phase == "backward":
        return f"{module or '-'} (backward)"
    if phase == "optimizer" and not module:
        return "(optimizer)"
    return module or "-"


def line_text(entry: AtPeakEntry, width: int | None = None) -> str:
    """``gpt.py:109 loss = F.cross_entropy(...)``, the statement cut to ``width`` characters;
    for state made before the call, ``before the call`` and its shape."""
    if entry.source:
        text = entry.source_text
        if width is not None and len(text) > width:
            text = text[: width - 1] + "…"
        return f"{entry.source}  {text}".rstrip()
    what = f", {entry.shape} {entry.dtype}".rstrip() if entry.shape else ""
    return ("before the call" if entry.before_call else "no line") + what


def shorten_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle (both ends of a kernel name
    tell which it is)."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


@dataclass
class IcicleNode:
    """A node of the peak by module -> source line: ``name`` as shown, ``path`` in full (a
    module's dotted path, or the leaf's line), ``bytes`` under it, the ``category`` of a leaf
    (None for a module), and its children, largest first."""

    name: str
    path: str
    bytes: int = 0
    category: str | None = None
    children: list[IcicleNode] | None = None

    def child(self, name: str, path: str, category: str | None = None) -> IcicleNode:
        self.children = self.children if self.children is not None else []
        for node in self.children:
            if node.path == path and node.category == category:
                return node
        node = IcicleNode(name, path, category=category)
        self.children.append(node)
        return node


def icicle(run: RunResult) -> IcicleNode | None:
    """What is live at ``run``'s peak as a tree: the footprint, then module paths (``blocks`` ->
    ``blocks.0`` -> ``blocks.0.attn``), then the source lines (or, for state made before the
    call, the category) inside each; what memprof could not attribute under its own node."""
    at_peak = run.at_peak
    if at_peak is None:
        return None
    root = IcicleNode(f"{run.label}: footprint", run.label)
    leaves: list[tuple[list[str], str, str, int]] = []
    for entry in at_peak.entries:
        parts = entry.module.split(".") if entry.module else ["(no module)"]
        if entry.source:
            leaf = entry.source + (" (backward)" if entry.phase == "backward" else "")
        else:
            leaf = entry.category + (" (before the call)" if entry.before_call else "")
        leaves.append((parts, leaf, entry.category, entry.bytes))
    for u in at_peak.unattributed:
        leaves.append((["(not attributed)"], u.reason, "other", u.bytes))
    for parts, leaf, category, nbytes in leaves:
        node = root
        node.bytes += nbytes
        for depth in range(len(parts)):
            # An index (blocks.0) says little alone: shown with its container's name.
            name = (
                ".".join(parts[depth - 1 : depth + 1]) if parts[depth].isdigit() and depth else parts[depth]
            )
            node = node.child(name, ".".join(parts[: depth + 1]))
            node.bytes += nbytes
        node = node.child(leaf, leaf, category)
        node.bytes += nbytes
    _sort_tree(root)
    return root


def _sort_tree(node: IcicleNode) -> None:
    if node.children:
        node.children.sort(key=lambda child: -child.bytes)
        for child in node.children:
            _sort_tree(child)
