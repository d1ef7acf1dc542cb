"""``memprof parse``: a printed torch profiler table -> CSV, JSON or a clean table. Works on
:class:`memprof.sources.files.table.ParsedTable`: no pandas is imported."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from memprof.core.errors import InputError
from memprof.frontends.commands import Command
from memprof.frontends.commands.common import err, out

if TYPE_CHECKING:
    from memprof.sources.files.table import ParsedTable


def _render_parsed(frame: ParsedTable) -> str:
    """The parsed table for people: sizes in KiB/MiB, truncated names marked with '...'."""
    import math
    import sys

    from memprof.core.units import format_bytes
    from memprof.outputs.layout import Column, Table, plain

    columns = [c for c in frame.columns if c != "name_truncated"]
    rows = []
    for record in frame.records():
        row = []
        for column in columns:
            value = record[column]
            if column == "name" and record.get("name_truncated"):
                value = f"{value}..."
            elif isinstance(value, float) and math.isnan(value):
                value = "-"
            elif column.endswith("_bytes"):
                value = format_bytes(value)
            elif column.endswith("_us"):
                value = f"{value:,.3f}"
            elif column.endswith("_pct"):
                value = f"{value:.2f}"
            row.append(value)
        rows.append(row)
    table = Table([Column(c, "left" if c == "name" else "right") for c in columns])
    for row in rows:
        table.add(*(str(value) for value in row))
    # The whole table, however wide: it is data to read or to pipe, not a terminal summary.
    lines = [plain(table.lines(width=sys.maxsize)).rstrip("\n")]
    for key, value in frame.attrs.items():
        if key.endswith("_time_total_us"):
            lines.append(f"{key}: {value:,.3f}")
    where = f"table {frame.attrs['table_index']} (header at line {frame.attrs['header_line']})"
    scope = ", top-level ops only" if frame.attrs.get("top_level_only") else ""
    lines.append(f"{len(frame)} rows from {where}{scope}")
    return "\n".join(lines)


def _json_text(document: dict[str, Any]) -> str:
    """Indented JSON with one line per row: readable, and small for 100,000 rows."""
    import json

    rows = document.pop("rows")
    head = json.dumps(document, indent=1, allow_nan=False)[: -len("\n}")]
    body = ",\n  ".join(json.dumps(row, allow_nan=False) for row in rows)
    return head + (',\n "rows": [\n  ' + body + "\n ]\n}\n" if rows else ',\n "rows": []\n}\n')


def _csv_text(frame: ParsedTable, exact: bool = False) -> str:
    """One header line, then the rows (NaN as an empty cell); a text holding a bare carriage
    return is quoted (the csv module quotes only the line terminator's characters before
    Python 3.12); a text a spreadsheet would evaluate as a formula gets a leading ``'`` unless
    ``exact``."""
    import csv
    import io
    import math

    from memprof.core.text import spreadsheet_safe

    texts = [key for key, values in frame.data.items() if isinstance(values, list)]
    carriage_return = any("\r" in value for key in texts for value in frame.data[key])
    buffer = io.StringIO()
    writer = csv.writer(
        buffer,
        lineterminator="\n",
        quoting=csv.QUOTE_NONNUMERIC if carriage_return else csv.QUOTE_MINIMAL,
    )
    writer.writerow(frame.columns)
    for record in frame.records():
        writer.writerow(
            ""
            if isinstance(value, float) and math.isnan(value)
            else spreadsheet_safe(value)
            if isinstance(value, str) and not exact
            else value
            for value in record.values()
        )
    return buffer.getvalue()


def parse(
    file: str = typer.Argument(
        ...,
        metavar="FILE",
        help="Text holding the table: a saved table, a whole log, or - for standard input.",
    ),
    csv_path: str | None = typer.Option(
        None, "--csv", metavar="PATH", help="Write the rows as CSV (one header line) to PATH."
    ),
    json_path: str | None = typer.Option(
        None,
        "--json",
        metavar="PATH",
        help="Write rows, columns and the footer totals as JSON to PATH (NaN as null).",
    ),
    table_index: int | None = typer.Option(
        None,
        "--table-index",
        metavar="N",
        help="Which table when the text holds several: 0 is the first, -1 the last.",
    ),
    lenient: bool = typer.Option(
        False, "--lenient", help="Skip rows that do not fit the columns, with a warning each."
    ),
    exact_csv: bool = typer.Option(
        False,
        "--exact-csv",
        help="Write CSV text exactly as it is. By default a cell a spreadsheet would evaluate as a "
        "formula (text starting with =, +, -, @, a tab or a carriage return) gets a leading ' so that "
        "it is shown, not run.",
    ),
) -> None:
    """Turn a printed torch profiler table into data: CSV, JSON, or a clean table.

    Reads what prof.key_averages().table(...) printed, from a log, a notebook or a bug report,
    and gives one row per op with names kept whole (spaces, <>&:#, the memory row), sizes in bytes
    (*_bytes), times in microseconds (*_us), percentages (*_pct), calls, and the Input Shapes,
    Source Location, FLOPs and device (CUDA, XPU, ...) columns when present. Log lines around
    the table are ignored. Without --csv or --json the parsed table is printed.

    Example:

        memprof parse train.log --table-index -1 --csv ops.csv --json ops.json

        python train.py 2>&1 | memprof parse - --lenient

    Exit codes: 0 ok; 2 no table, a row that does not fit (its line number is shown), a
    missing file or a bad --table-index.
    """
    from memprof.core.reading import read_text
    from memprof.core.writing import absolute, atomic_write_texts, check_output_paths
    from memprof.sources.files.table import parse_table, table_document

    reads = [] if file == "-" else [("the table's input file", file)]
    check_output_paths([("--csv", csv_path), ("--json", json_path)], reads)
    source = "standard input" if file == "-" else file
    text = read_text(file, "input")
    try:
        frame = parse_table(text, table_index=table_index, lenient=lenient)
    except InputError as error:
        raise InputError(f"{source}: {error.message}") from None
    for skipped in frame.attrs["skipped_rows"]:
        err(f"memprof: warning: {source}: line {skipped['line']}: skipped: {skipped['reason']}")

    outputs: list[tuple[str, str]] = []
    if csv_path is not None:
        outputs.append((csv_path, _csv_text(frame, exact_csv)))
    if json_path is not None:
        outputs.append((json_path, _json_text(table_document(frame))))
    if not outputs:
        out(_render_parsed(frame))
        return
    atomic_write_texts([(absolute(path), content) for path, content in outputs])
    for path, _ in outputs:
        err(f"memprof: wrote {len(frame)} rows to {path}")


COMMAND = Command(parse, place=80)
