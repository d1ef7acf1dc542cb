"""CSV: one row per op and run, exact integer bytes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memprof.model import Report


def render_csv(report: Report) -> str:
    """Columns: run, name, calls, self_bytes, total_bytes, allocated_bytes, peak_bytes, self_us,
    total_us. Names are quoted as CSV needs; nothing is escaped beyond that."""
    return report.ops_long().to_csv(index=False, lineterminator="\n", float_format="%.3f")


def render_at_peak_csv(report: Report) -> str:
    """What is live at each explained run's peak, one row per entry, then one per line memprof
    could not attribute: run, bytes, count, category, module, phase, source, source_text, op,
    shape, dtype, before_call (True/False), reason (empty for attributed entries). Every byte
    of each footprint is in one row. Only the header when no run was explained."""
    return report.at_peak_long().to_csv(index=False, lineterminator="\n")
