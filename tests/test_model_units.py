"""Reports load back as data only; sizes and percentages parse or say what a good one is."""

from __future__ import annotations

import json
import math
import re

import pytest
from examples import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memprof.core.errors import InputError, MemprofError, UsageError
from memprof.core.units import (
    format_bytes,
    format_torch_memory,
    parse_percent,
    parse_size,
    parse_torch_memory,
)
from memprof.model import Report
from memprof.pipeline import load_report

MiB = 1024 * 1024


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("800MB", 800 * MiB),
        ("800 MB", 800 * MiB),
        ("1.5GiB", 1536 * MiB),
        ("123456", 123456),
        ("2kb", 2048),
        ("0", 0),
        ("1e3", 1000),
        (" 10 MiB ", 10 * MiB),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "MB", "-5MB", "12 parsecs", "1.2.3GB", "nan", "inf GB"])
def test_bad_size_names_a_good_example(text):
    with pytest.raises(UsageError, match="800MB"):
        parse_size(text)


@given(st.text(max_size=30))
@settings(max_examples=examples(300), deadline=None)
@example("9" * 400)
@example("1e400")
@example("1.5")
def test_size_parser_raises_only_its_own_error(text):
    try:
        assert parse_size(text) >= 0
    except UsageError:
        pass


@given(st.text(max_size=30))
@settings(max_examples=examples(300), deadline=None)
@example("9" * 400 + "%")  # a tolerance of 400 nines once overflowed in the gate
@example("1e400%")
def test_percent_parser_raises_only_its_own_error(text):
    try:
        assert 0 <= parse_percent(text) < math.inf
    except UsageError:
        pass


def test_percent():
    assert parse_percent("5%") == pytest.approx(0.05)
    assert parse_percent("5") == pytest.approx(0.05)
    assert parse_percent("0.5%") == pytest.approx(0.005)
    with pytest.raises(UsageError, match="5%"):
        parse_percent("-3%")


@given(st.integers(min_value=-(2**50), max_value=2**50))
def test_torch_memory_format_round_trips_within_printed_rounding(nbytes):
    text = format_torch_memory(nbytes)
    parsed = parse_torch_memory(text)
    assert parsed is not None
    unit = 1 if abs(nbytes) < 1024 else 1024 ** min(3, (len(bin(abs(nbytes))) - 3) // 10)
    assert abs(parsed - nbytes) <= 0.005 * unit + 1


def test_torch_memory_spellings():
    assert parse_torch_memory("244.14 MB") == round(244.14 * MiB)
    assert parse_torch_memory("-486.37 MB") == -round(486.37 * MiB)
    assert parse_torch_memory("40 B") == 40
    assert parse_torch_memory("-40") == -40
    assert parse_torch_memory("1.50 Gb") == 1536 * MiB
    assert parse_torch_memory("12.00 Kb") == 12 * 1024
    assert parse_torch_memory("1.00 TB") == 1024**4
    assert parse_torch_memory("fast") is None


def test_format_bytes():
    assert format_bytes(834_000_000) == "795.4 MiB"
    assert format_bytes(-40) == "-40 B"
    assert format_bytes(2_000_000, signed=True) == "+1.9 MiB"
    assert format_bytes(None) == "-"


def _report_dict():
    return {
        "schema_version": 1,
        "target": "m:f",
        "device": "cpu",
        "environment": {"torch": "2.13.0"},
        "runs": {
            "eager": {
                "peak_bytes": 100,
                "allocated_bytes": 150,
                "net_bytes": 10,
                "ops": [
                    {
                        "name": "aten::add",
                        "calls": 2,
                        "self_bytes": 10,
                        "total_bytes": 10,
                        "allocated_bytes": 150,
                        "peak_bytes": 100,
                    }
                ],
            }
        },
    }


def test_report_round_trips(tmp_path):
    report = Report.from_dict(_report_dict())
    path = tmp_path / "r.json"
    path.write_text(report.to_json())
    again = load_report(path)
    assert again.runs["eager"].peak_bytes == 100
    assert again.runs["eager"].ops.iloc[0]["calls"] == 2
    assert again.to_dict()["runs"] == report.to_dict()["runs"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema_version=3), "schema_version is 3, this memprof reads 1 and 2"),
        (lambda d: d.pop("runs"), "missing 'runs'"),
        (lambda d: d.update(runs=[]), "'runs' must be an object"),
        (lambda d: d["runs"]["eager"].update(peak_bytes="big"), "peak_bytes must be a number"),
        (lambda d: d["runs"]["eager"].update(ops=[{"calls": 1}]), "must be an object with a 'name'"),
    ],
)
def test_wrong_shapes_are_input_errors_with_the_path(tmp_path, mutate, message):
    data = _report_dict()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=message) as caught:
        load_report(path)
    assert str(path) in str(caught.value)
    assert caught.value.exit_code == 2


