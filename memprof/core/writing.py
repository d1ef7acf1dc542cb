"""Files out: every file memprof writes goes through here.

Output paths are made absolute and checked before any work starts (writable, distinct,
none of them a file the run reads: the target's source, its inputs factory, the baseline, any
file of the running program (its script, every module it imported, checked again when writing),
and none a symbolic link: a link planted in a shared folder must not turn a report into a write
over the file it points to), and written atomically (temporary file + rename), all or none. A failure
or Ctrl-C never leaves a truncated report, table or baseline behind, nor some outputs replaced
and others not; a write that fails (disk full, folder gone, permission taken away) is an
:class:`OutputError` (exit 2) naming the path and the system's reason.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from memprof.core.errors import OutputError, UsageError
from memprof.core.reading import special_file_kind
from memprof.core.signals import deferred, terminating_cleanly

# Bound when memprof is imported: the profiled code runs in this process and may replace
# os.replace (or another of these) with something that does nothing; memprof must still write
# the files it says it wrote.
_replace, _link, _unlink, _lstat, _open, _fdopen, _chmod = (
    os.replace,
    os.link,
    os.unlink,
    os.lstat,
    os.open,
    os.fdopen,
    os.chmod,
)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)

WRITTEN: list[Path] = []
"""Every output memprof wrote in this process, in order (what a Ctrl-C message says was written)."""


def absolute(path: str | os.PathLike[str]) -> Path:
    """``path`` against the folder memprof started in, so that code that changes the working
    folder while it runs cannot move where the output goes (``..`` and links are kept)."""
    return Path(path).absolute()


def check_output_path(path: str | os.PathLike[str], option: str = "output") -> Path:
    """Fail fast (exit 2) when ``path`` cannot be written: missing folder, not writable, folder,
    a symbolic link."""
    out = _writable(path, option)
    _refuse_link(out, option)
    return out


def _writable(path: str | os.PathLike[str], option: str) -> Path:
    try:
        return _check_output_path(path, option)
    except (OSError, ValueError) as error:  # a name too long, a loop of links, a NUL character
        reason = getattr(error, "strerror", None) or str(error)
        raise UsageError(f"{option} {str(path)!r} cannot be written: {reason}") from None


def _refuse_link(out: Path, option: str) -> None:
    if out.is_symlink():
        raise UsageError(
            f"{option} {str(out)!r} is a symbolic link (to {os.readlink(out)!r}); memprof does not write "
            "through links, so that a link planted in a shared folder cannot make it replace another "
            "file: give the path of the file itself, or remove the link"
        )


def _check_output_path(path: str | os.PathLike[str], option: str) -> Path:
    out = Path(path)
    if str(path).endswith(("/", os.sep)) or out.is_dir():
        raise UsageError(f"{option} {str(path)!r} is a folder; give a file name, e.g. {out / 'x'}")
    target = written_path(out)
    if _names_open_file(out):
        raise UsageError(f"{option} {str(out)!r} is an open file of a process; give a file name")
    if target.exists() and not target.is_file():
        raise UsageError(f"{option} {str(out)!r} is {special_file_kind(target)}; give a file name")
    parent = out.absolute().parent
    if not parent.is_dir():
        raise UsageError(f"{option} {str(out)!r}: folder {str(parent)!r} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{option} {str(out)!r}: folder {str(parent)!r} is not writable")
    if out.exists() and not os.access(out, os.W_OK):
        raise UsageError(f"{option} {str(out)!r} exists and is not writable")
    return out


def _names_open_file(path: Path) -> bool:
    """``/dev/stdout``, ``/dev/fd/3``, ``/proc/self/fd/1``, or a link to one: renaming a file
    over it would replace whatever the descriptor is open on (a log, a capture) or the link."""
    hop = path.absolute()
    for _ in range(40):  # the kernel's own limit on links followed
        parts = hop.parts
        if parts[1:2] == ("proc",) or parts[1:3] in {("dev", "fd"), ("dev", "stdout"), ("dev", "stderr")}:
            return True
        if not hop.is_symlink():
            return False
        hop = Path(os.path.normpath(hop.parent / os.readlink(hop)))
    return False


def written_path(path: str | os.PathLike[str]) -> Path:
    """The file ``path`` names once symbolic links are followed to the end."""
    return Path(os.path.realpath(path))


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino)


def _same_file(a: Path, b: Path) -> bool:
    """The same file: the same path once links and ``..`` are resolved, or (hard links) the
    same inode. A loop of links is a path of its own (``realpath`` stops in it, never raises)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    identity = _identity(a)
    return identity is not None and identity == _identity(b)


