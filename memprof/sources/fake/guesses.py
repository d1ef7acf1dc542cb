"""Values fake execution has to guess, and whether a guess steers the program.

Fake tensors have shapes but no values: ``bool(t)``, ``t.item()``, ``int(t)``, ``float(t)`` and
``t.tolist()`` of a fake tensor whose value torch cannot know are answered with a placeholder
(1, 1.0, True). That is harmless where the value is only carried along (``loss.item()`` logged),
and makes the estimate wrong where it decides what runs (a loop that stops when a tensor says
so, as Hugging Face's ``generate`` does) or how much is allocated (a size read from a tensor).

:class:`Guesses` is entered for a whole estimate: it wraps those tensor methods, counts each
guess by the statement that asked for it, and says whether the guess steered the program:

- a guessed ``bool`` always does (it is asked for to branch);
- a guessed integer is taken to (integers read from tensors become sizes, indices, trip
  counts);
- a guessed float is handed out as a :class:`GuessedFloat`, a float that notes where it is
  compared, tested for truth, or turned into an integer (what carries it along keeps the
  note: arithmetic on it gives guessed floats); ``float(t)`` must return a plain float, so its
  guess is counted but not followed.

A statement whose guess steers, asked again and again, is a loop that the guesses keep going
(``while loss > tol``, ``while s.item() > 0``: on fake tensors every such condition holds for
ever). Past :data:`GUESSED_LOOP_LIMIT` guesses of one statement, or
:data:`GUESSED_LOOP_SECONDS` after its first guess once it made
:data:`GUESSED_LOOP_MIN` of them, :class:`GuessedLoop` is raised there, and again at every
later guess (code that catches it meets it at its next one).
"""

from __future__ import annotations

import contextlib
import sys
import time
from types import FrameType
from typing import Any

import torch  # noqa: TID253 - fake execution

from memprof.core.errors import UserCodeError
from memprof.model.estimate import Guess
from memprof.sources.tracking.lines import LIBRARY, MEMPROF, USER, frame_kind, resolve_sites

GUESSED_LOOP_LIMIT = 10_000
"""The most guesses one steering statement may ask for before the estimate stops."""
GUESSED_LOOP_SECONDS = 120.0
GUESSED_LOOP_MIN = 100
"""A steering statement guessed at least this many times, over more than
:data:`GUESSED_LOOP_SECONDS` since its first guess, stops the estimate too (loops whose every
round runs a whole model)."""

_Key = tuple[str, tuple[str, int], tuple[str, int] | None]


class GuessedLoop(UserCodeError):
    """A statement whose guessed value steers the program was asked again and again: a loop
    that only the guesses keep going. ``where``: the statement (file, line), ``user``: the
    user's line that called it when it is another, ``count``: its guesses."""

    def __init__(
        self, where: tuple[str, int], user: tuple[str, int] | None, count: int, seconds: float
    ) -> None:
        super().__init__(f"a loop at {where[0]}:{where[1]} kept going on guessed values ({count} guesses)")
        self.where, self.user, self.count, self.seconds = where, user, count, seconds


_METHODS = ("item", "__bool__", "__int__", "__float__", "__index__", "tolist")
_SOURCE_KINDS = (USER, LIBRARY)


