"""Which rows a report shows, decided once for every format.

An op table holds a comparison's ops (when two or more runs succeeded) or a run's ops,
ordered by ``sort`` and cut to ``top``: exactly ``top`` rows, in the terminal, in Markdown and
in HTML alike (:func:`op_tables`).

Two kinds of rows carry nothing a reader needs, and the summaries (terminal, Markdown) leave
them out, saying how many; the HTML report keeps them, hidden behind a toggle
(:func:`hidden_reasons` says why each is hidden):

- rows with no memory activity: every byte figure 0 in every run;
- rows that repeat another's figures (``aten::to``, ``aten::_to_copy`` and
  ``aten::empty_strided`` show the same calls and bytes: all of a caller's memory is its
  child's). Ops are taken for such a chain when they have the same calls, total, allocated
  and peak bytes in every run, each took longer than the next (a child runs inside its caller),
  and all but the innermost allocate nothing themselves (self bytes 0). One row stays: the
  outermost aten op (the call the user's code made, as "peak during" names it), or, with no
  aten op among them, the innermost (a fused kernel, a ``record_function`` range); in a table
  sorted by self bytes, the innermost, which holds them.

A comparison's table also folds wrappers into the op inside them (:func:`wrapper_reasons`):
the rows left are the ops that hold the bytes, in eager and compiled runs alike; with
``chains`` they are shown, each with the chain it wraps.

Fused kernels, which explain where the eager ops went, have their own section
(:func:`fused_rows`), the same in every format, most memory first. What is live at an explained
run's peak (:func:`at_peak_views`) shows the largest entries, modules and kernels: as many as
each format has room for (:class:`memprof.outputs.context.Limits`); a run whose modules were
grouped by layer kind shows its groups instead of its modules in the summaries, and above them
in HTML.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memprof.core.names import COMPILED_REGION, WRAPPER_RANGES
from memprof.model.ops import SORT_FIELDS, OpStats, sort_ops
from memprof.outputs.document import Inline, join, names, words
from memprof.outputs.document import name as code

if TYPE_CHECKING:
    from memprof.model.diff import OpDiff, RunDiff
    from memprof.model.explanation import AtPeakEntry, KernelStats, ModuleGroup, ModuleStats, Unattributed
    from memprof.model.report import Report
    from memprof.model.run import RunResult

SUMMARY_KERNELS = 5
"""The summaries (terminal, Markdown) list at most this many fused kernels (the most memory
first); the HTML and JSON reports hold them all."""
NO_ACTIVITY = "no memory activity"
"""Why a row is hidden: every byte figure is 0 in every run."""
REPEATS = "same figures as "
"""Why a row is hidden: ``same figures as <op>``, the op of its chain that is shown."""
FOLDED = "folded into "
"""Why a comparison's row is hidden: ``folded into <op>``, the op its peak was wholly inside."""
WRAPPER = "wrapper range"
"""Why a comparison's row is hidden: a range that only wraps other ops (autograd's nodes, a
profiler step, an optimizer step, the compiled region's wrappers)."""

ALLOCATORS = frozenset(
    {
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::new_empty",
        "aten::new_empty_strided",
        "aten::zeros",
        "aten::zeros_like",
        "aten::new_zeros",
        "aten::resize_",
    }
)
"""Ops that only allocate for the op around them: a wrapper is folded into the op above them."""

_WRAPPER_RANGE = re.compile(
    r"^(?:autograd::engine::evaluate_function: .*|[A-Z]\w*Backward\d*|ProfilerStep#\d+"
    r"|Optimizer\.\w+#.*|torch::autograd::AccumulateGrad)$"
)
_EVALUATE = "autograd::engine::evaluate_function: "


