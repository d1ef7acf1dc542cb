"""Equal names, equal integer codes: the grouping every op table starts from. Pure Python and
numpy (a run's analysis imports no pandas: it costs a quarter of a second to import)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def factorize(values: Sequence[Any] | np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """``(codes, uniques)``: each value's position in ``uniques``, the distinct values in order
    of first appearance (what ``pandas.factorize`` gives for hashable values)."""
    index: dict[Any, int] = {}
    add = index.setdefault
    codes = np.fromiter((add(value, len(index)) for value in values), dtype=np.int64, count=len(values))
    return codes, list(index)


def name_codes(
    op_name: np.ndarray, op_code: np.ndarray | None, code_names: Sequence[str]
) -> tuple[np.ndarray, list[str]]:
    """The ops' names as codes and the distinct names: from the reader's interned codes when
    it kept them (``op_code`` into ``code_names``; only the names used, in order of first
    appearance), else by hashing the names."""
    if op_code is None or not len(code_names):
        return factorize(op_name)
    used, codes = np.unique(op_code, return_inverse=True)
    first = np.full(len(used), len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes)))
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes].astype(np.int64), [code_names[int(c)] for c in used[order]]
