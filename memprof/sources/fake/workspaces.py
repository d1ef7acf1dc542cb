"""What an op's kernel allocates and frees inside itself, measured: the bytes fake execution
cannot see (``sum`` of a bool tensor on the CPU makes an int64 copy of it, 8 bytes per
element; oneDNN's convolution reorders an NCHW input into its blocked layout).

Measured, not tabled: no table of kernels' internals stays true across torch versions, CPU
kinds and thread counts, and each op's kernel is right here. An op is measured by running it
on real tensors under torch's profiler, once unmeasured (as a warm-up would) and then once
measured: its workspace is its highest live bytes inside the call less the bytes of what it
returns (the allocations still live at the call's end: an address freed inside the call may
come back for the output), and for each tensor it returns, the bytes its storage holds beyond
the tensor (``mse_loss``'s 0-dimensional result lives in a storage as large as its input).

Two steps, so that the cost does not grow with the tensors' sizes:

1. Each kind of call (the op; each tensor argument's dtype, number of dimensions and memory
   layout; the other arguments that are not numbers) is measured once, small: every whole
   number in its arguments is capped at ``k`` (a size ``d`` becomes ``min(d, k)``, the same
   ``k`` throughout, so that equal sizes stay equal), its largest tensor holding at most
   ``SURVEY_ELEMENTS`` elements. Most kinds allocate nothing inside: done.
2. The kinds that do are measured for each shape they are called with: at the call's own size
   when its largest tensor holds at most ``EXACT_ELEMENTS`` elements (exact), else at two caps
   holding at most ``PROBE_ELEMENTS``, and scaled linearly in the elements of the call's
   largest tensor (an approximation: such calls are named in a note).

Results are cached per process. An op that cannot run on such tensors (an index argument past
a capped size, say) is listed as not measured, and counted as allocating nothing inside.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch  # noqa: TID253 - runs ops on small real tensors, like sources/live.py
from torch.autograd.profiler import profile, record_function  # noqa: TID253
from torch.utils._pytree import tree_flatten, tree_leaves, tree_unflatten  # noqa: TID253

from memprof.core.records import CALL_MARKER
from memprof.sources.live.profiling import quiet_profiler_stderr
from memprof.sources.options import StatusFn
from memprof.sources.tracking import read_calls

SURVEY_ELEMENTS = 1 << 16
"""Each kind of call is first measured with its largest tensor at most this many elements."""

EXACT_ELEMENTS = 1 << 21
"""Calls whose largest tensor holds at most this many elements (8 MiB of float32) are measured
at their own size: exact."""

PROBE_ELEMENTS = 1 << 18
"""Larger calls are measured with their sizes capped so that no tensor exceeds this many
elements (1 MiB of float32), at two caps, and scaled."""

MIN_WORKSPACE = 512
"""Measured workspaces below this many bytes are not counted: calling an op from Python (as the
measurement does) boxes its number arguments into tensors of a few bytes, which the user's
call does not make."""


@dataclass(frozen=True)
class _TensorDesc:
    """A tensor of the fake run, as much of it as a measuring call needs."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class Fit:
    """Bytes of one call = ``slope`` x elements of its largest tensor + ``intercept``, at least 0."""

    slope: float
    intercept: float

    def bytes_at(self, elements: int) -> int:
        return max(0, round(self.slope * elements + self.intercept))


@dataclass(frozen=True)
class Measured:
    """A kind of call, measured: its workspace, and for each tensor it returns the bytes its
    storage holds beyond the tensor itself (``mse_loss``'s 0-dimensional result lives in a
    storage as large as its input)."""

    workspace: Fit
    outputs: tuple[Fit, ...]


