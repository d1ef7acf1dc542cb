"""memprof's errors, exit codes, and how messages name the caller's parameters.

Every failure a user can cause or meet is a :class:`MemprofError` carrying the exit code the
command line returns for it. The CLI catches them in one place (``cli.handle_errors``), prints
the one-line message and exits with ``exit_code``.

The library is called from Python (``memprof.profile(fn, repeat=0)``), from the command line
(``memprof run --repeat 0``) and from the pytest plugin, and a message should name the knob the
way the caller wrote it. Core modules therefore never spell a command-line flag: they name a
parameter with :func:`param` (``repeat``, ``mode='eager'``), and a front door that spells its
parameters differently installs its own spelling with :func:`spelled_as` (the CLI turns them
into ``--repeat``, ``--mode eager``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_USER_CODE = 3
EXIT_INTERRUPTED = 130


class MemprofError(Exception):
    """Base of memprof's errors; ``exit_code`` is what the command line returns.

    ``shown`` is True when what the error stands for was already printed (the gate's lines),
    so the command line adds no message of its own. ``hidden_messages``: what torch said and
    memprof kept out of the output while the failing run ran (a
    :class:`memprof.sources.live.noise.Heard`), when it failed during one.
    """

    exit_code: int = EXIT_USAGE
    shown: bool = False
    hidden_messages: Any = None

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self)


class UsageError(MemprofError):
    """Bad arguments or option values (exit 2)."""

    exit_code = EXIT_USAGE


class InputError(MemprofError):
    """A file or text given to memprof is missing, unreadable or malformed (exit 2)."""

    exit_code = EXIT_USAGE


class TargetNotFoundError(UsageError):
    """The target module, file or attribute does not exist (exit 2)."""


class UserCodeError(MemprofError):
    """The profiled code (its module, inputs factory, function or compilation) failed (exit 3).

    ``user_traceback`` holds the user's traceback with memprof's own frames trimmed. When
    other variants of a comparison were measured, ``report`` holds them (and this one as a
    failed run), so what was measured can still be shown and written.
    """

    exit_code = EXIT_USER_CODE

    def __init__(
        self, message: str, *, user_traceback: str = "", raised: BaseException | None = None
    ) -> None:
        super().__init__(message)
        self.user_traceback = user_traceback
        self.report: Any = None
        self.raised = raised
        """What the user's code raised, when it raised (the pytest plugin shows it as the test's
        own failure)."""


class OutputError(MemprofError):
    """An output file could not be written: its folder vanished, the disk is full, permission
    was taken away (exit 2). Nothing partial is left behind."""

    exit_code = EXIT_USAGE


class GateFailed(MemprofError):
    """A memory gate failed (exit 1). Its lines were printed (on stdout) before it was raised;
    the message is the gate's summary line."""

    exit_code = EXIT_GATE_FAILED
    shown = True


def path_error(error: OSError, what: str = "path") -> InputError:
    """An operating system's refusal of a path (a name over 255 bytes, a loop of symbolic links,
    a folder where a file was expected, a permission, ...) as the one-line error it is (exit 2):
    the path, the system's reason, and what to do."""
    import errno

    name = error.filename if error.filename is not None else "?"
    reason = error.strerror or type(error).__name__
    hint = {
        errno.ENAMETOOLONG: "a name in a path is at most 255 bytes on most file systems; give a shorter one",
        errno.ELOOP: "its symbolic links lead round in a loop; give the file itself",
        errno.EISDIR: "it is a folder; give a file",
        errno.ENOTDIR: "a part of it that should be a folder is a file; check the path",
        errno.EACCES: "check its permissions, or give another path",
        errno.EPERM: "check its permissions, or give another path",
    }.get(error.errno or 0, "check the path, or give another")
    return InputError(f"{what} {brief(str(name), 120)}: {reason}; {hint}")


class HardExit(SystemExit):
    """The profiled code called ``os._exit()`` in memprof's own process: raised there instead
    (see :func:`memprof.core.interpreter.kept_from_user_code`), so that the run fails with exit 3
    and its message, rather than ending the process with the code's status and no gate."""

    def __str__(self) -> str:
        return f"called os._exit({brief(self.code)})"


def first_line(error: BaseException) -> str:
    """``TypeName: the first line of its message`` (its message as :func:`message_of` reads it:
    the user's exception class may fail to say it)."""
    text = message_of(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def brief(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters (and a few levels of nesting), for
    quoting a value from a file or from the user's code in a one-line message."""
    import reprlib

    shortened = reprlib.Repr()
    shortened.maxstring = shortened.maxother = limit
    shortened.maxlevel, shortened.maxlist, shortened.maxdict = 3, 6, 6
    if type(value) is int and value.bit_length() > 4 * limit:  # repr would be long, or refused
        return f"<an integer of {value.bit_length()} bits>"
    try:
        return shortened.repr(value)
    except Exception:  # noqa: BLE001 - a __repr__ of the user's code can raise anything
        return f"<{type(value).__name__} object>"


def what_it_did(error: BaseException) -> str:
    """How the user's code failed, for a message: ``raised ValueError: bad input`` (first line
    of the message), or ``called sys.exit(0)``: leaving through ``sys.exit`` is the profiled
    code failing too, whatever the code (memprof's own exit code says what happened)."""
    from memprof.core.text import one_line

    if isinstance(error, HardExit):
        return f"called os._exit({brief(error.code)})"
    if isinstance(error, SystemExit):
        return f"called sys.exit({'' if error.code is None else brief(error.code)})"
    text = message_of(error).strip().splitlines()
    return f"raised {one_line(type(error).__name__)}: {one_line(text[0]) if text else ''}".rstrip(": ")


def message_of(error: BaseException) -> str:
    """``str(error)``, or what to say instead when the exception's own ``__str__`` fails (an
    exception class of the user's code can do anything there)."""
    try:
        return str(error)
    except Exception:  # noqa: BLE001 - whatever __str__ raised; Python's own words for it
        return "<exception str() failed>"


@contextlib.contextmanager
def user_code(failed: Callable[[str], str]) -> Iterator[None]:
    """Run the user's code: what it raises (``sys.exit()`` included) becomes a
    :class:`UserCodeError` (exit 3) with the message ``failed(what_it_did(error))`` and the
    user's traceback. memprof's own errors (a factory may refuse on purpose, with its own exit
    code) and Ctrl-C pass unchanged."""
    try:
        yield
    except (MemprofError, KeyboardInterrupt):
        raise
    except BaseException as error:
        traceback = format_user_traceback(error)
        raise UserCodeError(failed(what_it_did(error)), user_traceback=traceback, raised=error) from None


def format_user_traceback(error: BaseException) -> str:
    """The traceback of ``error`` with memprof's and importlib's frames left out, so the user
    sees their own code (and the libraries it called), as Python would show it."""
    import traceback

    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if _users(frame.filename)]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(error), error)
    return _capped_traceback("".join(lines))