@dataclass(frozen=True)
class LeftOut:
    """The ops a summary leaves out of a table: without memory activity, those that only
    repeat an op they call (as ``(op, the op it repeats)``), and a comparison's wrappers (as
    ``(op, the op it is folded into)``, the op empty for a wrapper range)."""

    no_activity: tuple[str, ...] = ()
    repeats: tuple[tuple[str, str], ...] = ()
    folded: tuple[tuple[str, str], ...] = ()

    def __len__(self) -> int:
        return len(self.no_activity) + len(self.repeats) + len(self.folded)

    def inline(self, groups: int = 3) -> Inline:
        """``3 ops not shown: aten::_to_copy, aten::empty_strided (same figures as aten::to);
        1 with no memory activity.`` (empty when none; at most ``groups`` chains named; with
        ``groups`` 0, the count alone: ``3 more ops not shown.``)."""
        if not len(self):
            return ()
        parts: list[Inline] = []
        chains: dict[str, list[str]] = {}
        for op, kept in self.repeats:
            chains.setdefault(kept, []).append(op)
        for kept, ops in list(chains.items())[:groups]:
            parts.append(join(names(ops), " (same figures as ", code(kept), ")"))
        if len(chains) > groups:
            rest = sum(len(ops) for ops in list(chains.values())[groups:])
            parts.append(words(f"{rest} more with the same figures as an op shown"))
        parts += self._folded_parts(groups)
        if self.no_activity:
            parts.append(words(f"{len(self.no_activity)} with no memory activity"))
        total = len(self)
        out = join(f"{total} op{'s' if total > 1 else ''} not shown: ")
        if not groups:  # counted alone
            return join(f"{total} more op{'s' if total > 1 else ''} not shown.")
        for n, part in enumerate(parts):
            out = join(out, "; " if n else "", part)
        return join(out, ".")

    def sentence(self, name: Callable[[str], str] = str, groups: int = 3) -> str:
        """:meth:`inline` as text, ``name`` formatting op names."""
        return "".join(name(span.text) if span.code else span.text for span in self.inline(groups))

    def _folded_parts(self, groups: int) -> list[Inline]:
        """``aten::linear, aten::matmul (folded into aten::mm)``, then the wrapper ranges."""
        into: dict[str, list[str]] = {}
        for op, kept in self.folded:
            into.setdefault(kept, []).append(op)
        ranges = into.pop("", [])
        parts = [
            join(names(ops), " (folded into ", code(kept), ")") for kept, ops in list(into.items())[:groups]
        ]
        if len(into) > groups:
            rest = sum(len(ops) for ops in list(into.values())[groups:])
            parts.append(words(f"{rest} more wrappers folded into the op inside them"))
        if ranges:
            parts.append(words(f"{len(ranges)} wrapper range{'s' if len(ranges) > 1 else ''}"))
        return parts


@dataclass(frozen=True)
class DiffTable:
    """The ops a comparison's table shows, and those left out (``hidden``: name -> why; the
    rows include them when the table was asked for with every row). ``chains``: for the
    wrappers a table asked for with ``chains`` shows, what each wraps (``-> aten::matmul ->
    aten::mm``, or ``wrapper range``)."""

    diff: RunDiff
    rows: tuple[OpDiff, ...]
    left_out: LeftOut = LeftOut()
    hidden: dict[str, str] = field(default_factory=dict)
    chains: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunTable:
    """The ops a run's table shows (a report with one successful run); see :class:`DiffTable`."""

    run: RunResult
    rows: tuple[OpStats, ...]
    left_out: LeftOut = LeftOut()
    hidden: dict[str, str] = field(default_factory=dict)


def op_tables(
    report: Report,
    sort: str = "peak",
    top: int | None = None,
    *,
    every_comparison: bool = False,
    keep_hidden: bool = False,
    chains: bool = False,
) -> tuple[DiffTable, ...] | tuple[RunTable, ...]:
    """The op tables of a report: the first comparison's (every comparison's with
    ``every_comparison``), or, with a single successful run, that run's. Rows without memory
    activity, repeating an op they call or (comparisons) wrapping another are left out, unless
    ``keep_hidden`` (then they are in the rows and ``hidden`` says why); ``chains`` shows the
    wrappers, each with what it wraps."""
    if report.diffs:
        diffs = report.diffs if every_comparison else report.diffs[:1]
        tables = []
        for diff in diffs:
            ops = [(op.name, (op.base, op.other)) for op in diff.op_diffs]
            hidden = hidden_reasons(ops, sort, fold=True)
            shown_chains: dict[str, str] = {}
            if chains:  # the wrappers shown, each with what it wraps
                shown_chains = {
                    name: chain_text(name, sides)
                    for name, sides in ops
                    if hidden.get(name, "").startswith((FOLDED, WRAPPER))
                }
                hidden = {name: why for name, why in hidden.items() if name not in shown_chains}
            shown, left_out, kept = _cut(diff_rows(diff, sort, None), hidden, top, keep_hidden)
            tables.append(DiffTable(diff, shown, left_out, kept, chains=shown_chains))
        return tuple(tables)
    return tuple(run_table(run, sort, top, keep_hidden) for run in report.ok_runs())


def run_table(
    run: RunResult, sort: str = "peak", top: int | None = None, keep_hidden: bool = False
) -> RunTable:
    """One run's op table (see :func:`op_tables`)."""
    hidden = hidden_reasons([(op.name, (op,)) for op in run.op_stats], sort)
    return RunTable(run, *_cut(run_rows(run, sort, None), hidden, top, keep_hidden))


