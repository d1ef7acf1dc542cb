"""The module table grouped by layer kind: every module of a class together ("all
``GPT2Attention``: 6.0 MiB live at the peak"), or every module whose path matches a pattern
(``transformer.h.*.attn``: each layer's attention).

A group's bytes are its outermost members' (a module's bytes include its submodules', so a
member inside another member of the same group is counted once, through the outer one): live
at the peak and allocated are summed over them, and so are their calls; ``peak_bytes`` is the
highest of any member's. Pure: no torch, no numpy, no pandas (``groups_frame`` of
:mod:`memprof.model.explanation` makes a DataFrame of the groups).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from memprof.core.errors import UsageError
from memprof.model.explanation import BY_CLASS, ModuleGroup, ModuleStats

MAX_PATTERNS = 64
"""The most path patterns one grouping takes."""


def parse_grouping(specs: str | Iterable[str]) -> tuple[str, ...]:
    """``"class"`` -> ``("class",)``; path patterns, comma-separated or one per item
    (``"transformer.h.*.attn,transformer.h.*.mlp"``), in order, each once. ``*`` matches any
    characters (dots too). A usage error for an empty grouping, or ``class`` among patterns."""
    items = [specs] if isinstance(specs, str) else list(specs)
    patterns = list(dict.fromkeys(p.strip() for item in items for p in str(item).split(",") if p.strip()))
    if not patterns:
        raise UsageError("name 'class' or path patterns like transformer.h.*.attn to group modules by")
    if BY_CLASS in patterns and len(patterns) > 1:
        raise UsageError("group modules by 'class' or by path patterns, not both")
    if len(patterns) > MAX_PATTERNS:
        raise UsageError(f"a module grouping takes at most {MAX_PATTERNS} patterns, got {len(patterns)}")
    return tuple(patterns)


def _matcher(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def _ancestors(modules: Sequence[ModuleStats]) -> dict[str, set[str]]:
    """Each module path's enclosing modules: its parents' chain (as the calls nested) and the
    paths in the table its dotted path lies under (``a.b`` is inside ``a``)."""
    parent: dict[str, str] = {}
    for m in modules:
        if m.parent and m.parent != m.module:
            parent.setdefault(m.module, m.parent)
    paths = {m.module for m in modules}
    found: dict[str, set[str]] = {}
    for path in paths:
        above: set[str] = set()
        step = parent.get(path)
        while step and step not in above and step != path:
            above.add(step)
            step = parent.get(step)
        parts = path.split(".")
        above |= {".".join(parts[:n]) for n in range(1, len(parts))} & paths
        found[path] = above
    return found


def group_modules(modules: Sequence[ModuleStats], by: str | Iterable[str]) -> tuple[ModuleGroup, ...]:
    """The module table grouped (``by``: ``"class"`` or path patterns, see
    :func:`parse_grouping`), one row per group and phase, most bytes live at the peak first.
    Modules in no group (matching no pattern; of no known class) are left out."""
    patterns = parse_grouping(by)
    by_class = patterns == (BY_CLASS,)
    matchers = [(p, _matcher(p)) for p in patterns] if not by_class else []

    def key(m: ModuleStats) -> str | None:
        if by_class:
            return m.module_class or None
        return next((p for p, matcher in matchers if matcher.fullmatch(m.module)), None)

    keys = {m.module: key(m) for m in modules}
    ancestors = _ancestors(modules)
    order: list[tuple[str, str]] = []
    members: dict[tuple[str, str], list[ModuleStats]] = {}
    for m in modules:
        group = keys[m.module]
        if group is None:
            continue
        slot = (group, m.phase)
        if slot not in members:
            order.append(slot)
        members.setdefault(slot, []).append(m)
    groups = []
    for group, phase in order:
        inside = members[(group, phase)]
        in_group = {m.module for m in inside}
        outer = [m for m in inside if not (ancestors[m.module] & in_group)]
        groups.append(
            ModuleGroup(
                group=group,
                by=BY_CLASS if by_class else "pattern",
                phase=phase,
                modules=len(outer),
                calls=sum(m.calls for m in outer),
                peak_bytes=max(m.peak_bytes for m in inside),
                allocated_bytes=sum(m.allocated_bytes for m in outer),
                at_peak_bytes=sum(m.at_peak_bytes for m in outer),
            )
        )
    return tuple(sorted(groups, key=lambda g: (-g.at_peak_bytes, -g.peak_bytes)))
