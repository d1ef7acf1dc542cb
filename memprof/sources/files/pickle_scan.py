"""A pickle's memo indices, checked before it is unpickled.

CPython's unpickler keeps its memo in an array as long as the largest index stored, and sizes
it when the index arrives: ``LONG_BINPUT 2**27`` in a 23-byte file makes it allocate 2 GiB
(16 bytes per slot) before anything else happens. ``pickle`` itself numbers memo entries in
order (``MEMOIZE``, or ``PUT`` with the next free index), so :func:`check_memo` walks the
opcodes (without building anything) and refuses an index above the number of entries stored
before it. The unpickler's memo then holds at most one slot per memo opcode of the file.

The walk reads each opcode's argument as :mod:`pickletools` describes it; it stops at ``STOP``,
at an unknown opcode or at truncated data, where the unpickler reports the problem itself.
"""

from __future__ import annotations

import pickletools

# How the walk steps over each opcode's argument: a size >= 0, or one of these.
_LINE, _LINES, _LEN1, _LEN4, _LEN4U, _LEN8U = -1, -2, -3, -4, -5, -6
_PUT, _BINPUT, _LONG_BINPUT, _MEMOIZE, _STOP, _UNKNOWN = -10, -11, -12, -13, -14, -15
_BY_ARGUMENT = {-1: _LINE, -2: _LEN1, -3: _LEN4, -4: _LEN4U, -5: _LEN8U}
_SPECIAL = {
    "PUT": _PUT,
    "BINPUT": _BINPUT,
    "LONG_BINPUT": _LONG_BINPUT,
    "MEMOIZE": _MEMOIZE,
    "STOP": _STOP,
    "GLOBAL": _LINES,
    "INST": _LINES,
}


def _steps() -> list[int]:
    steps = [_UNKNOWN] * 256
    for op in pickletools.opcodes:
        size = op.arg.n if op.arg is not None else 0
        steps[ord(op.code)] = _SPECIAL.get(op.name, size if size >= 0 else _BY_ARGUMENT[size])
    return steps


_STEPS = _steps()


class MemoOutOfOrder(Exception):
    """A memo index that ``pickle`` would never write: above the entries stored before it."""

    def __init__(self, index: int, stored: int) -> None:
        super().__init__(index, stored)
        self.index = index
        self.stored = stored


def check_memo(data: bytes | bytearray) -> None:
    """Raise :class:`MemoOutOfOrder` when ``data`` stores a memo index above the number of memo
    entries stored before it (see the module's notes). About 0.3 µs per opcode."""
    steps, size, at, stored = _STEPS, len(data), 0, 0
    try:
        while at < size:
            step = steps[data[at]]
            at += 1
            if step >= 0:
                at += step
            elif step == _MEMOIZE:
                stored += 1
            elif step == _LEN1:
                at += 1 + data[at]
            else:
                at, stored = _rare(data, at, step, stored)
    except (IndexError, _End):
        return  # truncated, or the end: the unpickler says what is wrong, if anything


class _End(Exception):
    """The walk stops: STOP, an unknown opcode, or an argument that cannot be read."""


def _rare(data: bytes | bytearray, at: int, step: int, stored: int) -> tuple[int, int]:
    """Step over an opcode with a less common argument; the position after it and the memo
    entries stored."""
    index = -1
    if step == _BINPUT:
        index, at = data[at], at + 1
    elif step == _LONG_BINPUT:
        index, at = int.from_bytes(data[at : at + 4], "little"), at + 4
    elif step in (_LINE, _PUT, _LINES):
        end = data.find(b"\n", at)
        if step == _LINES and end >= 0:
            end = data.find(b"\n", end + 1)
        if end < 0:
            raise _End
        if step == _PUT:
            try:
                index = int(data[at:end])
            except ValueError:
                raise _End from None
        at = end + 1
    elif step in (_LEN4, _LEN4U, _LEN8U):
        width = 8 if step == _LEN8U else 4
        length = int.from_bytes(data[at : at + width], "little", signed=step == _LEN4)
        if length < 0:
            raise _End
        at += width + length
    else:  # STOP, or an opcode pickle does not have: the unpickler ends there too
        raise _End
    if index >= 0:
        if index > stored:
            raise MemoOutOfOrder(index, stored)
        stored += 1
    return at, stored
