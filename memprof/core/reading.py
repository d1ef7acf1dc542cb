"""Files in: every file memprof reads goes through here.

Reading: only regular files and standard input. A folder, a character device such as
``/dev/zero``, a FIFO or a socket is refused at once (opening never blocks, even on a FIFO
without a writer); standard input is read up to :data:`STDIN_LIMIT_BYTES`. Text is UTF-8 (a
byte-order mark is dropped); invalid bytes are an error naming their offset. JSON is strict:
no ``NaN``/``Infinity``, no key twice in one object, no nesting deeper than Python can parse.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import IO, Any

from memprof.core.errors import InputError, UsageError, brief

STDIN_LIMIT_BYTES = 1 << 30
"""The most memprof reads from standard input (1 GiB): more is an error, never a hang or an
ever-growing process (``memprof parse - < /dev/zero``). Set it on this module to change it."""

_CHUNK = 1 << 20
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
STDIN = "standard input"


# -------------------------------------------------------------------------------------- reading


def special_file_kind(path: str | os.PathLike[str] | os.stat_result) -> str:
    """What a path that is not a regular file is, in words: ``a FIFO (named pipe)``, ``a
    character device``, ``a folder``, ..."""
    try:
        mode = path.st_mode if isinstance(path, os.stat_result) else os.stat(path).st_mode
    except OSError:
        return "not a regular file"
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((words for test, words in kinds if test(mode)), "not a regular file")


def _not_regular(what: str, path: str, kind: str) -> InputError:
    return InputError(
        f"{what} {path!r} is {kind}, not a regular file; save the content to a file and give that"
    )


def open_regular(path: str | os.PathLike[str], what: str = "file") -> IO[bytes]:
    """Open ``path`` for reading in binary if it is a regular file. Anything else (a folder, a
    device, a FIFO, a socket) is an :class:`InputError`; a FIFO without a writer does not block.
    A missing or unreadable file raises the ``OSError`` (callers word it)."""
    name = str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        # Opening a socket fails (ENXIO); say what it is rather than "no such device".
        if error.errno == errno.ENXIO and os.path.exists(path):
            raise _not_regular(what, name, special_file_kind(path)) from None
        raise
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(what, name, special_file_kind(info))
        if Path(os.path.realpath(path)).parts[1:2] == ("proc",):  # /proc/kcore "is" a regular file of 128 TiB
            raise _not_regular(what, name, "a file of the kernel's /proc")
        if flags & getattr(os, "O_NONBLOCK", 0):
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_file_bytes(path: str | os.PathLike[str], what: str = "file") -> bytes:
    """``Path(path).read_bytes()`` for regular files only (see :func:`open_regular`)."""
    with open_regular(path, what) as handle:
        return handle.read()


def read_stdin_bytes(limit: int | None = None) -> bytes:
    """Standard input, up to ``limit`` bytes (default :data:`STDIN_LIMIT_BYTES`); more is an
    :class:`InputError`, raised as soon as the limit is passed."""
    import sys

    limit = STDIN_LIMIT_BYTES if limit is None else limit
    stream = sys.stdin
    if stream is None:
        raise InputError("standard input is closed; give a file instead of -")
    source: Any = getattr(stream, "buffer", stream)
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = source.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            break
        if isinstance(chunk, str):  # a text stream without a buffer (an embedding replaced it)
            chunk = chunk.encode("utf-8", "surrogateescape")
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            from memprof.core.units import format_bytes

            raise InputError(
                f"standard input holds more than {format_bytes(limit)}, the most memprof reads from it; "
                "save it to a file and give the file"
            )
    return b"".join(chunks)


def read_bytes(path: str | os.PathLike[str], what: str = "file") -> bytes:
    """The bytes of a regular file, or of standard input for ``-``; a missing, unreadable or
    special file is an :class:`InputError` (exit 2)."""
    name = str(path)
    if name == "-":
        return read_stdin_bytes()
    try:
        return read_file_bytes(path, what)
    except FileNotFoundError:
        raise InputError(f"{what} {name!r} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{what} {name!r} is a folder, not a file") from None
    except OSError as error:
        raise InputError(f"cannot read {what} {name!r}: {error.strerror or error}") from None


def read_recording_bytes(path: str | os.PathLike[str], what: str, *, folder_hint: str) -> bytes:
    """The bytes of a recorded file (a trace, a snapshot): a missing, unreadable or special file,
    or a folder (``folder_hint`` says what to give instead), is an :class:`InputError`."""
    name = str(path)
    try:
        return read_file_bytes(path, what)  # a FIFO or /dev/zero is refused, never read
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{name} is a folder; {folder_hint}") from None
    except OSError as error:
        raise InputError(f"{name}: cannot read ({error.strerror or error})") from None


DECOMPRESSED_LIMIT_BYTES = 2 << 30
"""The most bytes a gzip-compressed recording is expanded to (2 GiB): an 8 MB file of zeros
expands to 8 GiB, and memprof stops at this many instead. The environment variable
``MEMPROF_MAX_DECOMPRESSED`` (a size: ``8GB``) sets another limit."""

DECOMPRESSED_LIMIT_VARIABLE = "MEMPROF_MAX_DECOMPRESSED"
GZIP_MAGIC = b"\x1f\x8b"
_INFLATE_IN, _INFLATE_OUT = 1 << 16, 1 << 22


def recording_head(path: str | os.PathLike[str], size: int = 64) -> bytes | None:
    """The first ``size`` bytes of a recording file, decompressed when it is gzip (how file
    readers tell their format by content, not by name); None for a file that cannot be read
    (a FIFO or a device is never read). Never raises."""
    import zlib

    try:
        with open_regular(path, "recording") as handle:
            head = handle.read(size)
            if head[:2] == GZIP_MAGIC:
                handle.seek(0)
                head = zlib.decompressobj(31).decompress(handle.read(4096), size)
    except (OSError, zlib.error, InputError):
        return None
    return head


def decompressed_limit() -> int:
    """:data:`DECOMPRESSED_LIMIT_BYTES`, or the size ``MEMPROF_MAX_DECOMPRESSED`` gives."""
    text = os.environ.get(DECOMPRESSED_LIMIT_VARIABLE, "").strip()
    if not text:
        return DECOMPRESSED_LIMIT_BYTES
    from memprof.core.units import parse_size

    try:
        return parse_size(text)
    except UsageError as error:
        raise UsageError(f"environment variable {DECOMPRESSED_LIMIT_VARIABLE}: {error.message}") from None


def gunzip(data: bytes | bytearray, name: str) -> bytes | bytearray:
    """The content of gzip ``data`` (every member, as ``gzip.decompress`` reads them), read from
    file ``name``: decompressed piece by piece, never beyond :func:`decompressed_limit`. Truncated,
    corrupt or too large data is an :class:`InputError` saying which."""
    import zlib

    from memprof.core.units import format_bytes

    limit = decompressed_limit()
    try:
        out = _inflate(data, limit)
    except EOFError:
        raise InputError(
            f"{name}: the gzip data is truncated; the file is incomplete, copy it again"
        ) from None
    except zlib.error as error:
        raise InputError(f"{name}: not a readable gzip file ({error}); copy it again") from None
    except OverflowError:
        raise InputError(
            f"{name}: its gzip data expands to more than {format_bytes(limit)}, the most memprof "
            f"decompresses; if the file is genuine, raise the limit, e.g. {DECOMPRESSED_LIMIT_VARIABLE}=8GB"
        ) from None
    except MemoryError:
        raise InputError(
            f"{name}: not enough memory to decompress it ({format_bytes(len(data))} of gzip data); "
            "give memprof more memory"
        ) from None
    return out


def _inflate(data: bytes | bytearray, limit: int) -> bytearray:
    """Members of gzip ``data`` one after the other, a slice of input at a time (zlib copies what
    it has not consumed on every call: whole files would make that quadratic). OverflowError past
    ``limit`` bytes, EOFError when the last member is cut short."""
    import zlib

    out = bytearray()
    view = memoryview(data)
    member = zlib.decompressobj(31)
    for start in range(0, len(view), _INFLATE_IN):
        pending: bytes | memoryview = view[start : start + _INFLATE_IN]
        while pending:
            if member.eof:
                member = zlib.decompressobj(31)  # the next member
            out += member.decompress(pending, _INFLATE_OUT)
            if len(out) > limit:
                raise OverflowError
            pending = member.unused_data if member.eof else member.unconsumed_tail
    while not member.eof:  # what zlib still holds once the input is consumed
        piece = member.decompress(b"", _INFLATE_OUT)
        if not piece:
            raise EOFError
        out += piece
        if len(out) > limit:
            raise OverflowError
    return out


def decode_text(data: bytes, where: str) -> str:
    """UTF-8 text from ``data``, without a leading byte-order mark; invalid bytes are an
    :class:`InputError` naming the first one's offset."""
    skipped = len(_UTF8_BOM) if data.startswith(_UTF8_BOM) else 0
    try:
        return data[skipped:].decode("utf-8")
    except UnicodeDecodeError as error:
        offset = error.start + skipped
        hint = (
            "it is UTF-16 (it starts with a UTF-16 byte-order mark); convert it, e.g. "
            "iconv -f UTF-16 -t UTF-8"
            if data[:2] in _UTF16_BOMS
            else "is it the right file? save it as UTF-8"
        )
        raise InputError(
            f"{where} is not UTF-8 text: byte {offset} (0x{data[offset]:02x}) is invalid; {hint}"
        ) from None


