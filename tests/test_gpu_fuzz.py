"""Damaged traces and snapshots: whatever is wrong with a file, reading and analysing it either
works or raises memprof's own error (a one-line message, exit 2) — never anything else."""

from __future__ import annotations

import gzip
import json
import pickle
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from examples import examples
from gpu_data import gpu_file
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memprof.analysis.peaks import analyze
from memprof.analysis.recorded import RecordedPeak, recorded_peak
from memprof.analysis.snapshot import analyze_snapshot
from memprof.core.errors import MemprofError
from memprof.sources.files.snapshot import read_snapshot
from memprof.sources.files.trace import TraceDevice, read_trace

FUZZ = settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def peak_of(device: TraceDevice) -> RecordedPeak:
    """The numbers of a trace device's memory records."""
    return recorded_peak(device.raw, device)


@cache
def _trace_text() -> str:
    """The H100 trace's ops and memory records (what memprof reads), as JSON text."""
    document = json.loads(gzip.decompress(gpu_file("tracelens_h100_bert_small.json.gz").read_bytes()))
    keep = ("cpu_op", "cpu_instant_event", "user_annotation")
    document["traceEvents"] = [e for e in document["traceEvents"] if e.get("cat") in keep]
    del document["metadata"]
    return json.dumps(document)


@cache
def _snapshot_bytes() -> bytes:
    return gpu_file("silmont2000_cs336_tiny.snapshot.pickle").read_bytes()


def _read_trace_or_own_error(path: Path) -> None:
    try:
        for device in read_trace(path).devices:
            analyze(device.raw)
            peak_of(device)
    except MemprofError as error:
        assert "\n" not in str(error)


def _read_snapshot_or_own_error(path: Path) -> None:
    try:
        analyze_snapshot(read_snapshot(path))
    except MemprofError as error:
        assert "\n" not in str(error)


@FUZZ
@given(cut=st.floats(min_value=0.0, max_value=1.0), compress=st.booleans())
def test_truncated_traces(tmp_path, cut, compress):
    data = _trace_text().encode()
    data = data[: int(len(data) * cut)]
    path = tmp_path / "t.json"
    path.write_bytes(gzip.compress(data) if compress else data)
    _read_trace_or_own_error(path)


@FUZZ
@given(position=st.floats(min_value=0.0, max_value=0.999), garbage=st.binary(min_size=1, max_size=8))
def test_corrupted_trace_bytes(tmp_path, position, garbage):
    data = bytearray(_trace_text().encode())
    at = int(len(data) * position)
    data[at : at + len(garbage)] = garbage
    path = tmp_path / "t.json"
    path.write_bytes(bytes(data))
    _read_trace_or_own_error(path)


@FUZZ
@given(data=st.data())
def test_trace_events_with_wrong_values(tmp_path, data):
    document = json.loads(_trace_text())
    events = document["traceEvents"]
    interesting = [i for i, e in enumerate(events) if e.get("ph") in ("X", "i")]
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        event = events[data.draw(st.sampled_from(interesting))]
        if data.draw(st.booleans()) and isinstance(event.get("args"), dict):
            key = data.draw(
                st.sampled_from(["Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id"])
            )
            event["args"][key] = data.draw(values)
        else:
            key = data.draw(st.sampled_from(["ts", "dur", "tid", "name", "ph", "cat", "args"]))
            event[key] = data.draw(values)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(document))  # NaN/Infinity written as the standard library allows
    _read_trace_or_own_error(path)


@FUZZ
@given(cut=st.floats(min_value=0.0, max_value=1.0))
def test_truncated_snapshots(tmp_path, cut):
    data = _snapshot_bytes()
    path = tmp_path / "s.pickle"
    path.write_bytes(data[: int(len(data) * cut)])
    _read_snapshot_or_own_error(path)


@FUZZ
@given(position=st.floats(min_value=0.0, max_value=0.999), garbage=st.binary(min_size=1, max_size=4))
def test_corrupted_snapshot_bytes(tmp_path, position, garbage):
    data = bytearray(_snapshot_bytes())
    at = int(len(data) * position)
    data[at : at + len(garbage)] = garbage
    path = tmp_path / "s.pickle"
    path.write_bytes(bytes(data))
    _read_snapshot_or_own_error(path)


