"""CSV: one row per op and run, exact integer bytes."""

from __future__ import annotations

import csv
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memprof.model import Report


def render_csv(report: Report) -> str:
    """Columns: run, name, calls, self_bytes, total_bytes, allocated_bytes, peak_bytes, self_us,
    total_us. Names are quoted as CSV needs; nothing is escaped beyond that."""
    frame = report.ops_long()
    # The csv module quotes a field holding "\n" (the line terminator) but, before Python 3.12,
    # not one holding a bare "\r", which readers take for a line break: then quote every text.
    carriage_return = any("\r" in text for column in ("run", "name") for text in frame[column])
    quoting = csv.QUOTE_NONNUMERIC if carriage_return else csv.QUOTE_MINIMAL
    return frame.to_csv(index=False, lineterminator="\n", float_format="%.3f", quoting=quoting)


def render_at_peak_csv(report: Report) -> str:
    """What is live at each explained run's peak, one row per entry, then one per line memprof
    could not attribute: run, bytes, count, category, module, phase, source, source_text, op,
    shape, dtype, before_call (True/False), reason (empty for attributed entries). Every byte
    of each footprint is in one row. Only the header when no run was explained."""
    frame = report.at_peak_long()
    texts = ("run", "module", "source", "source_text", "op")
    carriage_return = any("\r" in str(text) for column in texts for text in frame[column])
    quoting = csv.QUOTE_NONNUMERIC if carriage_return else csv.QUOTE_MINIMAL
    return frame.to_csv(index=False, lineterminator="\n", quoting=quoting)
