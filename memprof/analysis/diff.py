"""Compare two runs: per-op deltas and a one-line verdict. Pure: no I/O, no torch."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memprof.names import fused_kernel_ops, is_fused_kernel
from memprof.units import format_bytes, format_ms, format_percent, json_float

if TYPE_CHECKING:
    import pandas as pd

    from memprof.model import RunResult

_SIDE_FIELDS = ("calls", "self_bytes", "total_bytes", "allocated_bytes", "peak_bytes")


@dataclass(frozen=True)
class RunDiff:
    """``other`` compared with ``base``.

    ``ops`` columns: ``name``, ``presence`` ("both", "<base> only", "<other> only"), for each
    side ``<field>_<label>`` of calls/self/total/allocated/peak bytes (NaN where absent),
    ``peak_bytes_delta``, ``self_bytes_delta``, ``allocated_bytes_delta`` (other - base, an
    absent side counting 0), ``fused_into`` (for a base op: the other run's fused kernels whose
    names list it) and ``fused_ops`` (for a fused kernel: the aten ops it lists).
    """

    base: str
    other: str
    base_peak_bytes: int
    other_peak_bytes: int
    ops: pd.DataFrame
    base_wall_ms: float = math.nan
    other_wall_ms: float = math.nan

    @property
    def peak_bytes_delta(self) -> int:
        return self.other_peak_bytes - self.base_peak_bytes

    @property
    def peak_ratio(self) -> float | None:
        """other / base peak; None when the base peak is 0."""
        if self.base_peak_bytes == 0:
            return None
        return self.other_peak_bytes / self.base_peak_bytes

    @property
    def wall_ratio(self) -> float | None:
        """other / base wall time per call (medians); None when either is unknown or base is 0."""
        if not (math.isfinite(self.base_wall_ms) and math.isfinite(self.other_wall_ms)):
            return None
        if self.base_wall_ms <= 0:
            return None
        return self.other_wall_ms / self.base_wall_ms

    @property
    def summary(self) -> str:
        """Memory next to time, e.g. ``channels_last vs contiguous: peak -12.3%, wall time +4.0%
        (10.1 ms -> 10.5 ms)``: most techniques trade one for the other."""
        peak = self.peak_ratio
        wall = self.wall_ratio
        peak_text = format_percent(peak - 1) if peak is not None else "n/a"
        wall_text = format_percent(wall - 1) if wall is not None else "n/a"
        span = (
            f" ({format_ms(self.base_wall_ms)} -> {format_ms(self.other_wall_ms)})"
            if wall is not None
            else ""
        )
        return f"{self.other} vs {self.base}: peak {peak_text}, wall time {wall_text}{span}"

    @property
    def verdict(self) -> str:
        subject = "torch.compile" if (self.base, self.other) == ("eager", "compile") else self.other
        versus = "" if subject == "torch.compile" else f" vs {self.base}"
        delta = self.peak_bytes_delta
        span = f"{format_bytes(self.base_peak_bytes)} -> {format_bytes(self.other_peak_bytes)}"
        ratio = self.peak_ratio
        pct = format_percent(ratio - 1) if ratio is not None else "n/a"
        if delta < 0:
            return f"{subject} lowers peak memory{versus} by {format_bytes(-delta)} ({pct}): {span}"
        if delta > 0:
            return f"{subject} raises peak memory{versus} by {format_bytes(delta)} ({pct}): {span}"
        return f"{subject} leaves peak memory{versus} unchanged: {span}"

    def to_dict(self) -> dict[str, Any]:
        ratio = self.peak_ratio
        return {
            "base": self.base,
            "other": self.other,
            "peak_bytes_delta": int(self.peak_bytes_delta),
            "peak_ratio": ratio,
            "verdict": self.verdict,
            "wall_ms_base": json_float(self.base_wall_ms),
            "wall_ms_other": json_float(self.other_wall_ms),
            "wall_ratio": self.wall_ratio,
            "summary": self.summary,
            "ops": [_op_dict(row, self.base, self.other) for row in self.ops.to_dict("records")],
        }


def _op_dict(row: dict[str, Any], base: str, other: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": row["name"], "presence": row["presence"]}
    for label in (base, other):
        values = {f: row[f"{f}_{label}"] for f in _SIDE_FIELDS}
        out[label] = (
            None if any(_isnan(v) for v in values.values()) else {k: int(v) for k, v in values.items()}
        )
    for key in ("peak_bytes_delta", "self_bytes_delta", "allocated_bytes_delta"):
        out[key] = int(row[key])
    out["fused_into"] = list(row["fused_into"])
    out["fused_ops"] = list(row["fused_ops"])
    return out


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def op_note(
    row: dict[str, Any],
    name: Callable[[str], str] = str,
    text: Callable[[str], str] = str,
) -> str:
    """What explains a diff row: ``fuses abs, sub`` for a fused kernel, ``fused into <kernel>``
    for an op a kernel replaced, else ``eager only`` / ``compile only`` (empty when in both).
    ``name`` formats op names and ``text`` the rest (quoting for Markdown, say)."""
    if row["fused_ops"]:
        return "fuses " + ", ".join(name(op.removeprefix("aten::")) for op in row["fused_ops"])
    if row["fused_into"]:
        return "fused into " + ", ".join(name(kernel) for kernel in row["fused_into"])
    return "" if row["presence"] == "both" else text(str(row["presence"]))


def diff_runs(base: RunResult, other: RunResult, vocabulary: frozenset[str] | None = None) -> RunDiff:
    """Compare ``other`` with ``base`` op by op (ops matched by normalised name)."""
    import pandas as pd

    a = base.ops[["name", *_SIDE_FIELDS]].rename(columns={f: f"{f}_{base.label}" for f in _SIDE_FIELDS})
    b = other.ops[["name", *_SIDE_FIELDS]].rename(columns={f: f"{f}_{other.label}" for f in _SIDE_FIELDS})
    merged = a.merge(b, on="name", how="outer", indicator=True, sort=False)
    merged["presence"] = (
        merged["_merge"]
        .map({"both": "both", "left_only": f"{base.label} only", "right_only": f"{other.label} only"})
        .astype(object)
    )
    merged = merged.drop(columns="_merge")
    for field in ("peak_bytes", "self_bytes", "allocated_bytes"):
        merged[f"{field}_delta"] = (
            merged[f"{field}_{other.label}"].fillna(0) - merged[f"{field}_{base.label}"].fillna(0)
        ).astype("int64")

    vocab = vocabulary if vocabulary is not None else _aten_vocabulary(base, other)
    kernels = {name: fused_kernel_ops(name, vocab) for name in other.ops["name"] if is_fused_kernel(name)}
    merged["fused_ops"] = [kernels.get(name, []) for name in merged["name"]]
    merged["fused_into"] = [
        [kernel for kernel, parts in kernels.items() if name in parts] for name in merged["name"]
    ]
    order = merged[[f"peak_bytes_{base.label}", f"peak_bytes_{other.label}"]].fillna(0).max(axis=1)
    merged = merged.loc[order.sort_values(ascending=False, kind="stable").index].reset_index(drop=True)
    ops = pd.DataFrame(merged)
    return RunDiff(
        base=base.label,
        other=other.label,
        base_peak_bytes=int(base.peak_bytes),
        other_peak_bytes=int(other.peak_bytes),
        ops=ops,
        base_wall_ms=float(base.wall_ms),
        other_wall_ms=float(other.wall_ms),
    )


def _aten_vocabulary(*runs: RunResult) -> frozenset[str]:
    """aten op names to split fused kernel names with: the runs' own aten ops, plus every aten
    op torch knows when torch is already loaded (never imported just for this)."""
    import sys

    names = {
        n.split("::", 1)[1].split(".", 1)[0] for r in runs for n in r.ops["name"] if n.startswith("aten::")
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            all_ops = torch._C._dispatch_get_all_op_names()
        except Exception:  # pragma: no cover - private API moved; the runs' names still work
            all_ops = []
        names.update(n[6:].split(".", 1)[0] for n in all_ops if n.startswith("aten::"))
    return frozenset(names)