def _set(container: Any, data: st.DataObject) -> None:
    if isinstance(container, dict) and container:
        key = data.draw(st.sampled_from(sorted(container, key=str)))
        container[key] = data.draw(values)
    elif isinstance(container, list) and container:
        container[data.draw(st.integers(min_value=0, max_value=len(container) - 1))] = data.draw(values)


@FUZZ
@given(data=st.data())
def test_snapshot_fields_with_wrong_values(tmp_path, data):
    content = pickle.loads(_snapshot_bytes())  # noqa: S301 - the bundled test file, plain data
    kinds = data.draw(st.lists(st.sampled_from(["segment", "block", "event", "top"]), min_size=1, max_size=4))
    for where in sorted(kinds, key=lambda kind: kind == "top"):  # the whole document last
        if where == "segment":
            _set(data.draw(st.sampled_from(content["segments"])), data)
        elif where == "block":
            segment = data.draw(st.sampled_from(content["segments"]))
            if isinstance(segment, dict) and isinstance(segment.get("blocks"), list) and segment["blocks"]:
                _set(data.draw(st.sampled_from(segment["blocks"])), data)
        elif where == "event":
            _set(data.draw(st.sampled_from(content["device_traces"][0])), data)
        else:
            _set(content, data)
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(content))
    _read_snapshot_or_own_error(path)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("requested_size", 2**65, "36893488147419103232 is out of a 64-bit integer's range"),
        ("requested_size", -1, "a block's requested size is negative"),
        ("size", 2**63 - 1, "its sizes add up to more than 4 EiB, more than any device holds"),
    ],
)
def test_sizes_no_device_holds_are_refused_in_one_line(tmp_path, field, value, reason):
    # Found by the fuzzer: a block's size past 64 bits reached the analysis's int64 arrays.
    content = pickle.loads(_snapshot_bytes())  # noqa: S301 - the bundled test file, plain data
    block = next(b for s in content["segments"] for b in s["blocks"] if b["state"].startswith("active"))
    block[field] = value
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(content))
    with pytest.raises(MemprofError) as refused:
        read_snapshot(path)
    assert str(refused.value) == f"{path}: malformed snapshot ({reason}); the file is not one torch wrote"


def test_the_fuzzed_files_are_read_whole_when_undamaged(tmp_path):
    # The generators above start from files that read cleanly: a failure is the damage's.
    path = tmp_path / "t.json"
    path.write_text(_trace_text())
    assert peak_of(read_trace(path).devices[1]).peak_bytes == 9944576
    path = tmp_path / "s.pickle"
    path.write_bytes(_snapshot_bytes())
    assert analyze_snapshot(read_snapshot(path))[0].peak_bytes == 3249143816


pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


# --------------------------------------------------------------------------------------------
# Files that are not files, and nesting deeper than a parser goes: the same rule, and no hang.


def _pickle_of_nested_lists(depth: int) -> bytes:
    """A pickle of ``depth`` nested lists, built op by op (pickle.dumps would recurse)."""
    return b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b"."


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null", "fifo", "folder"])
@pytest.mark.parametrize("read", [read_trace, read_snapshot], ids=["trace", "snapshot"])
def test_special_files_are_refused_without_reading(tmp_path, special, read):
    import os

    if special == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)  # no writer: opening it for reading the usual way would block forever
    elif special == "folder":
        path = tmp_path
    else:
        path = Path(special)
    with pytest.raises(MemprofError) as caught:
        read(path)
    assert "\n" not in str(caught.value)
    assert any(words in str(caught.value) for words in ("not a regular file", "is a folder"))


@FUZZ
@given(depth=st.integers(min_value=0, max_value=3000))
@example(depth=1023)
@example(depth=1025)  # orjson's own limit is 1024 levels
@example(depth=100_000)
def test_traces_nested_to_any_depth(tmp_path, depth):
    path = tmp_path / "t.json"
    path.write_text("[" * depth + _trace_text() + "]" * depth)
    _read_trace_or_own_error(path)


@FUZZ
@given(depth=st.integers(min_value=1, max_value=3000))
@example(depth=100_000)
def test_snapshots_nested_to_any_depth(tmp_path, depth):
    path = tmp_path / "s.pickle"
    path.write_bytes(_pickle_of_nested_lists(depth))
    _read_snapshot_or_own_error(path)


# --------------------------------------------------------------------------------------------
# Files made to exhaust memory or time (tests/test_robust_limits.py runs the worst of them in a
# process with a memory limit): read within the documented limits, or refused in one line.

_EVENT = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "frames": []}
_BLOCK = {"address": 0, "size": 512, "requested_size": 512, "state": "inactive"}