def check_output_paths(
    paths: Iterable[tuple[str, str | os.PathLike[str] | None]],
    inputs: Iterable[tuple[str, str | os.PathLike[str] | None]] = (),
) -> None:
    """Check every ``(option, path)`` pair whose path is set: each writable, none a symbolic
    link, all distinct, and none of them one of the ``inputs`` (``(what, path)``: the target's
    file, the baseline, ...), which writing would destroy."""
    read = [(what, Path(path)) for what, path in inputs if path is not None]
    seen: list[tuple[Path, str]] = []
    for option, path in paths:
        if path is None:
            continue
        out = _writable(path, option)
        for what, source in read:
            if _same_file(out, source):
                raise UsageError(
                    f"{option} {str(path)!r} is {what} ({str(source)!r}); writing the report there "
                    "would replace it: give another file"
                )
        _refuse_link(out, option)
        _refuse_program_file(out, option, str(path))
        for other, other_option in seen:
            if _same_file(out, other):
                raise UsageError(
                    f"{other_option} and {option} both write {str(path)!r}; give each its own file"
                )
        seen.append((out, option))


def _refuse_program_file(out: Path, option: str, given: str) -> None:
    """Refuse an output that is a file of the running program: the script (``__main__``), any
    module it imported (its source, its compiled file, an extension), by any name (a hard link
    too). ``track(json=__file__)`` must not replace the caller's own script."""
    identity = _identity(out)
    if identity is None:  # nothing there yet: nothing to replace
        return
    for name, where in _program_files():
        if _identity_of(where) == identity:
            raise UsageError(
                f"{option} {given!r} is a file of the running program ({name}'s {where!r}); writing the "
                "report there would replace it: give another file"
            )


def _program_files() -> list[tuple[str, str]]:
    """``(module name, file)`` of every loaded module that has a file, and the script's."""
    import sys

    found = [("the script", sys.argv[0])] if sys.argv and sys.argv[0] else []
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if isinstance(where, str):
            found.append((name, where))
            cached = getattr(module, "__cached__", None)
            if isinstance(cached, str):
                found.append((name, cached))
    return found


def _identity_of(where: str) -> tuple[int, int] | None:
    try:
        info = os.stat(where)
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino)


def _write_failed(path: Path, error: OSError) -> OutputError:
    reason = error.strerror or str(error)
    hint = {
        errno.ENOSPC: "free some space or write elsewhere",
        errno.EDQUOT: "free some space or write elsewhere",
        errno.ENOENT: f"its folder {str(path.parent)!r} no longer exists; create it or write elsewhere",
        errno.EACCES: "make the folder writable or write elsewhere",
        errno.EPERM: "make the folder writable or write elsewhere",
        errno.EROFS: "write to a writable file system",
        errno.EISDIR: "remove the folder or write elsewhere",
    }.get(error.errno or 0, "write elsewhere")
    return OutputError(f"cannot write {str(path)!r}: {reason}; {hint}; nothing was written")


def _new_sibling(out: Path, suffix: str) -> tuple[int, str]:
    """Create a new file beside ``out``, readable by memprof alone: its descriptor and path. The
    name is short (``.memprof-<random>.tmp``): ``out``'s own may be as long as a name can be."""
    for _ in range(100):
        name = str(out.parent / f".memprof-{secrets.token_hex(6)}{suffix}")
        try:
            return _open(name, _NEW_FILE, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(out.parent))


def _stage(out: Path, write: Callable[[IO[str]], Any], made: list[str]) -> str:
    """Write a temporary sibling of ``out`` through ``write(handle)``; its path, noted in
    ``made`` as soon as the file exists (signals held in between: no file without its name)."""
    with deferred():
        fd, tmp = _new_sibling(out, ".tmp")
        made.append(tmp)
        # backslashreplace: a lone surrogate (a name read from JSON as "\\udcff") cannot be UTF-8
        handle = _fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="")
    with handle:
        write(handle)
        handle.flush()
    # mkstemp creates 0600; give the file the mode a plain open() would (or keep the old one).
    _chmod(tmp, _mode_of(out))
    return tmp


def _mode_of(out: Path) -> int:
    try:
        info = _lstat(out)
    except OSError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        return info.st_mode & 0o777
    return 0o666 & ~_umask()


def _unlink_quietly(path: str | Path) -> None:
    try:
        _unlink(path)
    except OSError:
        pass


