"""Output files: checked before any work starts, written atomically (temporary file + rename).

A failure or Ctrl-C never leaves a truncated report, table or baseline behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from memprof.errors import InputError, UsageError


def check_output_path(path: str | os.PathLike[str], option: str = "output") -> Path:
    """Fail fast (exit 2) when ``path`` cannot be written: missing folder, not writable, folder."""
    out = Path(path)
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise UsageError(f"{option} {str(out)!r} is a folder; give a file name, e.g. {out / 'x'}")
    if not parent.is_dir():
        raise UsageError(f"{option} {str(out)!r}: folder {str(parent)!r} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{option} {str(out)!r}: folder {str(parent)!r} is not writable")
    if out.exists() and not os.access(out, os.W_OK):
        raise UsageError(f"{option} {str(out)!r} exists and is not writable")
    return out


def check_output_paths(paths: Iterable[tuple[str, str | os.PathLike[str] | None]]) -> None:
    """Check every ``(option, path)`` pair whose path is set; paths must also be distinct."""
    seen: dict[Path, str] = {}
    for option, path in paths:
        if path is None:
            continue
        resolved = check_output_path(path, option).resolve()
        if resolved in seen:
            raise UsageError(
                f"{seen[resolved]} and {option} both write {str(path)!r}; give each its own file"
            )
        seen[resolved] = option


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[str]], Any]) -> Path:
    """Write a text file through ``write(handle)`` into a temporary sibling, then rename it over
    ``path``: readers see the old file or the complete new one, never a partial one."""
    out = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            write(handle)
        # mkstemp creates 0600; give the file the mode a plain open() would (or keep the old one).
        os.chmod(tmp, out.stat().st_mode & 0o777 if out.exists() else 0o666 & ~_umask())
        os.replace(tmp, out)
    except BaseException:
        # Also on KeyboardInterrupt: the temporary file must not stay behind.
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return atomic_write(path, lambda handle: handle.write(text))


def read_text(path: str | os.PathLike[str], what: str = "file") -> str:
    """Read a UTF-8 text file, or ``-`` for standard input; missing or unreadable -> exit 2."""
    if str(path) == "-":
        import sys

        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{what} {str(path)!r} is a folder, not a file") from None
    except UnicodeDecodeError as error:
        raise InputError(
            f"{what} {str(path)!r} is not UTF-8 text (byte {error.start}); is it the right file?"
        ) from None
    except OSError as error:
        raise InputError(f"cannot read {what} {str(path)!r}: {error.strerror}") from None


def read_json(path: str | os.PathLike[str], what: str = "JSON file") -> Any:
    """Parse a JSON file as data (never pickle, never eval); malformed -> exit 2 with the place."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            f"{what} {str(path)!r} is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