@FUZZ
@given(index=st.integers(min_value=0, max_value=2**32 - 1))
@example(index=2**27)  # a 2 GiB memo table from a 23-byte file
@example(index=2**32 - 1)
def test_snapshots_storing_any_memo_index(tmp_path, index):
    path = tmp_path / "s.pickle"
    path.write_bytes(b"\x80\x02]r" + index.to_bytes(4, "little") + b".")
    _read_snapshot_or_own_error(path)


@FUZZ
@given(
    shape=st.sampled_from(["devices", "segments", "frames"]),
    outer=st.integers(min_value=1, max_value=3000),
    inner=st.integers(min_value=0, max_value=3000),
)
@example(shape="devices", outer=10_000, inner=100_000)  # 10**9 events from 220 KB
@example(shape="segments", outer=10_000, inner=100_000)  # 10**9 blocks
@example(shape="frames", outer=10_000, inner=100_000)  # 10**4 events sharing 10**5 frames
def test_snapshots_that_share_one_list_many_times(tmp_path, shape, outer, inner):
    if shape == "devices":
        content: dict[str, Any] = {"segments": [], "device_traces": [[_EVENT] * inner] * outer}
    elif shape == "segments":
        content = {"segments": [{"address": 0, "total_size": 512, "blocks": [_BLOCK] * inner}] * outer}
    else:
        frames = [{"filename": "m.py", "line": 1, "name": "f"}] * inner
        events = [dict(_EVENT, addr=4096 * (i + 1), frames=frames) for i in range(outer)]
        content = {"segments": [], "device_traces": [events]}
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(content))
    _read_snapshot_or_own_error(path)


@FUZZ
@given(
    depth=st.integers(min_value=1, max_value=3000), field=st.sampled_from(["address", "total_size", "blocks"])
)
@example(depth=200_000, field="address")  # quoting the value in the message recursed
def test_snapshot_fields_nested_to_any_depth(tmp_path, depth, field):
    head = pickle.dumps({"segments": [{"address": 0, "total_size": 0, field: None}]}, protocol=2)
    path = tmp_path / "s.pickle"
    path.write_bytes(head.replace(b"N", b"]" * depth + b"a" * (depth - 1), 1))
    _read_snapshot_or_own_error(path)


@FUZZ
@given(length=st.integers(min_value=0, max_value=100_000), where=st.sampled_from(["name", "address"]))
@example(length=50_000_000, where="address")  # a 50 MB string where a number belongs
@example(length=5_000_000, where="name")
def test_snapshot_strings_of_any_length(tmp_path, length, where):
    frame = {"filename": "m.py", "line": 1, "name": "f" * length if where == "name" else "f"}
    address: Any = "7" * length if where == "address" else 0
    block = {"address": 0, "size": 512, "state": "active_allocated", "frames": [frame]}
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps({"segments": [{"address": address, "total_size": 512, "blocks": [block]}]}))
    try:
        analyze_snapshot(read_snapshot(path))
    except MemprofError as error:
        assert "\n" not in str(error) and len(str(error)) < 1000


@FUZZ
@given(length=st.integers(min_value=0, max_value=100_000))
@example(length=5_000_000)  # names went into a numpy string array as wide as the longest
def test_traces_with_an_op_name_of_any_length(tmp_path, length):
    document = json.loads(_trace_text())
    op = next(e for e in document["traceEvents"] if e.get("cat") == "cpu_op")
    op["name"] = "aten::" + "x" * length
    path = tmp_path / "t.json"
    path.write_text(json.dumps(document))
    for device in read_trace(path).devices:
        assert max(len(name) for name in device.raw.op_name) <= 1010
        analyze(device.raw)


@FUZZ
@given(expands_to=st.integers(min_value=0, max_value=1 << 22))
@example(expands_to=1 << 30)  # a gzip bomb: 1 GiB from 1 MB
def test_gzip_that_expands_beyond_the_ceiling(tmp_path, monkeypatch, expands_to):
    monkeypatch.setenv("MEMPROF_MAX_DECOMPRESSED", "1MB")
    piece = gzip.compress(b" " * (1 << 20), compresslevel=9)
    path = tmp_path / "t.json.gz"
    path.write_bytes(
        gzip.compress(_trace_text().encode()[:-1]) + piece * (expands_to >> 20) + gzip.compress(b"}")
    )
    _read_trace_or_own_error(path)
