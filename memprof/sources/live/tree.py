"""Read a finished profile's event tree (``experimental_event_tree()``): what the flat event
list of :mod:`memprof.sources.live.kineto` does not hold.

- The allocator records with their addresses (``[memory]`` nodes): which block each free
  frees, so that lifetimes can be paired and named (:mod:`memprof.analysis.attribution`).
- The ops autograd ran: each runs inside its node's ``evaluate_function`` range, whose sequence
  number is that of the forward op that made the node.
- The kernels of compiled code: the children of each Inductor wrapper call's range.
- The measured calls' ranges (``CALL_MARKER``).

Device-side activities (kernels, copies, and the GPU-side copy of every ``record_function``
range) are nodes of their own kind: on CUDA a call marker or a wrapper call appears twice,
once on the host and once as the span of its kernels on the GPU, which is not a second call.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter
from typing import Any

import numpy as np
import torch  # noqa: TID253 - reads torch's profiler objects

from memprof.core.records import AUTOGRAD_NODE, BACKWARD, CALL_MARKER, FORWARD, Allocations, TrackedOps
from memprof.sources.live.kineto import kineto_results

HOST_DEVICES = frozenset({"cpu", "mkldnn", "ideep"})
# Inductor's wrapper of one compiled graph, as a profiler range (profiler_mark_wrapper_call).
WRAPPER_CALL = re.compile(r"^graph_\d+_inductor_wrapper_call$")
_WRAPPER_SUFFIX = "_inductor_wrapper_call"
# Dynamo's range around each run of a frame's compiled code: ``Torch-Compiled Region: 0/1``
# (the frame's id, then how many times it was compiled before).
COMPILED_REGION = "Torch-Compiled Region: "
DEVICE_SIDE = getattr(torch._C._profiler._EventType, "Kineto", None)


@dataclass
class ProfileRead:
    """What the profile's event tree holds beyond the flat event list: the allocator records
    with addresses; the ops autograd ran (name, start, end, autograd node number; -1 for
    AccumulateGrad); the kernels of compiled code (wrapper call, name, start, end, phase); the
    measured calls' (start, end). ``with_backward``: backward's ops were read (an empty list
    then means there were none)."""

    allocations: Allocations
    backward: list[tuple[str, int, int, int]]
    kernels: list[tuple[int, str, int, int, int]]
    calls: list[tuple[int, int]]
    with_backward: bool = False
    graph_spans: GraphSpans | None = None
    """With the kernels: Dynamo's compiled regions and each wrapper call's span."""


@dataclass
class GraphSpans:
    """Where compiled code ran: each Dynamo compiled region (start, end, ``frame/compile`` id),
    and each Inductor wrapper call's (start, end), by its number among the wrapper calls."""

    regions: list[tuple[int, int, str]]
    wrappers: dict[int, tuple[int, int]]


def read_calls(prof: Any, device: str = "cpu") -> tuple[Allocations, list[tuple[int, int]]]:
    """The ``[memory]`` records of ``device`` with their addresses, and the (start, end) of each
    ``CALL_MARKER`` range, in order, of a finished ``torch.profiler.profile``."""
    read = read_profile(prof, device)
    return read.allocations, read.calls


def read_profile(prof: Any, device: str, *, backward_ops: bool = False, kernels: bool = False) -> ProfileRead:
    """One walk of the finished profile's event tree: the device's records with addresses, the
    calls, and (when asked) the backward ops and the compiled kernels."""
    roots = kineto_results(prof).experimental_event_tree()
    memory = MemoryRecords(torch.device(device))
    calls: list[tuple[int, int]] = []
    backward: list[tuple[str, int, int, int]] = []
    found: list[tuple[int, str, int, int, int]] = []
    spans = GraphSpans([], {}) if kernels else None
    walk_with_context(
        roots, memory, calls, backward if backward_ops else None, found if kernels else None, spans=spans
    )
    return ProfileRead(
        memory.allocations(),
        backward,
        sorted(found, key=lambda k: k[3]),
        sorted(calls),
        with_backward=backward_ops,
        graph_spans=spans,
    )