def _cut(rows: Sequence, hidden: dict[str, str], top: int | None, keep: bool) -> tuple:
    """The first ``top`` rows that are not hidden (with ``keep``, the hidden rows among them
    too), what was left out, and (with ``keep``) why."""
    shown: list = []
    visible = 0
    for row in rows:
        if top is not None and visible >= top:
            break
        if row.name not in hidden:
            visible += 1
            shown.append(row)
        elif keep:
            shown.append(row)
    left_out = LeftOut(
        no_activity=tuple(n for n, why in hidden.items() if why == NO_ACTIVITY),
        repeats=tuple((n, why.removeprefix(REPEATS)) for n, why in hidden.items() if why.startswith(REPEATS)),
        folded=tuple(
            (n, why.removeprefix(FOLDED) if why != WRAPPER else "")
            for n, why in hidden.items()
            if why.startswith(FOLDED) or why == WRAPPER
        ),
    )
    return tuple(shown), left_out, (hidden if keep else {})


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


_BYTES = ("self_bytes", "total_bytes", "allocated_bytes", "peak_bytes")


def _no_activity(sides: Sequence[OpStats | None]) -> bool:
    return all(side is None or not any(getattr(side, c) for c in _BYTES) for side in sides)


def _signature(sides: Sequence[OpStats | None]) -> tuple:
    """What a caller and the child it repeats share: in every run, presence, calls, total,
    allocated and peak bytes."""
    return tuple(
        None if s is None else (s.calls, s.total_bytes, s.allocated_bytes, s.peak_bytes) for s in sides
    )


def _chain(members: list[tuple[str, Sequence[OpStats | None]]]) -> list[str] | None:
    """The members' names from the innermost (shortest CPU time in every run) to the outermost,
    when they form a caller-child chain: strictly ordered times, and nothing allocated by any
    but the innermost. None when they do not."""
    order = sorted(members, key=lambda member: _total_us(member[1]))
    for (_, inner), (_, outer) in zip(order, order[1:], strict=False):
        pairs = [
            (i.total_us, o.total_us)
            for i, o in zip(inner, outer, strict=True)
            if i is not None and o is not None
        ]
        if not pairs or not all(math.isfinite(a) and math.isfinite(b) and a < b for a, b in pairs):
            return None
    if any(s is not None and s.self_bytes != 0 for _, sides in order[1:] for s in sides):
        return None
    return [name for name, _ in order]


def hidden_reasons(
    ops: Sequence[tuple[str, Sequence[OpStats | None]]], sort: str = "peak", *, fold: bool = False
) -> dict[str, str]:
    """For each op, given as (name, its numbers in each run or None), why a summary leaves it
    out: :data:`NO_ACTIVITY`, ``same figures as <op>`` (see the module's docstring; ``sort``
    "self" keeps the innermost of a chain), and with ``fold`` (a comparison) ``folded into
    <op>`` or :data:`WRAPPER` (:func:`wrapper_reasons`). Ops not in the result are shown."""
    hidden = {name: NO_ACTIVITY for name, sides in ops if _no_activity(sides)}
    if fold:
        hidden.update(wrapper_reasons([(name, sides) for name, sides in ops if name not in hidden]))
    groups: dict[tuple, list[tuple[str, Sequence[OpStats | None]]]] = {}
    for name, sides in ops:
        if name not in hidden:
            groups.setdefault(_signature(sides), []).append((name, sides))
    for members in groups.values():
        chain = _chain(members) if len(members) > 1 else None
        if chain is None:
            continue
        aten = [name for name in chain if name.startswith("aten::")]
        kept = aten[-1] if aten and sort != "self" else chain[0]
        hidden.update({name: REPEATS + kept for name in chain if name != kept})
    return hidden


def _inner(name: str, stats: OpStats) -> str | None:
    """The op ``name``'s peak was wholly inside (its innermost op but allocators), or, for an
    autograd node's ``evaluate_function`` of a report without chains, the node."""
    inner = [op for op in stats.wraps if op not in ALLOCATORS]
    if inner:
        return inner[-1]
    if not stats.wraps and name.startswith(_EVALUATE):
        return name.removeprefix(_EVALUATE)
    return None


