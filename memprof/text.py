"""Text from files and user code, made safe to show to people.

Names in a report (ops, ``record_function`` labels, run labels, notes) come from the profiled
code or from a file anyone may have edited. Shown raw, a bidirectional control (U+202E) can make
a name read backwards, a zero-width space can make two different names look the same, and an
ANSI escape sequence can recolour or rewrite the terminal. Every renderer for people (terminal,
Markdown, HTML) shows such characters escaped, as Python writes them (``\\u202e``, ``\\x1b``);
CSV and JSON keep the exact text, since they are data.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def _escaped(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, keep: str = "\n") -> str:
    """``text`` with every character that is not printable (controls, format characters such
    as bidirectional overrides and zero-width spaces, separators other than the space,
    surrogates) written as its escape, ``\\u202e``; characters in ``keep`` stay as they are."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() or char in keep else _escaped(char) for char in text)


def tabulate(rows: Iterable[Sequence[Any]], headers: Sequence[str] = (), **options: Any) -> str:
    """``tabulate.tabulate`` with every text cell and header passed through :func:`visible`
    first: escaped before the table is laid out, a carriage return or a line separator in a
    name cannot split its row, and the columns stay aligned."""
    from tabulate import tabulate as lay_out

    cells = [[visible(cell) if isinstance(cell, str) else cell for cell in row] for row in rows]
    return str(lay_out(cells, headers=[visible(header) for header in headers], **options))
