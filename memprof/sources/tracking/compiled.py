"""Compiled code explained: which source lines and modules each kernel Inductor generated
computes, from Inductor's own provenance of each kernel (the FX nodes it computes) and each
node's ``stack_trace`` and ``nn_module_stack``.

:class:`CompileTracking` is entered around a ``torch.compile``d function's first call (where
Inductor compiles) and its profiled calls; :func:`compiled_facts` turns the kernels the profile
saw into the op table of the attribution, one compiled graph call at a time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import sys
from collections import Counter
from typing import Any, NamedTuple

import numpy as np
import torch  # noqa: TID253 - the torch side of tracking

from memprof.core.records import (
    BACKWARD,
    FORWARD,
    OPTIMIZER,
    RECOMPUTE,
    ModuleCalls,
    TrackedFacts,
    TrackedOps,
)
from memprof.core.records import TrackedStorage as TrackedStorage
from memprof.sources.live.tree import ProfileRead, int_array
from memprof.sources.tracking.graph_regions import (
    CallsByTime,
    GraphCall,
    graph_call,
    graph_callers,
    graph_calls,
)
from memprof.sources.tracking.kernel_ranges import mark_kernels
from memprof.sources.tracking.lines import _TORCH_DIR, frame_kind, resolve_sites

_GRAPH_PREFIX = re.compile(r"^graph_\d+_")
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
_ROOT_SEPARATOR = "\x00"
_SELF = "\x01self"  # the root of a module path relative to the traced frame's own module
ANY_KERNEL = "*"  # a provenance entry whose kernel the profiler shows under another name


class NodeMeta(NamedTuple):
    """What a post-grad FX node says of itself: its ``stack_trace``, its innermost module
    (``root class \\x00 path``) and that module's class, its aten op, the (shape, dtype, bytes)
    of its result, and whether it is forward work recomputed in backward (checkpointing)."""

    trace: str
    module: str
    module_class: str
    op: str
    result: tuple[str, str, int] | None
    recompute: bool


class Origin(NamedTuple):
    """Where a kernel comes from: its statement (innermost user or library frame, ``file:line``),
    the user's own line that led there, its module and that module's class, a phase hint
    (``optimizer``, ``recompute`` or empty), the eager ops it replaces, and each node's result
    (shape, dtype, bytes, statement)."""

    where: str
    user_where: str
    module: str
    module_class: str
    phase: str
    ops: tuple[str, ...]
    results: tuple[tuple[str, str, int, str], ...]


class CompileTracking:
    """Entered around a ``torch.compile``d function's first call (where Inductor compiles) and
    its profiled calls: makes Inductor keep, for each kernel it generates, the FX nodes it
    computes (provenance tracking) and each node's source line, module and aten op.

    What memprof keeps of a graph (its nodes' metadata, each kernel's nodes) is saved in the
    compiled graph itself, with the provenance mapping Inductor keeps in it and caches with it
    (``CompiledFxGraph.inductor_provenance_mapping_str``): a graph that Inductor's FX graph or
    AOTAutograd cache gives back, compiled by an earlier run, is explained as the run that
    compiled it was, and nothing is compiled again for the explanation. Relies on Inductor
    internals (``torch._inductor.debug``'s provenance tables, a post-grad custom pass): where
    they are missing, compiled runs are explained by kernel only, with a note."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._pending: dict[str, NodeMeta] = {}  # the graph being compiled: its nodes' metadata
        self._graphs: dict[int, Any] = {}  # the compiled graphs made ready or called, by id
        self.calls: list[GraphCall] = []
        self.notes: list[str] = []
        self._marked: set[int] = set()  # the graphs whose kernels have their ranges

    def __enter__(self) -> CompileTracking:
        try:
            import torch._inductor.config as inductor_config
            import torch._inductor.debug as inductor_debug
            from torch._inductor.custom_graph_pass import CustomGraphPass
        except ImportError as error:
            self.notes.append(f"compiled code is explained by kernel only (no Inductor provenance: {error})")
            return self
        tracking = self
        chained = getattr(inductor_config, "post_grad_custom_post_pass", None)

        class KeepNodeMeta(CustomGraphPass):  # type: ignore[misc]
            def __call__(self, graph: Any) -> None:
                if chained is not None:
                    chained(graph)
                tracking._pending = {node.name: node_meta(node) for node in graph.nodes}
                # Inductor resets its kernel -> node table around a forward compile but not
                # around a backward one, so a second compile of the same step in one process
                # would find the first one's backward kernels in it. This graph's kernels are
                # generated after its post-grad passes: start its table empty here.
                inductor_debug._inductor_triton_kernel_to_post_grad_node_info.clear()

            def uuid(self) -> Any:
                # Part of the graph's cache key: a graph cached by another version of this pass
                # (or without it) holds no metadata this one reads.
                return ("memprof-node-meta", _KEPT_VERSION, chained.uuid() if chained is not None else None)

        original = inductor_debug.dump_inductor_provenance_info

        def dump() -> Any:
            # Called once per graph Inductor generates, after its kernels: what it returns is
            # saved in the compiled graph (and its cache entry) as JSON, memprof's part with it.
            result = original()
            nodes = inductor_debug._inductor_triton_kernel_to_post_grad_node_info
            kernels = sorted(
                ((name, list(nodes.get(name, ()))) for name in nodes),
                key=lambda kernel: int(kernel[0].rpartition(":")[2] or 0),
            )
            metas, tracking._pending = tracking._pending, {}
            if not isinstance(result, dict):
                return result
            kept = {"nodes": {name: list(meta) for name, meta in metas.items()}, "kernels": kernels}
            return {**result, _KEPT: kept}

        keep = KeepNodeMeta()
        self._stack.enter_context(
            inductor_config.patch({"trace.provenance_tracking_level": 1, "post_grad_custom_post_pass": keep})
        )
        self._key_by_sites(keep)
        inductor_debug.dump_inductor_provenance_info = dump
        self._stack.callback(setattr, inductor_debug, "dump_inductor_provenance_info", original)
        self._watch_graph_calls()
        return self

    def _key_by_sites(self, keep: Any) -> None:
        """Make the lines and modules of a graph's nodes part of its cache keys (Inductor's FX
        graph cache and AOTAutograd's): they are not otherwise, so the same graph traced from
        other lines (another function, the same one moved) would be read back with the lines
        kept when it was first compiled. Where Inductor hashes its graphs otherwise, its graph
        caches are bypassed (each graph is generated again, and says where it comes from)."""
        try:
            from torch._inductor.codecache import FxGraphHashDetails

            original = FxGraphHashDetails._get_custom_pass_detail
        except (ImportError, AttributeError):
            import torch._functorch.config as functorch_config
            import torch._inductor.config as inductor_config

            self._stack.enter_context(inductor_config.patch(fx_graph_cache=False))
            if hasattr(functorch_config, "enable_autograd_cache"):
                self._stack.enter_context(functorch_config.patch(enable_autograd_cache=False))
            return

        def detail(details: Any, custom_pass: Any) -> Any:
            found = original(details, custom_pass)
            return (found, sites_digest(details.gm)) if custom_pass is keep else found

        FxGraphHashDetails._get_custom_pass_detail = detail  # type: ignore[method-assign,assignment]
        self._stack.callback(setattr, FxGraphHashDetails, "_get_custom_pass_detail", original)

    def _watch_graph_calls(self) -> None:
        """Keep each compiled graph made ready (compiled, or loaded from Inductor's caches)
        or called, and note, at each call, who called it: the innermost statement of the
        user's and of a library's code, and the module whose forward runs it. A graph break
        leaves the graphs after it without the frames before it in their nodes' stack traces
        (the user's line that called the model) and without their module; the caller's stack
        still holds both. Nothing is allocated: the measured calls stay untouched."""
        try:
            from torch._inductor.output_code import CompiledFxGraph
        except ImportError:  # pragma: no cover - Inductor's classes moved: nodes' lines only
            return
        original, original_ready = CompiledFxGraph.__call__, CompiledFxGraph.post_compile
        calls, graphs = self.calls, self._graphs

        mark = self._mark_kernels

        def ready(graph: Any, *args: Any, **kwargs: Any) -> Any:
            graphs[id(graph)] = graph
            found = original_ready(graph, *args, **kwargs)
            mark(graph)
            return found

        def call(graph: Any, inputs: Any) -> Any:
            calls.append(graph_call(sys._getframe(1)))
            graphs.setdefault(id(graph), graph)
            mark(graph)
            return original(graph, inputs)

        CompiledFxGraph.__call__ = call  # type: ignore[method-assign,assignment]
        CompiledFxGraph.post_compile = ready  # type: ignore[method-assign,assignment]
        self._stack.callback(setattr, CompiledFxGraph, "__call__", original)
        self._stack.callback(setattr, CompiledFxGraph, "post_compile", original_ready)

    def _mark_kernels(self, graph: Any) -> None:
        """Each C++ kernel of ``graph`` in its own profiler range until the tracking ends
        (:func:`~memprof.sources.tracking.kernel_ranges.mark_kernels`); a graph whose module
        is not loaded yet is marked at its first call."""
        if id(graph) in self._marked or not mark_kernels(graph, self._stack):
            return
        self._marked.add(id(graph))
        self._stack.callback(self._marked.discard, id(graph))

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    def graphs(self) -> list[list[tuple[str, Origin]]]:
        """Each compiled graph's kernels in the order its wrapper calls them: the kernel's name
        as the profiler shows it (without the ``graph_N_`` prefix; extern kernels as their aten
        op) and its :class:`Origin`."""
        graphs = []
        for compiled in self._graphs.values():
            if (kept := _kept(compiled)) is None:
                continue  # compiled before tracking: explained by kernel only
            metas, kernels = kept
            graph = []
            order = {name: i for i, name in enumerate(metas)}
            for name, unordered in kernels:
                nodes = sorted((n for n in unordered if n in order), key=order.__getitem__)
                graph.append((profiled_name(name), kernel_origin([metas[n] for n in nodes if n in metas])))
            graphs.append(graph)
        return graphs

    def facts(
        self,
        read: ProfileRead,
        storages: tuple[TrackedStorage, ...],
        device: str,
        notes: list[str],
        module_paths: dict[int, str] | None = None,
        root: str = "",
        classes: dict[str, str] | None = None,
    ) -> TrackedFacts:
        """Facts of a compiled run: the kernels as ops, with the lines and modules of their
        nodes (where a node has none, its graph call's: ``module_paths`` names modules by id,
        ``root`` is the outermost module's name, ``classes`` each path's class)."""
        calls = [call.named(module_paths or {}) for call in self.calls]
        return compiled_facts(
            read, self.graphs(), storages, device, [*notes, *self.notes], calls, root, classes
        )


def sites_digest(gm: Any) -> str:
    """A digest of where each node of an FX graph comes from: its stack trace and its module
    stack (empty for no graph)."""
    digest = hashlib.sha256()
    for node in getattr(getattr(gm, "graph", None), "nodes", ()):
        meta = node.meta
        modules = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack") or {}
        where = [str(meta.get("stack_trace") or ""), *(str(value) for value in modules.values())]
        digest.update("\x00".join(where).encode("utf-8", "replace") + b"\x01")
    return digest.hexdigest()


_KEPT = "memprof"
"""memprof's entry in a compiled graph's provenance mapping: its nodes' metadata and kernels."""
_KEPT_VERSION = 2


def _kept(graph: Any) -> tuple[dict[str, NodeMeta], list[tuple[str, tuple[str, ...]]]] | None:
    """What :class:`CompileTracking` kept in a compiled ``graph`` (compiled now or read from a
    cache): each node's :class:`NodeMeta` by name and each kernel's nodes; None when it holds
    nothing of memprof's (compiled without tracking)."""
    text = getattr(graph, "inductor_provenance_mapping_str", None)
    if not text:
        return None
    try:
        kept = json.loads(text).get(_KEPT)
        metas = {
            str(name): NodeMeta(
                str(t), str(m), str(c), str(op), (str(r[0]), str(r[1]), int(r[2])) if r else None, bool(rc)
            )
            for name, (t, m, c, op, r, rc) in kept["nodes"].items()
        }
        kernels = [(str(name), tuple(str(n) for n in nodes)) for name, nodes in kept["kernels"]]
    except (ValueError, TypeError, KeyError, AttributeError, IndexError):
        return None
    return metas, kernels


def profiled_name(kernel: str) -> str:
    """A kernel of Inductor's provenance table (``name:index``) as the profiler shows it: a
    generated kernel by its name, an extern kernel (``extern_kernels.mm``) or a fallback to an
    aten op (``aten.randint.low_out``) as that op (``aten::mm``, ``aten::randint``), a
    higher-order op as :data:`ANY_KERNEL`."""
    base = kernel.rpartition(":")[0] or kernel
    if base.startswith("extern_kernels."):
        return "aten::" + base.removeprefix("extern_kernels.")
    if base.startswith(("aten.", "torch.ops.aten.")):
        return "aten::" + base.removeprefix("torch.ops.").split(".")[1]
    if base.startswith("torch.ops.higher_order."):
        # A higher-order op (run_with_rng_state, which checkpointing's recompute uses) runs
        # another op, which is what the profiler shows: any name matches it.
        return ANY_KERNEL
    return base


def node_meta(node: Any) -> NodeMeta:
    """What a post-grad FX node says of itself (:class:`NodeMeta`)."""
    meta = node.meta
    value = meta.get("val")
    result = None
    if isinstance(value, torch.Tensor):
        with contextlib.suppress(Exception):  # symbolic shapes have no plain size
            shape = tuple(int(n) for n in value.shape)
            nbytes = math.prod(shape) * value.dtype.itemsize
            result = (str(shape), str(value.dtype).replace("torch.", ""), nbytes)
    stack = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack") or {}
    module = module_class = ""
    if stack:
        # The root module's class (the outermost entry) and the innermost module's path below
        # it; in a graph traced from a module's own forward (after a graph break), paths are
        # relative to that module (``L['self'].mlp``): completed from the graph's call.
        first, last = list(stack.values())[0], list(stack.values())[-1]
        root = _SELF if str(last[0]).startswith("L['self']") else _class_name(first[1])
        module = f"{root}{_ROOT_SEPARATOR}{module_path(str(last[0]))}"
        module_class = _class_name(last[1])
    target = node.target
    op = f"aten::{target._schema.name.partition('::')[2]}" if hasattr(target, "_schema") else ""
    recompute = "recompute" in meta or "ac_graph_id" in meta
    return NodeMeta(str(meta.get("stack_trace") or ""), module, module_class, op, result, recompute)


def _class_name(cls: Any) -> str:
    return str(getattr(cls, "__name__", str(cls).rpartition(".")[2].rstrip("'>")))


def module_path(dynamo_path: str) -> str:
    """``L['model'].blocks[0].attn`` -> ``blocks.0.attn`` (the root's own name left out)."""
    path = re.sub(r"^L\['[^']*'\]", "", dynamo_path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\[['\"]([^'\"]+)['\"]\]", r".\1", path)
    return path.strip(".")


def _frames(trace: str) -> tuple[str, str, bool]:
    """(statement, user's statement, ran in torch.optim) of a node's ``stack_trace``: its
    innermost user or library frame and its innermost user frame (the same one when the
    statement is the user's), as ``file:line``."""
    found = [(m["file"], int(m["line"])) for m in _FRAME.finditer(trace)]
    optimizer = any(f.startswith(os.path.join(_TORCH_DIR, "optim", "")) for f, _ in found)
    kinds = [frame_kind(file) for file, _ in found]
    source = [frame for frame, kind in zip(found, kinds, strict=True) if kind in ("user", "library")]
    user = [frame for frame, kind in zip(found, kinds, strict=True) if kind == "user"]
    where = f"{source[-1][0]}:{source[-1][1]}" if source else ""
    user_where = f"{user[-1][0]}:{user[-1][1]}" if user else ""
    return where, user_where, optimizer


# Ops that only view their input: a backward kernel that reads a recomputed tensor through
# them does no forward work again.
_VIEW_OPS = frozenset(
    f"aten::{name}"
    for name in (
        "view", "_unsafe_view", "reshape", "_reshape_alias", "permute", "transpose", "t", "expand",
        "unsqueeze", "squeeze", "slice", "select", "unbind", "split", "split_with_sizes", "chunk",
        "as_strided", "alias", "detach", "narrow", "view_as", "movedim", "unfold", "diagonal",
    )
)  # fmt: skip


def _recomputed(metas: list[NodeMeta]) -> bool:
    """Whether a kernel is forward work done again: every node of it that computes (views
    aside) is a recomputed node (a backward kernel that fuses recomputed work into a gradient
    is backward work)."""
    working = [meta for meta in metas if meta.op not in _VIEW_OPS]
    return (
        bool(working)
        and all(meta.recompute for meta in working)
        or (not working and any(meta.recompute for meta in metas))
    )


def kernel_origin(metas: list[NodeMeta]) -> Origin:
    """A kernel's :class:`Origin` from its nodes, in graph order: the last node's statements
    and module (a kernel ends with what it produces), and each node's result: a buffer of
    that size is it."""
    where = user_where = module = module_class = ""
    optimizer = False
    recompute = _recomputed(metas)
    results: list[tuple[str, str, int, str]] = []
    for meta in metas:
        node_where, node_user, node_optimizer = _frames(meta.trace)
        optimizer = optimizer or node_optimizer
        if node_where:
            where, user_where = node_where, node_user
        if meta.module:
            module, module_class = meta.module, meta.module_class
        if meta.result is not None:
            results.append((*meta.result, node_where))
    ops = tuple(sorted({meta.op for meta in metas if meta.op}))
    phase = "optimizer" if optimizer else "recompute" if recompute else ""
    return Origin(where, user_where, module, module_class, phase, ops, tuple(reversed(results)))


def _phase(phase: int, origin: Origin | None) -> int:
    if phase == BACKWARD:
        # Forward nodes inside a backward graph are checkpointed work done again.
        return RECOMPUTE if origin is not None and origin.phase == "recompute" else BACKWARD
    return OPTIMIZER if origin is not None and origin.phase == "optimizer" else FORWARD


def compiled_facts(
    read: ProfileRead,
    graphs: list[list[tuple[str, Origin]]],
    storages: tuple[TrackedStorage, ...],
    device: str,
    notes: list[str],
    calls_made: list[GraphCall] | None = None,
    root: str = "",
    classes: dict[str, str] | None = None,
) -> TrackedFacts:
    """The kernels of each wrapper call as ops, matched to the compiled graph whose kernel
    sequence they are, with that graph's lines and modules (where a node has none, those of
    the graph's call, ``calls_made``; ``root``: the name of the outermost module, its path
    for the tracker); modules as one call per path (``classes``: each path's class)."""
    paired: dict[int, int] = {}
    by_time = CallsByTime(calls_made or [])
    kernels = _with_callers(_matched_kernels(read, graphs, notes), by_time, root, paired)
    kernels.sort(key=lambda k: k.t1)
    names = sorted({k.name for k in kernels})
    code = {name: i for i, name in enumerate(names)}
    origins = [k.origin for k in kernels if k.origin is not None]
    spans = graph_calls(read.graph_spans, paired)
    callers = graph_callers(spans, by_time)
    where = sorted(
        {w for o in origins for w in (o.where, o.user_where) if w}
        | {r[3] for o in origins for r in o.results if r[3]}
        | {w for caller in callers for w in caller if w}
    )
    sites = resolve_sites([(w.rpartition(":")[0], int(w.rpartition(":")[2])) for w in where])
    site_of = {w: i for i, w in enumerate(where)}
    calls, call_of = _module_calls(kernels, classes or {})
    fused = {
        k.name: k.origin.ops for k in kernels if k.origin and k.origin.ops and not k.name.startswith("aten::")
    }
    empty = np.zeros(0, dtype=np.int64)
    # What each kernel's nodes produce: a buffer of its size has that shape.
    results = [(i, result) for i, k in enumerate(kernels) if k.origin for result in k.origin.results]
    shapes = sorted({r[0] for _, r in results})
    dtypes = sorted({r[1] for _, r in results})
    return TrackedFacts(
        calls=tuple(read.calls),
        allocations=read.allocations,
        ops=TrackedOps(
            t0=int_array([k.t0 for k in kernels]),
            t1=int_array([k.t1 for k in kernels]),
            name=int_array([code[k.name] for k in kernels]),
            site=int_array([site_of.get(k.origin.where, -1) if k.origin else -1 for k in kernels]),
            module_call=int_array([call_of.get(k.origin.module, -1) if k.origin else -1 for k in kernels]),
            phase=int_array([_phase(k.phase, k.origin) for k in kernels]),
            names=tuple(names),
            user_site=int_array([site_of.get(k.origin.user_where, -1) if k.origin else -1 for k in kernels]),
        ),
        module_calls=calls,
        sites=sites,
        outputs_ptr=empty,
        outputs_op=empty,
        outputs_shape=empty,
        outputs_dtype=empty,
        shapes=tuple(shapes),
        dtypes=tuple(dtypes),
        saved_ptr=empty,
        saved_time=empty,
        storages=storages,
        notes=tuple(notes),
        device=device,
        compiled=True,
        fused_kernels=tuple(sorted(fused.items())),
        inputs_op=int_array([i for i, _ in results]),
        inputs_shape=int_array([shapes.index(r[0]) for _, r in results]),
        inputs_dtype=int_array([dtypes.index(r[1]) for _, r in results]),
        inputs_site=int_array([site_of[r[3]] if r[3] else -1 for _, r in results]),
        shape_numel=tuple(math.prod(int(n) for n in re.findall(r"\d+", shape)) for shape in shapes),
        dtype_bytes=tuple(torch.empty(0, dtype=getattr(torch, d)).element_size() for d in dtypes),
        graph_calls=spans,
        graph_callers=tuple((site_of.get(w, -1), site_of.get(u, -1)) for w, u in callers),
    )


class _Kernel(NamedTuple):
    name: str
    t0: int
    t1: int
    phase: int
    origin: Origin | None
    wrapper: int = -1


def _with_callers(
    kernels: list[_Kernel], calls: CallsByTime, root: str, paired: dict[int, int] | None = None
) -> list[_Kernel]:
    """Each kernel's origin completed with its graph call's caller: the user's line when its
    nodes' stack traces stop short of it (a graph after a graph break), the caller's statement
    when they hold none (an optimizer's graph, traced inside torch), the module whose forward
    called the graph when its nodes have none, or the full path of a module its nodes name
    relative to that module. A forward wrapper call is the graph call that began last before
    it; a backward one takes the module of the forward call it pairs with (:func:`backward_pair`:
    backward runs in the reverse order), noted in ``paired`` (backward wrapper: forward's)."""
    if not calls.calls:
        return kernels
    wrappers: dict[int, list[_Kernel]] = {}
    for kernel in kernels:
        wrappers.setdefault(kernel.wrapper, []).append(kernel)
    caller: dict[int, GraphCall | None] = {}
    base: dict[int, str | None] = {}  # the calling module's path ("": the root; None: unknown)
    waiting: list[tuple[frozenset[str], GraphCall | None, str | None, int]] = []  # forward calls, in order
    for wrapper, group in sorted(wrappers.items(), key=lambda item: min(k.t0 for k in item[1])):
        call = calls.before(min(k.t0 for k in group))
        names = frozenset(k.origin.module for k in group if k.origin and k.origin.module.startswith(_SELF))
        if group[0].phase == BACKWARD:
            # Backward's lines are its forward's, as in eager runs: the pair's caller.
            pair = backward_pair([pending[0] for pending in waiting], names)
            forward = waiting.pop(pair) if pair is not None else (frozenset(), None, None, -1)
            caller[wrapper], base[wrapper] = forward[1:3]
            if paired is not None and forward[3] >= 0:
                paired[wrapper] = forward[3]
            continue
        module = call.module if call is not None and isinstance(call.module, str) and call.module else None
        caller[wrapper], base[wrapper] = call, "" if module == root else module
        waiting.append((names, call, base[wrapper], wrapper))
    return [_completed(kernel, caller[kernel.wrapper], base[kernel.wrapper], root) for kernel in kernels]


def backward_pair(forwards: list[frozenset[str]], names: frozenset[str]) -> int | None:
    """Which of the forward graph calls not yet paired (the modules each names, in the order
    they ran) a backward graph call belongs to: the latest naming the same modules, else the
    latest sharing the most of them (a backward graph names other modules than its forward:
    checkpointed work done again, dropout's and the embedding's gradients, fused differently);
    None when none does."""
    exact = [i for i, forward in enumerate(forwards) if forward == names]
    if exact:
        return exact[-1]
    shared = [(len(forward & names), i) for i, forward in enumerate(forwards)]
    best = max(shared, default=(0, -1))
    return best[1] if best[0] else None


def _completed(kernel: _Kernel, call: GraphCall | None, base: str | None, root: str) -> _Kernel:
    """``kernel`` with what its nodes do not say taken from its graph's ``call`` and the path
    of the module that called the graph (``base``)."""
    origin = kernel.origin or Origin("", "", "", "", "", (), ())
    prefix, _, path = origin.module.partition(_ROOT_SEPARATOR)
    if prefix == _SELF:
        module = f"{root}{_ROOT_SEPARATOR}{'.'.join(p for p in (base, path) if p)}"
    elif origin.module or base is None:
        module = origin.module
    else:
        module = f"{root}{_ROOT_SEPARATOR}{base}"
    where = origin.where or (call.where if call is not None else "")
    user = origin.user_where or (call.user_where if call is not None else "")
    return kernel._replace(
        origin=origin._replace(where=where, user_where="" if user == where else user, module=module)
    )


def _matched_kernels(
    read: ProfileRead, graphs: list[list[tuple[str, Origin]]], notes: list[str]
) -> list[_Kernel]:
    """Each kernel the profile saw with its origin in the compiled graph its wrapper call ran
    (None when no graph matches)."""
    by_wrapper: dict[int, list[tuple[str, int, int, int]]] = {}
    for wrapper, name, t0, t1, phase in read.kernels:
        by_wrapper.setdefault(wrapper, []).append((_GRAPH_PREFIX.sub("", name, count=1), t0, t1, phase))
    kernels: list[_Kernel] = []
    unmatched = 0
    records = read.allocations
    for wrapper, events in by_wrapper.items():
        events.sort(key=lambda e: e[1])
        graph = _matching_graph(graphs, [e[0] for e in events])
        unmatched += graph is None
        unused = list(graph or [])
        previous_end = events[0][1]
        for name, t0, t1, phase in events:
            # The sizes allocated since the previous kernel: the buffers this one writes.
            lo, hi = np.searchsorted(records.time, [previous_end, t1], side="left")
            sizes = set(records.bytes[lo:hi].tolist())
            previous_end = t1
            same = [k for k in unused if k[0] == name] or [k for k in unused if k[0] == ANY_KERNEL]
            chosen = next(
                (k for k in same if any(r[2] in sizes for r in k[1].results)), same[0] if same else None
            )
            if chosen is not None:
                unused.remove(chosen)
            kernels.append(_Kernel(name, t0, t1, phase, chosen[1] if chosen else None, wrapper))
    if unmatched or not graphs:
        notes.append(
            f"{unmatched or len(by_wrapper)} compiled graph call(s) could not be matched to Inductor's "
            "provenance (compiled before memprof tracked the run): their buffers are explained by kernel"
        )
    return kernels


def _matching_graph(
    graphs: list[list[tuple[str, Origin]]], names: list[str]
) -> list[tuple[str, Origin]] | None:
    """The compiled graph whose kernels a wrapper call ran: the same kernels (Inductor numbers
    extern kernels in another order than it calls them, so as a multiset), else the graph that
    shares most of them, when it shares at least nine in ten (a kernel named otherwise in the
    profile than in the provenance table: unmatched, explained by its name alone)."""
    wanted = Counter(names)
    total = sum(wanted.values())
    best, best_shared = None, 0
    for graph in graphs:
        have = Counter(name for name, _ in graph)
        anything = have.pop(ANY_KERNEL, 0)
        exact = sum((have & wanted).values())
        if not have - wanted and total - exact == anything:
            return graph
        shared = exact + min(anything, total - exact)
        if shared > best_shared:
            best, best_shared = graph, shared
    return best if best is not None and best_shared * 10 >= max(total, 1) * 9 else None


def _module_calls(
    kernels: list[_Kernel], known_classes: dict[str, str]
) -> tuple[ModuleCalls, dict[str, int]]:
    """One call per module path (compiled code has no module boundaries at run time): its
    window spans its forward kernels and its submodules'; parents by path; each path's class
    (from its nodes, else ``known_classes``: the tracked model's, by path)."""
    encoded = sorted({k.origin.module for k in kernels if k.origin and k.origin.module})
    classes = {k.origin.module: k.origin.module_class for k in kernels if k.origin and k.origin.module}
    full: dict[str, str] = {}  # "Root/blocks.0.attn" -> shown path ("blocks.0.attn"; the root by class)
    shown_class: dict[str, str] = {}
    for module in encoded:
        root, _, path = module.partition(_ROOT_SEPARATOR)
        parts = path.split(".") if path else []
        for depth in range(len(parts) + 1):
            key = root + "/" + ".".join(parts[:depth])
            full.setdefault(key, ".".join(parts[:depth]) or root)
        shown_class[root + "/" + path] = classes.get(module, "")
        shown_class.setdefault(root + "/", root)
    keys = sorted(full)
    index = {key: i for i, key in enumerate(keys)}
    parent = [
        index.get(key.rpartition(".")[0] if "." in key.partition("/")[2] else key.partition("/")[0] + "/", -1)
        if key.partition("/")[2]
        else -1
        for key in keys
    ]
    start = [2**62] * len(keys)
    end = [-1] * len(keys)
    for position, kernel in enumerate(kernels):
        # The wrapper allocates a kernel's buffers just before calling it: from the previous end.
        t0 = kernels[position - 1].t1 + 1 if position else kernel.t0
        if kernel.origin and kernel.origin.module and kernel.phase != BACKWARD:
            root, _, path = kernel.origin.module.partition(_ROOT_SEPARATOR)
            at = index[root + "/" + path]
            while at >= 0:
                start[at], end[at] = min(start[at], t0), max(end[at], kernel.t1)
                at = parent[at]
    calls = ModuleCalls(
        path=int_array(list(range(len(keys)))),
        parent=int_array(parent),
        start=int_array([s if e >= 0 else -1 for s, e in zip(start, end, strict=True)]),
        end=int_array(end),
        paths=tuple(full[key] for key in keys),
        classes=tuple(shown_class.get(key) or known_classes.get(full[key], "") for key in keys),
    )
    call_of = {
        module: index[module.partition(_ROOT_SEPARATOR)[0] + "/" + module.partition(_ROOT_SEPARATOR)[2]]
        for module in encoded
    }
    return calls, call_of
