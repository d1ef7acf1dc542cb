"""Whose code a frame is, and the statement behind a (file, line).

Every frame of a Python stack is one of five kinds (:func:`frame_kind`):

- ``user``: the user's own files (outside every installed package): a script, a project
  folder, a notebook cell (``<ipython-input-...>``), code given to ``exec``;
- ``library``: installed packages: files under a site directory (``site-packages``,
  ``dist-packages``: the interpreter's, a virtual environment's, a conda environment's, the
  user site), and files of a distribution installed in editable mode whose folder does not hold
  the working directory (someone else's project, installed with ``pip install -e``);
- ``stdlib``: the standard library (its folder less the site directories inside it:
  on a system or conda Python, ``site-packages`` lies inside the stdlib folder), frozen modules;
- ``torch``: torch itself and the code it generates (FX's ``<eval_with_key>``, Inductor's);
- ``memprof``: memprof, except its examples (user code, as a user's would be).

An entry's ``source`` is the innermost frame that is ``user`` or ``library`` code (a line of
``modeling_gpt2.py`` when the tensor was made there); its ``user_source`` the innermost ``user``
frame (the user's line that called into the library).
"""

from __future__ import annotations

import ast
import functools
import io
import linecache
import os
import site
import sys
import sysconfig
import tokenize
from collections.abc import Iterable

import torch  # noqa: TID253 - the torch side of tracking

from memprof.core.records import Site

USER, LIBRARY, STDLIB, TORCH, MEMPROF = "user", "library", "stdlib", "torch", "memprof"
KINDS = (USER, LIBRARY, STDLIB, TORCH, MEMPROF)


def _directory(path: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(path)), "")


def _folder(path: str) -> str:
    return os.path.join(os.path.abspath(path), "")


_TORCH_DIR = _directory(torch.__file__)
# This file is memprof/sources/tracking/lines.py: memprof is three folders up.
_MEMPROF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "")
_EXAMPLES_DIR = os.path.join(_MEMPROF_DIR, "examples", "")


@functools.cache
def site_dirs() -> tuple[str, ...]:
    """Where installed packages live: the interpreter's and the environment's site
    directories, the user site, and every ``site-packages``/``dist-packages`` folder on
    ``sys.path`` (Debian's, a conda environment's). Longest first."""
    found: set[str] = set()
    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        if paths.get(key):
            found.add(_folder(paths[key]))
    try:
        found.update(_folder(p) for p in site.getsitepackages())
    except AttributeError:  # pragma: no cover - some embedded interpreters lack it
        pass
    user_site = getattr(site, "USER_SITE", None) or ""
    if user_site:
        found.add(_folder(user_site))
    for entry in sys.path:
        name = os.path.basename(os.path.normpath(entry)) if entry else ""
        if name in ("site-packages", "dist-packages"):
            found.add(_folder(entry))
    return tuple(sorted(found, key=len, reverse=True))


@functools.cache
def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({_folder(paths[key]) for key in ("stdlib", "platstdlib") if paths.get(key)})


@functools.cache
def _editable_roots() -> tuple[str, ...]:
    """Folders of distributions installed in editable mode (their ``direct_url.json``), except
    those holding the working directory: the user's own project is user code."""
    import importlib.metadata
    import json
    from urllib.parse import unquote, urlparse

    cwd = _folder(os.getcwd())
    roots: set[str] = set()
    try:
        distributions = list(importlib.metadata.distributions())
    except Exception:  # pragma: no cover - broken metadata of some package
        return ()
    for distribution in distributions:
        try:
            text = distribution.read_text("direct_url.json")
            data = json.loads(text) if text else None
        except Exception:
            continue
        if not isinstance(data, dict) or not (data.get("dir_info") or {}).get("editable"):
            continue
        url = urlparse(str(data.get("url", "")))
        if url.scheme != "file":
            continue
        root = _folder(unquote(url.path))
        if not cwd.startswith(root) and not root.startswith(_MEMPROF_DIR):
            roots.add(root)
    return tuple(sorted(roots, key=len, reverse=True))


def _generated_dirs() -> tuple[str, ...]:
    """Where Inductor writes the code it generates (only known once it is imported)."""
    module = sys.modules.get("torch._inductor.runtime.cache_dir_utils")
    if module is None:
        return ()
    try:
        return (_folder(module.cache_dir()),)
    except Exception:  # pragma: no cover - private helper moved
        return ()


@functools.lru_cache(maxsize=65536)
def frame_kind(filename: str) -> str:
    """Whose code ``filename`` is: ``user``, ``library``, ``stdlib``, ``torch`` or ``memprof``
    (see the module docstring)."""
    if filename.startswith("<"):
        if filename.startswith("<frozen"):
            return STDLIB
        if filename.startswith("<eval_with_key>"):
            return TORCH
        return USER
    path = os.path.abspath(filename)
    if path.startswith(_EXAMPLES_DIR):
        return USER
    if path.startswith(_MEMPROF_DIR):
        return MEMPROF
    if path.startswith(_TORCH_DIR) or path.startswith(_generated_dirs()):
        return TORCH
    for folder in site_dirs():
        if path.startswith(folder):
            return LIBRARY
    if path.startswith(_stdlib_dirs()):
        return STDLIB
    if path.startswith(_editable_roots()):
        return LIBRARY
    return USER


