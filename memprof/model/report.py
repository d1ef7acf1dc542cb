"""A report: a target's runs with the environment they ran in (:class:`Report`), written and
read as JSON.

A Report is data: its comparisons (``diffs``, ``ranks``) are made by whoever builds it
(:func:`memprof.pipeline.build_report`; :func:`memprof.pipeline.load_report` for a saved one),
never worked out here.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from memprof.core import fields, schema
from memprof.core.errors import InputError, brief
from memprof.core.text import visible
from memprof.core.version import __version__
from memprof.model.advice import Advice
from memprof.model.detail import DETAILS
from memprof.model.diff import RunDiff
from memprof.model.estimate import Fits
from memprof.model.kind import ReportKind
from memprof.model.ops import OP_COLUMNS
from memprof.model.ranks import RankSummary
from memprof.model.recorded import Source
from memprof.model.run import RunResult
from memprof.model.sweep import Sweep

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = 2
"""What this memprof writes. Version 1 (no ``fused_kernels``, the older diff layout) still loads."""


READABLE_SCHEMA_VERSIONS = (1, 2)

_D = TypeVar("_D")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True, kw_only=True, repr=False)
class Report:
    """A target's runs, with the environment they ran in.

    ``runs`` keeps insertion order; the first run is the base every other run is compared to:
    ``diffs`` holds each comparison, ``ranks`` the runs of several ranks side by side (made by
    whoever builds the report; a Report made by hand has none until
    :func:`memprof.pipeline.compared` makes them). ``diff_of``: the two saved reports a report of
    ``memprof diff`` compares (their file names), else empty. ``detail``: the payload of the
    report's kind, at most one (a :class:`~memprof.model.sweep.Sweep`, an
    :class:`~memprof.model.advice.Advice`, ...: :mod:`memprof.model.detail`), written under its
    own key (``sweep``, ``advice``). Treat a Report as a value.
    """

    target: str = fields.text(required=True)
    device: str = fields.text(default="cpu")
    created: str = fields.text(default_factory=_now)
    environment: dict[str, str] = fields.mapping(fields.TEXT)
    source: Source | None = fields.optional(Source)
    runs: dict[str, RunResult] = fields.mapping(RunResult, required=True, nonempty=True, key_field="label")
    fits: Fits | None = fields.optional(Fits)
    detail: object | None = fields.one_of(DETAILS)
    diff_of: tuple[str, ...] = fields.items(fields.TEXT, omit=lambda report: not report.diff_of)
    diffs: tuple[RunDiff, ...] = fields.python_only(default=())
    ranks: RankSummary | None = fields.python_only()
    # With two or more ranks: each rank's own comparisons (the rank a document details shows
    # them), made with the rest by memprof.pipeline.compared.
    rank_diffs: dict[int, tuple[RunDiff, ...]] | None = fields.python_only()

    @property
    def kind(self) -> ReportKind:
        """What the report is (:class:`ReportKind`): where its numbers come from, or RANKS when
        its runs are of two or more ranks (:meth:`ReportKind.of_source` then says what the
        runs of one rank are)."""
        if self.ranks is not None and len(self.ranks.ranks) > 1:
            return ReportKind.RANKS
        if self.advice is not None:
            return ReportKind.ADVICE
        return ReportKind.of_source(self.source, swept=self.sweep is not None)

    def detail_of(self, kind: type[_D]) -> _D | None:
        """The report's detail when it is a ``kind`` (e.g. :class:`memprof.model.sweep.Sweep`),
        else None."""
        return self.detail if isinstance(self.detail, kind) else None

    @property
    def sweep(self) -> Sweep | None:
        """The sweep an estimate of several values holds (its detail), else None."""
        return self.detail_of(Sweep)

    @property
    def advice(self) -> Advice | None:
        """The advice of ``memprof advise`` (its detail), else None."""
        return self.detail_of(Advice)

    @property
    def base(self) -> RunResult:
        return next(iter(self.runs.values()))

    def ok_runs(self) -> list[RunResult]:
        return [r for r in self.runs.values() if not r.failed]

    @property
    def diff(self) -> RunDiff | None:
        """The comparison of the second run with the first, when there are two or more."""
        return self.diffs[0] if self.diffs else None

    def verdict(self) -> str | None:
        diff = self.diff
        return diff.verdict if diff else None

    def __repr__(self) -> str:
        # One line, whatever a loaded report's target, labels or op names hold: control
        # characters (ESC, CR, RLO) and line breaks escaped, as the terminal report shows them.
        runs = "; ".join(run.summary() for run in self.runs.values())
        verdict = f"; {self.verdict()}" if self.diffs else ""
        return visible(f"<memprof.Report {self.target} on {self.device}: {runs}{verdict}>", keep="")

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

        from memprof.model.explanation import AT_PEAK_COLUMNS

        frames = [
            run.at_peak.frame.assign(run=label)
            for label, run in self.runs.items()
            if not run.failed and run.at_peak is not None
        ]
        if not frames:
            return pd.DataFrame(columns=["run", *AT_PEAK_COLUMNS])
        return pd.concat(frames, ignore_index=True)[["run", *AT_PEAK_COLUMNS]]

    @staticmethod
    def from_dict(data: Any, where: str = "report") -> Report:
        """The Report of a JSON document (schema version 1 or 2), without its comparisons
        (:func:`memprof.pipeline.report_from_dict` adds them); wrong shapes -> :class:`InputError`
        (exit 2) naming the place."""
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