class Guesses:
    """Counts the guesses made while entered (see the module docstring): ``sites()`` lists
    them; ``count`` is every guess, ``steering`` whether any of them steered the program.

    ``placeholders`` is read before and after each wrapped call: a call that made the
    recorder answer with a placeholder made a guess."""

    def __init__(self, placeholders: Any) -> None:
        self._placeholders = placeholders
        self._rows: dict[_Key, list[Any]] = {}
        self._stack = contextlib.ExitStack()
        self.count = 0
        self.stopped: GuessedLoop | None = None

    def __enter__(self) -> Guesses:
        for name in _METHODS:
            original = getattr(torch.Tensor, name, None)
            if original is None:
                continue
            own = name in vars(torch.Tensor)
            setattr(torch.Tensor, name, self._wrapped(name, original))
            if own:
                self._stack.callback(setattr, torch.Tensor, name, original)
            else:  # the base class's: torch.Tensor gets back no attribute of its own
                self._stack.callback(delattr, torch.Tensor, name)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    @property
    def steering(self) -> bool:
        return any(row[1] for row in self._rows.values())

    def _wrapped(self, name: str, original: Any) -> Any:
        guesses = self

        def method(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            before = guesses._placeholders()
            value = original(tensor, *args, **kwargs)
            if guesses._placeholders() == before:
                return value
            return guesses._guessed(name, value)

        method.__name__ = name
        return method

    def _guessed(self, method: str, value: Any) -> Any:
        """Note a guessed ``value`` returned by ``method``; hand it out (floats marked)."""
        if isinstance(value, list):
            return [self._guessed(method, item) for item in value]
        kind = "bool" if isinstance(value, bool) else "float" if isinstance(value, float) else "int"
        # A truth test, or an integer asked for as an index or a size, decides what runs.
        steers = kind in ("bool", "int") or method == "__index__"
        key = self._note(kind, steers)
        # float(t) must give a float itself (Python refuses a subclass): its guess is counted,
        # not followed.
        if kind == "float" and not steers and method != "__float__":
            return GuessedFloat(value, self, key)
        return value

    def _note(self, kind: str, steers: bool) -> _Key:
        if self.stopped is not None:
            raise self.stopped
        where, user = _statements(sys._getframe(1))
        key = (kind, where, user)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = [0, False, "", time.monotonic()]
        row[0] += 1
        self.count += 1
        if steers and not row[1]:
            row[1], row[2] = True, f"{where[0]}:{where[1]}"
        if row[1]:
            self._check_loop(where, user, row)
        return key

    def _check_loop(self, where: tuple[str, int], user: tuple[str, int] | None, row: list[Any]) -> None:
        count, seconds = row[0], time.monotonic() - row[3]
        if count > GUESSED_LOOP_LIMIT or (count >= GUESSED_LOOP_MIN and seconds > GUESSED_LOOP_SECONDS):
            self.stopped = GuessedLoop(where, user, count, seconds)
            raise self.stopped

    def steered(self, key: _Key) -> None:
        """A guessed float was compared, tested or made an integer: note where (once)."""
        row = self._rows[key]
        if not row[1]:
            where, _ = _statements(sys._getframe(1))
            row[1], row[2] = True, f"{where[0]}:{where[1]}"

    def sites(self) -> tuple[Guess, ...]:
        """Every statement that asked for a guess, those that steered first, then by count."""
        keys = list(self._rows)
        lines = [key[1] for key in keys] + [key[2] for key in keys if key[2] is not None]
        resolved = dict(zip(lines, resolve_sites(lines), strict=True))
        out = []
        for key in keys:
            count, steers, steered_at, _ = self._rows[key]
            site = resolved[key[1]]
            user = resolved[key[2]] if key[2] is not None else None
            out.append(
                Guess(
                    kind=key[0],
                    source=site.source,
                    source_text=site.text,
                    user_source=user.source if user is not None and user != site else "",
                    user_source_text=user.text if user is not None and user != site else "",
                    count=count,
                    steers=steers,
                    steered_at=_shown(steered_at, resolved),
                )
            )
        return tuple(sorted(out, key=lambda s: (not s.steers, -s.count, s.source)))


def _shown(where: str, resolved: dict[tuple[str, int], Any]) -> str:
    if not where:
        return ""
    file, _, line = where.rpartition(":")
    site = resolved.get((file, int(line)))
    if site is not None:
        return str(site.source)
    return resolve_sites([(file, int(line))])[0].source


def _statements(frame: FrameType | None) -> tuple[tuple[str, int], tuple[str, int] | None]:
    """The innermost user or library frame at or above ``frame`` as (file, line), and the
    innermost user frame when it is another one (frames above memprof's, which called the
    estimated code, are not its)."""
    where: tuple[str, int] | None = None
    inside = False  # past memprof's own frames at the bottom; those above it called memprof
    while frame is not None:
        kind = frame_kind(frame.f_code.co_filename)
        if kind == MEMPROF:
            if inside:
                break
        else:
            inside = True
        if kind in _SOURCE_KINDS:
            here = (frame.f_code.co_filename, frame.f_lineno)
            if kind == USER:
                return (here, None) if where is None else (where, here)
            where = where or here
        frame = frame.f_back
    return where or ("<unknown>", 0), None


class GuessedFloat(float):
    """A float fake execution guessed: it behaves as the float it is, and tells its
    :class:`Guesses` when it steers the program (compared, tested for truth, made an integer).
    Arithmetic on it gives guessed floats."""

    def __new__(cls, value: float, guesses: Guesses, key: Any) -> GuessedFloat:
        made = super().__new__(cls, value)
        made._guesses = guesses  # type: ignore[attr-defined]
        made._key = key  # type: ignore[attr-defined]
        return made

    def _steer(self) -> None:
        self._guesses.steered(self._key)  # type: ignore[attr-defined]

    def _carry(self, value: Any) -> Any:
        if isinstance(value, float) and not isinstance(value, GuessedFloat):
            return GuessedFloat(value, self._guesses, self._key)  # type: ignore[attr-defined]
        return value

    def __bool__(self) -> bool:
        self._steer()
        return float(self) != 0.0

    def __int__(self) -> int:
        self._steer()
        return float.__int__(self)

    def __round__(self, ndigits: Any = None) -> Any:
        self._steer()
        return float.__round__(self, ndigits)

    def __floor__(self) -> int:
        self._steer()
        return float.__floor__(self)

    def __ceil__(self) -> int:
        self._steer()
        return float.__ceil__(self)

    def __trunc__(self) -> int:
        self._steer()
        return float.__trunc__(self)

    def __hash__(self) -> int:
        return float.__hash__(self)


def _comparison(name: str) -> Any:
    def compare(self: GuessedFloat, other: Any) -> Any:
        self._steer()
        return getattr(float, name)(self, other)

    compare.__name__ = name
    return compare


def _arithmetic(name: str) -> Any:
    def operate(self: GuessedFloat, *args: Any) -> Any:
        return self._carry(getattr(float, name)(self, *args))

    operate.__name__ = name
    return operate


for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(GuessedFloat, _name, _comparison(_name))
for _name in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
    "__neg__", "__pos__", "__abs__",
):  # fmt: skip
    setattr(GuessedFloat, _name, _arithmetic(_name))
