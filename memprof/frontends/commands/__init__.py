"""One module per ``memprof`` subcommand. A module is a command by declaring its ``COMMAND``
(:class:`Command`): :mod:`memprof.frontends.cli` imports every module of this folder and
registers each one it finds, in the order of their ``place`` (``memprof --help`` lists them
so), with no list to add it to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Command:
    """A ``memprof`` subcommand: its ``function`` (named as the command; its parameters are the
    options, its docstring the help) and its ``place`` in ``memprof --help`` (lower first;
    commands of one place by name)."""

    function: Callable[..., Any]
    place: int = 100