class MemoryRecords:
    """The ``[memory]`` nodes met in a walk, read ``_MEMORY_BLOCK`` at a time (one accessor
    over the whole block, ``map`` in C) into typed arrays: the device's records only, as rows
    (time, bytes, address, and with ``threads`` the thread that made each)."""

    def __init__(self, device: torch.device, *, threads: bool = False) -> None:
        self._device = device
        self._threads = threads
        self.nodes: list[Any] = []
        self.devices: dict[torch.device, bool] = {}  # each device met: whether its records are read
        self._parts: list[np.ndarray] = []

    def flush(self) -> None:
        nodes = self.nodes
        if not nodes:
            return
        fields = list(map(_extra_fields, nodes))
        devices = list(map(_device, fields))
        # Each distinct device judged once: reading a device's type is a call into torch
        # (~0.8 us a record); hashing a device is not.
        wanted = self.devices
        for device in set(devices).difference(wanted):
            wanted[device] = self._wanted(device)
        keep = list(map(wanted.__getitem__, devices))
        if not all(keep):
            nodes, fields = list(compress(nodes, keep)), list(compress(fields, keep))
        count = len(nodes)
        part = np.empty((4 if self._threads else 3, count), dtype=np.int64)
        part[0] = np.fromiter(map(_start_time, nodes), dtype=np.int64, count=count)
        part[1] = np.fromiter(map(_alloc_size, fields), dtype=np.int64, count=count)
        part[2] = np.fromiter(map(_ptr, fields), dtype=np.int64, count=count)
        if self._threads:
            part[3] = np.fromiter(map(_thread, nodes), dtype=np.int64, count=count)
        self._parts.append(part)
        self.nodes = []

    def _wanted(self, device: torch.device) -> bool:
        if self._device.type == "cpu":
            return device.type in HOST_DEVICES
        return device == self._device

    def rows(self) -> np.ndarray:
        """The records read, in the order the walk met them."""
        self.flush()
        if self._parts:
            return np.concatenate(self._parts, axis=1)
        return np.zeros((4 if self._threads else 3, 0), dtype=np.int64)

    def allocations(self) -> Allocations:
        """The records in time order, ties by address, then as met (:func:`walk_with_context`
        meets them depth first, backwards: last to first, unless given ``every``)."""
        return allocations_of(self.rows())


def allocations_of(rows: np.ndarray) -> Allocations:
    """Records (rows: time, bytes, address) in time order, ties by address then as given."""
    order = np.lexsort((rows[2], rows[0]))
    return Allocations(time=rows[0][order], bytes=rows[1][order], ptr=rows[2][order])


_MEMORY_NODE = "[memory]"
_MEMORY_BLOCK = 4096
_extra_fields = attrgetter("extra_fields")
_device = attrgetter("device")
_start_time = attrgetter("start_time_ns")
_alloc_size = attrgetter("alloc_size")
_ptr = attrgetter("ptr")
_thread = attrgetter("start_tid")


class _Restore:
    """A stack entry that gives the walk back the context of a node's siblings, once that
    node's children (which saw a context the node changed) are done."""

    __slots__ = ("context", "name")

    def __init__(self, context: tuple[int | None, bool, int]) -> None:
        self.name = _RESTORE
        self.context = context


_RESTORE = "\x00restore"  # no profiler event is named so


