"""torch's own chatter during a run, kept out of the user's output and counted.

While memprof runs a target, torch warns and logs about memprof's own doing, not the user's:
"Profiler record function ... will be ignored" on every optimizer step under the profiler,
graph-break warnings while compiling, the fake-tensor tracebacks of a failed compile (memprof
says what failed itself), and, under pytest, over a thousand ``DEBUG torch.__trace`` records
in a failed test's captured log. :func:`hidden_torch_messages` catches them as they come, at
their own levels, and keeps them out of every output:

- warnings raised from torch's files (the user's own warnings are passed on afterwards);
- log records of torch's loggers (``torch`` and ``torch.*``): their handlers, torch's own and
  any a test runner attached to them, are set aside for the run.

Records at WARNING or above and torch's warnings are counted (and their first lines kept) so
the user can be told how many were hidden; DEBUG and INFO records are dropped, as torch's
default configuration would drop them. With ``show`` nothing is caught.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Heard:
    """What torch said during a run and was not shown: each message's first line, counted."""

    messages: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return sum(self.messages.values())

    def lines(self) -> tuple[tuple[str, int], ...]:
        """(first line, times) for each distinct message, most frequent first."""
        return tuple(self.messages.most_common())


class _Catcher(logging.Handler):
    def __init__(self, heard: Heard) -> None:
        super().__init__(logging.DEBUG)
        self.heard = heard

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            with contextlib.suppress(Exception):
                self.heard.messages[_first_line(record.getMessage())] += 1


def _first_line(text: str) -> str:
    lines = str(text).strip().splitlines()
    return lines[0].strip() if lines else ""


def _torch_loggers() -> list[logging.Logger]:
    names = [n for n in list(logging.root.manager.loggerDict) if n == "torch" or n.startswith("torch.")]
    loggers = [logging.getLogger(n) for n in names]
    return [logging.getLogger("torch"), *(lg for lg in loggers if lg.name != "torch")]


@contextlib.contextmanager
def _loggers_caught(heard: Heard) -> Iterator[None]:
    catcher = _Catcher(heard)
    saved = []
    for logger in _torch_loggers():
        # Loggers without handlers pass records up to a parent that has them (set aside too).
        if logger.handlers or logger.name == "torch":
            saved.append((logger, logger.handlers[:], logger.propagate))
            logger.handlers = [catcher]
            logger.propagate = False
    try:
        yield
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers = handlers
            logger.propagate = propagate


def _torch_dir() -> str | None:
    torch = sys.modules.get("torch")
    path = getattr(torch, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) + os.sep if path else None


@contextlib.contextmanager
def _warnings_caught(heard: Heard) -> Iterator[None]:
    caught: list[warnings.WarningMessage] = []
    failed = True
    try:
        # The user's filters stay in force: what they would have hidden is neither shown nor
        # counted, and a warning shown once per place is counted once.
        with warnings.catch_warnings(record=True) as caught_here:
            caught = caught_here
            yield
        failed = False
    finally:
        torch_dir = _torch_dir()
        for item in caught:
            if torch_dir and os.path.abspath(item.filename).startswith(torch_dir):
                heard.messages[f"{item.category.__name__}: {_first_line(str(item.message))}"] += 1
                continue
            # The user's own warnings (and other libraries'), under the user's filters again; a
            # filter that turns one into an error does not replace a failure already under way.
            with contextlib.suppress(Exception) if failed else contextlib.nullcontext():
                warnings.warn_explicit(
                    item.message, item.category, item.filename, item.lineno, source=item.source
                )


@contextlib.contextmanager
def hidden_torch_messages(show: bool = False) -> Iterator[Heard]:
    """Catch torch's warnings and log records for the block (nothing when ``show``); the
    :class:`Heard` yielded counts what was hidden, filled when the block ends."""
    heard = Heard()
    if show:
        yield heard
        return
    with _warnings_caught(heard), _loggers_caught(heard):
        yield heard
