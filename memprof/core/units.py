"""Sizes, times and percentages: parsing what users and torch write, formatting what we print.

torch prints memory with 1024-based units (``244.14 MB`` = 256,000,000 B) and so do we:
``KB``/``MB``/``GB``/``TB`` are 1024-based here, and ``KiB``/``MiB``/``GiB``/``TiB`` mean the same.
"""

from __future__ import annotations

import math
import re

from memprof.core.errors import UsageError, brief

_UNIT_BYTES: dict[str, int] = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
    "tib": 1024**4,
}

_SIZE_RE = re.compile(r"^\s*(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")

SIZE_EXAMPLE = "'800MB', '800 MB', '1.5GiB' or '123456' (bytes)"


def parse_size(text: str) -> int:
    """Parse a user-written size such as ``800MB``, ``1.5 GiB`` or ``123456`` into bytes.

    Units are case-insensitive and 1024-based. Raises :class:`UsageError` naming a good example.
    """
    match = _SIZE_RE.match(text) if isinstance(text, str) else None
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNIT_BYTES:
        raise UsageError(f"not a size: {brief(text)}; write it like {SIZE_EXAMPLE}")
    value = float(match.group(1)) * _UNIT_BYTES[unit]
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"not a size: {brief(text)}; a size is a non-negative number like {SIZE_EXAMPLE}")
    if _UNIT_BYTES[unit] == 1 and not value.is_integer():
        raise UsageError(
            f"not a size: {brief(text)} is a fraction of a byte; give whole bytes, or a unit like "
            f"{SIZE_EXAMPLE}"
        )
    return round(value)


# torch >= 2.5 prints B/KB/MB/GB; older releases printed b/Kb/Mb/Gb. Case matters there
# only to tell the spellings apart, both mean 1024-based bytes.
# The grammar of torch's table cells, shared with the table parser's whole-column fast path.
TORCH_NUMBER = r"(-?\d+(?:\.\d+)?)"
TORCH_MEMORY_UNITS = "B|KB|MB|GB|TB|b|Kb|Mb|Gb|Tb"
TORCH_TIME_UNITS = "us|ms|s"
TIME_SCALE_US = {"us": 1.0, "ms": 1e3, "s": 1e6}

_TORCH_MEM_RE = re.compile(rf"^{TORCH_NUMBER}(?:\s*({TORCH_MEMORY_UNITS}))?$")


def torch_unit_bytes(unit: str) -> int:
    """Bytes in one torch memory unit of any release (``MB``/``Mb`` -> 1048576; ``""`` -> 1)."""
    return _UNIT_BYTES[unit.lower()]


def parse_torch_memory(text: str) -> int | None:
    """Parse a memory cell of torch's profiler table (``-486.37 MB``, ``40 B``, ``1.2 Gb``).

    Returns integer bytes (rounded: the table keeps two decimals), or ``None`` when the text is
    not a torch memory value.
    """
    match = _TORCH_MEM_RE.match(text.strip())
    if match is None:
        return None
    return round(float(match.group(1)) * torch_unit_bytes(match.group(2) or ""))


def format_torch_memory(nbytes: int) -> str:
    """Format bytes exactly as torch's profiler table does (``244.14 MB``, ``-40 B``)."""
    kb, mb, gb = 1024, 1024**2, 1024**3
    if abs(nbytes) >= gb:
        return f"{nbytes / gb:.2f} GB"
    if abs(nbytes) >= mb:
        return f"{nbytes / mb:.2f} MB"
    if abs(nbytes) >= kb:
        return f"{nbytes / kb:.2f} KB"
    return f"{nbytes} B"


def format_bytes(nbytes: float | int | None, *, signed: bool = False) -> str:
    """Human size with binary units for people: ``795.4 MiB``, ``1.9 KiB``, ``40 B``.

    ``signed`` puts ``+`` in front of positive values (for deltas).
    """
    if nbytes is None or (isinstance(nbytes, float) and math.isnan(nbytes)):
        return "-"
    sign = "-" if nbytes < 0 else ("+" if signed and nbytes > 0 else "")
    size = abs(nbytes)
    for unit, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{sign}{size / scale:.1f} {unit}"
    return f"{sign}{int(size)} B"


_PCT_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*$")

PERCENT_EXAMPLE = "'5%' or '5' (five percent), '0.5%'"


def parse_percent(text: str) -> float:
    """Parse a tolerance such as ``5%`` or ``5`` into a fraction (0.05)."""
    match = _PCT_RE.match(text) if isinstance(text, str) else None
    if match is None:
        raise UsageError(f"not a percentage: {brief(text)}; write it like {PERCENT_EXAMPLE}")
    value = float(match.group(1))
    if not math.isfinite(value):  # 400 nines parse as infinity
        raise UsageError(f"not a percentage: {brief(text)} is too large; write it like {PERCENT_EXAMPLE}")
    return value / 100.0


def format_percent(fraction: float | None, *, signed: bool = True) -> str:
    """``-0.9976`` -> ``-99.8%``."""
    if fraction is None or math.isnan(fraction) or math.isinf(fraction):
        return "-"
    return f"{fraction * 100:+.1f}%" if signed else f"{fraction * 100:.1f}%"


def json_float(value: float | None) -> float | None:
    """A float for JSON (which has no NaN or infinity): rounded to 6 decimals, None if unknown."""
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), 6)


def format_ms(value: float | None) -> str:
    """A duration in milliseconds for people: ``311.5 ms``, ``18 us``; ``-`` when unknown."""
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.1f} ms" if value >= 1 else f"{value * 1000:.0f} us"


def format_seconds(value: float | None) -> str:
    """``1.6 s``; ``-`` when unknown (e.g. the compile time of an eager run)."""
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.1f} s"


_TIME_RE = re.compile(rf"^{TORCH_NUMBER}\s*({TORCH_TIME_UNITS})$")


def parse_torch_time_us(text: str) -> float | None:
    """Parse torch's table time (``886.017ms``, ``4.679us``, ``1.234s``) into microseconds."""
    match = _TIME_RE.match(text.strip())
    if match is None:
        return None
    return float(match.group(1)) * TIME_SCALE_US[match.group(2)]