def read_text(path: str | os.PathLike[str], what: str = "file") -> str:
    """Read a UTF-8 text file, or ``-`` for standard input (at most :data:`STDIN_LIMIT_BYTES`);
    missing, unreadable, special or not UTF-8 -> exit 2."""
    where = STDIN if str(path) == "-" else f"{what} {str(path)!r}"
    return decode_text(read_bytes(path, what), where)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise ValueError(f"the key {brief(twice)} appears twice in one object")
    return out


def parse_json(text: str, where: str) -> Any:
    """Strict JSON as data (never pickle, never eval): ``NaN``/``Infinity``, a key repeated in
    one object (which would silently keep the last) and nesting too deep to parse are
    :class:`InputError` (exit 2), as is malformed text (with its line and column)."""
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise InputError(
            f"{where} is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except ValueError as error:
        raise InputError(f"{where} is not valid JSON for memprof: {error}") from None
    except RecursionError:
        raise InputError(
            f"{where} nests arrays or objects too deeply to be read; it is not a file memprof wrote"
        ) from None
    except MemoryError:
        raise _too_large(where) from None


def _too_large(where: str) -> InputError:
    return InputError(f"{where} is too large to read in the memory memprof has; give memprof more memory")


def read_json(path: str | os.PathLike[str], what: str = "JSON file") -> Any:
    """Parse a JSON file (or ``-``, standard input) strictly, see :func:`parse_json`."""
    where = STDIN if str(path) == "-" else f"{what} {str(path)!r}"
    try:
        return parse_json(read_text(path, what), where)
    except MemoryError:
        raise _too_large(where) from None
