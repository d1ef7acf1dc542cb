"""One run of a target as a report holds it: :class:`RunResult`.

A plain frozen dataclass; each field's line is its part of the JSON contract (see
:mod:`memprof.core.fields`). ``run.ops`` and ``run.modules`` build pandas DataFrames on demand, for
Python users.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from memprof.core import fields
from memprof.core.text import visible
from memprof.core.units import format_bytes
from memprof.model.compiled import CompileSection
from memprof.model.estimate import EstimateSection
from memprof.model.explanation import (
    AtPeak,
    CallNumbers,
    KernelStats,
    ModuleGroup,
    ModuleStats,
    modules_frame,
)
from memprof.model.kind import (
    ESTIMATE_SOURCE,
    LIVE_SOURCE,
    SNAPSHOT_SOURCE,
    TRACE_SOURCE,
    ReportKind,
)
from memprof.model.ops import OpStats, ops_frame, sort_ops
from memprof.model.recipe import Recipe
from memprof.model.recorded import AllocatorModel, SnapshotSection
from memprof.model.timeline import Timeline
from memprof.model.timing import Spread, format_wall

if TYPE_CHECKING:
    import pandas as pd

OK, FAILED = "ok", "failed"


@dataclass(frozen=True, kw_only=True, repr=False)
class RunResult:
    """One profiled run of a target (eager, compiled, or one variant of a comparison).

    ``op_stats`` holds one :class:`OpStats` per op name (largest peak first); ``ops`` is the same
    as a DataFrame. ``fused_kernels`` maps each fused kernel of the run to the aten ops it
    replaced (None in reports written before memprof stored it). docs/concepts/numbers.md says
    what each number means. A run whose code failed has ``status`` "failed", its message in ``error`` (and
    ``failed``), and no numbers. ``rank`` is the distributed rank that made the run (None
    outside a multi-rank job or a folder of per-rank traces).

    ``source`` says where the numbers come from: ``live`` (profiled here), ``block`` (a block
    of code profiled where it runs, :func:`memprof.track`), ``estimate`` (fake execution), or
    the format of the recording it was read from (``trace``, ``snapshot``). ``mode`` is how the
    code ran: ``eager`` or ``compile``; None when not known (a recording does not say).

    Fields only some runs know are None (and absent from the JSON) elsewhere: ``rank``,
    ``device``/``device_name``/``device_total_bytes``; ``footprint_bytes`` (everything live at
    the peak, what was live before included), ``live_at_start_bytes``, ``reserved_peak_bytes``
    (CUDA's caching allocator); ``snapshot`` and ``allocator_model`` (runs read from a CUDA
    memory snapshot); ``compile`` (a compiled run: its graphs, graph breaks and recompiles);
    ``recipe``, how the run was made (live runs and estimates: target, inputs, the inputs
    factory's values, mode, device).

    Explained runs (the default for live runs; docs/concepts/at-peak.md) have
    ``footprint_bytes`` and ``live_at_start_bytes`` (``peak_bytes`` is their difference),
    ``at_peak`` (what is live at the peak; ``at_peak.frame`` as a DataFrame), ``module_stats``
    (``modules`` as a DataFrame), ``call_numbers`` (each measured call; ``peak_call`` is the
    one explained) and, compiled, ``kernels``; empty elsewhere and left out of the JSON, so
    reports written before them still load. ``module_groups``: the modules grouped by layer
    kind, when a grouping was asked for (:func:`memprof.group_modules` makes any).
    """

    label: str = fields.text(required=True)
    mode: str | None = fields.maybe_text(default="eager", default_from="label")
    source: str = fields.text(default=LIVE_SOURCE)
    recipe: Recipe | None = fields.optional(Recipe)
    status: str = fields.text(default=OK, choices=(OK, FAILED))
    rank: int | None = fields.maybe_count()
    device: str | None = fields.optional_text()
    device_name: str | None = fields.optional_text()
    device_total_bytes: int | None = fields.maybe_size()
    peak_bytes: int = fields.size(required=True)
    footprint_bytes: int | None = fields.maybe_size()
    live_at_start_bytes: int | None = fields.maybe_size()
    reserved_peak_bytes: int | None = fields.maybe_size()
    allocated_bytes: int = fields.size()
    net_bytes: int = fields.signed_size()
    inputs_bytes: int = fields.size()
    wall_ms: float = fields.number()
    wall_ms_all: tuple[float, ...] = fields.items(fields.NUMBER)
    wall_timing: str = fields.text(default="profiled", choices=("timed", "warm-up", "profiled"))
    repeat: int = fields.count(default=1)
    peak_op: str | None = fields.maybe_text()
    peak_op_stack: tuple[str, ...] = fields.items(fields.TEXT)
    records: int = fields.count()
    op_stats: tuple[OpStats, ...] = fields.items(OpStats, key="ops", required=True)
    timeline: Timeline = fields.nested(Timeline)
    notes: tuple[str, ...] = fields.items(fields.TEXT)
    compile_seconds: float | None = fields.maybe_number(
        omit=lambda run: run.mode != "compile" and run.compile_seconds is None
    )
    compile: CompileSection | None = fields.optional(CompileSection)
    fused_kernels: dict[str, tuple[str, ...]] | None = fields.mapping(
        fields.list_of(fields.TEXT), default=None, nullable=True, omit=lambda run: run.fused_kernels is None
    )
    at_peak: AtPeak | None = fields.optional(AtPeak)
    module_stats: tuple[ModuleStats, ...] = fields.items(
        ModuleStats, key="modules", omit=lambda run: not run.module_stats
    )
    call_numbers: tuple[CallNumbers, ...] = fields.items(
        CallNumbers, key="calls", omit=lambda run: not run.call_numbers
    )
    peak_call: int | None = fields.maybe_count()
    kernels: tuple[KernelStats, ...] = fields.items(KernelStats, omit=lambda run: not run.kernels)
    module_groups: tuple[ModuleGroup, ...] = fields.items(ModuleGroup, omit=lambda run: not run.module_groups)

    device_counters: dict[str, int] = fields.mapping(fields.INTEGER, omit=lambda run: not run.device_counters)
    snapshot: SnapshotSection | None = fields.optional(SnapshotSection)
    allocator_model: AllocatorModel | None = fields.optional(AllocatorModel)
    estimate: EstimateSection | None = fields.optional(EstimateSection)
    error: str | None = fields.maybe_text(omit=lambda run: run.error is None)
    torch_table: str | None = fields.python_only()
    torch_messages: tuple[tuple[str, int], ...] = fields.python_only(default=())

    def __post_init__(self) -> None:
        # Ops are kept largest peak first (how every report lists them; ties keep their order),
        # and sequences as tuples, whatever the caller passed.
        object.__setattr__(self, "op_stats", sort_ops(self.op_stats, "peak"))
        for name in (
            "wall_ms_all",
            "peak_op_stack",
            "notes",
            "module_stats",
            "call_numbers",
            "kernels",
            "module_groups",
        ):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @staticmethod
    def from_older(data: dict[str, Any]) -> dict[str, Any]:
        """A run's JSON as reports written before runs said their ``source`` hold it, in
        today's shape: ``mode`` then named the recording a run was read from (``trace``,
        ``snapshot``; now its source, its mode unknown), and an estimate was told by its
        ``estimate`` section. (:func:`memprof.core.schema.decode` calls it.)"""
        if "source" in data:
            return data
        if data.get("mode") in (TRACE_SOURCE, SNAPSHOT_SOURCE):
            return {**data, "source": data["mode"], "mode": None}
        if data.get("estimate") is not None:
            return {**data, "source": ESTIMATE_SOURCE}
        return data

    @property
    def failed(self) -> str | None:
        """The failure's message when the run failed, else None."""
        return (self.error or "failed") if self.status == FAILED else None

    @property
    def wall_spread(self) -> Spread | None:
        """How the wall times of the timed calls spread (count, min, quartiles, max)."""
        return Spread.of(self.wall_ms_all)

    def summary(self) -> str:
        """One line: ``eager: peak 795.4 MiB during aten::sum, wall 311.5 ms ±0.4%``; for a run
        read from a recording, its peak above the recording's start, and for an estimate, its
        estimated peak (no wall time). One line: control characters and line breaks of a label
        or op name (a loaded report's) are escaped (``\\x1b``, ``\\n``)."""
        return visible(self._summary(), keep="")

    def _summary(self) -> str:
        if self.failed:
            return f"{self.label}: failed: {self.failed}"
        kind = ReportKind.of_run(self)
        if kind is ReportKind.RECORDED:  # a recording's: no wall time
            return peak_line(self)
        if kind is ReportKind.ESTIMATE:  # nothing real ran: no wall time
            return f"{self.label}: {amount(self)}"
        during = f" during {self.peak_op}" if self.peak_op else ""
        wall = format_wall(self.wall_ms_all, self.wall_ms)
        return f"{self.label}: peak {format_bytes(self.peak_bytes)}{during}, wall {wall}"

    def __repr__(self) -> str:
        return f"<memprof.RunResult {self.summary()}; {len(self.op_stats)} ops>"  # summary: escaped

    @cached_property
    def ops(self) -> pd.DataFrame:
        """One row per op name: ``name``, ``calls``, ``self_bytes``, ``total_bytes``,
        ``allocated_bytes``, ``peak_bytes`` (integer bytes), ``self_us``, ``total_us`` (CPU
        time, microseconds, profiler on). Built on first use."""
        return ops_frame(self.op_stats)

    @cached_property
    def modules(self) -> pd.DataFrame:
        """The module table of an explained run, one row per module and phase: ``module``,
        ``phase`` (forward, backward), ``calls``, ``peak_bytes``, ``allocated_bytes``,
        ``at_peak_bytes`` (integer bytes; submodules included). Empty when not explained."""
        return modules_frame(self.module_stats)

    def ops_sorted(self, by: str = "peak") -> pd.DataFrame:
        """Ops sorted by ``peak``, ``self`` (its magnitude), ``allocated`` or ``total`` bytes,
        largest first."""
        return ops_frame(sort_ops(self.op_stats, by))

    @property
    def timeline_ns(self) -> tuple[int, ...]:
        return self.timeline.t_ns

    @property
    def timeline_bytes(self) -> tuple[int, ...]:
        return self.timeline.bytes