def _users(filename: str) -> bool:
    """Whether a frame of ``filename`` is the user's: not memprof's own, nor importlib's (its
    import_module around the module's code)."""
    import importlib
    import os

    skipped = (
        # memprof/core/errors.py: the package is two folders up.
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
        os.path.dirname(os.path.abspath(importlib.__file__ or "")) + os.sep,
    )
    return not os.path.abspath(filename).startswith(skipped) and not filename.startswith("<frozen importlib")


def users_own(error: BaseException) -> BaseException:
    """``error`` with memprof's frames taken out of its traceback, to raise it again where the
    user's code was called from (the pytest plugin: the test fails with the user's error)."""
    import types

    kept = []
    step = error.__traceback__
    while step is not None:
        if _users(step.tb_frame.f_code.co_filename):
            kept.append(step)
        step = step.tb_next
    rebuilt = None
    for step in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, step.tb_frame, step.tb_lasti, step.tb_lineno)
    return error.with_traceback(rebuilt)


TRACEBACK_LINES = 100
"""The most lines of a user's traceback memprof prints (the first and the last ones are kept)."""

TRACEBACK_CHARS = 8000
"""The most characters of a user's traceback memprof prints (its last lines are kept first)."""


def _capped_traceback(text: str, line_limit: int = 1000) -> str:
    """At most :data:`TRACEBACK_LINES` lines of at most ``line_limit`` characters each, and
    :data:`TRACEBACK_CHARS` in all: an exception message of 50 MB, or a million frames, must
    not become memprof's output. The first lines and the last ones (the error) are kept."""
    lines = [line if len(line) <= line_limit else line[:line_limit] + "…" for line in text.splitlines()]
    head: list[str] = []
    tail: list[str] = []
    size = 0
    for line in lines[: TRACEBACK_LINES // 5]:  # where it started
        if size + len(line) > TRACEBACK_CHARS // 5:
            break
        head.append(line)
        size += len(line) + 1
    for line in reversed(lines[len(head) :]):  # where it failed
        if len(head) + len(tail) >= TRACEBACK_LINES or size + len(line) > TRACEBACK_CHARS:
            break
        tail.append(line)
        size += len(line) + 1
    left = len(lines) - len(head) - len(tail)
    kept = [*head, *([f"  ... ({left} lines not shown)"] if left else []), *reversed(tail)]
    return "\n".join(kept) + "\n" if kept else ""


# ---------------------------------------------------------------------------- parameter names

NO_VALUE: Any = object()
"""``param(name)`` without a value: the parameter itself, not a setting of it."""

Spelling = Callable[[str, Any], "str | None"]
"""``(parameter, value) -> text``, or None when the caller has no such parameter."""


def python_spelling(name: str, value: Any = NO_VALUE) -> str:
    """``repeat``, ``mode='eager'``: parameters as a Python caller writes them."""
    return name if value is NO_VALUE else f"{name}={value!r}"


_SPELLING: ContextVar[Spelling] = ContextVar("memprof_spelling", default=python_spelling)


def param(name: str, value: Any = NO_VALUE) -> str:
    """Parameter ``name`` (set to ``value``, if given) as the current caller writes it:
    ``repeat`` and ``mode='eager'`` from Python, ``--repeat`` and ``--mode eager`` on the
    command line. A parameter the caller does not have is named as in Python."""
    return _SPELLING.get()(name, value) or python_spelling(name, value)


def param_if_any(name: str, value: Any = NO_VALUE) -> str | None:
    """Like :func:`param`, or None when the caller has no such parameter: for hints that
    only make sense where the knob exists (the pytest plugin has no ``strict_env``)."""
    return _SPELLING.get()(name, value)


@contextlib.contextmanager
def spelled_as(spelling: Spelling) -> Iterator[None]:
    """Messages made inside the block name parameters with ``spelling``."""
    token = _SPELLING.set(spelling)
    try:
        yield
    finally:
        _SPELLING.reset(token)


class TimeLimitReached(KeyboardInterrupt):
    """Raised inside the profiled code (in the thread that runs it) when its time limit ran out
    (:mod:`memprof.sources.deadline`). A :class:`KeyboardInterrupt`, so that it passes every
    place that lets Ctrl-C through and no ``except Exception`` of the user's code stops it; the
    time limit turns it into a :class:`UserCodeError` naming where the code was."""
