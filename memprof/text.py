"""Text from files and user code, made safe to show to people.

Names in a report (ops, ``record_function`` labels, run labels, notes) come from the profiled
code or from a file anyone may have edited. Shown raw, a bidirectional control (U+202E) can make
a name read backwards, a zero-width space can make two different names look the same, and an
ANSI escape sequence can recolour or rewrite the terminal. Every renderer for people (terminal,
Markdown, HTML) shows such characters escaped, as Python writes them (``\\u202e``, ``\\x1b``);
CSV and JSON keep the exact text, since they are data.
"""

from __future__ import annotations

import html


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


def html_text(value: object) -> str:
    """``value`` as HTML text or an attribute's value: :func:`visible`, then ``<``, ``>``, ``&``
    and quotes escaped."""
    return html.escape(visible(str(value)), quote=True)