# ---- a run in one line, as every format and repr say it ----------------------------------------


def _start_word(run: RunResult) -> str:
    return "the recording's start" if ReportKind.of_run(run) is ReportKind.RECORDED else "the call's start"


def peak_line(run: RunResult) -> str:
    """``cuda:0: peak 9.5 MiB above the recording's start (footprint 96.6 MiB, 87.1 MiB live at
    start) during aten::linear``."""
    parts = []
    if run.footprint_bytes is not None:
        parts.append(f"footprint {format_bytes(run.footprint_bytes)}")
    if run.live_at_start_bytes is not None:
        parts.append(f"{format_bytes(run.live_at_start_bytes)} live at start")
    context = f" ({', '.join(parts)})" if parts else ""
    where = ""
    if run.peak_op:
        where = f" at {peak_during(run)}" if run.source == SNAPSHOT_SOURCE else f" during {run.peak_op}"
    return f"{run.label}: peak {format_bytes(run.peak_bytes)} above {_start_word(run)}{context}{where}"


SEPARATORS = re.compile(r"[/\\]")


SITE = re.compile(r"^(?P<path>.+):(?P<rest>\d+ .*)$")


def short_site(site: str, prefix: str = "") -> str:
    """A site without ``prefix``; with no prefix, its file name only (``model.py:12 forward``)."""
    if prefix and site.startswith(prefix):
        return site[len(prefix) :]
    match = SITE.match(site)
    if match is None:
        return site
    return f"{SEPARATORS.split(match['path'])[-1]}:{match['rest']}"


def peak_during(run: RunResult) -> str:
    """The op at the peak, for a runs table; a snapshot's allocation site by its file name."""
    if not run.peak_op:
        return "-"
    return short_site(run.peak_op) if run.source == SNAPSHOT_SOURCE else run.peak_op


def amount(run: RunResult) -> str:
    """``estimated peak 52.2 MiB allocated, 76.0 MiB reserved`` (CUDA) or ``estimated peak
    795.4 MiB (795.4 MiB above the 1000.0 KiB live at the start)`` (CPU)."""
    footprint = run.footprint_bytes if run.footprint_bytes is not None else run.peak_bytes
    if run.reserved_peak_bytes is not None:
        reserved = format_bytes(run.reserved_peak_bytes)
        return f"estimated peak {format_bytes(footprint)} allocated, {reserved} reserved"
    start = run.live_at_start_bytes or 0
    return (
        f"estimated peak {format_bytes(footprint)} ({format_bytes(run.peak_bytes)} above the "
        f"{format_bytes(start)} live at the start)"
    )