@dataclass
class Slot:
    """An op call of the fake run whose kernel may allocate inside: the instants around its
    outputs where its workspace is live, its kind of call, the elements of its largest tensor,
    and its new outputs (position among the tensors it returns, index of their allocation in
    the records)."""

    key: Any
    kind: Any
    elements: int
    name: str
    scaled: bool = False
    alloc_ns: int = 0
    free_ns: int = 0
    outputs: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class _Case:
    """The first call of a kind: what is needed to make a smaller one."""

    func: Any
    spec: Any
    leaves: tuple[Any, ...]


_MEASURED: dict[Any, Measured | str] = {}
"""Per kind of call and shape: what was measured, or why it could not be. Shared by every
estimate of the process (a sweep measures each once)."""

_SURVEYED: dict[Any, Measured | str] = {}
"""Per kind of call (shapes aside): what the small measurement found."""

_VIEWS: dict[Any, bool] = {}


def _allocates(func: Any) -> bool:
    """Whether ``func``'s kernel may allocate: aten ops, not views."""
    found = _VIEWS.get(func)
    if found is None:
        schema = getattr(func, "_schema", None)
        found = (
            schema is not None
            and str(schema.name).startswith("aten::")
            and not any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
        )
        _VIEWS[func] = found
    return found


class Workspaces:
    """The op calls of one fake run whose kernels may allocate inside, and what was measured
    of them (see the module docstring)."""

    def __init__(self) -> None:
        self._slots: list[Slot] = []
        self._cases: dict[Any, _Case] = {}  # by kind and shape
        self._kinds: dict[Any, Any] = {}  # kind -> the key of its first call
        self._bytes: dict[str, int] = {}

    def slot(self, func: Any, args: Any, kwargs: Any, out: Any) -> Slot | None:
        """A slot for this call (its instants and outputs are set by the caller), or None."""
        if not _allocates(func):
            return None
        leaves, spec = tree_flatten((list(args), dict(kwargs)))
        kind_parts: list[Any] = [func]
        shapes: list[tuple[int, ...]] = []
        for value in leaves:
            if isinstance(value, torch.Tensor):
                kind_parts.append(_tensor_key(value))
                shapes.append(tuple(value.shape))
            elif isinstance(value, bool) or not isinstance(value, float | int):
                # Flags, dtypes, layouts: part of the kind; numbers (sizes, dims, scalars) not.
                kind_parts.append(value if _hashable(value) else type(value).__name__)
        if not shapes:
            return None  # factories allocate what they return
        kind = tuple(kind_parts)
        key = (kind, tuple(shapes))
        elements = max(math.prod(shape) for shape in shapes)
        for value in tree_leaves(out):
            if isinstance(value, torch.Tensor):
                elements = max(elements, value.numel())
        if key not in _MEASURED and key not in self._cases:
            self._cases[key] = _Case(func, spec, tuple(_describe(v) for v in leaves))
        self._kinds.setdefault(kind, key)
        slot = Slot(key=key, kind=kind, elements=elements, name=str(func._schema.name), scaled=scaled(shapes))
        self._slots.append(slot)
        return slot

    def resolve(
        self,
        add: Callable[[int, int, int], None],
        enlarge: Callable[[int, int], None],
        status: StatusFn | None = None,
    ) -> list[str]:
        """Measure the kinds of call not measured yet, then ``add(alloc_ns, free_ns, nbytes)``
        each call's workspace and ``enlarge(record, nbytes)`` the allocation of each output
        whose real storage is larger. Returns notes."""
        survey = [(kind, self._cases[key]) for kind, key in self._kinds.items() if kind not in _SURVEYED]
        if survey:
            if status:
                status(
                    f"measuring what {len(survey)} kind(s) of op call allocate inside, on small real tensors"
                )
            _SURVEYED.update(_measure(survey, _survey_cap))
        pending = [
            (key, case)
            for key, case in self._cases.items()
            if key not in _MEASURED and _allocates_inside(_SURVEYED.get(key[0]))
        ]
        if pending:
            if status:
                status(f"measuring {len(pending)} op call(s) that allocate inside, at their sizes")
            _MEASURED.update(_measure(pending, _caps))
        self._cases.clear()
        self._kinds.clear()
        for slot in self._slots:
            if not _allocates_inside(_SURVEYED.get(slot.kind)):
                continue
            measured = _MEASURED.get(slot.key)
            if not isinstance(measured, Measured):
                continue
            nbytes = measured.workspace.bytes_at(slot.elements)
            if nbytes > 0 and slot.free_ns > slot.alloc_ns:
                add(slot.alloc_ns, slot.free_ns, nbytes)
                self._bytes[slot.name] = max(self._bytes.get(slot.name, 0), nbytes)
            for position, record in slot.outputs:
                if position < len(measured.outputs):
                    extra = measured.outputs[position].bytes_at(slot.elements)
                    if extra > 0:
                        enlarge(record, extra)
        notes = []
        missing = self.unmeasured()
        if missing:
            notes.append(
                f"what {len(missing)} op(s) allocate inside could not be measured on small tensors "
                f"({_listed(missing)}): counted as nothing"
            )
        scaled_ops = self.scaled()
        if scaled_ops:
            notes.append(
                f"what {_listed(scaled_ops)} allocate(s) inside was measured on smaller tensors and "
                f"scaled (calls whose largest tensor exceeds {EXACT_ELEMENTS:,} elements): approximate"
            )
        return notes

    def summary(self) -> dict[str, int]:
        """Each op with a workspace, and its largest one in a call (bytes)."""
        return dict(sorted(self._bytes.items(), key=lambda item: -item[1]))

    def unmeasured(self) -> tuple[str, ...]:
        """The ops of this run that could not be measured."""
        names = {
            slot.name
            for slot in self._slots
            if isinstance(_SURVEYED.get(slot.kind), str) or isinstance(_MEASURED.get(slot.key), str)
        }
        return tuple(sorted(names))

    def scaled(self) -> tuple[str, ...]:
        """The ops of this run with a workspace measured smaller and scaled (approximate)."""
        names = {
            slot.name
            for slot in self._slots
            if slot.scaled
            and isinstance(_MEASURED.get(slot.key), Measured)
            and _allocates_inside(_SURVEYED[slot.kind])
        }
        return tuple(sorted(names))


