"""What is live at an explained run's peak, as every format shows it: the footprint and its
categories, each measured call's figures, the timeline stacked by category and an icicle of the
peak by module and line (HTML), every entry with the line that made it (a library's line, and
the user's line that called it), the modules holding most (or, grouped by layer kind, their
groups: instead of the modules in the summaries, above them in HTML), a compiled run's kernels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING

from memprof.core.units import format_bytes
from memprof.model.explanation import EAGER_GRAPH, nonzero_categories
from memprof.model.kind import ReportKind
from memprof.outputs import document as doc
from memprof.outputs.estimate import chosen_run
from memprof.outputs.rows import AtPeakView, at_peak_views, indexed_class, module_text

if TYPE_CHECKING:
    from memprof.model.explanation import AtPeakEntry, ModuleGroup
    from memprof.model.run import RunResult
    from memprof.outputs.context import Context

_TERMINAL = frozenset({doc.TERMINAL})
_MARKDOWN = frozenset({doc.MARKDOWN})

CATEGORIES_HELP = (
    "Categories: parameter, gradient (.grad of parameters), optimizer_state, input (other tensors "
    "reachable from the arguments), activation (saved by autograd for backward), temporary (made during "
    "the call, none of the above), workspace (allocated inside an op, never a tensor of the program), "
    "other (buffers, module globals, what could not be attributed). Backward entries carry the forward "
    "line and module whose gradient they are."
)
ICICLE_HELP = (
    "What is live at the peak by module (submodules below their module) and, last, by source line; a "
    "box is as wide as its bytes. Hover a box for its size."
)


def at_peak_section(context: Context) -> doc.Section | None:
    """What is live at the peak of each explained run (of an estimate's sweep, the run it
    details); None when no run was explained (``--no-explain``, a recording, a report written
    before memprof explained peaks)."""
    limits, report = context.limits, context.detail
    runs = report.ok_runs()
    if context.kind is ReportKind.SWEEP:
        chosen = chosen_run(report)
        runs = [chosen] if chosen is not None else []
    views = at_peak_views(runs, limits.entries, limits.modules, limits.kernels, limits.groups)
    if not views:
        return None
    blocks = [block for index, view in enumerate(views) for block in _run_blocks(view, index, context.kind)]
    blocks.append(doc.Paragraph(doc.words(CATEGORIES_HELP), "help", purpose=doc.EXPLAINS))
    return doc.Section("at-peak", "At the peak", tuple(blocks))


def _run_blocks(view: AtPeakView, index: int, kind: ReportKind) -> list:
    run = view.run
    assert run.at_peak is not None
    blocks: list = [
        doc.Heading(doc.words(f"At the peak of {run.label}"), lead=doc.words(footprint_text(run))),
        doc.Categories(run.at_peak.by_category),
    ]
    calls = calls_text(run)
    if calls:
        blocks.append(doc.Paragraph(doc.words(calls)))
    blocks += [
        doc.CategoryChart(run, index, category_caption(run, kind)),
        doc.Heading(doc.words("By module and line"), level=4, purpose=doc.SUBHEADING),
        doc.Icicle(run),
        doc.Paragraph(doc.words(ICICLE_HELP), "help", purpose=doc.EXPLAINS),
        doc.Heading(doc.words("What is live at the peak"), level=4, purpose=doc.SUBHEADING),
        entries_table(view),
    ]
    if view.hidden_entries:
        hidden = (
            f"... {view.hidden_entries} more entries, {format_bytes(view.hidden_bytes)} in all (the JSON, "
            "HTML and at-peak CSV reports list every one)"
        )
        blocks.append(doc.Paragraph(doc.words(hidden), "help", purpose=doc.LEFT_OUT))
    if view.groups:
        blocks += [
            doc.Heading(doc.words(f"Modules {grouping_text(view.groups)}"), level=4, purpose=doc.SUBHEADING),
            groups_table(view),
        ]
        if view.hidden_groups:
            more = f"... {view.hidden_groups} more groups"
            blocks += [
                doc.Paragraph(
                    doc.words(f"{more} (the JSON and HTML reports list every one)"), "help", only=_TERMINAL
                ),
                doc.Paragraph(doc.words(f"{more}."), only=_MARKDOWN),
            ]
    if view.modules:
        # Grouped, the summaries show the groups alone; HTML shows both.
        table = modules_table(view, purpose=doc.DETAIL if view.groups else "")
        blocks += [doc.Heading(doc.words("Modules"), level=4, purpose=doc.SUBHEADING), table]
    if view.kernels:
        blocks += [
            doc.Heading(doc.words("Kernels of compiled code"), level=4, purpose=doc.SUBHEADING),
            kernels_table(view),
        ]
    return blocks


def category_caption(run: RunResult, kind: ReportKind) -> str:
    """Which call the timeline by category shows, and how to read it."""
    count = len(run.call_numbers)
    if kind is ReportKind.RUN and run.mode == "eager":
        call = "the explaining call (one more call, made after the measured ones, with what it keeps tracked)"
    elif count > 1 and run.peak_call is not None:
        call = f"call {run.peak_call} of {count} (the one with the highest peak)"
    else:
        call = "the call whose peak is explained"
    return (
        f"Live bytes by category over {call}, from its start, what was live before it included; hover "
        "an area for its bytes at the peak."
    )


# ---- the tables ----------------------------------------------------------------------------------


def _role(role: str) -> str:
    """`` (FSDP unsharded)``: what a sharded job's machinery holds an entry as."""
    from memprof.model.explanation import ROLES

    return f" ({ROLES.get(role, role)})" if role else ""


