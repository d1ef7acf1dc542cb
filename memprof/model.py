"""The results memprof produces: :class:`RunResult` per run, :class:`Report` for a target.

A Report is what every output is rendered from and what ``--json`` writes; the JSON is also a
baseline for the gate. Loading one back (``load_report``) needs pandas but never torch.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof import __version__
from memprof.errors import InputError
from memprof.units import json_float

if TYPE_CHECKING:
    import pandas as pd

    from memprof.analysis.diff import RunDiff

SCHEMA_VERSION = 1

OP_FIELDS = ("name", "calls", "self_bytes", "total_bytes", "allocated_bytes", "peak_bytes")
OP_COLUMNS = (*OP_FIELDS, "self_us", "total_us")
"""The per-op frame's columns: integer bytes and calls, then CPU microseconds."""


def empty_ops() -> pd.DataFrame:
    """A per-op frame with no rows and the right column types."""
    import pandas as pd

    return pd.DataFrame(
        {
            column: pd.Series(
                dtype=object if column == "name" else float if column.endswith("_us") else "int64"
            )
            for column in OP_COLUMNS
        }
    )


@dataclass
class RunResult:
    """One profiled run of a target (eager, compiled, or one variant of a comparison).

    ``ops`` is a DataFrame with one row per op name: ``name``, ``calls``, ``self_bytes``,
    ``total_bytes``, ``allocated_bytes``, ``peak_bytes`` (all integer bytes), ``self_us``,
    ``total_us`` (CPU time, microseconds, profiler on). See README for each number's meaning.
    """

    label: str
    peak_bytes: int
    allocated_bytes: int
    net_bytes: int
    inputs_bytes: int
    wall_ms: float
    ops: pd.DataFrame
    peak_op: str | None = None
    peak_op_stack: list[str] = field(default_factory=list)
    repeat: int = 1
    wall_ms_all: list[float] = field(default_factory=list)
    compile_seconds: float | None = None
    mode: str = "eager"
    timeline_ns: list[int] = field(default_factory=list)
    timeline_bytes: list[int] = field(default_factory=list)
    device_counters: dict[str, int] = field(default_factory=dict)
    torch_table: str | None = None
    records: int = 0
    notes: list[str] = field(default_factory=list)
    failed: str | None = None

    @staticmethod
    def failed_run(label: str, mode: str, message: str) -> RunResult:
        """A run whose code failed: no numbers, the failure's message in ``failed``."""
        return RunResult(
            label=label,
            mode=mode,
            peak_bytes=0,
            allocated_bytes=0,
            net_bytes=0,
            inputs_bytes=0,
            wall_ms=float("nan"),
            ops=empty_ops(),
            failed=message,
        )

    def ops_sorted(self, by: str = "peak") -> pd.DataFrame:
        """Ops sorted by ``peak``, ``self``, ``allocated`` or ``total`` bytes, largest first."""
        column = {
            "peak": "peak_bytes",
            "self": "self_bytes",
            "allocated": "allocated_bytes",
            "total": "total_bytes",
        }[by]
        key = self.ops[column].abs() if by == "self" else self.ops[column]
        order = key.sort_values(ascending=False, kind="stable").index
        return self.ops.loc[order].reset_index(drop=True)

    def to_dict(self) -> dict[str, Any]:
        ops = self.ops_sorted("peak")
        data: dict[str, Any] = {
            "label": self.label,
            "mode": self.mode,
            "status": "failed" if self.failed else "ok",
            "peak_bytes": int(self.peak_bytes),
            "allocated_bytes": int(self.allocated_bytes),
            "net_bytes": int(self.net_bytes),
            "inputs_bytes": int(self.inputs_bytes),
            "wall_ms": json_float(self.wall_ms),
            "wall_ms_all": [json_float(v) for v in self.wall_ms_all],
            "repeat": self.repeat,
            "peak_op": self.peak_op,
            "peak_op_stack": list(self.peak_op_stack),
            "records": self.records,
            "ops": [
                {
                    "name": str(row.name),
                    "calls": int(row.calls),
                    "self_bytes": int(row.self_bytes),
                    "total_bytes": int(row.total_bytes),
                    "allocated_bytes": int(row.allocated_bytes),
                    "peak_bytes": int(row.peak_bytes),
                    "self_us": json_float(float(row.self_us)),
                    "total_us": json_float(float(row.total_us)),
                }
                for row in ops.itertuples(index=False)
            ],
            "timeline": {
                "t_ns": [int(t) for t in self.timeline_ns],
                "bytes": [int(b) for b in self.timeline_bytes],
            },
            "notes": list(self.notes),
        }
        if self.mode == "compile" or self.compile_seconds is not None:
            data["compile_seconds"] = json_float(self.compile_seconds)
        if self.device_counters:
            data["device_counters"] = dict(self.device_counters)
        if self.failed:
            data["error"] = self.failed
        return data

    @staticmethod
    def from_dict(label: str, data: dict[str, Any], where: str = "report") -> RunResult:
        import pandas as pd

        _require(data, ("peak_bytes", "ops"), f"{where}: runs.{label}")
        ops_list = data.get("ops") or []
        if not isinstance(ops_list, list):
            raise InputError(f"{where}: runs.{label}.ops must be a list of ops")
        rows = []
        for i, op in enumerate(ops_list):
            if not isinstance(op, dict) or "name" not in op:
                raise InputError(f"{where}: runs.{label}.ops[{i}] must be an object with a 'name'")
            rows.append(
                {
                    "name": str(op["name"]),
                    "calls": _int(op.get("calls", 0), where, f"runs.{label}.ops[{i}].calls"),
                    "self_bytes": _int(op.get("self_bytes", 0), where, f"runs.{label}.ops[{i}].self_bytes"),
                    "total_bytes": _int(
                        op.get("total_bytes", 0), where, f"runs.{label}.ops[{i}].total_bytes"
                    ),
                    "allocated_bytes": _int(
                        op.get("allocated_bytes", 0), where, f"runs.{label}.ops[{i}].allocated_bytes"
                    ),
                    "peak_bytes": _int(op.get("peak_bytes", 0), where, f"runs.{label}.ops[{i}].peak_bytes"),
                    "self_us": _float(op.get("self_us")),
                    "total_us": _float(op.get("total_us")),
                }
            )
        frame = pd.DataFrame(rows, columns=list(OP_COLUMNS))
        for column in OP_FIELDS[1:]:
            frame[column] = frame[column].astype("int64")
        at = f"runs.{label}"
        timeline = _typed(data.get("timeline"), dict, {}, where, f"{at}.timeline")
        counters = _typed(data.get("device_counters"), dict, {}, where, f"{at}.device_counters")
        compile_seconds = data.get("compile_seconds")
        peak_op = data.get("peak_op")
        return RunResult(
            label=label,
            mode=str(data.get("mode", label)),
            peak_bytes=_int(data["peak_bytes"], where, f"{at}.peak_bytes"),
            allocated_bytes=_int(data.get("allocated_bytes", 0), where, f"{at}.allocated_bytes"),
            net_bytes=_int(data.get("net_bytes", 0), where, f"{at}.net_bytes"),
            inputs_bytes=_int(data.get("inputs_bytes", 0), where, f"{at}.inputs_bytes"),
            wall_ms=_float(data.get("wall_ms")),
            wall_ms_all=[
                _float(v) for v in _typed(data.get("wall_ms_all"), list, [], where, f"{at}.wall_ms_all")
            ],
            repeat=_int(data.get("repeat", 1), where, f"{at}.repeat"),
            ops=frame,
            peak_op=None if peak_op is None else str(peak_op),
            peak_op_stack=[
                str(s) for s in _typed(data.get("peak_op_stack"), list, [], where, f"{at}.peak_op_stack")
            ],
            compile_seconds=None if compile_seconds is None else _float(compile_seconds),
            timeline_ns=[
                _int(t, where, f"{at}.timeline.t_ns")
                for t in _typed(timeline.get("t_ns"), list, [], where, f"{at}.timeline.t_ns")
            ],
            timeline_bytes=[
                _int(b, where, f"{at}.timeline.bytes")
                for b in _typed(timeline.get("bytes"), list, [], where, f"{at}.timeline.bytes")
            ],
            device_counters={str(k): _int(v, where, f"{at}.device_counters") for k, v in counters.items()},
            records=_int(data.get("records", 0) or 0, where, f"{at}.records"),
            notes=[str(n) for n in _typed(data.get("notes"), list, [], where, f"{at}.notes")],
            failed=str(data.get("error")) if data.get("status") == "failed" else None,
        )


