"""What failed, in the user's terms: an error met while torch.compile traced the user's code
(:func:`traced_user_error`), and running out of memory (:func:`out_of_memory_message`).

**A failed compile.**
torch.compile traces the user's function with fake tensors before running anything, so an error
in the user's code (a shape mismatch, say) surfaces as torch's ``TorchRuntimeError: RuntimeError
when making fake tensor call``, with some thirty lines of torch's frames before it. The user's
error is at the root of the exception chain, and the line that raised it is in the
``real_stack`` torch attaches (or in the traceback's frames from the user's files).
:func:`traced_user_error` finds both, so the message can name them as Python would.

**Out of memory.** The user needs the allocation that failed (the allocator's message says
its size), what was live above the call's start when it failed, and the most reached.

Then what a failed call is reported as (:func:`failure_error`, :func:`warm_up_error`). Only
exception objects and messages are inspected: torch is not imported here.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memprof.core.errors import (
    MemprofError,
    UsageError,
    UserCodeError,
    first_line,
    format_user_traceback,
    param,
    what_it_did,
)
from memprof.core.units import format_bytes, parse_size
from memprof.sources.options import RunOptions
from memprof.sources.targets.target import unrun_result

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


def traced_error(traced: TracedError, name: str) -> UserCodeError:
    """The error (exit 3) for the user's error met while torch.compile traced ``name``."""
    where = f" at {traced.where()}" if traced.where() else ""
    return UserCodeError(
        f"{name} raised {traced.first_line()}{where} while torch.compile traced it; "
        f"run with {param('mode', 'eager')} to see the error plainly",
        user_traceback=traced.traceback_text(),
    )


_TRIED = (
    re.compile(r"tried to allocate (\d+) bytes", re.IGNORECASE),  # CPU: exact bytes
    re.compile(r"tried to allocate ([\d.]+) ?([KMGT]i?B)\b", re.IGNORECASE),  # CUDA: "20.00 GiB"
)


def _attempted_bytes(message: str) -> int | None:
    """The size of the allocation that failed, when the allocator's message says it."""
    exact = _TRIED[0].search(message)
    if exact:
        return int(exact.group(1))
    rounded = _TRIED[1].search(message)
    return parse_size(f"{rounded.group(1)} {rounded.group(2)}") if rounded else None


def out_of_memory_message(name: str, first_line: str, peak: int, peak_op: str | None, live: int) -> str:
    """What the user needs from an out-of-memory failure: the allocation that failed, what was
    live above the call's start when it failed, and the most that had been reached, and where."""
    attempted = _attempted_bytes(first_line)
    asked = f" trying to allocate {format_bytes(attempted)}" if attempted is not None else ""
    if peak <= 0:
        reached = "; nothing it allocated was live yet (the first allocation failed)"
    else:
        during = f", during {peak_op}" if peak_op else ""
        reached = (
            f" with {format_bytes(max(live, 0))} live above its start "
            f"(the most it reached: {format_bytes(peak)}{during})"
        )
    return f"{name} ran out of memory{asked}{reached}: {first_line}"


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is running out of memory: torch's (CUDA), Python's, or the CPU
    allocator's (a RuntimeError from c10's DefaultCPUAllocator)."""
    torch = sys.modules.get("torch")
    out_of_memory = getattr(torch, "OutOfMemoryError", MemoryError) if torch is not None else MemoryError
    return isinstance(error, out_of_memory | MemoryError) or (
        isinstance(error, RuntimeError) and "can't allocate memory" in str(error)
    )


def is_compile_error(error: BaseException) -> bool:
    """Whether ``error`` is torch.compile's own failure (Dynamo's, Inductor's, the compiler's)."""
    module = type(error).__module__ or ""
    return module.startswith(("torch._dynamo", "torch._inductor")) or type(error).__name__ in {
        "BackendCompilerFailed",
        "InductorError",
        "InvalidCxxCompiler",
    }


def warm_up_error(error: BaseException, name: str) -> UserCodeError:
    """A failed first compiled call: the user's code failing while torch.compile traced it,
    the compiler's failure, or the user's code raising."""
    traced = traced_user_error(error)
    if traced is not None:
        return traced_error(traced, name)
    if is_compile_error(error):
        return UserCodeError(
            f"torch.compile of {name} failed: {first_line(error)}; try {param('mode', 'eager')}"
        )
    return UserCodeError(
        f"{name} {what_it_did(error)} (first compiled call)",
        user_traceback=format_user_traceback(error),
        raised=error,
    )


def failure_error(
    error: BaseException, name: str, peak: int, peak_op: str | None, options: RunOptions, live: int = 0
) -> MemprofError:
    """The error a profiled call's failure is reported as: out of memory (with the peak
    reached), the user's error met while torch.compile traced it, torch.compile's own failure,
    or the user's code raising (with the peak before the failure and the op then running)."""
    where = f" while {peak_op} ran" if peak_op else ""
    if isinstance(error, MemprofError):
        return error
    if is_out_of_memory(error):
        return UserCodeError(
            out_of_memory_message(name, first_line(error), peak, peak_op, live),
            user_traceback=format_user_traceback(error),
            raised=error,
        )
    traced = traced_user_error(error) if options.mode == "compile" else None
    if traced is not None:
        return traced_error(traced, name)
    if options.mode == "compile" and is_compile_error(error):
        return UserCodeError(
            f"torch.compile of {name} failed: {first_line(error)}; try {param('mode', 'eager')}"
        )
    return UserCodeError(
        f"{name} {what_it_did(error)} (peak before the failure: {format_bytes(peak)}{where})",
        user_traceback=format_user_traceback(error),
        raised=error,
    )


class CallsFailed(Exception):
    """The profiled calls failed: what they raised, and the records made up to the failure.
    Whoever has the records analysed reports it with the peak reached (:meth:`reported`)."""

    def __init__(self, error: BaseException, name: str, raw: Any, options: RunOptions) -> None:
        super().__init__(first_line(error))
        self.error, self.name, self.raw, self.options = error, name, raw, options
        self.hidden_messages: Any = None
        """What torch said and memprof hid meanwhile (as a :class:`MemprofError` carries it)."""

    def reported(self, peak: int, peak_op: str | None, live: int) -> MemprofError:
        """The error the failure is reported as (:func:`failure_error`), with the peak reached
        above the calls' start, the op then running and what was live at the failure."""
        error = failure_error(self.error, self.name, peak, peak_op, self.options, live)
        error.hidden_messages = self.hidden_messages
        return error


def check_ran(result: Any, name: str) -> None:
    """A call that returned a generator or coroutine ran none of its body: nothing to measure."""
    kind = unrun_result(result)
    if kind is not None:
        raise UsageError(
            f"{name} returned a {kind}, so its body never ran and nothing was measured; profile a "
            f"function that consumes it (list(...) for a generator, asyncio.run(...) for a coroutine)"
        )
