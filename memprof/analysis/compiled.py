"""Compiled code as the op tables show it.

torch.compile wraps compiled code in several nested profiler ranges (``Torch-Compiled Region``,
``## Call CompiledFxGraph ##``, ``CompiledFunction``, ``CompiledFunctionBackward``, Inductor's
``inductor_wrapper_call``), each with the same numbers, plus short bookkeeping ranges
(``TorchDynamo Cache Lookup``, ``Pregraph bytecode``, ``AOTDispatcher Runtime Wrapper
Prologue``). And Inductor's wrapper allocates each kernel's output buffers just before calling
the kernel, outside the kernel's own range, so by the records alone every fused kernel
allocates 0 B.

:func:`compiled_view` rewrites the op intervals before the per-op analysis: the outermost
wrapper range of each nest becomes one op, :data:`COMPILED_REGION`; the inner ones and the
bookkeeping ranges are dropped (what they held goes to their parent); and each op the wrapper
calls (fused kernels, extern kernels such as ``aten::mm``) starts at the first allocation
after the previous one ended, so it owns the buffers it produces. The same rule places
buffers on kernels in the attribution (:mod:`memprof.analysis.attribution`).

Pure: numpy, no torch.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from memprof.analysis.codes import name_codes
from memprof.analysis.nesting import _parents
from memprof.core.names import BOOKKEEPING_RANGES, COMPILED_REGION, WRAPPER_RANGES, normalize_name
from memprof.core.records import RawProfile

_WRAPPER_CALL = "inductor_wrapper_call"


def compiled_view(raw: RawProfile) -> RawProfile:
    """``raw`` with torch.compile's wrapper ranges collapsed and kernels given the buffers they
    produce (see the module docstring); ``raw`` itself when it has no compiled code."""
    count = len(raw.op_name)
    if not count:
        return raw
    codes, uniques = name_codes(raw.op_name, raw.op_code, raw.op_code_names)
    normalized = np.array([normalize_name(str(name)) for name in uniques], dtype=object)
    wrapper = np.isin(normalized, list(WRAPPER_RANGES))[codes]
    bookkeeping = np.isin(normalized, list(BOOKKEEPING_RANGES))[codes]
    if not (wrapper.any() or bookkeeping.any()):
        return raw
    parent, _ = _parents(raw)
    calls = (normalized == _WRAPPER_CALL)[codes]
    start = _kernel_starts(raw, parent, calls)
    keep = ~bookkeeping & ~(wrapper & _has_ancestor(parent, wrapper))
    names = raw.op_name.copy()
    names[wrapper] = COMPILED_REGION
    return replace(
        raw,
        op_name=names[keep],
        op_start=start[keep],
        op_end=raw.op_end[keep],
        op_thread=raw.op_thread[keep],
        op_async=raw.op_async[keep],
        op_code=None,  # the names changed (wrappers renamed): the reader's codes no longer hold
        op_code_names=(),
    )


def _kernel_starts(raw: RawProfile, parent: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """Op starts, those of ops a wrapper call runs moved back to the first allocation after
    the previous op of that call ended (or after the call began)."""
    start = raw.op_start.copy()
    inside = np.flatnonzero((parent >= 0) & calls[np.maximum(parent, 0)] & ~raw.op_async)
    if not len(inside) or not len(raw.mem_time):
        return start
    inside = inside[np.lexsort((raw.op_start[inside], parent[inside]))]
    owner = parent[inside]
    first = np.concatenate(([True], owner[1:] != owner[:-1]))
    previous_end = np.where(first, raw.op_start[owner], np.concatenate(([0], raw.op_end[inside][:-1])))
    order = np.argsort(raw.mem_time, kind="stable")
    times, sizes = raw.mem_time[order], raw.mem_bytes[order]
    # next_allocation[i]: the first record at or after i that allocates (len(times) if none).
    positions = np.where(sizes > 0, np.arange(len(times)), len(times))
    next_allocation = np.append(np.minimum.accumulate(positions[::-1])[::-1], len(times))
    found = next_allocation[np.searchsorted(times, previous_end, side="right")]
    at = times[np.minimum(found, len(times) - 1)]
    moved = (found < len(times)) & (at < raw.op_start[inside])
    start[inside[moved]] = at[moved]
    return start


def _has_ancestor(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """Whether each op has a marked op among its ancestors."""
    found = np.zeros(len(parent), dtype=bool)
    ids = np.flatnonzero(marked)
    ancestor = parent[ids]
    while len(ids):
        live = ancestor >= 0
        ids, ancestor = ids[live], ancestor[live]
        hit = marked[ancestor]
        found[ids[hit]] = True
        ids, ancestor = ids[~hit], parent[ancestor[~hit]]
    return found
