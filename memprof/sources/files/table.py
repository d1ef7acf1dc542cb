"""Read the fixed-width table torch prints (``prof.key_averages().table(...)``) back into data.

Pure text processing: no torch import, so it works on a laptop without torch for a table copied
from a GPU job's log, a notebook or a bug report. pandas is imported only when a frame is built
(:func:`read_table`); ``memprof parse`` works on :class:`ParsedTable` and never imports it.

How torch lays the table out (``torch/autograd/profiler_util.py::_build_table``): a dash line,
the header, the same dash line, one line per row, the dash line again, then footer lines such as
``Self CPU time total: 886.017ms``. Each dash run is a column; every column is followed by two
spaces. Values are right-aligned except Source Location (left-aligned, with continuation lines
holding the rest of the stack, then a blank line); torch 1.x left-aligned every column, which
reads the same way. A value wider than its column pushes the
rest of the line to the right; the parser follows that shift. Optionally, above the first dash
line: ``====`` lines around a title and the note "This report only display top-level ops
statistics".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memprof.core.errors import InputError, brief, param
from memprof.core.gcpause import gc_paused
from memprof.core.units import (
    parse_torch_time_us,
)
from memprof.sources.files.table_cells import (
    BYTES,
    EXPECTED,
    FLOAT,
    INT,
    NAME,
    PCT,
    SRC,
    STR,
    US,
    convert,
    convert_fast,
    to_float,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ParsedTable", "TableLocation", "find_tables", "parse_table", "read_table", "table_document"]

TOP_LEVEL_NOTE = "This report only display top-level ops statistics"

# A dash line: an optional constant prefix (indentation, "[rank0]:"), dash runs two spaces apart.
_SEP_RE = re.compile(r"^(?P<prefix>.*?)(?P<sep>-+(?:  -+)*)[ \t]*$")
_HEADER_SPLIT_RE = re.compile(r" {2,}")
_FOOTER_RE = re.compile(r"^\s*Self (?P<device>\S+) time total:\s*(?P<value>.*?)\s*$")
_EQ_LINE_RE = re.compile(r"^\s*={3,}\s*$")

_FLOPS_HEADER_RE = re.compile(r"^(?:Total )?[KMGTP]?FLOPs$")
_TIME_HEADER_RE = re.compile(r"^(?:Self \S+|(?:Self )?\S+ (?:total|time avg|time))$")


# Column kinds: how a cell is converted and what the column is called.


@dataclass(frozen=True)
class TableLocation:
    """Where a torch profiler table sits in a text; line numbers are 1-based.

    ``start_line`` is the table's first line (the ``====`` block when there is one),
    ``header_line`` the line with the column names, ``end_line`` the last line (the last footer
    line, or the closing dash line). ``closed`` is False when the text ends before the closing
    dash line. ``prefix`` is text repeated in front of every line (indentation, ``[rank0]:``).
    """

    index: int
    start_line: int
    header_line: int
    end_line: int
    columns: tuple[str, ...]
    closed: bool = True
    prefix: str = ""
    title: str | None = None
    top_level_only: bool = False
    # (start, width) of each column in a line without its prefix; from the dash runs.
    spans: tuple[tuple[int, int], ...] = field(default=(), repr=False)
    body: tuple[int, int] = field(default=(0, 0), repr=False)  # 0-based [first, end) row lines
    footer: tuple[int, int] = field(default=(0, 0), repr=False)


@dataclass(frozen=True)
class _Column:
    header: str
    key: str
    kind: str
    start: int
    width: int


def _split_lines(text: str) -> list[str]:
    # split("\n") rather than splitlines(): line numbers must match what an editor shows, and
    # names may contain characters that splitlines() treats as line breaks.
    lines = text.split("\n")
    if "\r" not in text:
        return lines
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _unprefix(line: str, prefix: str) -> str | None:
    if not prefix:
        return line
    if line.startswith(prefix):
        return line[len(prefix) :]
    # A blank line keeps at most the prefix without its trailing spaces.
    return "" if not line.strip() or line.rstrip() == prefix.rstrip() else None


def _header_names(line: str | None) -> list[str]:
    if line is None or not line.strip():
        return []
    return _HEADER_SPLIT_RE.split(line.strip())


def _table_start(lines: list[str], i: int) -> dict[str, Any] | None:
    """If a table starts with the dash line at ``i``, return its layout and the header names."""
    if i + 2 >= len(lines) or not lines[i].rstrip().endswith("-"):
        return None
    match = _SEP_RE.match(lines[i])
    if match is None:
        return None
    sep_line = lines[i].rstrip()
    if lines[i + 2].rstrip() != sep_line:
        return None
    prefix = match["prefix"]
    names = _header_names(_unprefix(lines[i + 1], prefix))
    if not names or names[0] != "Name":
        return None
    spans = tuple((m.start(), m.end() - m.start()) for m in re.finditer(r"-+", match["sep"]))
    return {"prefix": prefix, "sep_line": sep_line, "names": tuple(names), "spans": spans}


def _snake(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")


def find_tables(text: str) -> list[TableLocation]:
    """Find every torch profiler table in ``text`` (a log may hold several), in order."""
    return _find_tables(_split_lines(text))


def _find_tables(lines: list[str]) -> list[TableLocation]:
    tables: list[TableLocation] = []
    n = len(lines)
    i = 0
    while i < n - 2:
        if "-" not in lines[i]:
            i += 1
            continue
        layout = _table_start(lines, i)
        if layout is None:
            i += 1
            continue
        prefix, sep_line = layout["prefix"], layout["sep_line"]

        # What torch prints above the first dash line: [====, title,] [====, top-level note].
        def plain(k: int, prefix: str = prefix) -> str | None:
            if k < 0:
                return None
            line = _unprefix(lines[k], prefix)
            return None if line is None else line.strip()

        def equals_line(k: int) -> bool:
            return _EQ_LINE_RE.match(plain(k) or "") is not None

        start, k, top_level, title = i, i - 1, False, None
        if plain(k) == TOP_LEVEL_NOTE:
            top_level, start = True, k
            k -= 1
            if equals_line(k):
                start = k
                k -= 1
        if k >= 1 and plain(k) and equals_line(k - 1) and not equals_line(k):
            title, start = plain(k), k - 1

        # The body runs to the same dash line; an unclosed table ends where the next one starts.
        j = i + 3
        closed = False
        next_start = prefix + "-"
        while j < n:
            line = lines[j]
            if line.startswith(next_start):
                if line.rstrip() == sep_line:
                    closed = True
                    break
                if _table_start(lines, j) is not None:
                    break
            j += 1
        body = (i + 3, j)
        f = j + 1 if closed else j
        footer_start = f
        if closed:
            while f < n:
                footer_line = _unprefix(lines[f], prefix)
                if footer_line is None or _FOOTER_RE.match(footer_line) is None:
                    break
                f += 1
        end_line = f if closed else j  # 1-based number of the last line == 0-based index + 1
        tables.append(
            TableLocation(
                index=len(tables),
                start_line=start + 1,
                header_line=i + 2,
                end_line=max(end_line, i + 3),
                columns=layout["names"],
                closed=closed,
                prefix=prefix,
                title=title,
                top_level_only=top_level,
                spans=layout["spans"],
                body=body,
                footer=(footer_start, f),
            )
        )
        i = max(f, i + 3)
    return tables


def _columns_for(table: TableLocation) -> list[_Column]:
    if len(table.columns) != len(table.spans):
        raise InputError(
            f"line {table.header_line}: the header has {len(table.columns)} column names "
            f"({', '.join(table.columns)}) but the dash line above it has {len(table.spans)} "
            "columns; is the table cut or re-wrapped?"
        )
    columns: list[_Column] = []
    seen: set[str] = {"name_truncated"}
    for header, (start, width) in zip(table.columns, table.spans, strict=True):
        if header == "Name" and not columns:
            key, kind = "name", NAME
        elif header in ("# of Calls", "Number of Calls", "Calls"):
            key, kind = "calls", INT
        elif header == "Node ID":
            key, kind = "node_id", INT
        elif header == "Source Location":
            key, kind = "source_location", SRC
        elif header in ("Input Shapes", "Overload Name"):
            key, kind = _snake(header), STR
        elif _FLOPS_HEADER_RE.match(header):
            key, kind = _snake(header), FLOAT
        elif header.endswith(" %"):
            key, kind = _snake(header[:-2]) + "_pct", PCT
        elif header.endswith(" Mem"):
            key, kind = _snake(header) + "_bytes", BYTES
        elif _TIME_HEADER_RE.match(header):
            key, kind = _snake(header) + "_us", US
        else:  # a column this parser does not know (or a second "Name"): kept as text
            key, kind = _snake(header) or "column", STR
        base, n = key, 2
        while key in seen:
            key, n = f"{base}_{n}", n + 1
        seen.add(key)
        columns.append(_Column(header, key, kind, start, width))
    return columns


def _split_shifted(line: str, columns: list[_Column]) -> list[str] | None:
    """Cut a row whose values overflow their columns: each value still ends in two spaces."""
    fields: list[str] = []
    pos, n = 0, len(line)
    for column in columns:
        end = pos + column.width
        if end >= n or line[end : end + 2] == "  ":
            fields.append(line[pos:end])
            pos = end + 2
        else:
            stop = line.find("  ", end)
            if stop < 0:
                stop = n
            fields.append(line[pos:stop])
            pos = stop + 2
    if line[pos:].strip():
        return None
    return fields


# Whole-column fast paths: one regex pass over the column joined by newlines, numpy for the
# arithmetic, built from the grammar and scales in units that parse_torch_memory /
# parse_torch_time_us use; when a cell does not match, the column goes through those functions
# cell by cell instead.


@dataclass
class _Cut:
    """A table's body cut into cells: one tuple of cells per row, each row's 1-based line,
    continuation lines of the Source Location column by row, and the lines that did not fit."""

    rows: list[tuple[str, ...] | list[str]] = field(default_factory=list)
    row_lines: list[int] = field(default_factory=list)
    extra: dict[int, list[str]] = field(default_factory=dict)
    problems: list[tuple[int, str]] = field(default_factory=list)


def _read_located(lines: list[str], table: TableLocation, lenient: bool) -> ParsedTable:
    """Rows -> columns -> footer: cut the body into cells, convert each column, read the
    totals under the table."""
    columns = _columns_for(table)
    cut = _cut_rows(lines, table, columns)
    data, bad = _convert_columns(cut, columns, table)
    problems = sorted([*cut.problems, *((cut.row_lines[r], reason) for r, reason in bad.items())])
    if problems and not lenient:
        line_no, reason = problems[0]
        more = len(problems) - 1
        hint = f" ({more} more bad rows)" if more else ""
        raise InputError(f"line {line_no}: {reason}{hint}; {param('lenient', True)} skips bad rows")
    typed = _typed(data, columns, [r for r in range(len(cut.row_lines)) if r not in bad] if bad else None)
    skipped = [{"line": line_no, "reason": reason} for line_no, reason in problems]
    if not table.closed:
        reason = (
            f"the table whose header is at line {table.header_line} is not closed by a dash "
            "line; the text may be cut off"
        )
        if not lenient:
            raise InputError(f"line {table.end_line}: {reason}; {param('lenient', True)} reads it anyway")
        skipped.append({"line": table.end_line, "reason": reason})
    attrs = _footer(lines, table, lenient, skipped)
    attrs["top_level_only"] = table.top_level_only
    attrs["title"] = table.title
    attrs["table_index"] = table.index
    attrs["header_line"] = table.header_line
    attrs["skipped_rows"] = skipped
    return ParsedTable(typed, attrs)


def _cut_rows(lines: list[str], table: TableLocation, columns: list[_Column]) -> _Cut:
    """Each body line cut at the column boundaries (following values that overflow them)."""
    prefix = table.prefix
    total = sum(c.width + 2 for c in columns)
    pattern = re.compile("".join(f"(.{{{c.width}}})  " for c in columns), re.DOTALL)
    src = next((k for k, c in enumerate(columns) if c.kind == SRC), None)
    flops = next((k for k, c in enumerate(columns) if c.kind == FLOAT), None)
    # torch prints the FLOPs value before the source location although the header has them the
    # other way round; the cells are swapped back when their contents show it.
    swap = src is not None and flops is not None and src < flops
    src_start = columns[src].start if src is not None else 0
    cut = _Cut()
    last_ok = False
    first, end = table.body
    for index in range(first, end):
        raw_line = lines[index]
        line = raw_line if not prefix else _unprefix(raw_line, prefix)
        if line is None:
            cut.problems.append((index + 1, f"the line does not start with the table's prefix {prefix!r}"))
            last_ok = False
            continue
        if not line or line.isspace():
            continue
        if src is not None and not line[:src_start].strip():
            # A continuation line of the Source Location column.
            if last_ok:
                cut.extra.setdefault(len(cut.rows) - 1, []).append(line.strip())
            elif not cut.rows and not cut.problems:
                cut.problems.append((index + 1, "a Source Location continuation line without a row"))
            # else: it continues a bad row and goes with it
            continue
        padded = line if len(line) >= total else line + " " * (total - len(line))
        match = pattern.fullmatch(padded)
        fields = match.groups() if match is not None else _split_shifted(line, columns)
        if fields is None:
            cut.problems.append(
                (
                    index + 1,
                    f"the row does not fit the {len(columns)} columns of the header at line "
                    f"{table.header_line} ({', '.join(c.header for c in columns)}); "
                    "text is left over after the last column",
                )
            )
            last_ok = False
            continue
        if swap:
            assert src is not None and flops is not None
            shown_src, shown_flops = fields[src].strip(), fields[flops].strip()
            if to_float(shown_src) is not None and to_float(shown_flops) is None:
                fields = list(fields)
                fields[src], fields[flops] = fields[flops], fields[src]
        cut.rows.append(fields)
        cut.row_lines.append(index + 1)
        last_ok = True
    return cut


def _convert_columns(
    cut: _Cut, columns: list[_Column], table: TableLocation
) -> tuple[dict[str, Any], dict[int, str]]:
    """Each column's values by its kind, and the rows (by position) with a bad cell and why."""
    import numpy as np

    data: dict[str, Any] = {}
    bad: dict[int, str] = {}
    cells = list(zip(*cut.rows, strict=True)) if cut.rows else [() for _ in columns]
    name_width = columns[0].width
    for k, column in enumerate(columns):
        raw = list(cells[k])
        if column.kind == NAME:
            names = [text.strip() for text in raw]
            truncated = [len(s) == name_width and s.endswith("...") for s in names]
            data["name"] = [s[:-3] if t else s for s, t in zip(names, truncated, strict=True)]
            data["name_truncated"] = np.array(truncated, dtype=bool)
        elif column.kind == STR:
            data[column.key] = [text.strip() for text in raw]
        elif column.kind == SRC:
            data[column.key] = [
                "\n".join([text.strip(), *cut.extra[r]]) if r in cut.extra else text.strip()
                for r, text in enumerate(raw)
            ]
        else:
            fast = convert_fast(raw, column.kind)
            if fast is not None:
                data[column.key] = fast
                continue
            values, bad_rows = convert(raw, column.kind)
            for r in bad_rows:
                if r not in bad:
                    bad[r] = _bad_cell(cut.rows[r], raw[r], column, columns, table)
            data[column.key] = values
    return data, bad