@dataclass
class Report:
    """A target's runs, with the environment they ran in.

    ``runs`` keeps insertion order; the first run is the base every other run is compared to.
    """

    target: str
    device: str
    runs: dict[str, RunResult]
    environment: dict[str, str] = field(default_factory=dict)
    created: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    )

    @property
    def base(self) -> RunResult:
        return next(iter(self.runs.values()))

    def ok_runs(self) -> list[RunResult]:
        return [r for r in self.runs.values() if not r.failed]

    def diffs(self) -> list[RunDiff]:
        """Each successful run after the first compared with the first."""
        from memprof.analysis.diff import diff_runs

        runs = self.ok_runs()
        if len(runs) < 2:
            return []
        return [diff_runs(runs[0], other) for other in runs[1:]]

    @property
    def diff(self) -> RunDiff | None:
        """The comparison of the second run with the first, when there are two or more."""
        diffs = self.diffs()
        return diffs[0] if diffs else None

    def verdict(self) -> str | None:
        diff = self.diff
        return diff.verdict if diff else None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "memprof_version": __version__,
            "target": self.target,
            "device": self.device,
            "created": self.created,
            "environment": dict(self.environment),
            "runs": {label: run.to_dict() for label, run in self.runs.items()},
        }
        diffs = self.diffs()
        if diffs:
            data["diff"] = diffs[0].to_dict()
            if len(diffs) > 1:
                data["diffs"] = {d.other: d.to_dict() for d in diffs}
        return data

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

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

    def _repr_html_(self) -> str:
        from memprof.report.html import render_html

        return render_html(self, standalone=False)

    @staticmethod
    def from_dict(data: Any, where: str = "report") -> Report:
        """Rebuild a Report from its JSON form; wrong shapes -> :class:`InputError` (exit 2)."""
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected a memprof report (a JSON object), got {type(data).__name__}")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise InputError(
                f"{where}: schema_version is {version!r}, this memprof reads {SCHEMA_VERSION}; "
                "write the report again with `memprof run ... --json`"
            )
        _require(data, ("target", "runs"), where)
        runs = data["runs"]
        if not isinstance(runs, dict) or not runs:
            raise InputError(f"{where}: 'runs' must be an object with at least one run")
        for label, run in runs.items():
            if not isinstance(run, dict):
                raise InputError(f"{where}: runs.{label} must be an object")
        environment = data.get("environment") or {}
        if not isinstance(environment, dict):
            raise InputError(f"{where}: 'environment' must be an object")
        return Report(
            target=str(data["target"]),
            device=str(data.get("device", "cpu")),
            runs={str(label): RunResult.from_dict(str(label), run, where) for label, run in runs.items()},
            environment={str(k): str(v) for k, v in environment.items()},
            created=str(data.get("created", "")),
        )


def load_report(path: str | Path) -> Report:
    """Read a report JSON written by ``--json`` (data only: no pickle, no eval)."""
    from memprof.fileio import read_json

    return Report.from_dict(read_json(path, "report"), where=str(path))


def _require(data: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    missing = [k for k in keys if k not in data]
    if missing:
        raise InputError(f"{where}: missing {', '.join(repr(k) for k in missing)}; is this a memprof report?")


def _typed(value: Any, kind: type, default: Any, where: str, key: str) -> Any:
    """``value`` when it is a ``kind`` (None -> ``default``); anything else -> InputError."""
    if value is None:
        return default
    if not isinstance(value, kind):
        raise InputError(f"{where}: {key} must be a JSON {'object' if kind is dict else 'array'}")
    return value


def _int(value: Any, where: str, key: str) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not -(2**63) <= value < 2**63
    ):
        raise InputError(f"{where}: {key} must be a number of bytes, got {value!r}")
    return int(value)


def _float(value: Any) -> float:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value)
