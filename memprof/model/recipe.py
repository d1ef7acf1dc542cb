"""How a run was made (:class:`Recipe`): the target, its inputs, the values given to the inputs
factory, the mode and the device; and what differs between two runs' recipes
(:func:`recipe_changes`: ``batch 8 -> 16``), which a comparison of two saved reports says first.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core import fields


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """How a run was made: ``target`` (``pkg.mod:func``, ``path/to/file.py:func``, or a
    callable's qualified name), ``inputs`` (the inputs factory's spec; ``python`` for arguments
    given in Python; ``none`` for a target without arguments), ``settings`` (the values given to
    the inputs factory by name, ``--set batch=16``, as text), ``mode`` (eager or compile) and
    ``device`` (the device it ran on, or whose allocator an estimate modelled)."""

    target: str = fields.text(required=True)
    inputs: str = fields.text(default="none")
    settings: dict[str, str] = fields.mapping(fields.TEXT)
    mode: str = fields.text(default="eager")
    device: str = fields.text(default="cpu")


def recipe_changes(base: Recipe | None, other: Recipe | None) -> tuple[str, ...]:
    """What differs between two runs' recipes, each as ``name base -> other``: every setting
    first (``batch 8 -> 16``), then the target, inputs, mode and device. Nothing when either
    run does not record its recipe (a recording, a report saved by an older memprof)."""
    if base is None or other is None:
        return ()
    changes = []
    for name in dict.fromkeys([*base.settings, *other.settings]):
        a, b = base.settings.get(name, "unset"), other.settings.get(name, "unset")
        if a != b:
            changes.append(f"{name} {a} -> {b}")
    for name in ("target", "inputs", "mode", "device"):
        a, b = getattr(base, name), getattr(other, name)
        if a != b:
            changes.append(f"{name} {a} -> {b}")
    return tuple(changes)