def test_malformed_json_and_missing_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON: .* line 1 column 2"):
        load_report(path)
    with pytest.raises(InputError, match="does not exist"):
        load_report(tmp_path / "missing.json")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)
RUN_KEYS = ["peak_bytes", "allocated_bytes", "net_bytes", "inputs_bytes", "wall_ms", "wall_ms_all", "repeat",
            "ops", "peak_op", "peak_op_stack", "compile_seconds", "timeline", "device_counters", "records",
            "notes", "status", "error", "mode"]  # fmt: skip
OP_KEYS = [
    "name",
    "calls",
    "self_bytes",
    "total_bytes",
    "allocated_bytes",
    "peak_bytes",
    "self_us",
    "total_us",
]


@given(json_values)
@settings(max_examples=examples(300), deadline=None)
@example([])
@example("a report")
@example({"schema_version": 2, "target": "t", "runs": {"eager": {"peak_bytes": -1, "ops": []}}})
@example({"schema_version": 2, "target": "t", "runs": {"eager": {"peak_bytes": 1.5, "ops": []}}})
@example(
    {"schema_version": 2, "target": "t", "runs": {"eager": {"peak_bytes": 1, "ops": [], "wall_ms": 1e400}}}
)
def test_report_loader_raises_only_memprof_errors(data):
    try:
        Report.from_dict(data)
    except MemprofError:
        pass


@given(st.sampled_from(RUN_KEYS), json_values, st.sampled_from(OP_KEYS), json_values)
@settings(max_examples=examples(500), deadline=None)
def test_one_wrong_field_in_a_valid_report_is_an_input_error_or_accepted(run_key, value, op_key, op_value):
    data = _report_dict()
    data["runs"]["eager"]["ops"][0][op_key] = op_value
    data["runs"]["eager"][run_key] = value
    try:
        Report.from_dict(data).to_json()
    except MemprofError:
        pass


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["runs"]["eager"].update(peak_bytes=-5),
            "runs.eager.peak_bytes must be a number of bytes",
        ),
        (
            lambda d: d["runs"]["eager"].update(peak_bytes=1.5),
            "runs.eager.peak_bytes must be a number of bytes",
        ),
        (lambda d: d["runs"]["eager"].update(allocated_bytes=-1), "runs.eager.allocated_bytes must be"),
        (
            lambda d: d["runs"]["eager"]["ops"][0].update(peak_bytes=-1),
            "runs.eager.ops[0].peak_bytes must be",
        ),
        (
            lambda d: d["runs"]["eager"]["ops"][0].update(self_bytes=0.5),
            "runs.eager.ops[0].self_bytes must be",
        ),
        (lambda d: d["runs"]["eager"]["ops"][0].update(calls=-2), "runs.eager.ops[0].calls must be a count"),
        (
            lambda d: d["runs"]["eager"].update(status="lost"),
            "runs.eager.status must be one of 'ok', 'failed'",
        ),
        (lambda d: d["runs"]["eager"].update(wall_ms="fast"), "runs.eager.wall_ms must be a number or null"),
    ],
)
def test_impossible_values_are_rejected_with_their_place(mutate, message) -> None:
    data = _report_dict()
    mutate(data)
    with pytest.raises(InputError, match=re.escape(message)):
        Report.from_dict(data, where="r.json")


def test_signed_byte_counts_may_be_negative_and_whole_floats_are_whole_numbers() -> None:
    data = _report_dict()
    data["runs"]["eager"]["net_bytes"] = -10
    data["runs"]["eager"]["ops"][0].update(self_bytes=-10, total_bytes=-10.0)
    data["runs"]["eager"]["peak_bytes"] = 1e3
    run = Report.from_dict(data).runs["eager"]
    assert (run.net_bytes, run.op_stats[0].self_bytes, run.op_stats[0].total_bytes) == (-10, -10, -10)
    assert run.peak_bytes == 1000 and isinstance(run.peak_bytes, int)


def test_version_1_reports_load_and_are_written_as_version_2() -> None:
    report = Report.from_dict(_report_dict())
    run = report.runs["eager"]
    assert run.label == "eager" and run.mode == "eager"  # mode defaults to the label
    assert run.fused_kernels is None  # not stored before version 2
    data = report.to_dict()
    assert data["schema_version"] == 2
    assert "fused_kernels" not in data["runs"]["eager"]


