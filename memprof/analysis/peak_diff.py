"""Why the peak moved: what is live at one run's peak against another's.

:func:`diff_at_peak` compares the at-peak explanations of two runs (``RunResult.at_peak``) and
returns an :class:`~memprof.model.peak_diff.AtPeakDiff`: tables by category, module
and phase, line and op whose rows add up exactly to the difference of the two footprints, the
tensors each keeps for backward, the module groups one run holds and the other does not, and
a one-sentence summary written from the rows. Pure: no I/O, no torch, no pandas.

**Module rows.** Entries are grouped by module path and phase. A path is read in units, an
index joined to its container (``blocks.0.attn`` is ``blocks.0`` then ``attn``): a ModuleList
alone explains nothing. Rows start one unit below the root (``lm_head``, ``blocks.0``; the
root's own entries under its class name), and while one row holds more than half of the
change (the sum of every row's absolute change) and has submodules, it is replaced by its
submodules' rows and a row of its own entries: the table goes as deep as the change is
concentrated, and stays at the level where it spreads.

**The summary** names the groups of module rows that explain most of the change (at least 80%
of it, at most three groups), largest first: consecutive indices of one container, in one
phase, that change the same way (all new, all gone, or all held by both) are one group
(``blocks.0–2``); each with its change, the category that makes most of it, and "none of it at
X's peak" when one run holds none of it; then the line that changed most, when it holds 40% of
the change; then the op that changed most, when its change is larger than any named before
(changes of modules and lines can cancel out: autocast's bf16 copies of the weights, kept for
backward, against the activations it halves). Without modules (a recording), lines, then ops,
then categories take their place.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from memprof.core.units import format_bytes
from memprof.model.explanation import CATEGORIES, ENTRY_KEY, LINE_TEXTS, AtPeakEntry
from memprof.model.peak_diff import (
    ActivationDelta,
    AtPeakDiff,
    EntryDelta,
    ModuleDelta,
    OpDelta,
    SourceDelta,
)

if TYPE_CHECKING:
    from memprof.model.explanation import AtPeak
    from memprof.model.run import RunResult

CONCENTRATED = 0.5
"""A module row holding more than this share of the change is split into its submodules."""
EXPLAINED = 0.8
"""The summary names groups until they hold this share of the change (at most
:data:`SUMMARY_GROUPS`)."""
SUMMARY_GROUPS = 3
LINE_SHARE = 0.4
"""After the modules, the summary names the line that changed most when it holds this share."""
MOSTLY = 0.6
"""The summary names a group's category when it makes this share of the group's change."""

_PLURAL = {
    "parameter": "parameters",
    "gradient": "gradients",
    "optimizer_state": "optimizer state",
    "input": "inputs",
    "activation": "activations",
    "temporary": "temporaries",
    "workspace": "workspaces",
    "other": "other bytes",
}


@dataclass(frozen=True)
class _Item:
    """An entry live at one run's peak (``side`` 0: base, 1: other); bytes in no entry are an
    entry of category other that says nothing else of them."""

    side: int
    entry: AtPeakEntry

    @property
    def bytes(self) -> int:
        return self.entry.bytes

    @cached_property  # read at every step of the module rows' descent
    def units(self) -> tuple[str, ...]:
        return module_units(self.entry.module)


@lru_cache(maxsize=1 << 14)  # entries share few module paths
def module_units(module: str) -> tuple[str, ...]:
    """A module path in units, each index joined to its container: ``blocks.0.attn`` ->
    ``("blocks.0", "attn")``; ``""`` -> ``()``."""
    units: list[str] = []
    for part in module.split(".") if module else ():
        if part.isdigit() and units:
            units[-1] += "." + part
        else:
            units.append(part)
    return tuple(units)


def _items(at_peak: AtPeak, side: int) -> tuple[list[_Item], int, str | None]:
    """Every byte live at a peak as items, the footprint they add up to, and a note when the
    entries do not add up to the recorded footprint (then a remainder item, or the entries'
    own sum as the footprint when they exceed it)."""
    items = [_Item(side, entry) for entry in at_peak.entries]
    items += [_Item(side, u.as_entry()) for u in at_peak.unattributed]
    listed = sum(item.bytes for item in items)
    footprint = at_peak.footprint_bytes
    if listed == footprint:
        return items, footprint, None
    if listed < footprint:
        items.append(_Item(side, AtPeakEntry(footprint - listed)))
        return items, footprint, f"{format_bytes(footprint - listed)} of the footprint are in no entry"
    return items, listed, f"the entries hold {listed:,} B, more than the footprint {footprint:,} B"


K = TypeVar("K", bound=Hashable)
ModuleKey = tuple[tuple[str, ...], str, bool]
"""A module row's group: (units, phase, submodules included)."""


