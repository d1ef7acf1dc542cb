"""What memprof is doing, on stderr, while it works: ``memprof: compiling train_step ... 15 s``.

On a terminal, one line updated in place (each message replaces the one before, cut to the
terminal's width), cleared before the report or any other line is printed. Elsewhere (a pipe,
a file, a CI log), one line per step, cut to the width (``COLUMNS``, else 100): the ticks that
only say how long a step has taken so far are left out, but the first, which says what to
expect of a long step.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, TextIO

from memprof.core.text import one_line

_ELLIPSIS = "…"


def fit(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut at the end."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + _ELLIPSIS


def _step(message: str) -> str:
    """What a message is about: the text before `` ... `` (the ticks of one step share it)."""
    return message.split(" ... ", 1)[0]


class StatusLine:
    """Status messages on ``stream`` (stderr): in place on a terminal, one line per step
    otherwise. Call :meth:`clear` before printing anything else."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        try:
            self.tty = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.tty = False
        self.shown = False
        self.printed: str | None = None  # the step of the last line printed (not a terminal)
        self.lock = threading.Lock()  # the ticks of a long step come from another thread

    def width(self) -> int:
        from memprof.outputs.layout import terminal_width

        return terminal_width(self.stream)

    def __call__(self, message: str) -> None:
        text = one_line(f"memprof: {message}", 2000)
        step = _step(message)
        with self.lock:
            if self.tty:
                # One column spare: a line as wide as the terminal would wrap the cursor.
                self.stream.write("\r" + fit(text, self.width() - 1) + "\x1b[K")
                self.shown = True
            elif step != self.printed or "(" in message.partition(" ... ")[2]:
                self.stream.write(fit(text, self.width()) + "\n")
                self.printed = step
            self.stream.flush()

    def clear(self) -> None:
        """Take the line in place off the screen (on a terminal): what follows starts clean."""
        with self.lock:
            if self.tty and self.shown:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            self.shown = False


_ACTIVE: list[StatusLine] = []


def status_line(stream: Any = None) -> StatusLine:
    """A new status line, the one :func:`clear_status` clears."""
    line = StatusLine(stream)
    _ACTIVE[:] = [line]
    return line


def clear_status() -> None:
    """Clear the status line in place, if any, before a line or the report is printed."""
    for line in _ACTIVE:
        line.clear()
