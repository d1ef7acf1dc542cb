"""Ctrl-C and ``kill`` while memprof writes its outputs.

Python raises ``KeyboardInterrupt`` wherever the main thread is when SIGINT comes, and SIGTERM
ends the process on the spot. :mod:`memprof.core.writing` writes its outputs all or none: each file
in full to a temporary sibling, then every one renamed over its path. Two tools here keep that
promise under any signal, at any point:

- :func:`deferred`: the short steps that must not be cut in two (making a temporary file and
  noting its name; the renames and their bookkeeping; putting files back) run with SIGINT and
  SIGTERM held, and a signal that came meanwhile is raised again once they are done;
- :func:`terminating_cleanly`: while outputs are written, SIGTERM (when nothing else handles
  it) raises :class:`Terminated`, so that the temporary files are removed, then the process
  ends by SIGTERM as it would have.

Signal handlers belong to the main thread: elsewhere these do nothing (no signal is raised as
an exception in another thread).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

_HELD = (signal.SIGINT, signal.SIGTERM)


class Terminated(BaseException):
    """SIGTERM came while memprof wrote its outputs (see :func:`terminating_cleanly`)."""


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held for the block: one that comes is noted, and raised again when
    the block is over, with the handlers there were before."""
    if not _main_thread():
        yield
        return
    pending: list[int] = []
    before: dict[int, Any] = {}
    try:
        for signum in _HELD:
            before[signum] = signal.signal(signum, lambda number, _frame: pending.append(number))
        yield
    finally:
        for held, handler in before.items():
            signal.signal(held, handler if handler is not None else signal.SIG_DFL)
        for came in dict.fromkeys(pending):
            signal.raise_signal(came)  # the handler before: KeyboardInterrupt, Terminated, exit


def _terminate(_signum: int, _frame: Any) -> None:
    raise Terminated


@contextlib.contextmanager
def terminating_cleanly() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` (when its handler is the
    default one); when it does, and the block has cleaned up after it, the process ends by
    SIGTERM, as it would have without the block."""
    if not _main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    except Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise  # the signal ends the process before this line; for a process that blocks it
    finally:
        if signal.getsignal(signal.SIGTERM) is _terminate:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