def _grouped(items: Iterable[_Item], key: Callable[[_Item], K]) -> dict[K, list[_Item]]:
    groups: dict[K, list[_Item]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


def _sides(items: Sequence[_Item]) -> tuple[int, int]:
    base = sum(item.bytes for item in items if item.side == 0)
    return base, sum(item.bytes for item in items) - base


def _delta(items: Sequence[_Item]) -> int:
    base, other = _sides(items)
    return other - base


def _largest(items: Sequence[_Item]) -> _Item:
    """The item holding the most bytes (a row's line text, its user's line)."""
    return max(items, key=lambda item: item.bytes)


R = TypeVar("R", ModuleDelta, SourceDelta, OpDelta, EntryDelta, ActivationDelta)
Keyed = TypeVar("Keyed", SourceDelta, OpDelta, EntryDelta, ActivationDelta)


def _ordered(rows: Iterable[R], name: Callable[[R], tuple[Any, ...]]) -> tuple[R, ...]:
    """Rows largest change first, then largest size, then by name (a stable order)."""
    return tuple(
        sorted(rows, key=lambda r: (-abs(r.delta_bytes), -max(r.base_bytes, r.other_bytes), name(r)))
    )


# ---- the tables ---------------------------------------------------------------------------------


def _module_groups(items: Sequence[_Item]) -> dict[ModuleKey, list[_Item]]:
    """Items grouped by module (at the depth the module docstring describes) and phase."""
    rows: dict[ModuleKey, list[_Item]] = _grouped(items, lambda i: (i.units[:1], i.entry.phase, True))
    while True:
        total = sum(abs(_delta(members)) for members in rows.values())
        if total == 0:
            return rows
        key = max(rows, key=lambda k: (abs(_delta(rows[k])), str(k)))
        units, phase, submodules = key
        members = rows[key]
        deeper = [item for item in members if len(item.units) > len(units)]
        if not submodules or not deeper or abs(_delta(members)) <= total * CONCENTRATED:
            return rows
        del rows[key]
        for item in members:
            if len(item.units) > len(units):
                rows.setdefault((item.units[: len(units) + 1], phase, True), []).append(item)
            else:
                rows.setdefault((units, phase, False), []).append(item)


RowKey = tuple[str, str, bool]
"""A module row's (module, phase, submodules included)."""


def module_rows(items: Sequence[_Item]) -> dict[RowKey, tuple[ModuleDelta, list[_Item]]]:
    """The by-module table (see the module docstring for the depth), largest change first,
    each row with the items it counts."""
    rows = []
    for (units, phase, sub), members in _module_groups(items).items():
        a, b = _sides(members)
        sub = sub and any(len(item.units) > len(units) for item in members)
        row = ModuleDelta(module=".".join(units), phase=phase, submodules=sub, base_bytes=a, other_bytes=b)
        rows.append((row, members))
    ordered = _ordered((row for row, _ in rows), lambda r: (r.module, r.phase))
    members_of = {id(row): members for row, members in rows}
    return {(row.module, row.phase, row.submodules): (row, members_of[id(row)]) for row in ordered}


def keyed_rows(items: Sequence[_Item], row: type[Keyed]) -> tuple[Keyed, ...]:
    """Items grouped by the part of :data:`~memprof.model.explanation.ENTRY_KEY` that ``row``
    holds (its line's text and the user's line from the largest item of each group), largest
    change first: the by-line, by-op, contributor and activation tables."""
    names = [f.name for f in dataclass_fields(row) if f.name in ENTRY_KEY]
    key = [name for name in names if name not in LINE_TEXTS]
    rows = []
    for members in _grouped(items, lambda item: tuple(getattr(item.entry, name) for name in key)).values():
        largest = _largest(members).entry
        a, b = _sides(members)
        rows.append(row(**{name: getattr(largest, name) for name in names}, base_bytes=a, other_bytes=b))
    return _ordered(rows, lambda r: tuple(getattr(r, name) for name in key))


def activation_rows(items: Sequence[_Item]) -> tuple[ActivationDelta, ...]:
    """Tensors kept for backward, matched by module, phase, line, shape and dtype."""
    return keyed_rows([item for item in items if item.entry.category == "activation"], ActivationDelta)


def _held_by_one(items: Sequence[_Item]) -> tuple[tuple[ModuleDelta, ...], tuple[ModuleDelta, ...]]:
    """Module groups (one unit below the root, and phase) that one run holds at its peak and
    the other none of at its own: (held only at the other's peak, held only at the base's)."""
    rows = [
        ModuleDelta(module=".".join(units), phase=phase, base_bytes=a, other_bytes=b)
        for (units, phase), members in _grouped(items, lambda i: (i.units[:1], i.entry.phase)).items()
        for a, b in [_sides(members)]
        if units
    ]
    other = [row for row in rows if row.base_bytes == 0 and row.other_bytes > 0]
    base = [row for row in rows if row.other_bytes == 0 and row.base_bytes > 0]
    return _ordered(other, lambda r: (r.module, r.phase)), _ordered(base, lambda r: (r.module, r.phase))


def by_category(items: Sequence[_Item]) -> dict[str, int]:
    """Category -> change, for every category either run holds, in report order."""
    groups = _grouped(items, lambda item: item.entry.category)
    order = [c for c in CATEGORIES if c in groups] + sorted(str(c) for c in groups if c not in CATEGORIES)
    return {category: _delta(groups[category]) for category in order}


# ---- the diff -----------------------------------------------------------------------------------


def items_of(base: AtPeak, other: AtPeak) -> tuple[list[_Item], int, int, list[str]]:
    """Both peaks' items, their footprints, and notes on entries that do not add up."""
    a, base_footprint, base_note = _items(base, 0)
    b, other_footprint, other_note = _items(other, 1)
    notes = [f"{side}: {note}" for side, note in (("base", base_note), ("other", other_note)) if note]
    return a + b, base_footprint, other_footprint, notes


def diff_at_peak(
    base: RunResult, other: RunResult, labels: tuple[str, str] | None = None
) -> AtPeakDiff | None:
    """What is live at ``other``'s peak against ``base``'s; None unless both were explained.
    ``labels``: how the summary names the two runs (default: their labels)."""
    if base.at_peak is None or other.at_peak is None:
        return None
    items, base_footprint, other_footprint, notes = items_of(base.at_peak, other.at_peak)
    module_table = module_rows(items)
    modules = tuple(row for row, _ in module_table.values())
    sources = keyed_rows(items, SourceDelta)
    ops = keyed_rows(items, OpDelta)
    only_other, only_base = _held_by_one(items)
    notes += provenance_notes(base, other)
    summary = summarize(
        other_footprint - base_footprint,
        (base_footprint, other_footprint),
        labels or (base.label, other.label),
        items,
        module_table,
    )
    return AtPeakDiff(
        base_footprint_bytes=base_footprint,
        other_footprint_bytes=other_footprint,
        by_category=by_category(items),
        by_module=modules,
        by_source=sources,
        by_op=ops,
        activations=activation_rows(items),
        only_in_other=only_other,
        only_in_base=only_base,
        notes=tuple(notes),
        summary=summary,
    )


def contributors(base: AtPeak, other: AtPeak) -> tuple[EntryDelta, ...]:
    """The finest rows of the change (category, module, phase, line, op), largest first."""
    return keyed_rows(items_of(base, other)[0], EntryDelta)


def provenance_notes(base: RunResult, other: RunResult) -> list[str]:
    """Where a compiled run's explanation comes from, and what it lacks."""
    notes = []
    modes = {base.mode, other.mode}
    for run in (base, other):
        if run.mode != "compile" or run.at_peak is None:
            continue
        made = [e for e in run.at_peak.entries if not e.before_call]
        untraced = sum(e.bytes for e in made if not e.source and not e.module)
        if not run.kernels:
            notes.append(
                f"{run.label}: no Inductor provenance (kernels compiled before memprof tracked the run, "
                "or torch without it): its buffers are explained by kernel only, and which of them are "
                "kept for backward or recomputed cannot be said"
            )
        elif untraced:
            notes.append(
                f"{run.label}: lines, modules and recompute come from Inductor's graph nodes and AOT "
                f"autograd's recompute tags; {format_bytes(untraced)} made during the call have no graph "
                "node and are explained by kernel only"
            )
    held = [e for run in (base, other) if run.at_peak is not None for e in run.at_peak.entries]
    if modes == {"eager", "compile"} and any(
        e.category == "activation" or e.phase == "recompute" for e in held
    ):
        notes.append(
            "eager counts as activations the tensors autograd saves; compiled code, the buffers a forward "
            "kernel makes and a backward kernel frees (a buffer recomputed in backward is a temporary): "
            "compare recomputed work by module and phase"
        )
    return notes


# ---- the summary --------------------------------------------------------------------------------

_INDEXED = re.compile(r"^(?:(?P<name>.*)\.)?(?P<index>\d+)$")
"""A module named by its index in a container: ``blocks.3``, or ``3`` (a child of the model
itself, a ``Sequential``)."""


@dataclass(frozen=True)
class _Group:
    """Module rows the summary names together: ``blocks.0–2`` in one phase."""

    label: str
    phase: str
    members: tuple[ModuleDelta, ...]

    @property
    def base_bytes(self) -> int:
        return sum(row.base_bytes for row in self.members)

    @property
    def other_bytes(self) -> int:
        return sum(row.other_bytes for row in self.members)

    @property
    def delta_bytes(self) -> int:
        return self.other_bytes - self.base_bytes


def _kind(row: ModuleDelta) -> tuple[int, int]:
    """How a row changes: (sign, 0 new / 1 gone / 2 held by both)."""
    sign = (row.delta_bytes > 0) - (row.delta_bytes < 0)
    return sign, 0 if row.base_bytes == 0 else 1 if row.other_bytes == 0 else 2


def module_groups(rows: Sequence[ModuleDelta]) -> list[_Group]:
    """The rows that change, consecutive indices of one container in one phase that change
    the same way joined (``blocks.0``, ``blocks.1``, ``blocks.2`` -> ``blocks.0–2``)."""
    runs: dict[tuple, list[tuple[int, ModuleDelta]]] = {}
    groups: list[_Group] = []
    for row in rows:
        if not row.delta_bytes:
            continue
        match = _INDEXED.match(row.module)
        if match is None:
            groups.append(_Group(row.module, row.phase, (row,)))
            continue
        key = (match.group("name") or "", row.phase, _kind(row))
        runs.setdefault(key, []).append((int(match.group("index")), row))
    for (name, phase, _), members in runs.items():
        members.sort(key=lambda member: member[0])
        start = 0
        for end in range(1, len(members) + 1):
            if end == len(members) or members[end][0] != members[end - 1][0] + 1:
                first, last = members[start][0], members[end - 1][0]
                prefix = f"{name}." if name else ""
                label = f"{prefix}{first}" if first == last else f"{prefix}{first}–{last}"
                groups.append(_Group(label, phase, tuple(row for _, row in members[start:end])))
                start = end
    groups.sort(key=lambda group: (-abs(group.delta_bytes), group.label, group.phase))
    return groups


def _subject(module: str, phase: str) -> str:
    """``the backward of blocks.0–2``, ``the recompute of blocks.3 in backward``."""
    where = module or "code outside any module"
    if phase == "backward":
        return f"the backward of {where}"
    if phase == "recompute":
        return f"the recompute of {where} in backward"
    if phase == "forward":
        return f"the forward of {where}"
    if phase == "optimizer":
        return "the optimizer step" + (f" of {module}" if module else "")
    return f"{module}'s state from before the call" if module else "state from before the call"


def _category_clause(items: Sequence[_Item], delta: int) -> str:
    """`` of temporaries`` when one category makes most of ``delta`` among ``items``."""
    if not delta:
        return ""
    sign = 1 if delta > 0 else -1
    category, change = max(by_category(items).items(), key=lambda kv: kv[1] * sign)
    if change * sign <= 0 or abs(change) < MOSTLY * abs(delta):
        return ""
    return f" of {_PLURAL.get(category, category)}"


@dataclass(frozen=True)
class _Part:
    """What the summary names (``the backward of blocks.0–2``) and the items it counts."""

    subject: str
    items: Sequence[_Item]

    @property
    def delta_bytes(self) -> int:
        return _delta(self.items)

    def text(self, labels: tuple[str, str]) -> str:
        base, other = _sides(self.items)
        delta = other - base
        text = f"{self.subject} {format_bytes(delta, signed=True)}{_category_clause(self.items, delta)}"
        if base == 0 and other:
            return text + f", none of it at {labels[0]}'s peak"
        if other == 0 and base:
            return text + f", none of it at {labels[1]}'s peak"
        return text


def _picked(parts: Sequence[_Part], total: int) -> list[_Part]:
    """The first parts (largest first) until they hold :data:`EXPLAINED` of ``total``."""
    picked: list[_Part] = []
    held = 0
    sign = 1 if total >= 0 else -1
    for part in parts:
        if len(picked) == SUMMARY_GROUPS or (picked and held * sign >= EXPLAINED * abs(total) > 0):
            break
        picked.append(part)
        held += part.delta_bytes
    return picked


def summarize(
    total: int,
    footprints: tuple[int, int],
    labels: tuple[str, str],
    items: Sequence[_Item],
    modules: dict[RowKey, tuple[ModuleDelta, list[_Item]]],
) -> str:
    """One sentence: the change, then the rows that explain most of it (module docstring)."""
    span = f"{format_bytes(footprints[0])} -> {format_bytes(footprints[1])}"
    if not total:
        head = f"no change at the peak ({span})"
    else:
        head = f"{format_bytes(total, signed=True)} at the peak ({span})"
    by_modules = _module_parts(modules)
    parts = by_modules or _line_parts(items)
    if not parts:
        return head if total else f"nothing changed at the peak ({format_bytes(footprints[0])} in both)"
    picked = _picked(parts, total)
    said = [part.text(labels) for part in picked]
    named = [abs(part.delta_bytes) for part in picked]
    lines = _line_parts(items, _NAMINGS[:1]) if by_modules else []
    if lines and total and abs(lines[0].delta_bytes) >= LINE_SHARE * abs(total):
        said.append(f"by line, {lines[0].subject} {format_bytes(lines[0].delta_bytes, signed=True)}")
        named.append(abs(lines[0].delta_bytes))
    if by_modules or _line_parts(items, _NAMINGS[:1]):  # named by module or by line, not by op
        said += _largest_op(items, max(named, default=0), labels)
    return f"{head}: {'; '.join(said)}"


# Ops that copy a tensor into another dtype (autocast's casts, .to(dtype)).
_CASTS = frozenset({"aten::_to_copy", "aten::to", "aten::_autocast_to_reduced_precision"})


def _largest_op(items: Sequence[_Item], named: int, labels: tuple[str, str]) -> list[str]:
    """The op that changed most, when its change is larger than any part the summary named
    (``by op, casts kept for backward (aten::_to_copy) +1.7 MiB of activations``)."""
    by_op = [(op, members) for op, members in _grouped(items, lambda i: i.entry.op).items() if op]
    if not by_op:
        return []
    op, members = max(by_op, key=lambda kv: (abs(_delta(kv[1])), kv[0]))
    if abs(_delta(members)) <= named:
        return []
    part = _Part(op, members)
    kept = _category_clause(members, part.delta_bytes) == " of activations"
    if op in _CASTS and kept:
        part = _Part(f"casts kept for backward ({op})", members)
    return [f"by op, {part.text(labels)}"]


def _module_parts(modules: dict[RowKey, tuple[ModuleDelta, list[_Item]]]) -> list[_Part]:
    rows = [row for row, _ in modules.values()]
    if not any(row.module and row.delta_bytes for row in rows):
        return []
    return [
        _Part(
            _subject(group.label, group.phase),
            [item for row in group.members for item in modules[(row.module, row.phase, row.submodules)][1]],
        )
        for group in module_groups(rows)
    ]


def _line_subject(item: _Item) -> str:
    """``gpt.py:109 (loss = F.cross_entropy(logits.v…)``."""
    entry = item.entry
    text = entry.source_text if len(entry.source_text) <= 32 else entry.source_text[:31] + "…"
    return f"{entry.source} ({text})" if text else entry.source


Naming = tuple[Callable[[_Item], str], Callable[[_Item], str]]
"""How items are grouped (their line, op or category) and a group named."""

_NAMINGS: tuple[Naming, ...] = (
    (lambda i: i.entry.source, _line_subject),
    (lambda i: i.entry.op, lambda i: i.entry.op),
    (lambda i: i.entry.category, lambda i: _PLURAL.get(i.entry.category, i.entry.category)),
)
"""How the summary groups and names items without modules: by line, by op, by category."""


def _line_parts(
    items: Sequence[_Item], namings: Sequence[tuple[Callable, Callable]] = _NAMINGS
) -> list[_Part]:
    """Without modules: the lines, else the ops, else the categories that changed most."""
    for key, name in namings:
        groups = _grouped(items, key)
        if not any(k and _delta(members) for k, members in groups.items()):
            continue
        parts = [
            _Part(name(_largest(members)) if k else "bytes with no line", members)
            for k, members in groups.items()
            if _delta(members)
        ]
        return sorted(parts, key=lambda part: (-abs(part.delta_bytes), part.subject))
    return []
