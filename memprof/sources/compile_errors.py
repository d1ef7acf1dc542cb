"""What failed when a compiled call fails: the user's own error, or the compiler.

torch.compile traces the user's function with fake tensors before running anything, so an error
in the user's code (a shape mismatch, say) surfaces as torch's ``TorchRuntimeError: RuntimeError
when making fake tensor call``, with some thirty lines of torch's frames before it. The user's
error is at the root of the exception chain, and the line that raised it is in the
``real_stack`` torch attaches (or in the traceback's frames from the user's files).
:func:`traced_user_error` finds both, so the message can name them as Python would.

Only exception objects are inspected: torch is not imported here.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

# torch's wrappers of an error raised while tracing the user's code with fake tensors.
_TRACING_ERRORS = {"TorchRuntimeError", "Unsupported", "UserError", "UncapturedHigherOrderOpError"}


@dataclass(frozen=True)
class TracedError:
    """The user's error found under torch.compile's wrapper, with the user's frames."""

    error: BaseException
    frames: tuple[traceback.FrameSummary, ...]

    def first_line(self) -> str:
        text = str(self.error).strip().splitlines()
        return f"{type(self.error).__name__}: {text[0] if text else ''}".rstrip(": ")

    def where(self) -> str:
        """``shape.py:5 (return c @ b)``, the innermost user frame; empty when unknown."""
        if not self.frames:
            return ""
        frame = self.frames[-1]
        line = f" ({frame.line.strip()})" if frame.line else ""
        return f"{os.path.basename(frame.filename)}:{frame.lineno}{line}"

    def traceback_text(self) -> str:
        """The user's frames and error, laid out as Python prints a traceback."""
        lines = (
            ["Traceback (most recent call last), as torch.compile traced the code:\n"] if self.frames else []
        )
        lines += traceback.format_list(list(self.frames))
        lines += traceback.format_exception_only(type(self.error), self.error)
        return "".join(lines)


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and the exceptions it came from (causes first, then contexts), each once."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _from_torch(error: BaseException) -> bool:
    return (type(error).__module__ or "").startswith("torch")


def _user_frames(chain: list[BaseException]) -> tuple[traceback.FrameSummary, ...]:
    for error in chain:
        stack = getattr(error, "real_stack", None)
        if stack:
            return tuple(stack)
    root = chain[-1]
    ignored = tuple(os.sep + part + os.sep for part in ("torch", "memprof", "site-packages", "dist-packages"))
    return tuple(
        frame
        for frame in traceback.extract_tb(root.__traceback__)
        if not any(part in os.path.abspath(frame.filename) for part in ignored)
    )


def traced_user_error(error: BaseException) -> TracedError | None:
    """The user's error under a failed compiled call, or None when the compiler itself failed
    (or the error is not torch.compile's)."""
    chain = list(_chain(error))
    if not any(type(e).__name__ in _TRACING_ERRORS and _from_torch(e) for e in chain):
        return None
    root = chain[-1]
    if _from_torch(root):
        # No plain error underneath: torch's own complaint about the code (e.g. an unsupported
        # construct), still at the user's line.
        root = next(e for e in chain if type(e).__name__ in _TRACING_ERRORS)
    return TracedError(root, _user_frames(chain))
