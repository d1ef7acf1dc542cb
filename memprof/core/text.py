"""Text from files and user code, made safe to show to people.

Names in a report (ops, ``record_function`` labels, run labels, notes) come from the profiled
code or from a file anyone may have edited. Shown raw, a bidirectional control (U+202E) can make
a name read backwards, a zero-width space can make two different names look the same, and an
ANSI escape sequence can recolour or rewrite the terminal. Every renderer for people (terminal,
Markdown, HTML) shows such characters escaped, as Python writes them (``\\u202e``, ``\\x1b``);
JSON keeps the exact text, since it is data; so does CSV, except that a cell a spreadsheet
would evaluate as a formula (one starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return) gets a leading ``'`` (:func:`spreadsheet_safe`), unless exact text is asked for.

A line that quotes such text (a gate's verdict, an error) must stay one line, or a newline in
a run label could print a fake ``memprof gate: passed`` before the real verdict: :func:`one_line`
escapes line breaks too, and cuts the text to :data:`QUOTE_LIMIT` characters, so that a 50 MB
string in a file gives a short message rather than a 50 MB one.
"""

from __future__ import annotations

import hashlib
import html
import re


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


QUOTE_LIMIT = 200
"""The most characters of a text from an input that one line of memprof's output quotes."""


def one_line(text: object, limit: int = QUOTE_LIMIT) -> str:
    """``text`` as one short line: :func:`visible` with line breaks escaped too (``\\n``), cut
    to ``limit`` characters followed by ``…`` when longer. Only the first ``limit`` characters
    are looked at, so a huge text costs no more than a short one."""
    text = str(text)
    shown = visible(text[:limit], keep="")
    if len(shown) <= limit and len(text) <= limit:
        return shown
    return shown[:limit] + "…"


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet (Excel, LibreOffice, Google Sheets) takes a cell starting with for a formula."""


def spreadsheet_safe(text: str) -> str:
    """A CSV cell's text that no spreadsheet evaluates: OWASP's advice for CSV injection, a
    leading ``'`` before text that starts as a formula does (``=HYPERLINK(...)``, ``@SUM(...)``,
    ``-2+3``); a spreadsheet shows the text without the quote. Other text, and a plain number
    (``-8``, ``+1.5e3``: a spreadsheet reads it as that number), is unchanged."""
    if not text.startswith(FORMULA_STARTS) or _PLAIN_NUMBER.fullmatch(text):
        return text
    return "'" + text


_PLAIN_NUMBER = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")


NAME_LIMIT = 1000
"""The longest op name, range label or frame text memprof keeps from a recording, in characters.
A longer one keeps its first 1,000 characters, then ``…#`` and 8 hex digits of a hash of the
whole name, so that two long names that start alike stay two names."""


def capped_name(name: str, limit: int = NAME_LIMIT) -> str:
    """``name``, or its first ``limit`` characters and a hash of all of it (see :data:`NAME_LIMIT`)."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[:limit]}…#{digest}"


def html_text(value: object) -> str:
    """``value`` as HTML text or an attribute's value: :func:`visible`, then ``<``, ``>``, ``&``
    and quotes escaped."""
    return html.escape(visible(str(value)), quote=True)
