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

Compiled code runs when it is loaded, so the cache is private, or not used at all: its folder
must be a real folder (not a symbolic link) owned by this user with no access for anyone else
(mode 0700, as it is made); every entry must be a regular file owned by this user, writable by
no one else, and carry the digest it is filed under; every file is opened, written, renamed and
removed relative to the folder once it is checked (never through a path another user could
swap meanwhile), and only memprof's own entries (regular files with its names) are ever
removed. A folder that fails a check is left as it is and nothing is cached.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import marshal
import os
import stat
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
_DIGEST = 20  # bytes of the blake2b digest an entry is filed under (40 hex digits in its name)
_HEX = frozenset("0123456789abcdef")
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_folders: dict[str, int | None] = {}  # each cache folder's descriptor once checked; None: not private


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
        digest = blake2b(named + source, digest_size=_DIGEST).digest()
        folder = private_folder(self.folder)
        if folder is not None:
            code = _read(folder, digest)
            if code is not None:
                return code
        code = self.source_to_code(source, path)
        if folder is not None:
            _write(folder, digest, _MAGIC + digest + marshal.dumps(code))
        return code


def private_folder(path: str) -> int | None:
    """A descriptor of the cache folder ``path`` (made when missing, mode 0700), or None when it
    is not private: a symbolic link, not a folder, another user's, or open to group or others."""
    if path in _folders:
        return _folders[path]
    fd = None
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC)
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            os.close(fd)
            fd = None
    except (OSError, ValueError):
        if fd is not None:
            os.close(fd)
        fd = None
    _folders[path] = fd
    return fd


def _entry_name(digest: bytes) -> str:
    return f"{digest.hex()}.pyc"


def _read(folder: int, digest: bytes) -> CodeType | None:
    """The code of the entry filed under ``digest``, when it is memprof's: a regular file owned
    by this user, writable by no one else, starting with the magic number and ``digest``."""
    try:
        fd = os.open(_entry_name(digest), os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=folder)
    except OSError:
        return None  # absent: compiled again
    try:
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
                return None
            data = file.read()
        head = _MAGIC + digest
        if data[: len(head)] != head:
            return None
        code = marshal.loads(data[len(head) :])
    except (OSError, ValueError, EOFError, TypeError):
        return None  # unreadable or damaged: compiled again
    return code if isinstance(code, CodeType) else None


def _write(folder: int, digest: bytes, data: bytes) -> None:
    """Write the entry whole or not at all (another process may read it meanwhile)."""
    entry = _entry_name(digest)
    temporary = f"{entry}.{os.getpid()}.tmp"
    try:
        with os.scandir(folder) as entries:
            if sum(1 for _ in entries) > _MAX_ENTRIES:
                _empty(folder)
        fd = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=folder
        )
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, entry, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError:
        try:
            os.unlink(temporary, dir_fd=folder)
        except OSError:
            pass


def _ours(name: str) -> bool:
    """A name memprof gives its entries (``<40 hex digits>.pyc``) or their temporary files."""
    stem, _, rest = name.partition(".")
    return len(stem) == 2 * _DIGEST and set(stem) <= _HEX and (rest == "pyc" or rest.startswith("pyc."))


def _empty(folder: int) -> None:
    """Remove memprof's entries: regular files with its names, nothing else."""
    with os.scandir(folder) as entries:
        names = [e.name for e in entries if _ours(e.name) and e.is_file(follow_symlinks=False)]
    for name in names:
        try:
            os.unlink(name, dir_fd=folder)
        except OSError:
            pass