def _listed(names: tuple[str, ...]) -> str:
    return ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")


def _allocates_inside(measured: Measured | str | None) -> bool:
    """Whether a small measurement found the kind allocating inside (or could not tell)."""
    if not isinstance(measured, Measured):
        return False
    return measured.workspace.bytes_at(1) > 0 or any(fit.bytes_at(1) > 0 for fit in measured.outputs)


def _tensor_key(tensor: torch.Tensor) -> tuple[Any, ...]:
    stride = tensor.stride()
    order = tuple(sorted(range(tensor.dim()), key=lambda i: (-stride[i], i)))
    return (tensor.dtype, tensor.dim(), order, tuple(s == 0 for s in stride))


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _describe(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return _TensorDesc(tuple(value.shape), tuple(value.stride()), value.dtype)
    return value


# ---- measuring --------------------------------------------------------------------------------


@dataclass
class _Probe:
    key: Any
    elements: int
    outputs: dict[int, int]  # storage address of each new output -> bytes beyond the tensor
    positions: list[int]  # the same outputs' positions among the returned tensors
    call: int  # index of its CALL_MARKER range in the profile


def _measure(
    pending: list[tuple[Any, _Case]], caps: Callable[[_Case], list[int]]
) -> dict[Any, Measured | str]:
    """Run each case at its ``caps`` under one profile; fit each."""
    found: dict[Any, Measured | str] = {}
    probes: list[_Probe] = []
    markers = [0]  # CALL_MARKER ranges entered so far
    # The autograd profiler, not torch.profiler's: the same records, and its first start does not
    # import torch._dynamo (seconds).
    notes: list[str] = []
    quiet = quiet_profiler_stderr(notes)
    with quiet, torch.no_grad(), profile(profile_memory=True, use_kineto=True) as prof:
        for key, case in pending:
            for cap in caps(case):
                try:
                    probes.append(_probe(key, case, cap, markers))
                except Exception as error:  # the op refuses such small or capped arguments
                    found[key] = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:120]}"
                    break
    allocations, calls = read_calls(prof, "cpu")
    points: dict[Any, dict[int, tuple[int, tuple[int, ...]]]] = {}
    for probe in probes:
        if probe.key in found:
            continue
        start, end = calls[probe.call]
        lo, hi = np.searchsorted(allocations.time, [start, end], side="left")
        live, returned = call_bytes(
            allocations.bytes[lo:hi].tolist(), allocations.ptr[lo:hi].tolist(), set(probe.outputs)
        )
        extra = [0] * (max(probe.positions, default=-1) + 1)
        for ptr, position in zip(probe.outputs, probe.positions, strict=True):
            extra[position] = probe.outputs[ptr]
        # Two caps may come to the same size (a cap of 1 and its half): the larger counts.
        seen = points.setdefault(probe.key, {}).get(probe.elements)
        workspace = live - returned
        if seen is not None:
            workspace = max(workspace, seen[0])
            extra = [max(a, b) for a, b in zip(extra, seen[1], strict=False)]
        points[probe.key][probe.elements] = (workspace, tuple(extra))
    for key, measured in points.items():
        if key not in found:
            found[key] = _fit_all([(n, w, extra) for n, (w, extra) in measured.items()])
    return found