def _bad_cell(
    row: tuple[str, ...] | list[str], text: str, column: _Column, columns: list[_Column], table: TableLocation
) -> str:
    if not any(cell.strip() for cell in row[1:]):
        return (
            "not a table row: there is text only under Name; expected the "
            f"{len(columns)} columns of the header at line {table.header_line} "
            f"({', '.join(c.header for c in columns)})"
        )
    shown = brief(text.strip()) if text.strip() else "empty"  # a cell may be 50 MB long
    return f"column {column.header!r} should be {EXPECTED[column.kind]} but is {shown}"


@dataclass(frozen=True)
class ParsedTable:
    """A parsed table without pandas: ``data`` maps each column (in the table's order) to its
    values (a numpy array for numbers and flags, a list of str for text); ``attrs`` as
    :func:`read_table`'s ``frame.attrs``."""

    data: dict[str, Any]
    attrs: dict[str, Any]

    @property
    def columns(self) -> list[str]:
        return list(self.data)

    def __len__(self) -> int:
        return len(self.data["name"])

    def records(self) -> list[dict[str, Any]]:
        """One dict per row, of plain Python values (NaN stays a float NaN)."""
        values = [v.tolist() if hasattr(v, "tolist") else list(v) for v in self.data.values()]
        return [dict(zip(self.data, row, strict=True)) for row in zip(*values, strict=True)]

    def frame(self) -> pd.DataFrame:
        """The DataFrame :func:`read_table` returns."""
        import pandas as pd

        frame = pd.DataFrame(self.data)
        if frame.empty:  # no values to infer from: text columns must still be text
            for key, values in self.data.items():
                if isinstance(values, list):
                    frame[key] = frame[key].astype(str)
        frame.attrs.update(self.attrs)
        return frame


