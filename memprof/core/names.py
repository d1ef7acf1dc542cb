"""Op names: normalising volatile parts, and reading which aten ops a fused kernel replaced.

Pure string functions (no torch): the table parser, the diff and the reports use them on names
from any source.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from functools import cache

# `## Call CompiledFxGraph fvjsd5tv... ##`: the hash changes with the graph and the config.
_FX_GRAPH_RE = re.compile(r"^## Call CompiledFxGraph \S+ ##$")
# `Torch-Compiled Region: 0/0`: frame id / recompile counter.
_REGION_RE = re.compile(r"^Torch-Compiled Region: \d+/\d+$")
# Inductor prefixes kernels with the graph number when profiler marks are on: `graph_0_cpp_fused_…`.
_GRAPH_PREFIX_RE = re.compile(r"^graph_\d+_")
# `cpp_fused_abs_lt_sub_sum_unsqueeze_0`, `triton_poi_fused_add_mul_3`, `triton_red_fused_sum_0`.
_FUSED_RE = re.compile(r"^(?:cpp|triton_[a-z]+|cpu|halide)_fused_(?P<ops>.+?)(?:_\d+)?$")

MEMORY_ROW = "[memory]"

COMPILED_REGION = "[compiled region]"
"""The one op row that stands for the wrapper ranges around compiled code."""

WRAPPER_RANGES = frozenset(
    {
        "Torch-Compiled Region",
        "## Call CompiledFxGraph ##",
        "CompiledFunction",
        "CompiledFunctionBackward",
        "inductor_wrapper_call",
    }
)
"""Ranges torch.compile puts around compiled code (names normalised): collapsed into
:data:`COMPILED_REGION`."""

BOOKKEEPING_RANGES = frozenset(
    {"TorchDynamo Cache Lookup", "Pregraph bytecode", "AOTDispatcher Runtime Wrapper Prologue"}
)
"""Short ranges of torch.compile's own bookkeeping: folded into the op around them."""


def is_compiled_wrapper(name: str) -> bool:
    """Whether ``name`` (any spelling) is one of torch.compile's wrapper or bookkeeping ranges,
    or the row that stands for them."""
    normalized = normalize_name(name)
    return normalized in WRAPPER_RANGES or normalized in BOOKKEEPING_RANGES or name == COMPILED_REGION


def normalize_name(name: str) -> str:
    """Remove the parts of an op name that change between runs of the same code.

    ``## Call CompiledFxGraph <hash> ##`` -> ``## Call CompiledFxGraph ##``;
    ``Torch-Compiled Region: 0/1`` -> ``Torch-Compiled Region``;
    ``graph_0_cpp_fused_abs_sub_0`` -> ``cpp_fused_abs_sub_0``. Other names are unchanged.
    """
    if _FX_GRAPH_RE.match(name):
        return "## Call CompiledFxGraph ##"
    if _REGION_RE.match(name):
        return "Torch-Compiled Region"
    return _GRAPH_PREFIX_RE.sub("", name, count=1)


def is_fused_kernel(name: str) -> bool:
    """Whether ``name`` is an Inductor fused kernel (``cpp_fused_…``, ``triton_poi_fused_…``)."""
    return _FUSED_RE.match(normalize_name(name)) is not None


def fused_kernel_ops(name: str, vocabulary: Collection[str] = ()) -> list[str]:
    """The aten ops a fused kernel's name lists, as ``aten::<op>`` names.

    Inductor names kernels after the sorted aten ops they fuse, joined by ``_`` — and aten op
    names contain ``_`` too (``native_layer_norm``). With a ``vocabulary`` of aten op names the
    parts are split into the fewest known names (``cpp_fused__to_copy_add_0`` -> ``_to_copy``,
    ``add``); without one, or where no split fits, every ``_``-separated word is an op.
    Returns ``[]`` for a name that is not a fused kernel.
    """
    match = _FUSED_RE.match(normalize_name(name))
    if match is None:
        return []
    words = tuple(match.group("ops").split("_"))
    vocab = frozenset(vocabulary)
    parts = _segment(words, vocab) if vocab else None
    if parts is None:
        parts = [w for w in words if w]
    return [f"aten::{part}" for part in parts]


def aten_names(names: Iterable[str]) -> frozenset[str]:
    """The aten op names among ``names``, without ``aten::`` and overload: ``aten::add.Tensor`` ->
    ``add``. A vocabulary for :func:`fused_kernel_ops`."""
    return frozenset(n.split("::", 1)[1].split(".", 1)[0] for n in names if n.startswith("aten::"))


def fused_kernels(names: Iterable[str], vocabulary: Collection[str] = ()) -> dict[str, tuple[str, ...]]:
    """``{kernel: aten ops it lists}`` for the fused kernels among ``names`` (see
    :func:`fused_kernel_ops`), in the order of ``names``."""
    vocab = frozenset(vocabulary)
    return {name: tuple(fused_kernel_ops(name, vocab)) for name in names if is_fused_kernel(name)}


def _segment(words: tuple[str, ...], vocab: frozenset[str]) -> list[str] | None:
    """Split ``words`` into the fewest runs each of which, joined by ``_``, is in ``vocab``."""

    @cache
    def best(start: int) -> tuple[str, ...] | None:
        if start == len(words):
            return ()
        found: tuple[str, ...] | None = None
        for end in range(len(words), start, -1):
            candidate = "_".join(words[start:end])
            if candidate in vocab:
                rest = best(end)
                if rest is not None and (found is None or len(rest) + 1 < len(found)):
                    found = (candidate, *rest)
        return found

    result = best(0)
    return list(result) if result is not None else None
