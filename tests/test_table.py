"""read_table: torch's own table code renders random events; parsing gives the values back.

The property tests build synthetic ``FunctionEventAvg`` objects, print them with
``torch.autograd.profiler_util._build_table`` (the code behind ``key_averages().table()``) and
check every parsed cell against the source value within the printed rounding. The golden tests
read real tables captured from CPU runs (``tests/data/``, see ``scripts/capture_tables.py``).
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from examples import examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from torch.autograd import DeviceType
from torch.autograd import profiler_util as pu

from memprof.core.errors import InputError, MemprofError
from memprof.core.units import format_torch_memory
from memprof.sources.files.table import find_tables, parse_table, read_table, table_document

DATA = Path(__file__).parent / "data"
SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------------------------
# Rendering synthetic events with torch's table code


def _old_format_memory(nbytes: int) -> str:
    """torch < 2.5 spelled the units b, Kb, Mb, Gb."""
    number, unit = format_torch_memory(nbytes).split(" ")
    return f"{number} {_OLD_UNITS[unit]}"


_OLD_UNITS = {"B": "b", "KB": "Kb", "MB": "Mb", "GB": "Gb"}


@dataclass
class Rendered:
    text: str
    events: list[pu.FunctionEventAvg]
    shown: list[pu.FunctionEventAvg]
    device: str | None
    memory: bool
    time_unit: str | None
    max_name: int | None
    title: str | None
    top_level: bool


def render(events: list[pu.FunctionEventAvg], *, old_units: bool = False, **kwargs: Any) -> str:
    if old_units:
        with mock.patch.object(pu, "_format_memory", _old_format_memory):
            return pu._build_table(events, row_limit=-1, **kwargs)
    return pu._build_table(events, row_limit=-1, **kwargs)


def _squash(text: str) -> str:
    return " ".join(text.split())


NAME_CHARS = string.ascii_letters + string.digits + " _:<>&#[]().,/-*+=%'\"!?éμ√中"
names = st.text(NAME_CHARS, min_size=1, max_size=70).map(str.strip).filter(bool)
# Overload names and stack entries may overflow their column; then only single spaces are safe.
overloads = st.text(string.ascii_letters + "_. ", max_size=60).map(_squash)
stack_entries = st.builds(
    lambda path, line, func: f"{path}.py({line}): {func}",
    st.text(string.ascii_letters + "/_-. ", min_size=1, max_size=70).map(_squash),
    st.integers(0, 99999),
    st.text(string.ascii_letters + "_<> ", min_size=1, max_size=30).map(_squash).filter(bool),
)
times = st.one_of(
    st.integers(0, 999),
    st.integers(0, 10**7),
    st.floats(0, 10**7, allow_nan=False).map(lambda t: round(t, 4)),
    st.integers(0, 10**14),  # wider than the 12-character column: shifts the row
)
sizes = st.one_of(
    st.integers(-2047, 2047),
    st.integers(-(2**40), 2**40),
    st.integers(-(2**62), 2**62),  # "-4294967296.00 GB" overflows its column
)
shapes = st.lists(st.lists(st.integers(0, 10**6), max_size=4), max_size=6)


@st.composite
def rendered_tables(draw: st.DrawFn, old_units: bool | None = None) -> Rendered:
    device = draw(st.sampled_from([None, "cuda", "xpu", "mtia", "npu"]))
    device_time = device is not None and draw(st.booleans())
    device_mem = device is not None and draw(st.booleans())
    memory = draw(st.booleans())
    with_shapes = draw(st.booleans())
    with_stack = draw(st.booleans())
    with_flops = draw(st.booleans())
    with_overload = draw(st.booleans())
    with_node_id = draw(st.booleans())
    top_level = draw(st.booleans())
    zero_times = draw(st.booleans())  # all CPU times zero: torch prints NaN percentages
    time_unit = draw(st.sampled_from([None, None, "us", "ms", "s"]))
    max_name = draw(st.sampled_from([55, 55, None, 24]))
    title = draw(st.sampled_from([None, "Profile of step 3"]))

    events = []
    for k in range(draw(st.integers(1, 10))):
        evt = pu.FunctionEventAvg()
        evt.key = draw(names)
        evt.count = draw(st.integers(0, 10**6))
        evt.node_id = draw(st.integers(-1, 10**4)) if with_node_id else -1
        evt.use_device = device
        evt.is_user_annotation = False
        evt.is_async = draw(st.booleans())
        evt.device_type = DeviceType.CUDA if device_time else DeviceType.CPU
        if not zero_times:
            evt.self_cpu_time_total = draw(times)
            evt.cpu_time_total = evt.self_cpu_time_total + draw(times)
        if device_time:
            evt.self_device_time_total = draw(times)
            evt.device_time_total = evt.self_device_time_total + draw(times)
        evt.cpu_memory_usage = draw(sizes)
        evt.self_cpu_memory_usage = draw(sizes)
        if device_mem:
            evt.device_memory_usage = draw(sizes)
            evt.self_device_memory_usage = draw(sizes)
        if with_shapes:
            evt.input_shapes = draw(shapes)
        if with_stack:
            evt.stack = draw(st.lists(stack_entries, max_size=4))
        if with_flops:
            evt.flops = draw(st.one_of(st.just(0), st.integers(1, 10**15)))
        if with_overload:
            evt.overload_name = draw(overloads)
        if top_level and k > 0 and draw(st.booleans()):
            evt.cpu_parent = events[0]  # a child: left out of a top-level-only table
        events.append(evt)

    if sum(e.self_cpu_time_total for e in events) == 0 and not zero_times:
        # torch asserts that a zero total goes with zero times.
        events[0].self_cpu_time_total = 1
        events[0].cpu_time_total += 1
    if old_units is None:
        old_units = draw(st.booleans())
    text = render(
        events,
        old_units=old_units,
        profile_memory=memory,
        with_flops=with_flops,
        top_level_events_only=top_level,
        time_unit=time_unit,
        max_name_column_width=max_name,
        header=title,
    )
    shown = [e for e in events if not (top_level and e.cpu_parent is not None)]
    return Rendered(text, events, shown, device, memory, time_unit, max_name, title, top_level)


# ---------------------------------------------------------------------------------------------
# What the table should say about each event


def _time_close(parsed: float, value: float, unit: str | None) -> bool:
    if unit is None:
        scale = 1e6 if value >= 1e6 else 1e3 if value >= 1e3 else 1.0
    else:
        scale = {"us": 1.0, "ms": 1e3, "s": 1e6}[unit]
    # Three printed decimals, plus the float error of numbers as large as 1e14.
    return abs(parsed - value) <= 0.0005 * scale * (1 + 1e-9) + abs(value) * 1e-15 + 1e-12


def _bytes_close(parsed: int, value: int) -> bool:
    if abs(value) < 1024:
        return parsed == value
    unit = 1024**3 if abs(value) >= 1024**3 else 1024**2 if abs(value) >= 1024**2 else 1024
    return abs(parsed - value) <= 0.005 * unit * 1.000001 + 1 + abs(value) * 1e-15


def _pct_close(parsed: float, part: float, total: float) -> bool:
    if total == 0:
        return math.isnan(parsed)
    return math.isclose(parsed, part * 100.0 / total, abs_tol=0.005 + 1e-9)


def _shown_name(key: str, max_name: int | None) -> tuple[str, bool]:
    if max_name is not None and len(key) >= max_name - 3:
        return key[: max_name - 3], True
    return key, False


def _trim_path(path: str, width: int) -> str:
    # As _build_table's trim_path: keep the end of a long path, mark the cut with "...".
    if len(path) > width:
        path = path[len(path) - width :]
        if len(path) > 3:
            path = "..." + path[3:]
    return path


def check_parsed(r: Rendered, text: str | None = None) -> None:
    df = read_table(r.text if text is None else text)
    events, shown = r.events, r.shown
    dev = (r.device or "").lower()
    has_device_time = any(e.self_device_time_total > 0 for e in events)
    has_device_mem = any(e.self_device_memory_usage > 0 for e in events)
    has_shapes = any(e.input_shapes for e in events)
    has_stack = any(e.stack for e in events)
    has_overload = any(e.overload_name for e in events)
    has_flops = any(e.flops > 0 for e in events)
    has_node_id = any(e.node_id != -1 for e in events)

    expected = ["name", "name_truncated"]
    expected += ["overload_name"] if has_overload else []
    expected += ["self_cpu_pct", "self_cpu_us", "cpu_total_pct", "cpu_total_us", "cpu_time_avg_us"]
    if has_device_time:
        expected += [f"self_{dev}_us", f"self_{dev}_pct", f"{dev}_total_us", f"{dev}_time_avg_us"]
    if r.memory:
        expected += ["cpu_mem_bytes", "self_cpu_mem_bytes"]
        if r.device and has_device_mem:
            expected += [f"{dev}_mem_bytes", f"self_{dev}_mem_bytes"]
    expected += ["calls"] + (["node_id"] if has_node_id else [])
    expected += ["input_shapes"] if has_shapes else []
    expected += ["source_location"] if has_stack else []
    flops_column = [c for c in df.columns if c.startswith("total_") and c.endswith("flops")]
    expected += flops_column if has_flops else []
    assert list(df.columns) == expected
    assert len(df) == len(shown)

    total_self_cpu = sum(e.self_cpu_time_total for e in events)
    total_self_dev = sum(e.self_device_time_total for e in events)
    assert _time_close(df.attrs["self_cpu_time_total_us"], total_self_cpu, r.time_unit)
    if has_device_time:
        assert _time_close(df.attrs[f"self_{dev}_time_total_us"], total_self_dev, r.time_unit)
    assert df.attrs["top_level_only"] is r.top_level
    assert df.attrs["title"] == r.title
    assert df.attrs["skipped_rows"] == []

    width = 0
    if has_stack:
        width = max(len(x) for e in events if e.stack for x in e.stack) + 4
        width = min(width, 75)
    flops_scale = 1.0
    if has_flops:
        unit = flops_column[0][len("total_") : -len("flops")]
        flops_scale = 1000.0 ** -"_kmgtp".index(unit or "_") if unit else 1.0
    for row, evt in zip(df.to_dict("records"), shown, strict=True):
        name, truncated = _shown_name(evt.key, r.max_name)
        assert (row["name"], row["name_truncated"]) == (name, truncated)
        assert row["calls"] == evt.count
        assert _time_close(row["self_cpu_us"], evt.self_cpu_time_total, r.time_unit)
        assert _time_close(row["cpu_total_us"], evt.cpu_time_total, r.time_unit)
        assert _time_close(row["cpu_time_avg_us"], evt.cpu_time, r.time_unit)
        assert _pct_close(row["self_cpu_pct"], evt.self_cpu_time_total, total_self_cpu)
        if evt.is_async:
            assert row["cpu_total_pct"] == 0.0
        else:
            assert _pct_close(row["cpu_total_pct"], evt.cpu_time_total, total_self_cpu)
        if has_device_time:
            assert _time_close(row[f"self_{dev}_us"], evt.self_device_time_total, r.time_unit)
            assert _time_close(row[f"{dev}_total_us"], evt.device_time_total, r.time_unit)
            assert _time_close(row[f"{dev}_time_avg_us"], evt.device_time, r.time_unit)
            assert _pct_close(row[f"self_{dev}_pct"], evt.self_device_time_total, total_self_dev)
        if r.memory:
            assert _bytes_close(row["cpu_mem_bytes"], evt.cpu_memory_usage)
            assert _bytes_close(row["self_cpu_mem_bytes"], evt.self_cpu_memory_usage)
            if r.device and has_device_mem:
                assert _bytes_close(row[f"{dev}_mem_bytes"], evt.device_memory_usage)
                assert _bytes_close(row[f"self_{dev}_mem_bytes"], evt.self_device_memory_usage)
        if has_overload:
            shown_overload, cut = _shown_name(evt.overload_name, r.max_name)
            assert row["overload_name"] == shown_overload + ("..." if cut else "")
        if has_node_id:
            assert row["node_id"] == evt.node_id
        if has_shapes:
            shapes_width = min(max(len(str(e.input_shapes)) for e in events) + 4, 80)
            assert row["input_shapes"] == str(evt.input_shapes)[:shapes_width].strip()
        if has_stack:
            stack = evt.stack or []
            assert row["source_location"] == "\n".join(_trim_path(x, width) for x in stack)
        if has_flops:
            value = row[flops_column[0]]
            if evt.flops <= 0:
                assert math.isnan(value)
            else:
                assert math.isclose(value, evt.flops * flops_scale, rel_tol=1e-9, abs_tol=6e-4)


# ---------------------------------------------------------------------------------------------
# Properties


@SETTINGS
@given(rendered_tables())
def test_round_trip_through_torchs_table_code(r: Rendered) -> None:
    check_parsed(r)


@SETTINGS
@given(rendered_tables(), st.booleans())
def test_parse_without_pandas_writes_what_pandas_writes(r: Rendered, carriage_return: bool) -> None:
    # `memprof parse` works on ParsedTable (no pandas): its exact CSV (--exact-csv) is pandas'
    # to_csv of the frame (NaN as an empty cell, a bare carriage return quoted), its JSON the
    # frame's document.
    import csv

    from memprof.frontends.commands.parse import _csv_text

    text = r.text.replace("aten::", "aten\r::", 1) if carriage_return else r.text
    frame, parsed = read_table(text), parse_table(text)
    quoting = csv.QUOTE_NONNUMERIC if "\r" in "".join(frame["name"]) else csv.QUOTE_MINIMAL
    assert _csv_text(parsed, exact=True) == frame.to_csv(index=False, lineterminator="\n", quoting=quoting)
    assert repr(table_document(parsed)) == repr(table_document(frame))
    assert parsed.frame().equals(frame) and parsed.attrs == frame.attrs


@SETTINGS
@given(rendered_tables(old_units=True))
def test_round_trip_with_pre_2_5_unit_spellings(r: Rendered) -> None:
    check_parsed(r)


@SETTINGS
@given(
    rendered_tables(),
    st.sampled_from(["", "    ", "[rank0]: ", "| "]),
    st.booleans(),
    st.lists(st.text(string.printable.replace("\r", ""), max_size=40), max_size=3),
)
def test_round_trip_inside_a_log(r: Rendered, prefix: str, rstrip: bool, noise: list[str]) -> None:
    """Log lines around the table, a prefix on each line, trailing spaces stripped."""
    lines = r.text.split("\n")
    lines = [prefix + line for line in lines]
    if rstrip:
        lines = [line.rstrip() for line in lines]
    # Noise lines never hold a full dash/header/dash block, so they are not tables.
    text = "\n".join([*noise, *lines, "step 4 done", *noise])
    check_parsed(r, text)


DUPLICATE_NAME = "------  ------  ----------\nName    Name    # of Calls\n------  ------  ----------\n"


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=400), st.booleans())
@example(DUPLICATE_NAME + "------  ------  ----------\n", False)  # no rows: a KeyError once
@example(DUPLICATE_NAME + "aten    x                1\n------  ------  ----------\n", False)
@example(DUPLICATE_NAME + "aten    x              one\n------  ------  ----------\n", True)
@example("\ufeff" + DUPLICATE_NAME, False)
@example(DUPLICATE_NAME + "aten    " + "x" * 1_000_000 + "  1\n------  ------  ----------\n", False)
@example(DUPLICATE_NAME + "aten    x    " + "9" * 1_000_000 + "\n------  ------  ----------\n", True)
def test_arbitrary_text_raises_only_memprof_errors(text: str, lenient: bool) -> None:
    try:
        read_table(text, lenient=lenient)
    except MemprofError as error:
        assert len(str(error)) < 1000  # what it quotes from the text is cut short


@SETTINGS
@given(rendered_tables(), st.data(), st.booleans())
def test_mutated_tables_raise_only_memprof_errors(r: Rendered, data: st.DataObject, lenient: bool) -> None:
    text = r.text
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, max(len(text) - 1, 0)))
        op = data.draw(st.sampled_from(["delete", "insert", "replace_line", "cut", "dup"]))
        if op == "delete":
            text = text[:at] + text[at + data.draw(st.integers(1, 30)) :]
        elif op == "insert":
            text = text[:at] + data.draw(st.text(max_size=20)) + text[at:]
        elif op == "cut":
            text = text[:at]
        else:
            lines = text.split("\n")
            k = data.draw(st.integers(0, len(lines) - 1))
            lines[k] = data.draw(st.text(max_size=60)) if op == "replace_line" else lines[k] * 2
            text = "\n".join(lines)
    for index in (None, 0, -1, 5):
        try:
            df = read_table(text, lenient=lenient, table_index=index)
        except MemprofError:
            continue
        assert list(df.columns[:2]) == ["name", "name_truncated"]


@settings(max_examples=examples(100), deadline=None)
@given(st.binary(max_size=300), st.booleans())
@example(b"\xef\xbb\xbf" + DUPLICATE_NAME.encode() + b"------  ------  ----------\n", False)
@example(b"abc\xff\xfe", False)  # not UTF-8: standard input once gave a UnicodeDecodeError
@example("\ufeffName".encode("utf-16"), False)
def test_arbitrary_bytes_from_a_file_raise_only_memprof_errors(data: bytes, lenient: bool) -> None:
    import tempfile

    from memprof.core.reading import read_text

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "t.txt")
        path.write_bytes(data)
        try:
            read_table(read_text(path), lenient=lenient)
        except MemprofError as error:
            assert "\n" not in str(error)


# ---------------------------------------------------------------------------------------------
# Layouts and errors, one at a time


def _evt(key: str, **fields: Any) -> pu.FunctionEventAvg:
    evt = pu.FunctionEventAvg()
    evt.key, evt.count, evt.node_id, evt.is_user_annotation = key, 1, -1, False
    evt.self_cpu_time_total = evt.cpu_time_total = 10
    for name, value in fields.items():
        setattr(evt, name, value)
    return evt


def _table(events: list[pu.FunctionEventAvg], **kwargs: Any) -> str:
    return render(events, profile_memory=True, **kwargs)


def test_device_columns_are_named_after_the_device() -> None:
    events = [
        _evt(
            "aten::mm",
            use_device="xpu",
            device_type=DeviceType.XPU,
            self_device_time_total=1500,
            device_time_total=2000,
            device_memory_usage=3 * 1024**2,
            self_device_memory_usage=1024**2,
        )
    ]
    df = read_table(_table(events))
    row = df.iloc[0]
    assert row["self_xpu_us"] == 1500.0 and row["xpu_total_us"] == 2000.0
    assert row["self_xpu_pct"] == 100.0 and row["xpu_time_avg_us"] == 2000.0
    assert row["xpu_mem_bytes"] == 3 * 1024**2 and row["self_xpu_mem_bytes"] == 1024**2
    assert df.attrs["self_xpu_time_total_us"] == 1500.0


def test_names_with_spaces_and_symbols_and_truncation() -> None:
    long = "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<X>>"
    keys = ["Torch-Compiled Region: 0/0", "a  b   c", "<>&:#", "[memory]", long]
    df = read_table(_table([_evt(k) for k in keys]))
    assert list(df["name"]) == keys[:4] + [long[:52]]
    assert list(df["name_truncated"]) == [False] * 4 + [True]


def test_negative_sizes_and_every_unit() -> None:
    sizes = [-40, 40, -1536, 5 * 1024**2, -3 * 1024**3, 0]
    text = _table([_evt(f"op{k}", cpu_memory_usage=s) for k, s in enumerate(sizes)])
    assert list(read_table(text)["cpu_mem_bytes"]) == sizes
    # torch stops at GB; TB is read too, in case a release prints it.
    text = text.replace("-3.00 GB", "-3.00 TB")
    assert read_table(text)["cpu_mem_bytes"].iloc[4] == -3 * 1024**4


def test_all_zero_times_give_nan_percentages() -> None:
    events = [_evt("a", self_cpu_time_total=0, cpu_time_total=0)]
    df = read_table(_table(events))
    assert "NaN" in _table(events)
    assert math.isnan(df["self_cpu_pct"].iloc[0]) and math.isnan(df["cpu_total_pct"].iloc[0])


def test_no_table_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no torch profiler table found"):
        read_table("hello\n-----\nworld\n")


def test_several_tables_need_an_index() -> None:
    text = (DATA / "two_tables.log").read_text()
    with pytest.raises(InputError, match=r"found 2 profiler tables \(header lines 5, 18\)"):
        read_table(text)
    assert read_table(text, table_index=1).attrs["header_line"] == 18
    assert read_table(text, table_index=-1).attrs["table_index"] == 1
    with pytest.raises(InputError, match="table index 2 is out of range: found 2"):
        read_table(text, table_index=2)


def _with_bad_row() -> tuple[str, int]:
    text = _table([_evt("aten::a"), _evt("aten::b", cpu_memory_usage=2048), _evt("aten::c")])
    lines = text.split("\n")
    bad = next(k for k, line in enumerate(lines) if "aten::b" in line)
    lines[bad] = lines[bad].replace("2.00 KB", "2.00 XB")
    return "\n".join(lines), bad + 1


def test_a_bad_cell_names_line_column_and_expectation() -> None:
    text, line = _with_bad_row()
    with pytest.raises(InputError) as info:
        read_table(text)
    assert str(info.value) == (
        f"line {line}: column 'CPU Mem' should be a size like '244.14 MB', '-1.00 KB' or '40 B' "
        "but is '2.00 XB'; lenient=True skips bad rows"
    )


def test_a_huge_cell_is_quoted_short() -> None:
    # The message quoted the whole cell: a 5 MB cell made a 5 MB line.
    text, line = _with_bad_row()
    with pytest.raises(InputError) as info:
        read_table(text.replace("2.00 XB", "9" * 5_000_000 + " XB"))
    assert str(info.value) == (
        f"line {line}: column 'CPU Mem' should be a size like '244.14 MB', '-1.00 KB' or '40 B' but is "
        f"'{'9' * 27}...{'9' * 25} XB'; lenient=True skips bad rows"
    )


def test_lenient_skips_bad_rows_and_lists_them() -> None:
    text, line = _with_bad_row()
    df = read_table(text, lenient=True)
    assert list(df["name"]) == ["aten::a", "aten::c"]
    assert [s["line"] for s in df.attrs["skipped_rows"]] == [line]


def test_a_row_with_extra_text_does_not_fit() -> None:
    lines = _table([_evt("aten::a")]).split("\n")
    lines[3] = lines[3].rstrip() + "  surplus"
    with pytest.raises(InputError, match=r"^line 4: the row does not fit the 9 columns"):
        read_table("\n".join(lines))


def test_a_cut_off_table_is_an_error_unless_lenient() -> None:
    text = _table([_evt("aten::a"), _evt("aten::b")])
    cut = "\n".join(text.split("\n")[:5])
    with pytest.raises(InputError, match="not closed by a dash line"):
        read_table(cut)
    assert list(read_table(cut, lenient=True)["name"]) == ["aten::a", "aten::b"]


def test_a_table_without_rows_keeps_its_columns_and_types() -> None:
    lines = (DATA / "cpu_memory.txt").read_text().split("\n")
    df = read_table("\n".join([*lines[:3], lines[0], lines[-2]]))
    assert len(df) == 0 and df.attrs["self_cpu_time_total_us"] == 663.833
    assert df["cpu_mem_bytes"].dtype == "int64" and df["calls"].dtype == "int64"
    assert df["name"].dtype == object or str(df["name"].dtype) == "str"


def test_windows_line_endings() -> None:
    text = (DATA / "cpu_memory.txt").read_text()
    crlf = read_table(text.replace("\n", "\r\n"))
    assert crlf.equals(read_table(text))


def test_header_and_dash_line_disagreeing_is_an_error() -> None:
    lines = _table([_evt("aten::a")]).split("\n")
    lines[1] = lines[1].replace("Self CPU %", "Self CPU  %")
    with pytest.raises(InputError, match=r"^line 2: the header has 10 column names"):
        read_table("\n".join(lines))


def test_old_left_aligned_layout_with_old_headers_and_units() -> None:
    """torch 1.x left-aligned every column, said "Number of Calls", "Self CPU total" and "Kb"."""
    text = (DATA / "cpu_memory.txt").read_text()
    (table,) = find_tables(text)
    old_names = {"Self CPU %": "Self CPU total %", "Self CPU": "Self CPU total"}
    old_names["# of Calls"] = "Number of Calls"
    lines = text.split("\n")
    for k in range(1, table.body[1]):
        if k == 2:
            continue
        cells = [lines[k][a : a + w].strip() for a, w in table.spans]
        if k == 1:
            cells = [old_names.get(c, c) for c in cells]
        cells = [c.replace(" MB", " Mb").replace(" KB", " Kb").replace(" B", " b") for c in cells]
        lines[k] = "".join(c.ljust(w) + "  " for c, (_, w) in zip(cells, table.spans, strict=True))
    old = read_table("\n".join(lines))
    new = read_table(text)
    assert list(old.columns) == [
        "name",
        "name_truncated",
        "self_cpu_total_pct",
        "self_cpu_total_us",
        "cpu_total_pct",
        "cpu_total_us",
        "cpu_time_avg_us",
        "cpu_mem_bytes",
        "self_cpu_mem_bytes",
        "calls",
    ]
    assert (old.to_numpy() == new.to_numpy()).all()


def test_find_tables_reports_locations() -> None:
    found = find_tables((DATA / "two_tables.log").read_text())
    assert [(t.start_line, t.header_line, t.end_line) for t in found] == [(4, 5, 13), (17, 18, 24)]
    assert found[0].columns[0] == "Name" and found[0].columns[-1] == "# of Calls"


def test_module_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, memprof.sources.files.table as t; t.read_table(open(sys.argv[1]).read());"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    root = Path(__file__).parent.parent
    result = subprocess.run(
        [sys.executable, "-c", code, str(DATA / "cpu_memory.txt")],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------------------------------------
# Real tables captured from CPU runs


def _rows(df: Any, name: str) -> list[dict[str, Any]]:
    return [r for r in df.to_dict("records") if r["name"] == name]


def test_captured_cpu_memory_table() -> None:
    df = read_table((DATA / "cpu_memory.txt").read_text())
    assert len(df) == 13
    assert df.attrs["self_cpu_time_total_us"] == 663.833
    (empty,) = _rows(df, "aten::empty")
    assert (empty["calls"], empty["cpu_mem_bytes"], empty["self_cpu_mem_bytes"]) == (
        3,
        1426063,  # 1.36 MB
        1426063,
    )
    assert empty["self_cpu_us"] == 10.827 and empty["self_cpu_pct"] == 1.63
    (block,) = _rows(df, "my block: matmul & sum <fp32>")
    assert (block["calls"], block["cpu_mem_bytes"], block["self_cpu_mem_bytes"]) == (1, 103424, 0)
    (memory,) = _rows(df, "[memory]")
    assert (memory["calls"], memory["cpu_mem_bytes"]) == (7, -1530921)  # -1.46 MB
    (mm,) = _rows(df, "aten::mm")
    assert mm["self_cpu_mem_bytes"] == 102400
    assert not df["name_truncated"].any()


def test_captured_input_shapes_table() -> None:
    df = read_table((DATA / "input_shapes.txt").read_text())
    assert len(df) == 20
    assert _rows(df, "aten::mm")[0]["input_shapes"] == "[[256, 1000], [1000, 100]]"
    assert list(df.columns)[-1] == "input_shapes"
    sums = _rows(df, "aten::sum")
    assert [(r["input_shapes"], r["cpu_mem_bytes"]) for r in sums] == [
        ("[[256, 100], [], [], []]", 1024),
        ("[[10], []]", 4),
    ]


def test_captured_source_location_table() -> None:
    df = read_table((DATA / "source_location.txt").read_text())
    assert list(df["name"]) == ["aten::empty"] * 2 + ["aten::mm", "aten::sum", "aten::add"] + ["aten::empty"]
    assert df["source_location"].iloc[2] == (
        "capture_tables.py(22): _workload\ncapture_tables.py(34): _profile\ncapture_tables.py(64): main"
    )
    assert df["source_location"].iloc[5].startswith("<built-in method empty of type object")
    assert list(df["cpu_mem_bytes"]) == [1024000, 399995, 102400, 1024, 1024, 40]


def test_captured_top_level_table_with_title_and_flops() -> None:
    df = read_table((DATA / "top_level_flops.txt").read_text())
    assert df.attrs["top_level_only"] is True and df.attrs["title"] == "Top level"
    assert df.attrs["header_line"] == 6
    (add,) = _rows(df, "aten::add")
    assert add["total_flops"] == 256.0
    assert math.isnan(_rows(df, "aten::ones")[0]["total_flops"])


def test_captured_compiled_table() -> None:
    df = read_table((DATA / "compiled.txt").read_text())
    (graph,) = [r for r in df.to_dict("records") if r["name"].startswith("## Call CompiledFxGraph")]
    assert graph["name_truncated"] and len(graph["name"]) == 52
    assert (graph["calls"], graph["self_cpu_mem_bytes"]) == (1, 40960)
    assert _rows(df, "Torch-Compiled Region: 0/0")[0]["cpu_mem_bytes"] == 40960
    assert _rows(df, "[memory]")[0]["self_cpu_mem_bytes"] == -40960


def test_captured_log_with_two_tables_and_noise() -> None:
    text = (DATA / "two_tables.log").read_text()
    first = read_table(text, table_index=0)
    assert list(first["name"])[:2] == ["aten::empty", "aten::ones"]
    second = read_table(text, table_index=1)
    assert list(second["name"]) == ["aten::fill_", "aten::mm", "my block: matmul & sum <fp3"]
    assert list(second["name_truncated"]) == [False, False, True]
    assert list(second["calls"]) == [4, 1, 1]


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.one_of(sizes.map(pu._format_memory), sizes.map(_old_format_memory)), min_size=1),
    st.lists(times.map(pu._format_time), min_size=1),
)
def test_whole_column_path_agrees_with_the_units_functions(sizes_: list[str], times_: list[str]) -> None:
    from memprof.sources.files.table_cells import convert, convert_fast

    for cells, kind in ((sizes_, "bytes"), (times_, "us")):
        cells = [cell.rjust(12) for cell in cells]
        slow, bad = convert(cells, kind)
        assert bad == []
        assert list(convert_fast(cells, kind)) == slow