def entries_table(view: AtPeakView) -> doc.Table:
    """Every entry shown, largest first, then what could not be attributed (with the reason)."""
    columns = (
        doc.Column("bytes", doc.SIZE, strong=True),
        doc.Column("count", doc.COUNT, detail=True),
        doc.Column("category", doc.CATEGORY),
        doc.Column("module", doc.NAME, width=16),
        doc.Column("line", doc.NOTE, verbatim=True),
        doc.Column("op", doc.NAME, width=20),
    )
    rows = [
        doc.Row(
            (
                entry.bytes,
                entry.count,
                entry.category + (f" x{entry.count}" if entry.count > 1 else "") + _role(entry.role),
                module_cell(entry.module, entry.phase, indexed_class(view.run, entry.module)),
                line_cell(entry),
                doc.name(entry.op) or doc.words("-"),
            )
        )
        for entry in view.entries
    ]
    rows += [
        doc.Row(
            (
                u.bytes,
                u.count,
                "other",
                doc.words("-"),
                doc.words(f"not attributed: {u.reason}"),
                doc.words("-"),
            ),
            mark="unattributed",
        )
        for u in view.unattributed
    ]
    return doc.Table(columns, tuple(rows), name="at-peak-entries", sortable=True)


def modules_table(view: AtPeakView, purpose: str = "") -> doc.Table:
    """The modules holding most at the peak, submodules included: the summaries name each with
    its class and phase, HTML gives them columns of their own."""
    columns = (
        doc.Column("module (submodules included)", doc.NAME, width=16, brief=True),
        doc.Column("module", doc.TEXT, detail=True),
        doc.Column("class", doc.TEXT, detail=True),
        doc.Column("phase", doc.TEXT, detail=True),
        doc.Column("calls", doc.COUNT, drop=2),
        doc.Column("live at peak", doc.SIZE, strong=True),
        doc.Column("peak inside", doc.SIZE),
        doc.Column("allocated", doc.SIZE, drop=1),
    )
    figures = attrgetter("calls", "at_peak_bytes", "peak_bytes", "allocated_bytes")
    phase = {"forward": ""}
    rows = tuple(
        doc.Row(
            (
                module_cell(m.module, phase.get(m.phase, m.phase), m.module_class),
                doc.name(m.module) or doc.words("-"),
                m.module_class,
                m.phase,
                *figures(m),
            )
        )
        for m in view.modules
    )
    return doc.Table(columns, rows, name="at-peak-modules", sortable=True, purpose=purpose)


