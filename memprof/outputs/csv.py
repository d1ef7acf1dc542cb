"""CSV: one row per op and run, exact integer bytes.

A text cell that a spreadsheet would evaluate as a formula (an op named ``=HYPERLINK(...)``,
``@SUM(...)``, ``-x``) gets a leading ``'`` (:func:`memprof.core.text.spreadsheet_safe`) unless
``exact`` is given: numbers are never changed."""

from __future__ import annotations

import csv
from typing import TYPE_CHECKING, Any

from memprof.core.text import spreadsheet_safe

if TYPE_CHECKING:
    import pandas as pd

    from memprof.model.report import Report


def _cell(value: Any, exact: bool) -> Any:
    return spreadsheet_safe(value) if isinstance(value, str) and not exact else value


def _safe_frame(frame: pd.DataFrame, exact: bool) -> pd.DataFrame:
    """``frame`` with each text cell made :func:`spreadsheet_safe` (unless ``exact``)."""
    if exact:
        return frame
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object:
            frame[column] = [_cell(value, exact) for value in frame[column]]
    return frame


def render_csv(report: Report, *, exact: bool = False) -> str:
    """Columns: run, name, calls, self_bytes, total_bytes, allocated_bytes, peak_bytes, self_us,
    total_us. Names are quoted as CSV needs; one that starts as a formula gets a leading ``'``
    unless ``exact``."""
    frame = _safe_frame(report.ops_long(), exact)
    # The csv module quotes a field holding "\n" (the line terminator) but, before Python 3.12,
    # not one holding a bare "\r", which readers take for a line break: then quote every text.
    carriage_return = any("\r" in text for column in ("run", "name") for text in frame[column])
    quoting = csv.QUOTE_NONNUMERIC if carriage_return else csv.QUOTE_MINIMAL
    return frame.to_csv(index=False, lineterminator="\n", float_format="%.3f", quoting=quoting)


def render_at_peak_csv(report: Report, *, exact: bool = False) -> str:
    """What is live at each explained run's peak, one row per entry, then one per line memprof
    could not attribute: run, bytes, count, category, module, phase, source, source_text, op,
    shape, dtype, before_call (True/False), reason (empty for attributed entries). Every byte
    of each footprint is in one row. Only the header when no run was explained. Text that starts
    as a formula gets a leading ``'`` unless ``exact``."""
    frame = _safe_frame(report.at_peak_long(), exact)
    texts = ("run", "module", "source", "source_text", "op")
    carriage_return = any("\r" in str(text) for column in texts for text in frame[column])
    quoting = csv.QUOTE_NONNUMERIC if carriage_return else csv.QUOTE_MINIMAL
    return frame.to_csv(index=False, lineterminator="\n", quoting=quoting)


def render_sweep_csv(report: Report, *, exact: bool = False) -> str:
    """A sweep, one row per estimated value: parameter, value, run, footprint_bytes, line_bytes
    (the line through the listed values' footprints, there), needed (what is compared with the
    capacity: footprint_bytes or reserved_peak_bytes), needed_bytes, fits (empty without a capacity),
    searched (added by the search for the largest value that fits), largest_fitting. Text that
    starts as a formula gets a leading ``'`` unless ``exact``."""
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
                _cell(sweep.parameter, exact),
                _cell(point.value, exact),
                _cell(point.label, exact),
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