def wrapper_reasons(ops: Sequence[tuple[str, Sequence[OpStats | None]]]) -> dict[str, str]:
    """Which of a comparison's ops are wrappers: ``folded into <op>`` when in every run its peak
    was wholly that (shown) op's, :data:`WRAPPER` for a range that only wraps other ops.

    An op whose peak was wholly another's in every run (``OpStats.wraps``: ``aten::linear`` ->
    ``aten::matmul`` -> ``aten::mm``, ``autograd::engine::evaluate_function: X`` -> ``X`` -> its
    aten op) is left out for that innermost op (allocators such as ``aten::empty`` skipped);
    ranges that only wrap other ops (autograd's nodes and their ``evaluate_function``,
    ``ProfilerStep#N``, ``Optimizer.step#...``, the compiled region's wrappers) are left out as
    wrapper ranges."""
    sides_of = dict(ops)
    targets: dict[str, str | None] = {}
    for name, sides in ops:
        inner = {_inner(name, s) for s in sides if s is not None}
        target = inner.pop() if len(inner) == 1 else None
        targets[name] = target if target != name and target in sides_of else None
    reasons = {}
    for name in sides_of:
        target, seen = targets[name], {name}
        while target is not None and targets.get(target) is not None and target not in seen:
            seen.add(target)
            target = targets[target]  # a wrapper folded into a wrapper: into the innermost
        if target is not None and not _is_range(target):
            reasons[name] = FOLDED + target
        elif _is_range(name):
            reasons[name] = WRAPPER
    return reasons


def _is_range(name: str) -> bool:
    """A range that only wraps ops. Of torch.compile's, the one row that stands for them: in
    reports saved before kernels owned their buffers, its ranges (``Torch-Compiled Region``,
    ``inductor_wrapper_call``) are rows of their own that hold the compiled code's bytes."""
    if name in WRAPPER_RANGES:  # CompiledFunctionBackward: an autograd node's name, and one of them
        return False
    return name == COMPILED_REGION or _WRAPPER_RANGE.match(name) is not None


def chain_text(name: str, sides: Sequence[OpStats | None]) -> str:
    """What a wrapper wraps, for a table with chains: ``-> aten::matmul -> aten::mm`` (its
    chain in the first run that has one), else ``wrapper range``."""
    for side in sides:
        if side is not None and side.wraps:
            return "-> " + " -> ".join(side.wraps)
    if name.startswith(_EVALUATE):
        return "-> " + name.removeprefix(_EVALUATE)
    return WRAPPER


def _total_us(sides: Sequence[OpStats | None]) -> float:
    return sum(s.total_us for s in sides if s is not None)


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

    @property
    def replaced_peak_bytes(self) -> int:
        """The largest peak, in the base run, of the ops the kernel replaced."""
        return max((op.base_peak_bytes or 0 for op in self.replaced), default=0)


def fused_rows(report: Report, top: int | None = None) -> tuple[FusedRow, ...]:
    """The fused kernels of every comparison, most memory first (by the largest eager peak of
    the ops each replaced, then its own peak), at most ``top``."""
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
    rows.sort(key=lambda row: (-row.replaced_peak_bytes, -(row.peak_bytes or 0)))
    return tuple(rows[:top])


def fused_count(report: Report) -> int:
    """How many fused kernels the comparisons hold (for "and N more")."""
    return sum(1 for diff in report.diffs for op in diff.op_diffs if op.fused_ops)


# ---- what is live at the peak -------------------------------------------------------------------


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
    groups: tuple[ModuleGroup, ...] = ()
    hidden_groups: int = 0


def at_peak_views(
    runs: Sequence[RunResult],
    entries: int | None = None,
    modules: int | None = None,
    kernels: int | None = None,
    groups: int | None = None,
) -> tuple[AtPeakView, ...]:
    """What is live at the peak of each of ``runs`` that was explained: its largest ``entries``,
    ``modules``, ``kernels`` and module ``groups`` (None: all)."""
    views = []
    for run in runs:
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
                groups=run.module_groups[:groups],
                hidden_groups=len(run.module_groups[groups:]) if groups is not None else 0,
            )
        )
    return tuple(views)


def indexed_class(run: RunResult, module: str) -> str:
    """The class of a module its path names only by an index in a container (``0`` of a
    ``Sequential``, ``blocks.3``): ``Linear``; else (or when not recorded) empty."""
    if not module or not module.rpartition(".")[2].isdigit():
        return ""
    return next((m.module_class for m in run.module_stats if m.module == module and m.module_class), "")


def module_text(module: str, phase: str, module_class: str = "") -> str:
    """``lm_head``, ``GPT (backward)``, ``blocks.0.attn (recompute)``, ``(optimizer)``; with
    its class, ``6 (Conv2d)``; ``-`` for none."""
    if module_class and module and module_class != module:
        module = f"{module} ({module_class})"
    if phase in ("backward", "recompute"):
        return f"{module or '-'} ({phase})"
    if phase == "optimizer" and not module:
        return "(optimizer)"
    return module or "-"
