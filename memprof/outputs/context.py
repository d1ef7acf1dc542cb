"""What a report's sections are built from (:class:`Context`), and how much of each list a
format shows (:class:`Limits`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memprof.model.kind import ReportKind

if TYPE_CHECKING:
    from memprof.analysis.gate import GateResult
    from memprof.model.report import Report
    from memprof.outputs.ranks import RankView

TOP_SITES = 10
"""The allocation sites a summary lists per snapshot."""


@dataclass(frozen=True)
class Limits:
    """How much of each list a format shows: ``top`` ops per table by ``sort`` bytes (None:
    all), ``quiet`` (keep the op rows the summaries leave out, marked), ``every_comparison``
    (an op table per comparison, not the first alone), at-peak ``entries``, ``modules`` and
    ``kernels`` per run, module ``groups`` per run (grouped by layer kind), ``fused`` kernels,
    allocation ``sites`` (None: all); ``chains``: a comparison's wrappers shown, each with what
    it wraps; ``short``: the short terminal report (what changed at the peak as its sentence
    alone, the notes counted rather than shown)."""

    top: int | None = None
    sort: str = "peak"
    quiet: bool = False
    every_comparison: bool = False
    entries: int | None = None
    modules: int | None = None
    kernels: int | None = None
    groups: int | None = None
    fused: int | None = None
    sites: int = TOP_SITES
    chains: bool = False
    short: bool = False


@dataclass(frozen=True)
class Context:
    """What a section is built from: the whole ``report``, the ``detail`` (its runs, or the
    detailed rank's), the rank ``view`` when there are ranks, the format's ``limits``, and the
    memory gate's result when there is one."""

    report: Report
    detail: Report
    view: RankView | None
    limits: Limits
    gate: GateResult | None = None

    @property
    def kind(self) -> ReportKind:
        """What the detailed runs are (never RANKS)."""
        return self.detail.kind if self.detail.kind is not ReportKind.RANKS else ReportKind.RUN
