"""The module table and the kernel table of an explained peak.

Pure. Each module call's peak inside it, what it allocated and what of that is live at the
peak, summed up its parents; for compiled runs, each kernel's calls and bytes.
"""

from __future__ import annotations

import numpy as np

from memprof.analysis.lifetimes import BEFORE, Lifetimes, Window
from memprof.analysis.peak_entries import What
from memprof.core.records import BACKWARD, FORWARD, PHASES, RECOMPUTE, TrackedFacts
from memprof.model.explanation import KernelStats, ModuleStats

# ---- modules ------------------------------------------------------------------------------------


def _up(parent: np.ndarray, ids: np.ndarray, values: np.ndarray, ufunc: np.ufunc, init: int) -> np.ndarray:
    """Reduce ``values`` into each id and all its ancestors (parent -1 ends a chain)."""
    out = np.full(len(parent), init, dtype=np.int64)
    while len(ids):
        ufunc.at(out, ids, values)
        ids = parent[ids]
        keep = ids >= 0
        ids, values = ids[keep], values[keep]
    return out


def module_stats(
    facts: TrackedFacts, lt: Lifetimes, what: What, live: np.ndarray, window: Window, prefix: np.ndarray
) -> tuple[ModuleStats, ...]:
    """One row per module and phase: its calls, the highest rise inside them, what it allocated
    and what it made that is live at the peak (submodules included)."""
    calls, ops = facts.module_calls, facts.ops
    if not len(calls.path):
        return ()
    in_call = (calls.start >= window.start_ns) & (calls.start <= window.end_ns)
    alloc_prefix = np.concatenate(([0], np.cumsum(np.maximum(lt.deltas, 0) * (lt.times > BEFORE))))
    # Bytes live at the peak, by the module call (and its ancestors) and phase that made them.
    origin = what.origin_op
    made_live = live & (origin >= 0)
    grouped: dict[tuple[str, int], list[int]] = {}  # (path, phase) -> first call, calls, peak, alloc, at peak
    for phase_code in (FORWARD, BACKWARD, RECOMPUTE):
        chosen = made_live.copy()
        chosen[made_live] = ops.phase[origin[made_live]] == phase_code
        owners = ops.module_call[origin[chosen]]
        has = owners >= 0
        at_peak = _up(calls.parent, owners[has], lt.nbytes[chosen][has], np.add, 0)
        spans, allocated = _phase_spans(facts, lt, what, window, phase_code)
        for call in np.flatnonzero(in_call):
            start, end = int(spans[call][0]), int(spans[call][1])
            if start < 0:
                continue  # no work of this phase for this call
            lo = int(np.searchsorted(lt.times, start, side="left"))
            hi = int(np.searchsorted(lt.times, end, side="right"))
            peak = int(prefix[lo : hi + 1].max()) - int(prefix[lo])
            alloc = int(alloc_prefix[hi] - alloc_prefix[lo]) if allocated is None else int(allocated[call])
            slot = grouped.setdefault((calls.paths[calls.path[call]], phase_code), [int(call), 0, 0, 0, 0])
            slot[1] += 1
            slot[2] = max(slot[2], peak)
            slot[3] += alloc
            slot[4] += int(at_peak[call])
    classes = calls.classes
    ordered = sorted(grouped.items(), key=lambda item: (item[0][1], item[1][0]))
    return tuple(
        ModuleStats(
            module=path,
            phase=PHASES[phase_code],
            calls=slot[1],
            peak_bytes=slot[2],
            allocated_bytes=slot[3],
            at_peak_bytes=slot[4],
            module_class=classes[calls.path[slot[0]]] if classes else "",
            parent=calls.paths[calls.path[calls.parent[slot[0]]]] if calls.parent[slot[0]] >= 0 else "",
        )
        for (path, phase_code), slot in ordered
    )


def _phase_spans(
    facts: TrackedFacts, lt: Lifetimes, what: What, window: Window, phase: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per module call, the (start, end) of its work in ``phase`` (-1 when none), and the bytes
    allocated by that work (None: all that was allocated within the span). Forward: the calls'
    own windows; a recompute call (a checkpointed forward run again in backward): its window;
    backward, and the recompute work of compiled code: the first and last op of that phase made
    by its autograd nodes (its submodules' included)."""
    calls = facts.module_calls
    ends = np.where(calls.end >= 0, calls.end, window.end_ns)
    windows = np.stack([calls.start, ends], axis=1)
    own = calls.phases() == phase
    if phase == FORWARD:
        return np.where(own[:, None], windows, -1), None
    spans, allocated = _op_spans(facts, lt, what, window, phase)
    if phase == RECOMPUTE and own.any():
        return np.where(own[:, None], windows, spans), None
    return spans, allocated


def _op_spans(
    facts: TrackedFacts, lt: Lifetimes, what: What, window: Window, phase: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per module call: (first, last) time of the ops of ``phase`` attributed to it (its
    submodules' included; -1 when none), and the bytes those ops allocated."""
    calls, ops = facts.module_calls, facts.ops
    inside = (ops.t0 >= window.start_ns) & (ops.t1 <= window.end_ns)
    chosen = (ops.phase == phase) & (ops.module_call >= 0) & inside
    owners = ops.module_call[chosen]
    big = np.iinfo(np.int64).max
    first = _up(calls.parent, owners, ops.t0[chosen], np.minimum, big)
    last = _up(calls.parent, owners, ops.t1[chosen], np.maximum, -1)
    spans = np.stack([np.where(first == big, -1, first), last], axis=1)
    made = lt.recorded & (what.origin_op >= 0)
    made[made] = chosen[what.origin_op[made]]
    allocated = _up(calls.parent, ops.module_call[what.origin_op[made]], lt.nbytes[made], np.add, 0)
    return spans, allocated


def kernel_stats(
    facts: TrackedFacts, lt: Lifetimes, what: What, live: np.ndarray, window: Window
) -> tuple[KernelStats, ...]:
    ops = facts.ops
    in_call = (ops.t1 >= window.start_ns) & (ops.t0 <= window.end_ns)
    made = lt.recorded & (what.origin_op >= 0)
    made[made] = in_call[what.origin_op[made]]
    fused = dict(facts.fused_kernels)
    rows: dict[tuple[str, int], list[int]] = {}
    for op in np.flatnonzero(in_call):
        rows.setdefault((ops.names[ops.name[op]], int(ops.phase[op])), [0, 0, 0])[0] += 1
    origins = what.origin_op[made]
    for lifetime, op in zip(np.flatnonzero(made), origins, strict=True):
        slot = rows[ops.names[ops.name[op]], int(ops.phase[op])]
        slot[1] += int(lt.nbytes[lifetime])
        slot[2] += int(lt.nbytes[lifetime]) if live[lifetime] else 0
    stats = [
        KernelStats(name, PHASES[phase], calls, allocated, at_peak, fused.get(name, ()))
        for (name, phase), (calls, allocated, at_peak) in rows.items()
        if allocated
    ]
    return tuple(sorted(stats, key=lambda k: (-k.at_peak_bytes, -k.allocated_bytes, k.name)))
