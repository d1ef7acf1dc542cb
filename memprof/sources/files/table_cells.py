"""The cells of a torch profiler table, converted (:mod:`memprof.sources.files.table` finds the table and cuts
its rows): whole numbers, sizes, times, percentages and floats as torch prints them, each
column at once with numpy where every cell matches, else cell by cell with the positions of
the cells that do not."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from memprof.core.units import (
    TIME_SCALE_US,
    TORCH_MEMORY_UNITS,
    TORCH_NUMBER,
    TORCH_TIME_UNITS,
    parse_torch_memory,
    parse_torch_time_us,
    torch_unit_bytes,
)

INT_RE = re.compile(r"^\s*-?\d{1,18}\s*$")


FLOAT_RE = re.compile(r"^\s*-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*$")


PCT_RE = re.compile(r"^\s*(-?(?:\d+(?:\.\d*)?|\.\d+))%?\s*$")


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


NAME, STR, SRC, INT, BYTES, US, PCT, FLOAT = (
    "name",
    "str",
    "source",
    "int",
    "bytes",
    "us",
    "pct",
    "float",
)


EXPECTED = {
    INT: "a whole number",
    BYTES: "a size like '244.14 MB', '-1.00 KB' or '40 B'",
    US: "a time like '12.345us', '1.234ms' or '1.000s'",
    PCT: "a percentage like '12.34%' or 'NaN'",
    FLOAT: "a number or '--'",
}


def to_int(text: str) -> int | None:
    return int(text) if INT_RE.match(text) else None


def to_bytes(text: str) -> int | None:
    try:
        value = parse_torch_memory(text)
    except (OverflowError, ValueError):
        return None
    if value is None or not INT64_MIN <= value <= INT64_MAX:
        return None
    return value


def to_pct(text: str) -> float | None:
    stripped = text.strip()
    if stripped == "NaN":
        return math.nan
    match = PCT_RE.match(stripped)
    return float(match.group(1)) if match else None


def to_float(text: str) -> float | None:
    stripped = text.strip()
    if stripped == "--":
        return math.nan
    return float(stripped) if FLOAT_RE.match(stripped) else None


CONVERTERS: dict[str, Callable[[str], Any]] = {
    INT: to_int,
    BYTES: to_bytes,
    US: parse_torch_time_us,
    PCT: to_pct,
    FLOAT: to_float,
}


def convert(raw: list[str], kind: str) -> tuple[list[Any], list[int]]:
    """Convert one column's cells; return the values and the positions of bad cells."""
    parse = CONVERTERS[kind]
    memo: dict[str, Any] = {}
    values: list[Any] = []
    bad: list[int] = []
    append = values.append
    for k, text in enumerate(raw):
        value = memo.get(text)
        if value is None:
            value = parse(text)
            if value is None:
                bad.append(k)
                append(0)
                continue
            memo[text] = value
        append(value)
    return values, bad


FAST_RE = {
    US: re.compile(rf"^ *{TORCH_NUMBER}({TORCH_TIME_UNITS}) *$", re.MULTILINE),
    BYTES: re.compile(rf"^ *{TORCH_NUMBER}(?: *({TORCH_MEMORY_UNITS}))? *$", re.MULTILINE),
    PCT: re.compile(r"^ *(-?\d+(?:\.\d+)?|NaN)%? *$", re.MULTILINE),
    INT: re.compile(r"^ *(-?\d{1,18}) *$", re.MULTILINE),
}


def convert_fast(raw: list[str], kind: str) -> Any:
    """The column as a numpy array, or None when some cell needs a closer look."""
    import numpy as np

    pattern = FAST_RE.get(kind)
    if pattern is None or not raw:
        return None
    found = pattern.findall("\n".join(raw))
    if len(found) != len(raw):  # each line matches at most once: all matched iff counts agree
        return None
    if kind == INT:
        return np.array(found, dtype=np.int64)
    if kind == PCT:
        return np.array(found, dtype=np.float64)
    values = np.array([number for number, _ in found], dtype=np.float64)
    scale_of: Callable[[str], float] = TIME_SCALE_US.__getitem__ if kind == US else torch_unit_bytes
    values *= np.array([scale_of(unit) for _, unit in found], dtype=np.float64)
    if kind == US:
        return values
    values = np.rint(values)
    if not np.all(np.abs(values) < 2.0**63):  # also catches inf and nan
        return None
    return values.astype(np.int64)