def test_fused_kernels_are_stored_and_read_back() -> None:
    data = _report_dict()
    data["schema_version"] = 2
    data["runs"]["eager"]["fused_kernels"] = {"cpp_fused__to_copy_add_0": ["aten::_to_copy", "aten::add"]}
    report = Report.from_dict(data)
    assert report.runs["eager"].fused_kernels == {"cpp_fused__to_copy_add_0": ("aten::_to_copy", "aten::add")}
    assert Report.from_dict(json.loads(report.to_json())).runs["eager"] == report.runs["eager"]


def _report_bytes() -> bytes:
    return Report.from_dict(_report_dict()).to_json().encode()


HUGE_KEY = b"k" * 100_000  # quoted in the message when given twice: cut short there

# What a report file can be: a valid report cut, spliced or wrapped, or any bytes at all.
report_files = st.one_of(
    st.binary(max_size=200),
    st.builds(lambda cut: _report_bytes()[:cut], st.integers(0, 2000)),
    st.builds(
        lambda at, junk: _report_bytes()[:at] + junk + _report_bytes()[at:],
        st.integers(0, 2000),
        st.binary(max_size=8),
    ),
    st.builds(lambda depth: b"[" * depth + _report_bytes() + b"]" * depth, st.integers(0, 3000)),
)


@given(report_files)
@settings(max_examples=examples(150), deadline=None)
@example(b"[" * 100_000 + b"]" * 100_000)  # deeper than Python parses: a RecursionError once
@example(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
@example(_report_bytes().replace(b'"peak_bytes": 100', b'"peak_bytes": -1'))
@example(_report_bytes().replace(b'"peak_bytes": 100', b'"peak_bytes": 1.5'))
@example(_report_bytes().replace(b'"peak_bytes": 100', b'"peak_bytes": NaN'))
@example(_report_bytes().replace(b'"peak_bytes": 100', b'"peak_bytes": Infinity'))
@example(_report_bytes().replace(b'"peak_bytes": 100', b'"peak_bytes": 1e400'))
@example(_report_bytes().replace(b'"target"', b'"runs": {}, "target"'))  # a key twice
@example(b"\xef\xbb\xbf" + _report_bytes())  # a byte-order mark: read
@example(b"\xff\xfe" + "{}".encode("utf-16-le"))  # UTF-16
@example(b"\x80abc")
@example(b"")
@example(b"[]")
@example(b'"a string"')
@example(_report_bytes().replace(b'"peak_bytes": 100', b'"peak_bytes": "' + b"7" * 5_000_000 + b'"'))
@example(_report_bytes().replace(b'"target"', b'"' + HUGE_KEY + b'": 1, "' + HUGE_KEY + b'": 2, "target"'))
@example(_report_bytes().replace(b'"eager"', b'"eager\\nmemprof gate: passed (1 checks)"'))
def test_report_files_raise_only_memprof_errors(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/r.json"
        with open(path, "wb") as handle:
            handle.write(data)
        try:
            report = load_report(path)
        except MemprofError as error:
            assert "\n" not in str(error) and len(str(error)) < 1000
            return
        assert all(run.peak_bytes >= 0 for run in report.runs.values())
        report.to_json()


def test_a_report_value_copied_from_the_analysis_takes_every_field_and_never_a_default() -> None:
    from types import SimpleNamespace

    from memprof.core.fields import copied
    from memprof.model.recorded import Fragmentation

    facts = SimpleNamespace(
        cached_bytes=3, largest_free_block_bytes=2, largest_request_bytes=5, unusable_bytes=1, extra=9
    )
    assert copied(Fragmentation, facts, unusable_bytes=0) == Fragmentation(
        cached_bytes=3, largest_free_block_bytes=2, largest_request_bytes=5, unusable_bytes=0
    )
    del facts.cached_bytes
    with pytest.raises(AttributeError, match="cached_bytes"):
        copied(Fragmentation, facts)


@settings(deadline=None)  # the first example imports pandas
@given(st.lists(st.sampled_from(["aten::mm", "aten::add", "[memory]", "x"]), max_size=40))
def test_op_names_are_coded_in_order_of_first_appearance_interned_or_not(names: list[str]) -> None:
    """Both ways the analysis codes op names give pandas.factorize's codes and uniques."""
    import numpy as np
    import pandas as pd

    from memprof.analysis.codes import factorize, name_codes

    values = np.array(names, dtype=object)
    expected_codes, expected_uniques = pd.factorize(values)
    codes, uniques = factorize(values)
    assert codes.tolist() == expected_codes.tolist() and uniques == list(expected_uniques)
    table = ["unused", "x", "aten::mm", "[memory]", "aten::add"]  # a reader's interned names
    interned = np.array([table.index(n) for n in names], dtype=np.int32)
    codes, uniques = name_codes(values, interned, table)
    assert codes.tolist() == expected_codes.tolist() and uniques == list(expected_uniques)
