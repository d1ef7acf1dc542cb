"""The results memprof produces: :class:`RunResult` per run, :class:`Report` for a target.

Plain frozen dataclasses. A Report is what every output is rendered from and what ``to_json``
writes; the JSON is also a baseline for the gate. Each field's line below is its part of the
JSON contract (see :mod:`memprof.fields`); :mod:`memprof.schema` writes and reads them. Loading
a report back (``load_report``) needs neither torch nor pandas; ``run.ops`` and
``report.diff.ops`` build pandas DataFrames on demand, for Python users.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof import __version__, fields, schema
from memprof.analysis.explanation import (
    AtPeak,
    CallNumbers,
    KernelStats,
    ModuleGroup,
    ModuleStats,
    modules_frame,
)
from memprof.analysis.ops import OP_COLUMNS, OpStats, ops_frame, sort_ops
from memprof.analysis.sweep import Sweep
from memprof.analysis.timeline import Timeline
from memprof.errors import InputError, brief

if TYPE_CHECKING:
    import pandas as pd

    from memprof.analysis.diff import RunDiff
    from memprof.analysis.peaks import Analysis
    from memprof.analysis.ranks import RankSummary
    from memprof.analysis.timing import Spread

__all__ = [
    "OP_COLUMNS",
    "AllocatorModel",
    "OpStats",
    "Report",
    "RunResult",
    "SnapshotSection",
    "Source",
    "Timeline",
    "load_report",
]

SCHEMA_VERSION = 2
"""What this memprof writes. Version 1 (no ``fused_kernels``, the older diff layout) still loads."""
READABLE_SCHEMA_VERSIONS = (1, 2)

OK, FAILED = "ok", "failed"


# ------------------------------------------------------------------ recordings (traces, snapshots)


@dataclass(frozen=True, kw_only=True)
class SourceFile:
    """One file a report was read from: its ``path``, ``kind`` (``trace`` or ``snapshot``), the
    labels of the ``runs`` it gave, and what it records about itself (rank, world size,
    distributed backend, torch version; None where it does not say)."""

    path: str = fields.text(required=True)
    kind: str = fields.text(required=True)
    runs: tuple[str, ...] = fields.items(fields.TEXT)
    rank: int | None = fields.maybe_count()
    world_size: int | None = fields.maybe_count()
    distributed_backend: str | None = fields.optional_text()
    torch_version: str | None = fields.optional_text()


@dataclass(frozen=True, kw_only=True)
class Source:
    """Where a report's numbers come from: ``kind`` ``live`` (profiled here), ``trace`` (chrome
    traces), ``snapshot`` (CUDA memory snapshots), ``trace+snapshot`` (both), ``estimate``;
    ``paths`` as given, ``files`` each file read."""

    kind: str = fields.text(required=True)
    paths: tuple[str, ...] = fields.items(fields.TEXT)
    files: tuple[SourceFile, ...] = fields.items(SourceFile)


@dataclass(frozen=True, kw_only=True)
class SnapshotSite:
    """Requested bytes live at the peak that were allocated at one ``site`` (``file:line
    function`` of the innermost Python frame), in ``count`` blocks."""

    site: str = fields.text(required=True)
    bytes: int = fields.size()
    count: int = fields.count()


@dataclass(frozen=True, kw_only=True)
class Fragmentation:
    """The reserve at dump time: ``cached_bytes`` = reserved - allocated (free, held by the
    cache), the largest free block, the trace's largest request and the cached bytes that could
    not hold it (other pool, other stream, or too small; None without a trace)."""

    cached_bytes: int = fields.size()
    largest_free_block_bytes: int = fields.size()
    largest_request_bytes: int | None = fields.maybe_size()
    unusable_bytes: int | None = fields.maybe_size()


@dataclass(frozen=True, kw_only=True)
class OomEvent:
    """An out-of-memory the trace recorded (``index``: its event number), explained: the request
    (rounded, as recorded), free on the device, and what the allocator held then. ``cause`` is
    ``fragmentation`` when the cache held enough free bytes but no block that fits."""

    index: int = fields.count()
    time_us: int | None = fields.maybe_count()
    requested_bytes: int = fields.size()
    free_on_device_bytes: int = fields.size()
    reserved_bytes: int = fields.size()
    allocated_bytes: int = fields.size()
    largest_free_block_bytes: int = fields.size()
    cause: str = fields.text(default="capacity", choices=("capacity", "fragmentation"))


@dataclass(frozen=True, kw_only=True)
class WhatIf:
    """The snapshot's allocations replayed from an empty allocator under ``settings``: the
    highest reserved and allocated bytes (block sizes), reserved above allocated, segments asked
    of the device, the largest free block at the end, and how many recorded out-of-memory
    requests would still fail within ``capacity_bytes`` (None: capacity unknown, not checked)."""

    settings: str = fields.text(required=True)
    reserved_peak_bytes: int = fields.size()
    allocated_peak_bytes: int = fields.size()
    reserve_overhead_bytes: int = fields.size()
    segment_allocations: int = fields.count()
    largest_free_block_bytes: int = fields.size()
    capacity_bytes: int | None = fields.maybe_size()
    ooms: int = fields.count()


@dataclass(frozen=True, kw_only=True)
class SnapshotSection:
    """What a CUDA memory snapshot says about one device beyond the run's numbers.

    At dump time: segments (small, large, expandable), reserved, allocated (block sizes) and
    requested bytes. Its trace: events, each action's count, frees of blocks allocated before
    it began (the ring buffer wrapped when > 0), the highest live requested bytes and when,
    the sites live then, the memory the allocator could have had (reserved + free at the first
    out-of-memory), fragmentation, each out-of-memory explained, and the what-if replays asked for.
    """

    segments: int = fields.count()
    small_segments: int = fields.count()
    large_segments: int = fields.count()
    expandable_segments: int = fields.count()
    reserved_bytes: int = fields.size()
    allocated_bytes: int = fields.size()
    requested_bytes: int = fields.size()
    trace_events: int = fields.count()
    trace_actions: dict[str, int] = fields.mapping(fields.COUNT)
    frees_without_alloc: int = fields.count()
    peak_requested_bytes: int = fields.size()
    peak_time_us: int | None = fields.maybe_count()
    capacity_bytes: int | None = fields.maybe_size()
    sites_at_peak: tuple[SnapshotSite, ...] = fields.items(SnapshotSite)
    fragmentation: Fragmentation = fields.nested(Fragmentation)
    ooms: tuple[OomEvent, ...] = fields.items(OomEvent)
    what_if: tuple[WhatIf, ...] = fields.items(WhatIf)


@dataclass(frozen=True, kw_only=True)
class AllocatorModel:
    """The caching-allocator model's replay of a snapshot's trace against what was recorded:
    allocations placed at the recorded address, segments asked for at the same event with the
    same size (and those the trace does not have), blocks at dump time reproduced, reserved and
    allocated bytes at the end equal; ``exact`` when all are. ``settings``: the settings it ran
    with; ``settings_differ``: recorded settings it does not follow."""

    placements_matched: int = fields.count()
    placements: int = fields.count()
    segments_matched: int = fields.count()
    segments: int = fields.count()
    segments_unexpected: int = fields.count()
    blocks_matched: int = fields.count()
    blocks: int = fields.count()
    reserved_matched: bool = fields.flag()
    allocated_matched: bool = fields.flag()
    exact: bool = fields.flag(init=False)
    settings: str = fields.text(default="default")
    settings_differ: tuple[str, ...] = fields.items(fields.TEXT)

    def __post_init__(self) -> None:
        exact = (
            self.placements_matched == self.placements
            and self.segments_matched == self.segments
            and not self.segments_unexpected
            and self.blocks_matched == self.blocks
            and self.reserved_matched
            and self.allocated_matched
        )
        object.__setattr__(self, "exact", exact)


@dataclass(frozen=True, kw_only=True)
class AllocatorReplay:
    """An estimate's allocations and frees, from the first input made to the end of the
    estimated call, replayed through the CUDA caching-allocator model (default settings, one
    stream), as on a device with no limit: the highest allocated bytes (block sizes) and
    reserved bytes (whole segments, each a ``cudaMalloc``), reserved above allocated, segments
    held at the end and asked for in all, the largest cached free block at the end.

    With a ``capacity_bytes``, replayed once more within it, as the allocator would behave on
    that device (when a segment does not fit, it frees its cached segments and tries again):
    the highest reserve there (``capacity_reserved_peak_bytes``) and the requests that found
    no room even then (``ooms``: the run does not fit)."""

    settings: str = fields.text(default="default")
    allocated_peak_bytes: int = fields.size()
    reserved_peak_bytes: int = fields.size()
    reserve_overhead_bytes: int = fields.size()
    segments: int = fields.count()
    segment_allocations: int = fields.count()
    largest_free_block_bytes: int = fields.size()
    capacity_bytes: int | None = fields.maybe_size()
    capacity_reserved_peak_bytes: int | None = fields.maybe_size()
    ooms: int = fields.count()


@dataclass(frozen=True, kw_only=True)
class Guess:
    """A statement whose code asked fake execution for a value it cannot know (``bool(t)``,
    ``t.item()``, ``int(t)``, ...) and got a placeholder: what was asked (``kind``: ``bool``,
    ``int`` or ``float``), where (``source``, the innermost statement of the user's or a
    library's code, with its text, and the user's own line that led there when another), how
    many times, and whether the guessed value ``steers`` the program (decides what runs or
    how much is allocated; ``steered_at``: where it first did)."""

    kind: str = fields.text(required=True, choices=("bool", "int", "float"))
    source: str = fields.text(default="")
    source_text: str = fields.text(default="")
    user_source: str = fields.text(default="", omit=lambda guess: not guess.user_source)
    user_source_text: str = fields.text(default="", omit=lambda guess: not guess.user_source_text)
    count: int = fields.count()
    steers: bool = fields.flag()
    steered_at: str = fields.text(default="", omit=lambda guess: not guess.steered_at)


@dataclass(frozen=True, kw_only=True)
class EstimateSection:
    """How a run was estimated (``memprof estimate``): whose allocator it models (``cpu``,
    ``cuda``), the seconds the fake execution took (warm-up included), the ops of the estimated
    call, each op with a measured workspace and its largest (bytes), the ops whose workspaces
    could not be measured, the scalar reads answered with a placeholder (``placeholders``; each
    statement that asked, in ``guesses``), whether the estimate can be relied on (``reliable``:
    false when a guessed value steered the program, which may then have taken another path
    than a real run), and the CUDA allocator's replay."""

    modelled_device: str = fields.text(default="cuda", choices=("cpu", "cuda"))
    seconds: float = fields.number()
    ops: int = fields.count()
    workspace_ops: dict[str, int] = fields.mapping(fields.SIZE)
    unmeasured_ops: tuple[str, ...] = fields.items(fields.TEXT)
    placeholders: int = fields.count()
    allocator: AllocatorReplay | None = fields.optional(AllocatorReplay)
    reliable: bool = fields.flag(default=True)
    guesses: tuple[Guess, ...] = fields.items(Guess, omit=lambda section: not section.guesses)


