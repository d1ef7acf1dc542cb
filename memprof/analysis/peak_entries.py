"""What each lifetime is, and the entries live at the peak (issue 11, steps 3 and 4).

Pure. The tracker's observations are (address, time) pairs; the lifetime holding that address
at that time is the one observed. Categories by precedence: parameter > gradient >
optimizer_state > input > other state > activation (saved for backward) > temporary (returned
by an op) > workspace (allocated inside an op, never returned) > other (allocated outside any
op: put on the statement that made it). A Python number given for a Tensor argument becomes a
tensor before its op starts: it is that op's, an activation when autograd keeps it. The
lifetimes live at the peak are grouped, largest first; every byte in exactly one category;
what cannot be attributed is listed with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memprof.analysis.lifetimes import NEVER, Backward, Lifetimes, Window, cover
from memprof.core.records import BACKWARD, FORWARD, PHASES, RECOMPUTE, TrackedFacts
from memprof.model.explanation import CATEGORIES, EAGER_GRAPH, ENTRY_KEY, AtPeak, AtPeakEntry, Unattributed

# Kind bits of a lifetime, from the tracker's observations.
_PARAMETER, _GRADIENT, _OPTIMIZER_STATE, _INPUT, _STATE_OTHER, _SAVED = 1, 2, 4, 8, 16, 32
_KIND_BITS = {
    "parameter": _PARAMETER,
    "gradient": _GRADIENT,
    "optimizer_state": _OPTIMIZER_STATE,
    "input": _INPUT,
    "other": _STATE_OTHER,
}
# Precedence: the first bit set decides the category.
_PRECEDENCE = (
    (_PARAMETER, "parameter"),
    (_GRADIENT, "gradient"),
    (_OPTIMIZER_STATE, "optimizer_state"),
    (_INPUT, "input"),
    (_STATE_OTHER, "other"),
    (_SAVED, "activation"),
)
OUTSIDE_OPS = "allocated after the last op the tracker saw"
NO_STATEMENT = "made outside any op, by a statement the tracker did not see"
NOT_TRACKED = "made during the call; its ops were not tracked (eager and Inductor code are)"
UNKNOWN_BEFORE = (
    "made before the call and not reachable from its arguments, model or optimizer; freed during it"
)


# ---- what each lifetime is ----------------------------------------------------------------------


@dataclass
class What:
    """Per lifetime: its category code, the op that made it (or inside which it was allocated),
    the output that made it, the TrackedStorage row that describes it best, and for what was
    allocated outside any op (``outside``) the statement that made it (index into
    ``facts.statements``, -1 when not seen)."""

    category: np.ndarray
    origin_op: np.ndarray
    maker: np.ndarray
    fact: np.ndarray
    outside: np.ndarray
    statement: np.ndarray


def classify(facts: TrackedFacts, lt: Lifetimes, backward: Backward) -> What:
    count = len(lt.ptr)
    bits = np.zeros(count, dtype=np.int64)
    best_fact = lt.fact.copy()
    storages = facts.storages
    if storages:
        s_ptr = np.array([s.ptr for s in storages], dtype=np.int64)
        s_seen = np.array([s.seen_ns for s in storages], dtype=np.int64)
        s_bit = np.array([_KIND_BITS.get(s.kind, _STATE_OTHER) for s in storages], dtype=np.int64)
        hit = cover(lt.ptr, lt.start, lt.end, s_ptr, s_seen)
        found = hit >= 0
        np.bitwise_or.at(bits, hit[found], s_bit[found])
        # The describing row: the one of the highest-precedence kind (the lowest bit).
        for row in np.flatnonzero(found)[np.argsort(-s_bit[found], kind="stable")]:
            best_fact[hit[row]] = row
    saved = cover(lt.ptr, lt.start, lt.end, facts.saved_ptr, facts.saved_time)
    np.bitwise_or.at(bits, saved[saved >= 0], _SAVED)
    ops = facts.ops
    if facts.compiled and len(ops.t1):
        # Compiled forward graphs return what backward needs: a buffer made in forward and
        # freed by a backward kernel was saved for backward.
        made_in = _op_slot(ops.t1, lt.start)
        freed_in = _op_slot(ops.t1, np.minimum(lt.end, NEVER - 1))
        saved_for_backward = (
            lt.recorded
            & (made_in >= 0)
            & (freed_in >= 0)
            & (ops.phase[np.maximum(made_in, 0)] == 0)
            & (ops.phase[np.maximum(freed_in, 0)] == 1)
            & (lt.end != NEVER)
        )
        bits[saved_for_backward] |= _SAVED

    # Each allocation belongs to the op in whose slot it happened: after the previous op ended,
    # until this one ended (arguments are prepared, e.g. torch.tensor's data, just before).
    slot = _op_slot(ops.t1, lt.start)
    slot[~lt.recorded] = -1
    maker = np.full(count, -1, dtype=np.int64)
    if len(facts.outputs_ptr):
        out_op = facts.outputs_op
        made = cover(lt.ptr, lt.start, lt.end, facts.outputs_ptr, ops.t1[out_op])
        # Made by the op only if allocated in its slot (else it existed before: a view, in place).
        ok = made >= 0
        ok[ok] &= slot[made[ok]] == out_op[ok]
        first = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, made[ok], np.flatnonzero(ok))
        maker = np.where(first == np.iinfo(np.int64).max, -1, first)
    origin = slot
    bits[_kept_from_recompute(facts, lt, maker)] |= _SAVED

    category = np.full(count, CATEGORIES.index("other"), dtype=np.int64)
    no_bits = bits == 0
    category[no_bits & (maker >= 0)] = CATEGORIES.index("temporary")
    category[no_bits & (maker < 0) & (origin >= 0)] = CATEGORIES.index("workspace")
    # Ops read from the profile (backward) have no known outputs: what outlives the op is
    # taken for its output, what it freed before returning for its workspace.
    if backward.from_profile.any():
        op = np.maximum(origin, 0)
        outlives = (origin >= 0) & backward.from_profile[op] & (lt.end > ops.t1[op])
        category[no_bits & (maker < 0) & outlives] = CATEGORIES.index("temporary")
    statement = np.full(count, -1, dtype=np.int64)
    outside, argument = _outside_ops(facts, lt, slot, no_bits & (maker < 0), backward)
    if argument.any():
        # Kept after its op returned, a number's tensor is what autograd saved for backward.
        kept = lt.end[argument] > ops.t1[slot[argument]]
        category[np.flatnonzero(argument)[kept]] = CATEGORIES.index("activation")
    if outside.any():
        category[outside] = CATEGORIES.index("other")
        origin = np.where(outside, -1, origin)
        statement[outside] = _statement_of(facts, lt.start[outside], slot[outside])
    for bit, name in reversed(_PRECEDENCE):
        category[(bits & bit) != 0] = CATEGORIES.index(name)
    return What(
        category=category, origin_op=origin, maker=maker, fact=best_fact, outside=outside, statement=statement
    )


def _outside_ops(
    facts: TrackedFacts, lt: Lifetimes, slot: np.ndarray, unknown: np.ndarray, backward: Backward
) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the lifetimes allocated before their slot's forward op started and not made by
    it (``unknown``: neither state, saved nor an op's output): those made outside any op, and
    the Python numbers turned into tensors for the op's Tensor arguments (of the sizes the
    tracker noted for that op)."""
    ops = facts.ops
    none = np.zeros(len(lt.ptr), dtype=bool)
    if facts.compiled or not facts.ops_tracked or not len(ops.t0):
        return none, none
    op = np.maximum(slot, 0)
    before = unknown & (slot >= 0) & (lt.start < ops.t0[op]) & ~backward.from_profile[op]
    argument = none.copy()
    if len(facts.rewrap_op) and before.any():
        numbers = set(zip(facts.rewrap_op.tolist(), facts.rewrap_bytes.tolist(), strict=True))
        for index in np.flatnonzero(before).tolist():
            argument[index] = (int(slot[index]), int(lt.nbytes[index])) in numbers
    return before & ~argument, argument


