"""A time limit on the profiled code: ``timeout`` of :func:`memprof.profile`,
:func:`memprof.compare` and :func:`memprof.estimate` (``--timeout`` of the commands).

A watching thread waits for the limit; when it runs out, it notes where the code was (the
innermost line of the user's code, and of a library's when that is deeper) and raises
:class:`memprof.core.errors.TimeLimitReached` in the thread running the code, at its next Python
instruction. :func:`time_limit` turns that into a :class:`memprof.core.errors.UserCodeError`
(exit 3) naming the line. Code stuck inside one C call never reaches a Python instruction:
on the command line (:func:`ending_the_process`), the process then ends with exit 3 after a
grace period.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import os
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from memprof.core.errors import EXIT_USER_CODE, TimeLimitReached, UserCodeError, param

GRACE_SECONDS = 30.0
"""How long code stuck in one C call may take to notice the limit before the command line
ends the process."""


def where_code_was(frame: FrameType | None) -> str:
    """The innermost line of the user's code in ``frame``'s stack below memprof's outermost
    frame (what called memprof is not the profiled code), with a library's line first when the
    code was inside one: ``loop.py:12 (while loss > tol:)``; "" when none (memprof's own work)."""
    from memprof.sources.tracking.lines import LIBRARY, MEMPROF, USER, frame_kind, resolve_sites

    stack: list[tuple[str, int, str]] = []  # innermost first
    while frame is not None:
        filename = frame.f_code.co_filename
        stack.append((filename, frame.f_lineno, frame_kind(filename)))
        frame = frame.f_back
    outermost = max((n for n, (_, _, kind) in enumerate(stack) if kind == MEMPROF), default=len(stack))
    library: tuple[str, int] | None = None
    user: tuple[str, int] | None = None
    for filename, line, kind in stack[:outermost]:
        if filename.startswith("<") and not filename.startswith("<ipython"):
            continue  # code made at run time (a dataclass's __init__): no line to show
        if kind == USER:
            user = (filename, line)
            break
        if kind == LIBRARY and library is None:
            library = (filename, line)
    sites = resolve_sites([site for site in (library, user) if site is not None])
    return ", called from ".join(f"{s.source} ({s.text})" if s.text else s.source for s in sites)


class _Watch:
    """The watching thread of one :func:`time_limit`."""

    def __init__(self, seconds: float, hard: Callable[[str], None] | None) -> None:
        self.seconds = seconds
        self.hard = hard
        self.target = threading.get_ident()
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.fired = False
        self.received = False
        self.where = ""
        self.thread = threading.Thread(target=self._watch, name="memprof-time-limit", daemon=True)

    def _watch(self) -> None:
        if self.done.wait(self.seconds):
            return
        with self.lock:
            if self.done.is_set():
                return
            self.where = where_code_was(sys._current_frames().get(self.target))
            self.fired = True
            _raise_in(self.target, TimeLimitReached)
        # Raised again each second until it is received: code may have swallowed it (a bare
        # except around an import).
        for _ in range(int(GRACE_SECONDS)):
            if self.done.wait(1.0):
                return
            with self.lock:
                if not self.done.is_set() and not self.received:
                    _raise_in(self.target, TimeLimitReached)
        if self.hard is not None and not self.done.wait(max(0.0, GRACE_SECONDS - int(GRACE_SECONDS))):
            self.hard(self.where)

    def stop(self) -> None:
        with self.lock:
            self.done.set()
            if self.fired and not self.received:  # raised as the code ended: take it back
                _raise_in(self.target, None)
                self.received = True


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    """Raise ``exception`` in the thread at its next instruction (None: no longer)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception is not None else None
    )


_ENDS_PROCESS: contextvars.ContextVar[bool] = contextvars.ContextVar("memprof_time_limit_ends", default=False)


@contextlib.contextmanager
def ending_the_process() -> Iterator[None]:
    """Inside the block (the command line), a time limit whose code does not stop within
    :data:`GRACE_SECONDS` ends the process with exit 3."""
    token = _ENDS_PROCESS.set(True)
    try:
        yield
    finally:
        _ENDS_PROCESS.reset(token)


def timed_out_message(seconds: float, spelled: str, where: str) -> str:
    """The exit-3 message of a time limit that ran out; ``spelled``: the parameter as the caller
    writes it (``--timeout 5``)."""
    at = f"it was at {where}" if where else "it was in memprof's or torch's own work, not in the code"
    return (
        f"the profiled code did not finish within {seconds:g} s ({spelled}): {at}; if that is a loop "
        "that never ends, make it stop (a fixed trip count); else give it more time"
    )


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Run the block with a limit of ``seconds`` (None: none); past it, :class:`UserCodeError`
    naming where the code was. Inside :func:`ending_the_process`, code that does not notice
    within :data:`GRACE_SECONDS` (stuck in one C call) ends the process (exit 3) with the
    message."""
    if seconds is None:
        yield
        return
    if seconds <= 0:
        from memprof.core.errors import UsageError

        raise UsageError(f"{param('timeout')} must be more than 0 seconds, got {seconds:g}")
    spelled = param("timeout", seconds)  # here: the watching thread has not the caller's spelling
    watch = _Watch(seconds, _ender(seconds, spelled) if _ENDS_PROCESS.get() else None)
    watch.thread.start()
    try:
        yield
    except TimeLimitReached:
        if not watch.fired:
            raise  # not ours (an outer limit's)
        watch.received = True
        watch.stop()
        raise UserCodeError(timed_out_message(seconds, spelled, watch.where)) from None
    finally:
        watch.stop()


def _ender(seconds: float, spelled: str) -> Callable[[str], None]:
    # The standard error of now: a profile redirects file descriptor 2 while it runs.
    try:
        stderr = os.dup(2)
    except OSError:
        stderr = 2

    def end(where: str) -> None:
        with contextlib.suppress(OSError):
            os.write(stderr, f"memprof: error: {timed_out_message(seconds, spelled, where)}\n".encode())
        os._exit(EXIT_USER_CODE)

    return end