def walk_with_context(
    roots: list[Any],
    memory: MemoryRecords,
    calls: list[tuple[int, int]],
    backward: list[tuple[str, int, int, int]] | None,
    found: list[tuple[int, str, int, int, int]] | None,
    every: Callable[[Any, str], object] | None = None,
    spans: GraphSpans | None = None,
) -> None:
    """The walk of the event tree, every reader's: depth first, the ``[memory]`` nodes into
    ``memory`` and the measured calls' ranges into ``calls``, carrying a context: the autograd
    node's number (None outside backward), whether inside a backward op already, and the
    Inductor wrapper call whose kernels are the children (-1 if none). ``backward`` collects
    the ops autograd ran (name, start, end, node number), ``found`` the kernels of compiled code
    (wrapper call, name, start, end, phase); None: not wanted. A node that changes the context
    leaves a :class:`_Restore` under its children, so that the stack holds nodes alone, not
    (node, context) tuples.
    ``every`` is given each node but the records, with its name, in the tree's order (a node's
    children first to last, which also numbers the wrapper calls first to last; without it they
    are walked last to first). ``spans`` collects where compiled code ran (with ``found``)."""
    stack = list(roots) if every is None else roots[::-1]
    pop = stack.pop
    keep = memory.nodes.append
    memory_node, call_marker, block, restore = _MEMORY_NODE, CALL_MARKER, _MEMORY_BLOCK, _RESTORE
    device_side = DEVICE_SIDE
    sequence: int | None = None
    inside = False
    wrapper = wrappers = -1
    while stack:
        node = pop()
        name = node.name
        if name == memory_node:
            keep(node)
            if len(memory.nodes) == block:
                memory.flush()
                keep = memory.nodes.append
            continue
        if name is restore:
            sequence, inside, wrapper = node.context
            continue
        if every is not None:
            every(node, name)
        before = None  # the context of the node's siblings, when the node changes it
        if (
            name == call_marker or wrapper >= 0 or name.endswith(_WRAPPER_SUFFIX)
        ) and node.tag == device_side:
            continue  # a GPU-side span: neither a call, a wrapper call nor a kernel launch
        if name == call_marker:
            calls.append((node.start_time_ns, node.end_time_ns))
        elif name.startswith(AUTOGRAD_NODE):
            before = (sequence, inside, wrapper)
            sequence, inside = int(node.extra_fields.sequence_number), False
        elif backward is not None and sequence is not None and not inside and name.startswith("aten::"):
            backward.append((name, node.start_time_ns, node.end_time_ns, sequence))
            before = (sequence, inside, wrapper)
            inside = True
        if found is not None and (wrapper >= 0 or WRAPPER_CALL.match(name)):
            before = before or (sequence, inside, wrapper)
            if wrapper >= 0:
                phase = BACKWARD if sequence is not None else FORWARD
                found.append((wrapper, name, node.start_time_ns, node.end_time_ns, phase))
                wrapper = -1
            else:
                wrappers += 1
                wrapper = wrappers
                if spans is not None:
                    spans.wrappers[wrapper] = (node.start_time_ns, node.end_time_ns)
        elif spans is not None and name.startswith(COMPILED_REGION) and node.tag != device_side:
            spans.regions.append((node.start_time_ns, node.end_time_ns, name[len(COMPILED_REGION) :]))
        children = node.children
        if every is not None and children:
            children.reverse()  # popped first to last
        if before is None:
            stack += children
        elif children:
            stack.append(_Restore(before))
            stack += children
        else:
            sequence, inside, wrapper = before


def int_array(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64) if values else np.zeros(0, dtype=np.int64)


def backward_table(backward: list[tuple[str, int, int, int]]) -> tuple[TrackedOps, np.ndarray]:
    """Backward ops read from the profile as an op table in order of end, and their nodes' numbers."""
    # By end, ties by start, name and node: the same table whichever way the tree was walked.
    ops = sorted(backward, key=lambda op: (op[2], op[1], op[0], op[3]))
    names = sorted({op[0] for op in ops})
    code = {name: i for i, name in enumerate(names)}
    count = len(ops)
    tracked = TrackedOps(
        t0=int_array([op[1] for op in ops]),
        t1=int_array([op[2] for op in ops]),
        name=int_array([code[op[0]] for op in ops]),
        site=np.full(count, -1, dtype=np.int64),
        module_call=np.full(count, -1, dtype=np.int64),
        phase=np.full(count, BACKWARD, dtype=np.int64),
        names=tuple(names),
        user_site=np.full(count, -1, dtype=np.int64),
    )
    return tracked, int_array([op[3] for op in ops])