def _typed(data: dict[str, Any], columns: list[_Column], keep: list[int] | None) -> dict[str, Any]:
    """The converted columns as typed arrays (text stays lists), with only the rows in ``keep``
    (None: all)."""
    import numpy as np

    if keep is not None:
        data = {key: [values[r] for r in keep] for key, values in data.items()}
    dtypes = {INT: np.int64, BYTES: np.int64, US: np.float64, PCT: np.float64, FLOAT: np.float64}
    for column in columns:
        if column.kind in dtypes:
            data[column.key] = np.array(data[column.key], dtype=dtypes[column.kind])
    data["name_truncated"] = np.array(data["name_truncated"], dtype=bool)
    return data


def _footer(
    lines: list[str], table: TableLocation, lenient: bool, skipped: list[dict[str, Any]]
) -> dict[str, Any]:
    """The totals under the table (``self_cpu_time_total_us``, ...); a bad one is skipped
    (added to ``skipped``) with ``lenient``, else an error."""
    attrs: dict[str, Any] = {}
    for index in range(*table.footer):
        line = _unprefix(lines[index], table.prefix) or ""
        footer = _FOOTER_RE.match(line)
        assert footer is not None  # find_tables only counts matching lines
        value = parse_torch_time_us(footer["value"])
        if value is None:
            reason = f"the total should be a time like '886.017ms' but is {brief(footer['value'])}"
            if not lenient:
                raise InputError(f"line {index + 1}: {reason}")
            skipped.append({"line": index + 1, "reason": reason})
            continue
        attrs[f"self_{_snake(footer['device'])}_time_total_us"] = value
    return attrs


