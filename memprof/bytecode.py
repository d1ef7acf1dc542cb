"""memprof's own modules, compiled once where Python writes no bytecode.

Python keeps the compiled form of each module it imports next to its source (``__pycache__``),
unless it is told not to write it: ``PYTHONDONTWRITEBYTECODE`` (``sys.dont_write_bytecode``),
common in container images. An installed wheel was compiled when pip installed it, but a
checkout installed in editable mode (``pip install -e .``) never is: every start of memprof
compiled its modules from source again (on a 2-CPU machine, the modules a run loads took 0.51 s
after torch compiled from source, 0.30 s from this cache: the (m) rows of
``scripts/bench_phases.py`` part 3).

There, and only for memprof's own modules, the compiled code is kept in memprof's cache folder
(``$XDG_CACHE_HOME/memprof/bytecode``, else ``~/.cache/memprof/bytecode``), under the hash of
the source file's path, content and Python's optimisation level: an edited file is compiled
again, and an entry is only ever the compilation of exactly that source at that path.
``MEMPROF_BYTECODE_CACHE=0`` turns it off. A folder that cannot be written leaves imports as
they were.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import marshal
import os
import sys
from types import CodeType
from typing import Any

try:  # the one hash needed, without hashlib's OpenSSL binding (~4 ms to import)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - another Python implementation
    from hashlib import blake2b

_PACKAGE = "memprof."
_MAGIC = importlib.util.MAGIC_NUMBER
_MAX_ENTRIES = 2000  # past this, the folder is emptied and filled again as modules load


def install() -> None:
    """Keep compiled code of memprof's modules in its cache folder, when Python writes none."""
    if not sys.dont_write_bytecode or os.environ.get("MEMPROF_BYTECODE_CACHE", "1").strip() in ("0", ""):
        return
    folder = cache_folder()
    if folder is None or any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder(folder))


def cache_folder() -> str | None:
    """Where the compiled code is kept; None when there is no home folder to keep it in."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):  # no HOME: never a folder relative to the working directory
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "memprof", "bytecode", sys.implementation.cache_tag or "python")


class _Finder:
    """Finds memprof's submodules as the import system does, with a loader that keeps their
    compiled code (:class:`_Loader`)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if path is None or not fullname.startswith(_PACKAGE):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader:
            spec.loader = _Loader(spec.loader.name, spec.loader.path, self.folder)
        return spec


class _Loader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, folder: str) -> None:
        super().__init__(fullname, path)
        self.folder = folder

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        source = self.get_data(path)
        # The path (code objects carry it: tracebacks, memprof's own frames told apart by it),
        # the optimisation level (``python -O`` compiles asserts out) and the content.
        named = b"%s\0%d\0" % (os.fsencode(path), sys.flags.optimize)
        entry = os.path.join(self.folder, f"{blake2b(named + source, digest_size=20).hexdigest()}.pyc")
        try:
            with open(entry, "rb") as file:
                data = file.read()
            if data[: len(_MAGIC)] == _MAGIC:
                code = marshal.loads(data[len(_MAGIC) :])
                if isinstance(code, CodeType):
                    return code
        except (OSError, ValueError, EOFError, TypeError):
            pass  # absent or unreadable: compiled again below
        code = self.source_to_code(source, path)
        _write(self.folder, entry, _MAGIC + marshal.dumps(code))
        return code


def _write(folder: str, entry: str, data: bytes) -> None:
    """Write ``entry`` whole or not at all (another process may read it meanwhile)."""
    temporary = f"{entry}.{os.getpid()}.tmp"
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        with os.scandir(folder) as entries:
            if sum(1 for _ in entries) > _MAX_ENTRIES:
                _empty(folder)
        with open(temporary, "wb") as file:
            file.write(data)
        os.replace(temporary, entry)
    except OSError:
        try:
            os.remove(temporary)
        except OSError:
            pass


def _empty(folder: str) -> None:
    for name in os.listdir(folder):
        try:
            os.remove(os.path.join(folder, name))
        except OSError:
            pass
