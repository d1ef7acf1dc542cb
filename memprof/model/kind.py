"""What a report is (:class:`ReportKind`), and what a run is: decided here once, from where
the numbers come from and what the report holds. Every format lays out its sections by it
(:mod:`memprof.outputs.document`); nothing else asks ``source.kind`` or a run's source what a
report is."""

from __future__ import annotations

import enum
from typing import Protocol


class _Source(Protocol):
    @property
    def kind(self) -> str: ...


class _Run(Protocol):
    @property
    def source(self) -> str: ...


LIVE_SOURCE, ESTIMATE_SOURCE = "live", "estimate"
"""``Source.kind`` (and ``RunResult.source``) of runs profiled here and of estimates; any other
names recordings (``trace``, ``snapshot``: the format read)."""

BLOCK_SOURCE = "block"
"""``RunResult.source`` of a block of code profiled where it runs (:func:`memprof.track`): a run
profiled here, as a live one is."""

TRACE_SOURCE, SNAPSHOT_SOURCE = "trace", "snapshot"
"""``RunResult.source`` of runs read from a chrome trace and from a CUDA memory snapshot."""


class ReportKind(str, enum.Enum):
    """What a report is, decided once from where its numbers come from and what it holds: every
    format lays out its sections by it."""

    RUN = "run"
    """Live runs of a target (one, or several compared: variants, eager vs compiled)."""
    RECORDED = "recorded"
    """Traces or snapshots recorded elsewhere (``memprof analyze``)."""
    ESTIMATE = "estimate"
    """One estimate on fake tensors (``memprof estimate``)."""
    SWEEP = "sweep"
    """Estimates of several values of one parameter (a sweep)."""
    ADVICE = "advice"
    """Memory-saving techniques tried on fake tensors, and a plan for a budget (``memprof advise``)."""
    RANKS = "ranks"
    """Runs of several ranks of one job (live, or per-rank recordings): every rank side by side,
    then one rank detailed as a report of its own kind."""

    @classmethod
    def of_source(cls, source: _Source | None, swept: bool = False) -> ReportKind:
        """The kind of the numbers of ``source`` (a :class:`memprof.model.Source`; None:
        profiled here); ``swept``: an estimate holds a sweep."""
        name = LIVE_SOURCE if source is None else source.kind
        if name == ESTIMATE_SOURCE:
            return cls.SWEEP if swept else cls.ESTIMATE
        return cls.RUN if name == LIVE_SOURCE else cls.RECORDED

    @classmethod
    def of_run(cls, run: _Run) -> ReportKind:
        """Where one run's numbers come from (a :class:`memprof.model.RunResult`): RECORDED,
        ESTIMATE or RUN (profiled here)."""
        if run.source in (LIVE_SOURCE, BLOCK_SOURCE):
            return cls.RUN
        return cls.ESTIMATE if run.source == ESTIMATE_SOURCE else cls.RECORDED

    @property
    def estimated(self) -> bool:
        """An estimate, a sweep of estimates or advice: nothing real ran (advice's verification
        is said in its plan)."""
        return self in (ReportKind.ESTIMATE, ReportKind.SWEEP, ReportKind.ADVICE)