def _where(tables: list[TableLocation]) -> str:
    return ", ".join(str(t.header_line) for t in tables)


def read_table(text: str, *, table_index: int | None = None, lenient: bool = False) -> pd.DataFrame:
    """Parse the table printed by ``prof.key_averages().table(...)`` into a DataFrame.

    ``text`` may be a whole log: lines before and after the table are ignored, and a constant
    prefix on every table line (indentation, ``[rank0]:``) is removed. With several tables,
    ``table_index`` picks one (0-based; negative counts from the end). Any torch release's
    table works (``B KB MB GB`` or the older ``b Kb Mb Gb``, ``us ms s``, any device).

    One row per table row, in order; the table's columns in snake case with their unit:
    ``name`` (cut names kept without torch's ``...``, ``name_truncated`` says so),
    ``self_cpu_us``, ``cpu_total_us``, ``self_cpu_mem_bytes``, ``cpu_mem_bytes``, ``calls``,
    the device's (``self_cuda_us``, ``cuda_mem_bytes``, ...), ``input_shapes``,
    ``source_location``, ``total_mflops``, ...: times float microseconds, memory int64 bytes
    (net, may be negative), percentages float. docs/guides/parse.md lists every column.

    ``frame.attrs`` holds the footer's totals (``self_cpu_time_total_us``, ...),
    ``top_level_only``, ``title``, ``table_index``, ``header_line`` (1-based) and
    ``skipped_rows`` (``{"line", "reason"}`` of rows ``lenient=True`` skipped).

    Raises :class:`memprof.core.errors.InputError` when there is no table, ``table_index`` is needed
    or out of range, or a row does not fit the columns (unless ``lenient``).
    """
    with gc_paused():  # millions of small objects, alive until the frame is built
        return _read_table(text, table_index, lenient).frame()