def call_bytes(sizes: list[int], ptrs: list[int], outputs: set[int]) -> tuple[int, int]:
    """A call's allocation events (bytes, negative for a free; storage address), in order: its
    highest live bytes above its start, and the bytes of its outputs' allocations (those at an
    address in ``outputs`` still live at its end). An address freed inside the call can be
    handed out again for the output (oneDNN's convolution frees its reordered input, 8 MiB,
    and the allocator may give that block to the output of the same size): counting every
    allocation at the output's address would take the reorder for part of the output."""
    live = peak = 0
    held: dict[int, int] = {}  # address -> bytes, allocated inside the call and not freed yet
    for size, ptr in zip(sizes, ptrs, strict=True):
        live += size
        peak = max(peak, live)
        if size > 0:
            held[ptr] = size
        else:
            held.pop(ptr, None)
    return peak, sum(held.get(ptr, 0) for ptr in outputs)


def _fit_all(points: list[tuple[int, int, tuple[int, ...]]]) -> Measured:
    width = min(len(extra) for _, _, extra in points)
    return Measured(
        workspace=_fit([(n, w) for n, w, _ in points], MIN_WORKSPACE),
        outputs=tuple(_fit([(n, extra[i]) for n, _, extra in points], MIN_WORKSPACE) for i in range(width)),
    )


def _fit(points: list[tuple[int, int]], smallest: int) -> Fit:
    """The line through the two measurements (elements, bytes); a constant when they are at
    the same size or the line would fall with size (the larger measurement is kept); none
    when both are below ``smallest``."""
    (n1, w1), (n2, w2) = sorted(points)[0], sorted(points)[-1]
    if max(w1, w2) < smallest:
        return Fit(0.0, 0.0)
    if n1 == n2 or w2 <= w1:
        return Fit(0.0, float(max(w1, w2)))
    slope = (w2 - w1) / (n2 - n1)
    return Fit(slope, w2 - slope * n2)


def _survey_cap(case: _Case) -> list[int]:
    """One cap, the largest at which no tensor exceeds SURVEY_ELEMENTS elements."""
    return [_largest_cap(case, SURVEY_ELEMENTS)]


def _largest_cap(case: _Case, limit: int) -> int:
    shapes = [leaf.shape for leaf in case.leaves if isinstance(leaf, _TensorDesc)]
    largest = max((max(shape, default=1) for shape in shapes), default=1)

    def elements(cap: int) -> int:
        return max((math.prod(min(d, cap) for d in shape) for shape in shapes), default=1)

    low, high = 1, largest
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if elements(middle) <= limit else (low, middle - 1)
    return low


