"""Each C++ kernel of a compiled graph in a profiler range of its own, opened from the graph's
Python wrapper while memprof tracks a compiled run: how a kernel's buffers are tied to it, as
Inductor ties a Triton kernel's by the range it opens at each launch.

Inductor's own way, ``cpp.enable_kernel_profile``, compiles the range into each kernel's C++
source: a heavier header per kernel file (a cold compile's C++ took about a quarter longer) and
other kernels than the user's own compile makes. Wrapped from Python, memprof's compile and the
user's generate and cache the same kernels."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from types import BuiltinFunctionType
from typing import Any

import torch  # noqa: TID253 - the torch side of tracking

CPP_KERNEL = re.compile(r"^(cpp_|kernel_cpp_)\w+$")
"""A C++ kernel in a compiled graph's Python wrapper (``cpp_fused_gelu_0``; without
descriptive names, ``kernel_cpp_0``)."""


def mark_kernels(graph: Any, stack: contextlib.ExitStack) -> bool:
    """Wrap each C++ kernel bound in ``graph``'s Python wrapper module in a profiler range of
    its name (``graph_N_`` before it, as Inductor names its own), put back when ``stack``
    closes. False when the graph's module is not loaded yet (it is by its first call); True
    once done, or when there is nothing to wrap (a C++ wrapper)."""
    if getattr(graph, "current_callable", None) is None:
        return False
    if (namespace := _wrapper_namespace(graph)) is None:
        return True
    graph_id = (getattr(graph, "fx_kwargs", None) or {}).get("graph_id")
    prefix = f"graph_{graph_id}_" if isinstance(graph_id, int) else ""
    for name, kernel in list(namespace.items()):
        if CPP_KERNEL.match(name) and isinstance(kernel, BuiltinFunctionType):
            namespace[name] = _ranged(prefix + name, kernel)
            stack.callback(namespace.__setitem__, name, kernel)
    return True


def _wrapper_namespace(graph: Any) -> dict[str, Any] | None:
    """The globals of a compiled graph's Python wrapper module, where its kernels are bound
    (None: no such module, as with the C++ wrapper)."""
    key = getattr(graph, "cache_key", None)
    with contextlib.suppress(ImportError, AttributeError):
        from torch._inductor.codecache import PyCodeCache

        for module in reversed(PyCodeCache.modules):
            if key and module.__name__.rpartition(".")[2] == key:
                return vars(module)
    namespace = getattr(getattr(graph, "current_callable", None), "__globals__", None)
    return namespace if isinstance(namespace, dict) and "call" in namespace else None


def _ranged(name: str, kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel`` in a profiler range named ``name`` while a profiler records."""
    profiler = torch.autograd.profiler
    record = getattr(torch._C._profiler, "_RecordFunctionFast", None) or torch.profiler.record_function

    def ranged(*args: Any) -> Any:
        if profiler._is_profiler_enabled:
            with record(name):
                return kernel(*args)
        return kernel(*args)

    return ranged
