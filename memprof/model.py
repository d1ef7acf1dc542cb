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
from memprof.analysis.explanation import AtPeak, CallNumbers, KernelStats, ModuleStats, modules_frame
from memprof.analysis.ops import OP_COLUMNS, OpStats, ops_frame, sort_ops
from memprof.analysis.timeline import Timeline
from memprof.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from memprof.analysis.diff import RunDiff
    from memprof.analysis.peaks import Analysis
    from memprof.analysis.ranks import RankSummary

__all__ = ["OP_COLUMNS", "OpStats", "Report", "RunResult", "Timeline", "load_report"]

SCHEMA_VERSION = 2
"""What this memprof writes. Version 1 (no ``fused_kernels``, the older diff layout) still loads."""
READABLE_SCHEMA_VERSIONS = (1, 2)

OK, FAILED = "ok", "failed"


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """One profiled run of a target (eager, compiled, or one variant of a comparison).

    ``op_stats`` holds one :class:`OpStats` per op name (largest peak first); ``ops`` is the same
    as a DataFrame. ``fused_kernels`` maps each fused kernel of the run to the aten ops it
    replaced (None in reports written before memprof stored it). See README for each number's
    meaning. A run whose code failed has ``status`` "failed", its message in ``error`` (and
    ``failed``), and no numbers. ``rank`` is the distributed rank that made the run (None
    outside a multi-rank job).

    Explained runs (the default; README, "What is live at the peak") also have
    ``footprint_bytes`` and ``live_at_start_bytes`` (``peak_bytes`` is their difference),
    ``at_peak`` (what is live at the peak; ``at_peak.frame`` as a DataFrame), ``module_stats``
    (``modules`` as a DataFrame), ``call_numbers`` (each measured call; ``peak_call`` is the
    one explained) and, compiled, ``kernels``. Fields a run does not know are None or empty and
    left out of the JSON, so reports written before them still load.
    """

    label: str = fields.text(required=True)
    mode: str = fields.text(default="eager", default_from="label")
    status: str = fields.text(default=OK, choices=(OK, FAILED))
    rank: int | None = fields.count(default=None, nullable=True, omit=lambda run: run.rank is None)
    peak_bytes: int = fields.size(required=True)
    footprint_bytes: int | None = fields.maybe_size()
    live_at_start_bytes: int | None = fields.maybe_size()
    allocated_bytes: int = fields.size()
    net_bytes: int = fields.signed_size()
    inputs_bytes: int = fields.size()
    wall_ms: float = fields.number()
    wall_ms_all: tuple[float, ...] = fields.items(fields.NUMBER)
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
    peak_call: int | None = fields.count(default=None, nullable=True, omit=lambda run: run.peak_call is None)
    kernels: tuple[KernelStats, ...] = fields.items(KernelStats, omit=lambda run: not run.kernels)

    device_counters: dict[str, int] = fields.mapping(fields.INTEGER, omit=lambda run: not run.device_counters)
    error: str | None = fields.maybe_text(omit=lambda run: run.error is None)
    torch_table: str | None = fields.python_only()

    def __post_init__(self) -> None:
        # Ops are kept largest peak first (how every report lists them; ties keep their order),
        # and sequences as tuples, whatever the caller passed.
        object.__setattr__(self, "op_stats", sort_ops(self.op_stats, "peak"))
        for name in ("wall_ms_all", "peak_op_stack", "notes", "module_stats", "call_numbers", "kernels"):
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


@dataclass(frozen=True, kw_only=True)
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
    runs: dict[str, RunResult] = fields.mapping(RunResult, required=True, nonempty=True, key_field="label")

    @property
    def base(self) -> RunResult:
        return next(iter(self.runs.values()))

    def ok_runs(self) -> list[RunResult]:
        return [r for r in self.runs.values() if not r.failed]

    @cached_property
    def diffs(self) -> tuple[RunDiff, ...]:
        """Each successful run after the first compared with the first."""
        from memprof.analysis.diff import diff_runs

        runs = self.ok_runs()
        return tuple(diff_runs(runs[0], other) for other in runs[1:])

    @cached_property
    def ranks(self) -> RankSummary | None:
        """Per-rank rows and the imbalance of the ranks' peaks, when runs carry a ``rank``
        (a distributed job, per-rank traces); else None."""
        from memprof.analysis.ranks import summarize

        return summarize(self.runs.values())

    @property
    def diff(self) -> RunDiff | None:
        """The comparison of the second run with the first, when there are two or more."""
        return self.diffs[0] if self.diffs else None

    def verdict(self) -> str | None:
        diff = self.diff
        return diff.verdict if diff else None

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
                f"{where}: schema_version is {version!r}, this memprof reads {readable}; "
                "profile again with this memprof to write a report it reads"
            )
        return schema.decode(Report, data, where)


def load_report(path: str | Path) -> Report:
    """Read a report JSON written by memprof (data only: no pickle, no eval)."""
    from memprof.fileio import read_json

    return Report.from_dict(read_json(path, "report"), where=str(path))