@dataclass(frozen=True, kw_only=True)
class Fits:
    """Whether an estimate fits a device's memory: ``capacity_bytes`` (``gpu`` names the card
    it came from, when one was named), less ``reserve_bytes`` kept for what lies outside the
    caching allocator (the CUDA context, libraries' handles and workspaces), the bytes the run
    needs (``needed``: the reserved peak on CUDA, the footprint on the CPU; the largest over the
    runs) and what is left (``headroom_bytes`` = capacity - reserve - needed; negative: short by
    that much). ``reliable`` is false when the estimate guessed values that steer the program
    (see :class:`EstimateSection`): then ``fits`` is false too, as nothing can be claimed."""

    capacity_bytes: int = fields.size(required=True)
    fits: bool = fields.flag()
    headroom_bytes: int = fields.signed_size()
    needed_bytes: int = fields.size()
    needed: str = fields.text(default="footprint_bytes", choices=("footprint_bytes", "reserved_peak_bytes"))
    run: str | None = fields.optional_text()
    gpu: str | None = fields.optional_text()
    reserve_bytes: int = fields.size()
    reliable: bool = fields.flag(default=True)

    @property
    def usable_bytes(self) -> int:
        """What the run may take: the capacity less the reserve."""
        return self.capacity_bytes - self.reserve_bytes


