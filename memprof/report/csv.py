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


def render_sweep_csv(report: Report) -> str:
    """A sweep, one row per estimated value: parameter, value, run, footprint_bytes, line_bytes
    (the line through the listed values' footprints, there), needed (what is compared with the
    capacity: footprint_bytes or reserved_peak_bytes), needed_bytes, fits (empty without a capacity),
    searched (added by the search for the largest value that fits), largest_fitting."""
    import io

    sweep = report.sweep
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "parameter",
            "value",
            "run",
            "footprint_bytes",
            "line_bytes",
            "needed",
            "needed_bytes",
            "fits",
            "searched",
            "largest_fitting",
        ]
    )
    if sweep is None:
        return out.getvalue()
    for point in sweep.points:
        writer.writerow(
            [
                sweep.parameter,
                point.value,
                point.label,
                point.footprint_bytes,
                "" if point.fitted_bytes is None else point.fitted_bytes,
                sweep.needed,
                point.needed_bytes,
                "" if point.fits is None else str(point.fits).lower(),
                str(point.searched).lower(),
                str(point.label == sweep.largest_fitting_label).lower(),
            ]
        )
    return out.getvalue()
