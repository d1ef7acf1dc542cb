"""memprof's errors and exit codes.

Every failure a user can cause or meet is a :class:`MemprofError` carrying the exit code
the command line returns for it. The CLI catches them in one place (``cli._handle_errors``),
prints the one-line message and exits with ``exit_code``.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_USER_CODE = 3
EXIT_INTERRUPTED = 130


class MemprofError(Exception):
    """Base of memprof's errors; ``exit_code`` is what the command line returns."""

    exit_code: int = EXIT_USAGE

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

    ``user_traceback`` holds the user's traceback with memprof's own frames trimmed.
    """

    exit_code = EXIT_USER_CODE

    def __init__(self, message: str, *, user_traceback: str = "") -> None:
        super().__init__(message)
        self.user_traceback = user_traceback


def format_user_traceback(error: BaseException) -> str:
    """The traceback of ``error`` with memprof's and importlib's frames left out, so the user
    sees their own code (and the libraries it called), as Python would show it."""
    import os
    import traceback

    package_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not os.path.abspath(frame.filename).startswith(package_dir)
        and not frame.filename.startswith("<frozen importlib")
    ]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(error), error)
    return "".join(lines)