def parse_table(text: str, *, table_index: int | None = None, lenient: bool = False) -> ParsedTable:
    """:func:`read_table` without pandas: the same columns, values and attrs as a
    :class:`ParsedTable`."""
    with gc_paused():
        return _read_table(text, table_index, lenient)


def _read_table(text: str, table_index: int | None, lenient: bool) -> ParsedTable:
    lines = _split_lines(text)
    tables = _find_tables(lines)
    if not tables:
        raise InputError(
            "no torch profiler table found: expected a dash line ('------  ------'), a header "
            "line starting with 'Name' ('Name    Self CPU %  ...'), then the same dash line, as "
            "printed by prof.key_averages().table()"
        )
    if table_index is None:
        if len(tables) > 1:
            raise InputError(
                f"found {len(tables)} profiler tables (header lines {_where(tables)}); choose "
                f"one with {param('table_index', 0)} to {len(tables) - 1}"
            )
        table = tables[0]
    else:
        if not -len(tables) <= table_index < len(tables):
            count = "1 profiler table" if len(tables) == 1 else f"{len(tables)} profiler tables"
            raise InputError(
                f"table index {table_index} is out of range: found {count} (header lines "
                f"{_where(tables)}); use 0 to {len(tables) - 1}, or -1 for the last"
            )
        table = tables[table_index]
    return _read_located(lines, table, lenient)


def table_document(frame: pd.DataFrame | ParsedTable) -> dict[str, Any]:
    """The JSON document for a frame from :func:`read_table` or a :func:`parse_table` result
    (NaN becomes None)::

    {"schema_version": 1, "kind": "torch_table", "totals": {"self_cpu_time_total_us": ...},
     "table": {"index", "header_line", "title", "top_level_only"}, "skipped_rows": [...],
     "columns": [...], "rows": [{column: value}, ...]}
    """
    attrs = frame.attrs
    totals = {k: v for k, v in attrs.items() if k.endswith("_time_total_us")}
    rows = frame.records() if isinstance(frame, ParsedTable) else frame.to_dict("records")
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float) and math.isnan(value):
                row[key] = None
            elif hasattr(value, "item"):  # a numpy scalar
                row[key] = value.item()
    return {
        "schema_version": 1,
        "kind": "torch_table",
        "totals": totals,
        "table": {
            "index": attrs.get("table_index"),
            "header_line": attrs.get("header_line"),
            "title": attrs.get("title"),
            "top_level_only": attrs.get("top_level_only", False),
        },
        "skipped_rows": list(attrs.get("skipped_rows", [])),
        "columns": [str(c) for c in frame.columns],
        "rows": rows,
    }