def _statement_of(facts: TrackedFacts, starts: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """The last statement that called into C before each allocation, after the op before it
    ended (-1: none seen, e.g. facts tracked without them)."""
    times = facts.statements.time
    if not len(times):
        return np.full(len(starts), -1, dtype=np.int64)
    found = np.searchsorted(times, starts, side="right") - 1
    previous_end = np.where(slots > 0, facts.ops.t1[np.maximum(slots - 1, 0)], np.iinfo(np.int64).min)
    ok = (found >= 0) & (times[np.maximum(found, 0)] > previous_end)
    return np.where(ok, found, -1)


def _kept_from_recompute(facts: TrackedFacts, lt: Lifetimes, maker: np.ndarray) -> np.ndarray:
    """Lifetimes made by a forward run again in backward (activation checkpointing) that outlive
    that recompute: tensors rebuilt for backward, as a forward's saved activations are."""
    kept = np.zeros(len(lt.ptr), dtype=bool)
    if not facts.recompute or not len(facts.outputs_op):
        return kept
    made = maker >= 0
    op = facts.outputs_op[maker[made]]
    recomputed = facts.ops.phase[op] == RECOMPUTE
    starts = np.array([w[0] for w in facts.recompute], dtype=np.int64)
    ends = np.array([w[1] for w in facts.recompute], dtype=np.int64)
    at = np.maximum(np.searchsorted(starts, lt.start[made], side="right") - 1, 0)
    kept[np.flatnonzero(made)] = recomputed & (lt.end[made] > ends[at])
    return kept


def _op_slot(t1: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The op in whose slot each time falls (after the previous op's end, up to its own), or -1
    after the last op. Ops are recorded as they end, so ``t1`` is in order."""
    found = np.searchsorted(t1, times, side="left")
    return np.where(found < len(t1), found, -1).astype(np.int64)


# ---- what is live at the peak -------------------------------------------------------------------


def _entry_order(entry: AtPeakEntry) -> tuple[object, ...]:
    """Largest first, then by every field of the group: ties (the same bytes, e.g. forward's and
    backward's matmul of one line) in one order, whatever order the lifetimes came in."""
    return (
        -entry.bytes,
        CATEGORIES.index(entry.category),
        entry.module,
        entry.source,
        entry.op,
        entry.shape,
        entry.phase,
        entry.dtype,
        entry.user_source,
        entry.role,
        entry.before_call,
        entry.count,
        entry.source_text,
        entry.user_source_text,
        entry.graph,
    )


def live_at_peak(
    facts: TrackedFacts, lt: Lifetimes, what: What, window: Window, backward: Backward
) -> tuple[AtPeak, np.ndarray]:
    """Entries grouped by (category, module, phase, source, op, shape, dtype, before_call) and
    the unattributed lines; also the mask of lifetimes live at the peak."""
    live = (lt.alloc_pos < window.peak) & (lt.free_pos >= window.peak)
    sums = np.zeros(len(CATEGORIES), dtype=np.int64)  # exact: np.add.at, not bincount's float64
    np.add.at(sums, what.category[live], lt.nbytes[live])
    by_category = dict(zip(CATEGORIES, sums.tolist(), strict=True))
    describe = _Describer(facts, backward.forward_op)
    graph_of = _GraphOf(facts)
    groups: dict[tuple[Any, ...], list[int]] = {}  # values of _GROUPED_BY: texts, then a flag
    loose: dict[tuple[str, bool], list[int]] = {}
    for index in np.flatnonzero(live):
        before = bool(lt.alloc_pos[index] < window.lo)
        nbytes = int(lt.nbytes[index])
        category = CATEGORIES[what.category[index]]
        origin = int(what.origin_op[index])
        statement = int(what.statement[index])
        if category == "other" and origin < 0 and what.fact[index] < 0 and statement < 0:
            reason = (
                UNKNOWN_BEFORE
                if not lt.recorded[index]
                else NO_STATEMENT
                if what.outside[index]
                else OUTSIDE_OPS
                if facts.ops_tracked
                else NOT_TRACKED
            )
            _add(loose, (reason, before), nbytes)
            continue
        graph = graph_of(int(lt.start[index])) if not before and lt.recorded[index] else ""
        if statement >= 0:
            described = describe.statement(statement)
        elif graph == EAGER_GRAPH:
            fact = int(what.fact[index])
            described = _eager_described(graph_of, describe, int(lt.start[index]), origin, fact, nbytes)
        else:
            described = describe(origin, int(what.maker[index]), int(what.fact[index]), nbytes)
        _add(groups, (category, *described, before, graph), nbytes)
    entries = sorted(
        (
            AtPeakEntry(
                bytes=total, count=count, graph=key[-1], **dict(zip(_GROUPED_BY, key[:-1], strict=True))
            )
            for key, (total, count) in groups.items()
        ),
        key=_entry_order,
    )
    unattributed = sorted(
        (
            Unattributed(bytes=total, count=count, reason=reason, before_call=before)
            for (reason, before), (total, count) in loose.items()
        ),
        key=lambda u: (-u.bytes, u.reason, u.before_call, u.count),
    )
    freed = (lt.alloc_pos < window.lo) & (lt.free_pos >= window.lo) & (lt.free_pos < window.peak)
    footprint = int(lt.nbytes[live].sum())
    start = int(lt.nbytes[(lt.alloc_pos < window.lo) & (lt.free_pos >= window.lo)].sum())
    return (
        AtPeak(
            by_category=by_category,
            entries=tuple(entries),
            unattributed=tuple(unattributed),
            footprint_bytes=footprint,
            peak_bytes=footprint - start,
            freed_before_peak_bytes=int(lt.nbytes[freed].sum()),
        ),
        live,
    )


def _eager_described(
    graph_of: _GraphOf, describe: _Describer, start: int, origin: int, fact: int, nbytes: int
) -> tuple[str, ...]:
    """What eager code at a graph break allocated at ``start``: the kernel after it did not
    make it (its line, module, op and shape are not this tensor's); a storage still names it
    (``fact``), the statement that ran it its lines, in backward the statement that ran
    backward."""
    ran = graph_of.eager_statement(start, origin)
    if ran >= 0:
        return describe.statement(ran)
    caller = graph_of.backward_caller(start, origin) if fact < 0 else None
    if caller is not None:
        return describe.at_sites(*caller, phase=BACKWARD)
    return describe.eager(origin, fact, nbytes)


class _GraphOf:
    """The compiled graph whose call an allocation made at a time happened in (``0/0 step (train.py:12)``),
    :data:`~memprof.model.explanation.EAGER_GRAPH` outside every graph call; empty for an
    eager run."""

    def __init__(self, facts: TrackedFacts) -> None:
        self.facts = facts
        calls = facts.graph_calls if facts.compiled else ()
        self.starts = np.array([c[0] for c in calls], dtype=np.int64)
        self.ends = np.array([c[1] for c in calls], dtype=np.int64)
        self.graphs = [c[2] for c in calls]

    def __call__(self, time: int) -> str:
        if not self.graphs:
            return ""
        at = int(np.searchsorted(self.starts, time, side="right")) - 1
        return self.graphs[at] if at >= 0 and time <= self.ends[at] else EAGER_GRAPH

    def backward_caller(self, time: int, origin: int) -> tuple[int, int] | None:
        """The (site, user site) that ran backward when eager code made a tensor between two
        compiled backward graphs at ``time`` (autograd's engine or AOTAutograd's runtime: a
        gradient summed or copied for the next graph, the loss's seed gradient): the caller of
        the next graph call, the user's ``loss.backward()``. None outside backward or unknown."""
        facts = self.facts
        if origin < 0 or facts.ops.phase[origin] != BACKWARD or len(facts.graph_callers) != len(self.graphs):
            return None
        at = min(int(np.searchsorted(self.starts, time, side="left")), len(self.graphs) - 1)
        site, user = facts.graph_callers[at] if at >= 0 else (-1, -1)
        return (site, user) if site >= 0 else None

    def eager_statement(self, time: int, origin: int) -> int:
        """The statement that ran eager forward code at a graph break allocating at ``time``
        (index into ``facts.statements``; -1: none known): the one running then (between its
        first and last events), else the first one noted after it, before the next graph call
        starts. Eager code at a break calls a function that returns
        (a ``torch.compiler.disable``d one: its ``return h * 3.0``), or is the statement that
        broke the graph, after which Dynamo calls the function that resumes the frame there;
        an op called by an operator (``h * 3.0``) is noted by nothing before it: the next
        statement only when no other one of its file starts between it and the one before
        (``statements.follows``). Not in backward, where Python runs rarely between autograd's
        nodes."""
        statements, ops = self.facts.statements, self.facts.ops
        if origin < 0 or ops.phase[origin] != FORWARD or not len(statements.time):
            return -1
        found = int(np.searchsorted(statements.time, time, side="right"))
        if found and len(statements.end) == len(statements.time) and statements.end[found - 1] >= time:
            found -= 1  # made while that statement ran (a builtin it called: torch.relu(h))
        elif found < len(statements.follows) and not statements.follows[found]:
            return -1  # other statements may have run between the two noted around it
        after = int(np.searchsorted(self.starts, time, side="right"))
        if found >= len(statements.time) or statements.phase[found] != FORWARD:
            return -1
        return found if after >= len(self.starts) or statements.time[found] < self.starts[after] else -1


def _add(groups: dict, key: tuple, nbytes: int) -> None:  # type: ignore[type-arg]
    slot = groups.get(key)
    if slot is None:
        groups[key] = [nbytes, 1]
    else:
        slot[0] += nbytes
        slot[1] += 1


_DESCRIBED = tuple(name for name in ENTRY_KEY if name not in ("category", "before_call"))
"""What :class:`_Describer` says of a lifetime, in this order: the entry's key
(:data:`~memprof.model.explanation.ENTRY_KEY`) but the category and ``before_call``, which
:func:`live_at_peak` knows itself."""
_GROUPED_BY = ("category", *_DESCRIBED, "before_call")
"""The fields of an entry's group key, in :func:`live_at_peak`'s order."""

_STATE_KINDS = frozenset({"parameter", "gradient", "optimizer_state"})


class _Describer:
    """What :data:`_DESCRIBED` names (module, phase, source, its text, op, shape, dtype, the
    user's line and its text, role) of a lifetime from the op that made it, the output it is,
    and the storage row that names it. Tensors made by backward ops read from the profile take
    the shape of the forward op's argument or result of their size (a gradient has its
    variable's shape)."""

    def __init__(self, facts: TrackedFacts, forward_op: np.ndarray) -> None:
        self.facts = facts
        self.forward_op = forward_op
        calls = facts.module_calls
        self.call_paths = [calls.paths[p] for p in calls.path]
        self.user_site = facts.ops.user_sites()
        self._by_op: tuple[tuple[np.ndarray, np.ndarray], ...] | None = None
        self._forward_of: dict[str, int] | None = None

    def __call__(self, origin: int, maker: int, fact: int, nbytes: int) -> tuple[str, ...]:
        facts, ops = self.facts, self.facts.ops
        module = phase = source = text = op = shape = dtype = user_source = user_text = role = ""
        if origin >= 0:
            call = int(ops.module_call[origin])
            module = self.call_paths[call] if call >= 0 else ""
            phase = PHASES[int(ops.phase[origin])]
            site = int(ops.site[origin])
            if site >= 0:
                source, text = facts.sites[site].source, facts.sites[site].text
            user = int(self.user_site[origin])
            if user >= 0:
                user_source, user_text = facts.sites[user].source, facts.sites[user].text
            op = ops.names[int(ops.name[origin])]
        if maker >= 0:
            shape = facts.shapes[int(facts.outputs_shape[maker])]
            dtype = facts.dtypes[int(facts.outputs_dtype[maker])]
        elif origin >= 0 and self.forward_op[origin] >= 0:
            shape, dtype, site = self._shape_of_size(int(self.forward_op[origin]), nbytes)
            if site >= 0:  # compiled: the line of the node whose result this buffer is
                source, text = facts.sites[site].source, facts.sites[site].text
        if fact >= 0:
            storage = facts.storages[fact]
            role = storage.role
            if storage.kind in _STATE_KINDS:
                # A parameter's, its gradient's or its optimizer state's module and shape are
                # the parameter's: the op that made the storage (a compiled backward kernel
                # writing a weight's gradient) may name another module, and its buffer the
                # shape of whatever tensor of that size the op touched.
                module = storage.module or module
                shape, dtype = storage.shape or shape, storage.dtype or dtype
                if storage.kind == "gradient" and facts.compiled and origin >= 0:
                    phase, lines = "backward", self._parameter_lines(storage.module)
                    if lines is not None:
                        source, text, user_source, user_text = lines
            else:
                module = module or storage.module
                shape, dtype = shape or storage.shape, dtype or storage.dtype
        if user_source == source:
            user_source = user_text = ""
        return module, phase, source, text, op, shape, dtype, user_source, user_text, role

    def eager(self, origin: int, fact: int, nbytes: int) -> tuple[str, ...]:
        """The description of what eager code at a graph break made (a compiled run): the
        phase of the kernel after it, what a storage row says of it, nothing of that kernel."""
        described = list(self(-1, -1, fact, nbytes))
        if origin >= 0:
            described[_DESCRIBED.index("phase")] = PHASES[int(self.facts.ops.phase[origin])]
        return tuple(described)

    def _parameter_lines(self, module: str) -> tuple[str, str, str, str] | None:
        """(source, text, user source, user text) of the first forward kernel of ``module`` in
        a compiled run: the line that uses a parameter, for its gradient. The backward kernel
        that writes a gradient may also compute other work (another layer's forward done again
        under checkpointing), whose line and phase are not the gradient's."""
        facts, ops = self.facts, self.facts.ops
        if self._forward_of is None:
            self._forward_of = {}
            forward = (ops.phase == FORWARD) & (ops.module_call >= 0) & (ops.site >= 0)
            for op in np.flatnonzero(forward).tolist():
                self._forward_of.setdefault(self.call_paths[int(ops.module_call[op])], op)
        op = self._forward_of.get(module)
        if op is None:
            return None
        site, user = int(ops.site[op]), int(self.user_site[op])
        user_source, user_text = (facts.sites[user].source, facts.sites[user].text) if user >= 0 else ("", "")
        return facts.sites[site].source, facts.sites[site].text, user_source, user_text

    def statement(self, index: int) -> tuple[str, ...]:
        """The description of what a statement made outside any op: its module, phase and
        lines; no op, shape or dtype (the tracker saw no tensor of it)."""
        statements = self.facts.statements
        call = int(statements.module_call[index])
        module = self.call_paths[call] if call >= 0 else ""
        site, user = int(statements.site[index]), int(statements.user_site[index])
        return self.at_sites(site, user, int(statements.phase[index]), module)

    def at_sites(self, site: int, user: int, phase: int, module: str = "") -> tuple[str, ...]:
        """The description of what was made on a line with no op, shape or dtype known: its
        lines (indices into the sites), phase and module."""
        sites = self.facts.sites
        source, text = (sites[site].source, sites[site].text) if site >= 0 else ("", "")
        user_source, user_text = (sites[user].source, sites[user].text) if user >= 0 else ("", "")
        if user_source == source:
            user_source = user_text = ""
        return module, PHASES[phase], source, text, "", "", "", user_source, user_text, ""

    def _shape_of_size(self, forward: int, nbytes: int) -> tuple[str, str, int]:
        """(shape, dtype, site or -1) of the first argument or result of ``forward`` with
        ``nbytes`` bytes; ("", "", -1) if none."""
        facts = self.facts
        if self._by_op is None:
            # The arguments' and results' rows by op, each op's in the order recorded (a few
            # lookups among many rows: sorted once, searched each time).
            self._by_op = tuple(
                (ops[order], order)
                for ops in (facts.inputs_op, facts.outputs_op)
                for order in [np.argsort(ops, kind="stable")]
            )
        sites = facts.inputs_site if len(facts.inputs_site) else None
        for which, (ops, order) in enumerate(self._by_op):
            lo, hi = np.searchsorted(ops, [forward, forward + 1], side="left").tolist()
            for row in order[lo:hi].tolist():
                shape, dtype = (
                    (facts.inputs_shape[row], facts.inputs_dtype[row])
                    if which == 0
                    else (facts.outputs_shape[row], facts.outputs_dtype[row])
                )
                if facts.shape_numel[shape] * facts.dtype_bytes[dtype] == nbytes:
                    site = int(sites[row]) if which == 0 and sites is not None else -1
                    return facts.shapes[shape], facts.dtypes[dtype], site
        return "", "", -1
