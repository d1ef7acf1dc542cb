"""Replacing a function of torch's for the length of a run, and putting it back as it was: the
fake job's process-group calls and the probe of rank reads both do it.

A module that imported a function by name (``from torch.distributed import get_rank``) holds
its own reference: :func:`replace_everywhere` replaces those too.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Container
from typing import Any


def replace_attribute(stack: contextlib.ExitStack, owner: Any, name: str, replacement: Any) -> None:
    """``owner.name`` is ``replacement`` until ``stack`` closes, then what it was (as stored: a
    compiled class's method is not what looking the attribute up returns)."""
    stored = vars(owner).get(name, getattr(owner, name))
    setattr(owner, name, replacement)
    stack.callback(setattr, owner, name, stored)


def replace_everywhere(
    stack: contextlib.ExitStack,
    original: Callable[..., Any],
    replacement: Callable[..., Any],
    torch_modules: Container[str] | None = (),
) -> None:
    """Every loaded module's global that is ``original`` is ``replacement`` until ``stack``
    closes: the user's and libraries' modules, and of torch's those in ``torch_modules`` (None:
    all of them; torch's others reach it through those)."""
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        name = str(getattr(module, "__name__", ""))
        if (name == "torch" or name.startswith("torch.")) and torch_modules is not None:
            if name not in torch_modules:
                continue
        for key, value in list(namespace.items()):
            if value is original:
                replace_attribute(stack, module, key, replacement)