def groups_table(view: AtPeakView) -> doc.Table:
    """The modules grouped by layer kind (``run.module_groups``): each group's outermost
    modules, their calls, what they hold at the peak, their peak and what they allocated."""
    grouping = grouping_text(view.groups)
    columns = (
        doc.Column(f"modules {grouping}", doc.NAME, width=16, brief=True),
        doc.Column("class" if grouping == "by class" else "path pattern", doc.TEXT, detail=True),
        doc.Column("phase", doc.TEXT, detail=True),
        doc.Column("modules", doc.COUNT, detail=True),
        doc.Column("calls", doc.COUNT, drop=2),
        doc.Column("live at peak", doc.SIZE, strong=True),
        doc.Column("peak inside", doc.SIZE),
        doc.Column("allocated", doc.SIZE, drop=1, secondary=True),
    )
    figures = attrgetter("modules", "calls", "at_peak_bytes", "peak_bytes", "allocated_bytes")
    rows = tuple(
        doc.Row(
            (
                doc.join(doc.name(g.group), group_text(g).removeprefix(g.group)),
                doc.name(g.group),
                g.phase,
                *figures(g),
            )
        )
        for g in view.groups
    )
    return doc.Table(columns, rows, name="at-peak-groups", sortable=True)


def kernels_table(view: AtPeakView) -> doc.Table:
    """A compiled run's kernels, the bytes they produce and hold at the peak, the eager ops each
    replaces."""
    columns = (
        doc.Column("kernel", doc.NAME),
        doc.Column("phase", doc.TEXT),
        doc.Column("calls", doc.COUNT, drop=1),
        doc.Column("produces", doc.SIZE),
        doc.Column("live at peak", doc.SIZE, strong=True),
        doc.Column("eager ops it replaces", doc.NOTE),
    )
    figures = attrgetter("phase", "calls", "allocated_bytes", "at_peak_bytes")
    replaced = [doc.names([op.removeprefix("aten::") for op in k.replaces]) for k in view.kernels]
    rows = tuple(
        doc.Row((doc.name(k.name), *figures(k), ops or doc.words("-")))
        for k, ops in zip(view.kernels, replaced, strict=True)
    )
    return doc.Table(columns, rows, name="at-peak-kernels", sortable=True)


def module_cell(module: str, phase: str, module_class: str = "") -> doc.Inline:
    """A module as a name: ``lm_head (Linear)``, ``GPT (backward)``; ``(optimizer)`` and ``-``
    (none) as text."""
    text = module_text(module, phase, module_class)
    return doc.name(text) if module else doc.words(text)


def module_name(module: str, phase: str) -> doc.Inline:
    """``lm_head`` as code, then its phase as text: ``GPT`` (backward); ``(optimizer)`` and ``-``
    (none) as text."""
    if not module:
        return doc.words(module_text(module, phase))
    return doc.join(doc.name(module), f" ({phase})" if phase in ("backward", "recompute") else "")


def line_cell(entry: AtPeakEntry) -> doc.Inline:
    """The line that made an entry, and on a line of its own the user's line that called it;
    for state made before the call, ``before the call`` and its shape. In a compiled run, on a
    last line, the graph that made it."""
    if not entry.source:
        what = f", {entry.shape} {entry.dtype}".rstrip() if entry.shape else ""
        cell = doc.words(("before the call" if entry.before_call else "no line") + what)
    else:
        cell = _lines(entry)
    if entry.graph == EAGER_GRAPH:
        cell = doc.join(cell, (doc.BREAK,), "ran eagerly, between graphs")
    elif entry.graph:
        cell = doc.join(cell, (doc.BREAK,), "in graph ", doc.name(entry.graph))
    return cell


def _lines(entry: AtPeakEntry) -> doc.Inline:
    """An entry's line and the user's line that called it."""
    cell = doc.join(doc.name(entry.source), "  ", doc.name(entry.source_text))
    if entry.user_source:
        cell = doc.join(
            cell,
            (doc.BREAK,),
            "called from ",
            doc.name(entry.user_source),
            "  ",
            doc.name(entry.user_source_text),
        )
    return cell


# ---- what the section says -----------------------------------------------------------------------


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


def grouping_text(groups: tuple[ModuleGroup, ...]) -> str:
    """``by class`` or ``by path pattern``: what a grouped table's rows are."""
    return "by path pattern" if groups and groups[0].by == "pattern" else "by class"


def group_text(group: ModuleGroup) -> str:
    """``GPT2Attention x2``, ``transformer.h.*.attn x2 (backward)``: a group, how many
    outermost modules it holds, its phase."""
    text = f"{group.group} x{group.modules}" if group.modules > 1 else group.group
    return f"{text} ({group.phase})" if group.phase in ("backward", "recompute") else text


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
