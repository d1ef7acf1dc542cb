"""Compare two runs: per-op deltas and a one-line verdict. Pure: no I/O, no torch, no pandas
(the DataFrame view :attr:`RunDiff.ops` imports pandas when asked for).

A diff's columns are fixed (``base``, ``other``, ``*_delta``) whatever the runs are called; the
labels are data (:attr:`RunDiff.base`, :attr:`RunDiff.other`), so a run labelled ``delta`` or
``base`` cannot collide with a computed column.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from memprof.analysis.peak_diff import diff_at_peak
from memprof.core.names import aten_names
from memprof.core.names import fused_kernels as kernels_from_names
from memprof.model.diff import BASE_ONLY, BOTH, OTHER_ONLY, OpDiff, RunDiff
from memprof.model.recipe import recipe_changes
from memprof.model.timing import iqr

if TYPE_CHECKING:
    from memprof.model.run import RunResult


def op_note(
    diff: RunDiff,
    op: OpDiff,
    name: Callable[[str], str] = str,
    text: Callable[[str], str] = str,
) -> str:
    """What explains a diff row: ``fuses abs, sub`` for a fused kernel, ``fused into <kernel>``
    for an op a kernel replaced, else ``eager only`` / ``compile only`` (empty when in both).
    ``name`` formats op names and ``text`` the rest (quoting for Markdown, say)."""
    if op.fused_ops:
        return "fuses " + ", ".join(name(part.removeprefix("aten::")) for part in op.fused_ops)
    if op.fused_into:
        return "fused into " + ", ".join(name(kernel) for kernel in op.fused_into)
    return "" if op.presence == BOTH else text(diff.label(op.presence))


def run_kernels(base: RunResult, other: RunResult) -> dict[str, tuple[str, ...]]:
    """The fused kernels of ``other`` and the aten ops each replaced.

    A run made by this memprof carries them (split with torch's whole op vocabulary when the
    run was made). An older report's runs do not: their kernel names are split with the aten
    op names the two runs themselves contain, never with whatever this process has loaded, so
    a loaded report gives the same diff everywhere.
    """
    if other.fused_kernels is not None:
        return dict(other.fused_kernels)
    vocabulary = aten_names(op.name for run in (base, other) for op in run.op_stats)
    return kernels_from_names((op.name for op in other.op_stats), vocabulary)


def diff_runs(base: RunResult, other: RunResult) -> RunDiff:
    """Compare ``other`` with ``base`` op by op (ops matched by their normalised names),
    the op with the largest peak in either run first (ties by name)."""
    base_ops = {op.name: op for op in base.op_stats}
    other_ops = {op.name: op for op in other.op_stats}
    kernels = run_kernels(base, other)
    rows = []
    for name in sorted(base_ops.keys() | other_ops.keys()):
        a, b = base_ops.get(name), other_ops.get(name)
        rows.append(
            OpDiff(
                name=name,
                presence=BOTH
                if a is not None and b is not None
                else BASE_ONLY
                if a is not None
                else OTHER_ONLY,
                base=a,
                other=b,
                fused_ops=kernels.get(name, ()),
                fused_into=tuple(kernel for kernel, parts in kernels.items() if name in parts),
            )
        )
    rows.sort(
        key=lambda op: -max(op.base.peak_bytes if op.base else 0, op.other.peak_bytes if op.other else 0)
    )
    return RunDiff(
        base=base.label,
        other=other.label,
        base_peak_bytes=int(base.peak_bytes),
        other_peak_bytes=int(other.peak_bytes),
        base_wall_ms=float(base.wall_ms),
        other_wall_ms=float(other.wall_ms),
        base_wall_iqr_ms=iqr(base.wall_ms_all),
        other_wall_iqr_ms=iqr(other.wall_ms_all),
        op_diffs=tuple(rows),
        at_peak=diff_at_peak(base, other),
        recipe_changes=recipe_changes(base.recipe, other.recipe),
    )