def is_user_file(filename: str) -> bool:
    """Whether code in ``filename`` is the user's own (outside every installed package, torch,
    memprof and the standard library; memprof's examples count as the user's)."""
    return frame_kind(filename) == USER


def is_source_file(filename: str) -> bool:
    """Whether a line of ``filename`` is shown as a source: the user's code or a library's."""
    return frame_kind(filename) in (USER, LIBRARY)


def shown_path(filename: str) -> str:
    """The file as a report shows it: a library's relative to its site directory
    (``transformers/models/gpt2/modeling_gpt2.py``, also when the environment lies inside the
    project, as ``.venv`` often does), else relative to the working directory when inside it,
    else as given."""
    if filename.startswith("<"):
        return filename
    path = os.path.abspath(filename)
    for folder in site_dirs():
        if path.startswith(folder):
            return path[len(folder) :]
    cwd = _folder(os.getcwd())
    if path.startswith(cwd):
        return os.path.relpath(path, cwd)
    return filename


def resolve_sites(lines: Iterable[tuple[str, int]]) -> tuple[Site, ...]:
    """Each (file, line) as the statement that covers it."""
    resolved: list[Site] = []
    files: dict[str, _Source] = {}
    for filename, line in lines:
        source = files.get(filename)
        if source is None:
            source = files[filename] = _Source(filename)
        first, text = source.statement_at(line)
        if not text:
            text = linecache.getline(filename, line).strip()
        resolved.append(Site(file=shown_path(filename), line=first, text=text[:200]))
    return tuple(resolved)


def nothing_between(pairs: Iterable[tuple[tuple[str, int], tuple[str, int]]]) -> list[bool]:
    """For each (earlier, later) pair of (file, line): whether both lie in one file, the later
    below the earlier, and no statement (a ``def`` or ``class`` header aside) starts between the
    statements covering them: code that ran between them ran on the later one."""
    files: dict[str, _Source] = {}
    found = []
    for (file, line), (later_file, later_line) in pairs:
        source = files.get(file)
        if source is None:
            source = files[file] = _Source(file)
        first, last = source.statement_at(line)[0], source.statement_at(later_line)[0]
        found.append(
            file == later_file
            and first < last <= first + _NEAR
            and not any(source.starts_statement(n) for n in range(first + 1, last))
        )
    return found


_NEAR = 200
"""Lines: statements further apart are not looked between."""


class _Source:
    """A file's statements, parsed once; the statement covering a line found by descending the
    syntax tree (library files run to thousands of lines: nothing is done per statement)."""

    def __init__(self, filename: str) -> None:
        self.lines = linecache.getlines(filename)
        try:
            self.tree: ast.AST | None = ast.parse("".join(self.lines))
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            self.tree = None

    def statement_at(self, line: int) -> tuple[int, str]:
        """First line and text (on one line, comments left out) of the innermost statement
        covering ``line``; compound statements (if, for, with, def) only with their header;
        (line, "") if none."""
        best: ast.stmt | None = None
        nodes = list(ast.iter_child_nodes(self.tree)) if self.tree is not None else []
        while nodes:
            inside = next(
                (
                    node
                    for node in nodes
                    if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno)
                ),
                None,
            )
            if inside is None:
                # Statements nest in statements through their bodies and in handlers, cases.
                nodes = [c for n in nodes if not isinstance(n, ast.stmt) for c in ast.iter_child_nodes(n)]
                continue
            header_end = _header_end(inside)
            if line <= header_end:
                return inside.lineno, self._text(inside, header_end)
            best = inside
            nodes = list(ast.iter_child_nodes(inside))
        if best is None:
            return line, ""
        return best.lineno, self._text(best, _header_end(best))

    def starts_statement(self, line: int) -> bool:
        """Whether a statement starts at ``line`` (a ``def``, ``class`` or decorator line aside)."""
        first, text = self.statement_at(line)
        return first == line and bool(text) and not text.startswith(("def ", "async def ", "class ", "@"))

    def _text(self, node: ast.stmt, last: int) -> str:
        if _has_body(node):
            text = " ".join(_code_part(self.lines[n - 1]) for n in range(node.lineno, last + 1))
        else:
            text = self._segment(node)
        return " ".join(text.split())

    def _segment(self, node: ast.stmt) -> str:
        """The node's source, from its first column to its last (``ast.get_source_segment``
        without splitting the whole file again)."""
        chunk = [part.encode() for part in self.lines[node.lineno - 1 : node.end_lineno or node.lineno]]
        if not chunk:
            return ""
        if node.end_col_offset is not None:
            chunk[-1] = chunk[-1][: node.end_col_offset]
        chunk[0] = chunk[0][node.col_offset :]
        return b"".join(chunk).decode(errors="replace")


def _has_body(node: ast.stmt) -> bool:
    body = getattr(node, "body", None)
    return isinstance(body, list) and bool(body) and isinstance(body[0], ast.stmt)


def _header_end(node: ast.stmt) -> int:
    """The last line of a compound statement's header; a simple statement's last line."""
    if _has_body(node):
        return max(node.lineno, node.body[0].lineno - 1)  # type: ignore[attr-defined]
    return node.end_lineno or node.lineno


def _code_part(line: str) -> str:
    """A header line without its trailing comment (a ``#`` outside quotes)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError):
        return line.strip()
    for token in tokens:
        if token.type == tokenize.COMMENT:
            return line[: token.start[1]].strip()
    return line.strip()
