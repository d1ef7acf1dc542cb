"""The values of an at-peak diff (what :mod:`memprof.analysis.peak_diff` computes and a
report's ``diff.at_peak`` holds), with their part of the JSON contract (:mod:`memprof.core.fields`).

Pure and light: no numpy, no torch, no pandas.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core import fields


class _Change:
    """A row of both runs' bytes: ``delta_bytes`` is set from them (other - base)."""

    base_bytes: int
    other_bytes: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "delta_bytes", self.other_bytes - self.base_bytes)


@dataclass(frozen=True, kw_only=True)
class ModuleDelta(_Change):
    """Bytes live at each peak that a module made in one ``phase`` (``forward``, ``backward``,
    ``recompute``, ``optimizer``; empty for state made before the call). ``submodules``: whether
    the row counts bytes its submodules made (false for the row of a module's own bytes when
    its submodules have rows of their own, and where they made none). ``module`` is empty for
    bytes of no module (and those memprof could not attribute)."""

    module: str = fields.text(default="")
    phase: str = fields.text(default="")
    submodules: bool = fields.flag(default=True)
    base_bytes: int = fields.size()
    other_bytes: int = fields.size()
    delta_bytes: int = fields.signed_size(init=False)


@dataclass(frozen=True, kw_only=True)
class SourceDelta(_Change):
    """Bytes live at each peak made by one statement (``source``, ``file.py:LINE``, empty for
    bytes without a line: state made before the call, what memprof could not attribute), with
    its text, and the user's own line that led there when the statement is a library's (that of
    its largest bytes)."""

    source: str = fields.text(default="")
    source_text: str = fields.text(default="")
    user_source: str = fields.text(default="", omit=lambda row: not row.user_source)
    user_source_text: str = fields.text(default="", omit=lambda row: not row.user_source_text)
    base_bytes: int = fields.size()
    other_bytes: int = fields.size()
    delta_bytes: int = fields.signed_size(init=False)


@dataclass(frozen=True, kw_only=True)
class OpDelta(_Change):
    """Bytes live at each peak made by one op (an aten op or a compiled kernel; empty for none)."""

    op: str = fields.text(default="")
    base_bytes: int = fields.size()
    other_bytes: int = fields.size()
    delta_bytes: int = fields.signed_size(init=False)


@dataclass(frozen=True, kw_only=True)
class EntryDelta(_Change):
    """The finest rows: bytes live at each peak that share category, module, phase, line and op
    (what a failing gate lists as the contributors to the growth)."""

    category: str = fields.text(default="other")
    module: str = fields.text(default="")
    phase: str = fields.text(default="")
    source: str = fields.text(default="")
    source_text: str = fields.text(default="")
    op: str = fields.text(default="")
    base_bytes: int = fields.size()
    other_bytes: int = fields.size()
    delta_bytes: int = fields.signed_size(init=False)


@dataclass(frozen=True, kw_only=True)
class ActivationDelta(_Change):
    """Tensors kept for backward (category ``activation``) live at each peak, by module, phase,
    line, shape and dtype: a row with 0 on one side is kept by one run and not the other."""

    module: str = fields.text(default="")
    phase: str = fields.text(default="")
    source: str = fields.text(default="")
    shape: str = fields.text(default="")
    dtype: str = fields.text(default="")
    base_bytes: int = fields.size()
    other_bytes: int = fields.size()
    delta_bytes: int = fields.signed_size(init=False)


@dataclass(frozen=True, kw_only=True)
class AtPeakDiff:
    """What is live at the other run's peak against the base run's.

    Each table's rows add up exactly to ``footprint_delta_bytes`` (other - base): ``by_category``
    (category -> delta), ``by_module`` (module and phase, at the depth
    :func:`memprof.analysis.peak_diff.module_rows` chooses), ``by_source`` (line), ``by_op``;
    rows largest change first, a row for what has no module, line or op. ``activations``: the
    tensors each run keeps for backward. ``only_in_other`` / ``only_in_base``: module and phase
    groups one run holds at its peak and the other holds none of at its own (buffers alive
    together in one run that the other never holds at its peak). ``notes``: where the
    explanation comes from and what it cannot say (compiled runs: Inductor's provenance).
    ``summary``: one sentence naming the rows that explain most of the change."""

    base_footprint_bytes: int = fields.size()
    other_footprint_bytes: int = fields.size()
    footprint_delta_bytes: int = fields.signed_size(init=False)
    by_category: dict[str, int] = fields.mapping(fields.SIGNED_SIZE)
    by_module: tuple[ModuleDelta, ...] = fields.items(ModuleDelta)
    by_source: tuple[SourceDelta, ...] = fields.items(SourceDelta)
    by_op: tuple[OpDelta, ...] = fields.items(OpDelta)
    activations: tuple[ActivationDelta, ...] = fields.items(ActivationDelta)
    only_in_other: tuple[ModuleDelta, ...] = fields.items(ModuleDelta)
    only_in_base: tuple[ModuleDelta, ...] = fields.items(ModuleDelta)
    notes: tuple[str, ...] = fields.items(fields.TEXT)
    summary: str = fields.text(default="")

    def __post_init__(self) -> None:
        delta = self.other_footprint_bytes - self.base_footprint_bytes
        object.__setattr__(self, "footprint_delta_bytes", delta)