def _caps(case: _Case) -> list[int]:
    """The caps a kind of call is measured at: none that changes it (its own size) when its
    largest tensor holds at most EXACT_ELEMENTS elements; else the largest cap at which no
    tensor exceeds PROBE_ELEMENTS, and half of it."""
    shapes = [leaf.shape for leaf in case.leaves if isinstance(leaf, _TensorDesc)]
    if not scaled(shapes):
        return [max((max(shape, default=1) for shape in shapes), default=1)]
    cap = _largest_cap(case, PROBE_ELEMENTS)
    return [max(1, cap // 2), cap]


def scaled(case_shapes: list[tuple[int, ...]]) -> bool:
    """Whether a call with tensors of these shapes is measured smaller and scaled."""
    return max((math.prod(shape) for shape in case_shapes), default=0) > EXACT_ELEMENTS


def _probe(key: Any, case: _Case, cap: int, markers: list[int]) -> _Probe:
    leaves = [_capped(leaf, cap) for leaf in case.leaves]
    args, kwargs = tree_unflatten(leaves, case.spec)
    case.func(*args, **kwargs)  # warm-up: first-call caches (oneDNN primitives) are not a workspace
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    inputs = {t.untyped_storage().data_ptr() for t in tensors}
    index = markers[0]
    markers[0] += 1
    with record_function(CALL_MARKER):
        out = case.func(*args, **kwargs)
    returned = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
    outputs: dict[int, int] = {}
    positions: list[int] = []
    for position, tensor in enumerate(returned):
        ptr = tensor.untyped_storage().data_ptr()
        if ptr and ptr not in inputs and ptr not in outputs:
            outputs[ptr] = tensor.untyped_storage().nbytes() - _span_bytes(tensor)
            positions.append(position)
    elements = max(t.numel() for t in [*tensors, *returned])
    return _Probe(key, elements, outputs, positions, index)


def _span_bytes(tensor: torch.Tensor) -> int:
    """The bytes of storage ``tensor`` itself reaches (what a fresh tensor of its shape needs)."""
    if tensor.numel() == 0:
        return 0
    steps = zip(tensor.shape, tensor.stride(), strict=True)
    last = int(tensor.storage_offset()) + sum(int(n - 1) * int(s) for n, s in steps)
    return (last + 1) * tensor.element_size()


def _capped(leaf: Any, cap: int) -> Any:
    """A real tensor for a described one; every whole number above ``cap`` capped (sizes, and
    the other numbers that may be compared with them)."""
    if isinstance(leaf, _TensorDesc):
        return _small_tensor(leaf, cap)
    if isinstance(leaf, int) and not isinstance(leaf, bool) and leaf > cap:
        return cap
    return leaf


def _small_tensor(desc: _TensorDesc, cap: int) -> torch.Tensor:
    """A real tensor like ``desc`` with each size capped: same dtype, same order of strides
    (memory layout), broadcast dimensions kept broadcast. Floating values are 0.5 (no log or
    square root fails on it), integers 0 (a valid index anywhere), booleans alternate."""
    shape = [min(d, cap) for d in desc.shape]
    order = sorted(range(len(shape)), key=lambda i: (-desc.stride[i], i))
    base_shape = [1 if desc.stride[i] == 0 else shape[i] for i in order]
    dtype = desc.dtype
    if dtype.is_floating_point or dtype.is_complex:
        base = torch.full(base_shape, 0.5, dtype=dtype)
    elif dtype == torch.bool:
        base = (torch.arange(math.prod(base_shape)) % 2 == 0).reshape(base_shape)
    else:
        base = torch.zeros(base_shape, dtype=dtype)
    inverse = [order.index(i) for i in range(len(shape))]
    tensor = base.permute(inverse)
    return tensor.expand(shape) if any(s == 0 for s in desc.stride) else tensor