def atomic_write_all(
    items: Sequence[tuple[str | os.PathLike[str], Callable[[IO[str]], Any]]], *, remember: bool = True
) -> list[Path]:
    """Write several files, all or none: each is first written in full to a temporary sibling
    (where a full disk or a vanished folder shows), then they are renamed over their paths (see
    :func:`_commit`). A failure (an :class:`OutputError`, exit 2), Ctrl-C or SIGTERM at any
    point leaves every path as it was, or all of them written, and no temporary file (see
    :mod:`memprof.core.signals`; after SIGTERM the process then ends by it). A path that is a symbolic
    link is replaced by the file (the file the link points to is left alone). ``remember``: list
    the files in :data:`WRITTEN`."""
    for path, _ in items:  # checked when written too: the program may have imported it since
        _refuse_program_file(absolute(path), "output", str(path))
    made: list[str] = []
    written: list[Path] = []
    current = Path()
    with terminating_cleanly():
        try:
            staged = []
            for path, write in items:
                current = absolute(path)
                staged.append((_stage(current, write, made), current))
            with deferred():  # the renames and what says they were made: all, or none
                _commit(staged)
                written = [out for _, out in staged]
                if remember:
                    WRITTEN.extend(written)
        except OSError as error:
            raise _write_failed(current, error) from None
        finally:
            with deferred():
                for tmp in made:
                    _unlink_quietly(tmp)  # gone once renamed; left only after a failure
    return written


def _commit(staged: list[tuple[str, Path]]) -> None:
    """Rename each staged file over its path, all or none. Every destination is checked first
    (the profiled code may have made a folder there), and the file each replaces is kept as a
    hard link (a copy where links are not allowed) until all are renamed: when a rename fails,
    or Ctrl-C comes, the ones already renamed are put back."""
    for _, out in staged:
        _check_destination(out)
    backups: list[tuple[Path, str | None]] = []
    renamed = 0
    try:
        for _, out in staged:
            try:
                backups.append((out, _backup(out)))
            except OSError as error:
                raise _write_failed(out, error) from None
        for tmp, out in staged:
            try:
                _replace(tmp, out)
                renamed += 1
                _lstat(out)  # there, or the rename did not happen
            except OSError as error:
                raise _write_failed(out, error) from None
    except BaseException:
        _put_back(backups[:renamed])
        raise
    finally:
        for _, backup in backups:
            if backup is not None:
                _unlink_quietly(backup)  # gone when put back


def _check_destination(out: Path) -> None:
    try:
        info = _lstat(out)
    except FileNotFoundError:
        return
    except OSError as error:
        raise _write_failed(out, error) from None
    if stat.S_ISDIR(info.st_mode):
        raise OutputError(
            f"cannot write {str(out)!r}: it is a folder now (made while memprof ran?); remove it or write "
            "elsewhere; nothing was written"
        )


def _backup(out: Path) -> str | None:
    """A second name for the file at ``out`` (None when there is none), to put it back."""
    try:
        _lstat(out)
    except FileNotFoundError:
        return None
    for _ in range(100):
        name = str(out.parent / f".memprof-{secrets.token_hex(6)}.old")
        try:
            _link(out, name, follow_symlinks=False)
            return name
        except FileExistsError:
            continue
        except OSError:
            break  # a file system without hard links: a copy
    import shutil

    fd, name = _new_sibling(out, ".old")
    os.close(fd)
    try:
        shutil.copy2(out, name)
    except BaseException:
        _unlink_quietly(name)
        raise
    return name


def _put_back(done: list[tuple[Path, str | None]]) -> None:
    """Undo renames: each path gets its old file back, or is removed if it had none."""
    for out, backup in reversed(done):
        try:
            if backup is None:
                _unlink(out)
            else:
                _replace(backup, out)
        except OSError:
            pass  # the folder is gone too: nothing is left to put back


def atomic_write(
    path: str | os.PathLike[str], write: Callable[[IO[str]], Any], *, remember: bool = True
) -> Path:
    """Write a text file through ``write(handle)`` into a temporary sibling, then rename it over
    ``path``: readers see the old file or the complete new one, never a partial one."""
    return atomic_write_all([(path, write)], remember=remember)[0]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str, *, remember: bool = True) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return atomic_write(path, lambda handle: handle.write(text), remember=remember)


def atomic_write_texts(texts: Sequence[tuple[str | os.PathLike[str], str]]) -> list[Path]:
    """Write every ``(path, text)``: all of them, or none (see :func:`atomic_write_all`)."""
    return atomic_write_all([(path, _writer(text)) for path, text in texts])


def _writer(text: str) -> Callable[[IO[str]], Any]:
    return lambda handle: handle.write(text)