@dataclass(frozen=True, kw_only=True, repr=False)
class RunResult:
    """One profiled run of a target (eager, compiled, or one variant of a comparison).

    ``op_stats`` holds one :class:`OpStats` per op name (largest peak first); ``ops`` is the same
    as a DataFrame. ``fused_kernels`` maps each fused kernel of the run to the aten ops it
    replaced (None in reports written before memprof stored it). docs/concepts/numbers.md says
    what each number means. A run whose code failed has ``status`` "failed", its message in ``error`` (and
    ``failed``), and no numbers. ``rank`` is the distributed rank that made the run (None
    outside a multi-rank job or a folder of per-rank traces).

    Fields only some runs know are None (and absent from the JSON) elsewhere: ``rank``,
    ``device``/``device_name``/``device_total_bytes``; ``footprint_bytes`` (everything live at
    the peak, what was live before included), ``live_at_start_bytes``, ``reserved_peak_bytes``
    (CUDA's caching allocator); ``snapshot`` and ``allocator_model`` (runs read from a CUDA
    memory snapshot).

    Explained runs (the default for live runs; docs/concepts/at-peak.md) have
    ``footprint_bytes`` and ``live_at_start_bytes`` (``peak_bytes`` is their difference),
    ``at_peak`` (what is live at the peak; ``at_peak.frame`` as a DataFrame), ``module_stats``
    (``modules`` as a DataFrame), ``call_numbers`` (each measured call; ``peak_call`` is the
    one explained) and, compiled, ``kernels``; empty elsewhere and left out of the JSON, so
    reports written before them still load. ``module_groups``: the modules grouped by layer
    kind, when a grouping was asked for (:func:`memprof.group_modules` makes any).
    """

    label: str = fields.text(required=True)
    mode: str = fields.text(default="eager", default_from="label")
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
    wall_timing: str = fields.text(default="profiled", choices=("timed", "profiled"))
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
    def failed_run(label: str, mode: str, message: str) -> RunResult:
        """A run whose code failed: no numbers, the failure's message in ``error``."""
        return RunResult(label=label, mode=mode, status=FAILED, peak_bytes=0, error=message)

    @classmethod
    def from_analysis(cls, analysis: Analysis, **run: Any) -> RunResult:
        """The run built from the analysis' values: every number of ``analysis.numbers`` that
        is a field of a run (peak, allocated, net, peak op, records, ...), the ops, the timeline
        and the analysis' notes (after ``run["notes"]``); ``run`` gives the rest (label, mode,
        times, what the source observed)."""
        names = {f.name for f in dataclass_fields(cls)}
        numbers = analysis.numbers
        values = {f.name: getattr(numbers, f.name) for f in dataclass_fields(numbers) if f.name in names}
        values.update(op_stats=analysis.ops, timeline=analysis.timeline)
        notes = (*run.pop("notes", ()), *analysis.notes)
        return cls(**{**values, **run, "notes": notes})

    @property
    def failed(self) -> str | None:
        """The failure's message when the run failed, else None."""
        return (self.error or "failed") if self.status == FAILED else None

    @property
    def wall_spread(self) -> Spread | None:
        """How the wall times of the timed calls spread (count, min, quartiles, max)."""
        from memprof.analysis.timing import Spread

        return Spread.of(self.wall_ms_all)

    def summary(self) -> str:
        """One line: ``eager: peak 795.4 MiB during aten::sum, wall 311.5 ms ±0.4%``; for a run
        read from a recording, its peak above the recording's start, and for an estimate, its
        estimated peak (no wall time)."""
        if self.failed:
            return f"{self.label}: failed: {self.failed}"
        if self.mode in ("trace", "snapshot"):  # a recording's: no wall time
            from memprof.report.recorded import peak_line

            return peak_line(self)
        if self.estimate is not None:  # nothing real ran: no wall time
            from memprof.report.estimate import amount

            return f"{self.label}: {amount(self)}"
        from memprof.analysis.timing import format_wall
        from memprof.units import format_bytes

        during = f" during {self.peak_op}" if self.peak_op else ""
        wall = format_wall(self.wall_ms_all, self.wall_ms)
        return f"{self.label}: peak {format_bytes(self.peak_bytes)}{during}, wall {wall}"

    def __repr__(self) -> str:
        return f"<memprof.RunResult {self.summary()}; {len(self.op_stats)} ops>"

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


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True, kw_only=True, repr=False)
class Report:
    """A target's runs, with the environment they ran in.

    ``runs`` keeps insertion order; the first run is the base every other run is compared to.
    The comparisons (``diffs``) are computed once, when first asked for: treat a Report as a
    value and make a new one (``dataclasses.replace``) rather than changing its runs.
    """

    target: str = fields.text(required=True)
    device: str = fields.text(default="cpu")
    created: str = fields.text(default_factory=_now)
    environment: dict[str, str] = fields.mapping(fields.TEXT)
    source: Source | None = fields.optional(Source)
    runs: dict[str, RunResult] = fields.mapping(RunResult, required=True, nonempty=True, key_field="label")
    fits: Fits | None = fields.optional(Fits)
    sweep: Sweep | None = fields.optional(Sweep)

    @property
    def base(self) -> RunResult:
        return next(iter(self.runs.values()))

    def ok_runs(self) -> list[RunResult]:
        return [r for r in self.runs.values() if not r.failed]

    @cached_property
    def diffs(self) -> tuple[RunDiff, ...]:
        """Each successful run after the first compared with the first; none when the runs are
        on different devices or ranks (a GPU is not compared with the host, nor one rank with
        another)."""
        from memprof.analysis.diff import diff_runs

        runs = self.ok_runs()
        # Only runs of one device and one rank are comparable (a per-rank view of a job is).
        if len({(run.device, run.rank) for run in runs}) > 1:
            return ()
        return tuple(diff_runs(runs[0], other) for other in runs[1:])

    @cached_property
    def ranks(self) -> RankSummary | None:
        """Per-rank rows and the imbalance of the ranks' peaks, when runs carry a ``rank``
        (a distributed job, per-rank traces); else None."""
        from memprof.analysis.ranks import summarize

        return summarize(self.runs.values())

    @property
    def recorded(self) -> bool:
        """Whether the runs were read from recordings (traces, snapshots), not profiled here."""
        return self.source is not None and self.source.kind not in ("live", "estimate")

    @property
    def diff(self) -> RunDiff | None:
        """The comparison of the second run with the first, when there are two or more."""
        return self.diffs[0] if self.diffs else None

    def verdict(self) -> str | None:
        diff = self.diff
        return diff.verdict if diff else None

    def __repr__(self) -> str:
        runs = "; ".join(run.summary() for run in self.runs.values())
        verdict = f"; {self.verdict()}" if self.diffs else ""
        return f"<memprof.Report {self.target} on {self.device}: {runs}{verdict}>"

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: ``schema_version``, ``memprof_version``, the report's fields,
        then ``diff`` (second run vs first) and, with three or more runs, ``diffs`` (every later
        run vs the first, by label), and ``ranks`` when runs carry a rank."""
        data: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "memprof_version": __version__}
        data.update(schema.encode(self))
        if self.diffs:
            data["diff"] = schema.encode(self.diffs[0])
            if len(self.diffs) > 1:
                data["diffs"] = {d.other: schema.encode(d) for d in self.diffs}
        if self.ranks is not None:
            data["ranks"] = schema.encode(self.ranks)
        return data

    def to_json(self) -> str:
        return schema.dumps(self.to_dict())

    def ops_long(self) -> pd.DataFrame:
        """One row per op and run: ``run`` then the op columns (the CSV layout)."""
        import pandas as pd

        frames = [
            run.ops_sorted("peak").assign(run=label) for label, run in self.runs.items() if not run.failed
        ]
        if not frames:
            return pd.DataFrame(columns=["run", *OP_COLUMNS])
        frame = pd.concat(frames, ignore_index=True)
        return frame[["run", *OP_COLUMNS]]

    def at_peak_long(self) -> pd.DataFrame:
        """What is live at the peak of each explained run, one row per entry (then per
        unattributed line): ``run`` then the columns of ``AtPeak.frame`` (the at-peak CSV)."""
        import pandas as pd

        from memprof.analysis.explanation import AT_PEAK_COLUMNS

        frames = [
            run.at_peak.frame.assign(run=label)
            for label, run in self.runs.items()
            if not run.failed and run.at_peak is not None
        ]
        if not frames:
            return pd.DataFrame(columns=["run", *AT_PEAK_COLUMNS])
        return pd.concat(frames, ignore_index=True)[["run", *AT_PEAK_COLUMNS]]

    def _repr_html_(self) -> str:
        from memprof.report.notebook import notebook_html

        return notebook_html(self)

    @staticmethod
    def from_dict(data: Any, where: str = "report") -> Report:
        """Rebuild a Report from its JSON form (schema version 1 or 2); wrong shapes ->
        :class:`InputError` (exit 2) naming the place."""
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected a memprof report (a JSON object), got {type(data).__name__}")
        version = data.get("schema_version")
        if isinstance(version, bool) or version not in READABLE_SCHEMA_VERSIONS:
            readable = " and ".join(str(v) for v in READABLE_SCHEMA_VERSIONS)
            raise InputError(
                f"{where}: schema_version is {brief(version)}, this memprof reads {readable}; "
                "profile again with this memprof to write a report it reads"
            )
        return schema.decode(Report, data, where)


def load_report(path: str | Path) -> Report:
    """Read a report JSON written by memprof (data only: no pickle, no eval)."""
    from memprof.fileio import read_json

    return Report.from_dict(
        read_json(path, "report"), where="standard input" if str(path) == "-" else str(path)
    )
