"""Files made to exhaust memory or time: gzip bombs, pickle bombs (a huge memo index, lists
referenced thousands of times), one op name of millions of characters, values nested or sized
to make the error message itself the problem. Each is read within the limits
docs/reference/limits.md documents, or refused in one line (exit 2), in a process given 4 GiB
of address space or less and a time limit: what the hidden acceptance check does."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import resource
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.core.errors import InputError
from memprof.core.reading import gunzip
from memprof.frontends.cli import app
from memprof.sources.files import snapshot as snapshot_module
from memprof.sources.files import trace as trace_module
from memprof.sources.files.pickle_scan import MemoOutOfOrder, check_memo

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30
BOMB_REFUSED = (
    "the pickle refers to more events, blocks and frames than its {size:,} bytes can hold (it points "
    "at the same lists again and again: a pickle bomb, not a snapshot torch wrote); memprof reads at "
    "most one per byte"
)


def limited(
    *args: str, memory: int = GIB, seconds: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m memprof ARGS`` with ``memory`` bytes of address space and ``seconds`` of time:
    a reader that does not stop fails the test instead of exhausting the machine."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    paths = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "memprof", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": paths, **(env or {})},
        timeout=seconds,
        preexec_fn=limit,
        stdin=subprocess.DEVNULL,
    )


def one_line_exit_2(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert (done.returncode, done.stderr) == (2, f"memprof: error: {message}\n")


def _member(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()


def gzip_bomb(path: Path, head: bytes, expands_to: int) -> Path:
    """A gzip file of ``head`` then spaces, ``expands_to`` bytes in all, made of repeated
    members (as ``gzip.decompress`` reads them) so that making it takes no time."""
    piece = 16 << 20
    path.write_bytes(_member(head) + _member(b" " * piece) * (expands_to // piece))
    return path


# ---------------------------------------------------------------------------- gzip bombs


@pytest.mark.parametrize(
    ("name", "head"),
    [("t.json.gz", b'{"traceEvents": ['), ("s.pickle.gz", b"\x80\x04(")],
    ids=["trace", "snapshot"],
)
def test_a_gzip_bomb_stops_at_the_ceiling(tmp_path, name, head):
    bomb = gzip_bomb(tmp_path / name, head, 2 * GIB)  # 2 MB on disk
    done = limited("analyze", "-q", str(bomb), env={"MEMPROF_MAX_DECOMPRESSED": "32MB"})
    one_line_exit_2(
        done,
        f"{bomb}: its gzip data expands to more than 32.0 MiB, the most memprof decompresses; if the "
        "file is genuine, raise the limit, e.g. MEMPROF_MAX_DECOMPRESSED=8GB",
    )


def test_a_gzip_bomb_inside_a_folder_stops_at_the_ceiling(tmp_path):
    _trace_with_a_long_name(tmp_path / "rank0.json", 10, ops=3)
    bomb = gzip_bomb(tmp_path / "rank1.json.gz", b'{"traceEvents": [', 2 * GIB)
    done = limited("analyze", "-q", str(tmp_path), env={"MEMPROF_MAX_DECOMPRESSED": "32MB"})
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"memprof: error: {bomb}: its gzip data expands to more than 32.0 MiB")


@pytest.mark.slow  # decompresses 2 GiB: 3 s on a quiet machine, 20 s on a loaded one
def test_an_8_gib_gzip_bomb_under_4_gib_of_memory_stops_at_the_default_ceiling(tmp_path):
    bomb = gzip_bomb(tmp_path / "t.json.gz", b'{"traceEvents": [', 8 * GIB)  # 8 MB on disk
    done = limited("analyze", "-q", str(bomb), memory=4 * GIB, seconds=90)
    one_line_exit_2(
        done,
        f"{bomb}: its gzip data expands to more than 2.0 GiB, the most memprof decompresses; if the "
        "file is genuine, raise the limit, e.g. MEMPROF_MAX_DECOMPRESSED=8GB",
    )


def test_the_ceiling_is_set_by_the_environment(tmp_path, monkeypatch):
    content = b'{"traceEvents": []}' + b" " * 1500
    monkeypatch.setenv("MEMPROF_MAX_DECOMPRESSED", "1KB")
    with pytest.raises(InputError, match="expands to more than 1.0 KiB"):
        gunzip(gzip.compress(content), "t.json.gz")
    monkeypatch.setenv("MEMPROF_MAX_DECOMPRESSED", "2KB")
    assert gunzip(gzip.compress(content), "t.json.gz") == content
    monkeypatch.setenv("MEMPROF_MAX_DECOMPRESSED", "lots")
    result = CliRunner().invoke(app, ["analyze", "-q", str(_gzipped(monkeypatch, content))])
    assert (result.exit_code, result.stderr) == (
        2,
        "memprof: error: environment variable MEMPROF_MAX_DECOMPRESSED: not a size: 'lots'; write it like "
        "'800MB', '800 MB', '1.5GiB' or '123456' (bytes)\n",
    )


def _gzipped(monkeypatch: pytest.MonkeyPatch, content: bytes) -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp()) / "t.json.gz"
    path.write_bytes(gzip.compress(content))
    return path


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            gzip.compress(b"[1, 2, 3]")[:-9],
            "the gzip data is truncated; the file is incomplete, copy it again",
        ),
        (gzip.compress(b"[1]") + b"garbage", "not a readable gzip file"),
    ],
    ids=["truncated", "trailing garbage"],
)
def test_damaged_gzip_is_named(data, problem):
    with pytest.raises(InputError) as caught:
        gunzip(data, "t.json.gz")
    assert str(caught.value).startswith(f"t.json.gz: {problem}")


def test_several_gzip_members_read_as_gzip_reads_them():
    members = gzip.compress(b'{"traceEvents": ') + gzip.compress(b"[]}")
    assert gunzip(members, "t.json.gz") == gzip.decompress(members) == b'{"traceEvents": []}'


# ---------------------------------------------------------------------------- pickle bombs


MEMO_BOMB = b"\x80\x02]r\x00\x00\x00\x08."  # an empty list stored in memo slot 2**27


def test_a_huge_memo_index_is_refused_before_the_unpickler_allocates_for_it(tmp_path):
    # CPython's unpickler would allocate 16 bytes per slot up to the index (2 GiB) first.
    path = tmp_path / "s.pickle"
    path.write_bytes(MEMO_BOMB)
    done = limited("analyze", "-q", str(path), memory=GIB)
    one_line_exit_2(
        done,
        f"{path}: the pickle stores memo slot 134217728 after 0 memo entries; pickle writes them in order, "
        "so this is no snapshot torch wrote (a memo index this large would only take memory); memprof "
        "refuses it",
    )


@pytest.mark.parametrize("protocol", range(6))
def test_pickles_of_every_protocol_pass_the_memo_check(protocol):
    frame = {"filename": "model.py", "line": 3, "name": "forward"}
    content = {"segments": [{"address": 0, "blocks": [{"frames": [frame, frame]}] * 3}], "names": ["a"] * 4}
    check_memo(pickle.dumps(content, protocol=protocol))


def test_memo_indices_out_of_order_are_caught_in_every_form():
    for opcode in (b"q\x05", b"r\x05\x00\x00\x00", b"p5\n"):  # BINPUT, LONG_BINPUT, PUT
        with pytest.raises(MemoOutOfOrder):
            check_memo(b"\x80\x02]" + opcode + b".")
    check_memo(b"\x80\x02]q\x00]q\x01h\x00.")  # in order: fine


def _bomb(path: Path, content: object) -> Path:
    path.write_bytes(pickle.dumps(content))
    return path


EVENT = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "frames": []}
BLOCK = {"address": 0, "size": 512, "requested_size": 512, "state": "inactive"}


@pytest.mark.parametrize(
    "content",
    [
        # 5,000 devices sharing one trace of 20,000 events: 10**8 events from 100 KB
        {"segments": [], "device_traces": [[EVENT] * 20_000] * 5_000},
        # 5,000 segments sharing one list of 20,000 blocks
        {"segments": [{"address": 0, "total_size": 512, "blocks": [BLOCK] * 20_000}] * 5_000},
    ],
    ids=["devices sharing a trace", "segments sharing blocks"],
)
def test_lists_referenced_thousands_of_times_are_refused_at_once(tmp_path, content):
    path = _bomb(tmp_path / "s.pickle", content)
    done = limited("analyze", "-q", str(path), seconds=30)  # minutes before: every reference was read
    one_line_exit_2(done, f"{path}: " + BOMB_REFUSED.format(size=path.stat().st_size))


def test_one_frame_list_shared_by_every_event_is_read_once(tmp_path):
    # 10,000 events x one list of 100,000 frames: the stack was rebuilt for every event.
    frames = [{"filename": "model.py", "line": line, "name": "forward"} for line in range(3)] * 33_334
    events = [dict(EVENT, addr=4096 * (i + 1), frames=frames) for i in range(10_000)]
    path = _bomb(tmp_path / "s.pickle", {"segments": [], "device_traces": [events]})
    done = limited("analyze", "-q", str(path), "--json", str(tmp_path / "r.json"), seconds=30)
    assert done.returncode == 0, done.stderr
    run = json.loads((tmp_path / "r.json").read_text())["runs"]["cuda:0"]
    assert (run["peak_bytes"], run["peak_op"]) == (10_000 * 512, "model.py:0 forward")


# ------------------------------------------------------------------------ huge names, values


def _trace_with_a_long_name(path: Path, length: int, ops: int = 300) -> Path:
    """One op named ``aten::xxx...`` (``length`` characters) around ``ops`` ordinary ops, each
    allocating 512 bytes: every op holds a moment of the timeline."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::" + "x" * length, "ts": 0, "dur": 10 * ops, "tid": 1}
    ]
    for i in range(ops):
        events.append(
            {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "ts": 10 * i + 1, "dur": 5, "tid": 1}
        )
        args = {
            "Device Type": 1,
            "Device Id": 0,
            "Bytes": 512,
            "Total Allocated": 512 * (i + 1),
            "Total Reserved": 0,
        }
        events.append({"ph": "i", "name": "[memory]", "ts": 10 * i + 2, "tid": 1, "args": args})
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_one_op_name_of_millions_of_characters_is_kept_short(tmp_path):
    # Names went into a numpy string array as wide as the longest: 300 x 5M x 4 bytes = 6 GB.
    trace = _trace_with_a_long_name(tmp_path / "t.json", 5_000_000)
    done = limited("analyze", "-q", str(trace), "--json", str(tmp_path / "r.json"), memory=GIB)
    assert done.returncode == 0, done.stderr
    run = json.loads((tmp_path / "r.json").read_text())["runs"]["cuda:0"]
    long = "aten::" + "x" * 994 + "…#"
    assert run["peak_op"].startswith(long) and len(run["peak_op"]) == 1010
    assert [len(op["name"]) for op in run["ops"] if op["name"].startswith(long)] == [1010]


def test_two_long_names_that_start_alike_stay_two_names(tmp_path):
    from memprof.core.text import capped_name

    a, b = "x" * 2000 + "a", "x" * 2000 + "b"
    assert capped_name(a) != capped_name(b)
    assert capped_name(a)[:1000] == capped_name(b)[:1000] == "x" * 1000
    assert capped_name("short") == "short"


def test_a_snapshot_field_nested_200000_lists_deep_is_one_line(tmp_path):
    # The error message quoted the value with repr(), which recursed.
    deep = b"]" * 200_000 + b"a" * 199_999
    head = pickle.dumps({"segments": [{"total_size": 0, "address": None}]}, protocol=2)
    # The segment's address: replace None (N) with 200,000 nested lists.
    path = tmp_path / "s.pickle"
    path.write_bytes(head.replace(b"N", deep, 1))
    done = limited("analyze", "-q", str(path))
    one_line_exit_2(
        done, f"{path}: malformed snapshot ([[[[...]]]] is not an integer); the file is not one torch wrote"
    )


def test_a_50_mb_string_where_a_number_belongs_is_quoted_short(tmp_path):
    path = _bomb(tmp_path / "s.pickle", {"segments": [{"address": "7" * 50_000_000, "total_size": 0}]})
    done = limited("analyze", "-q", str(path))
    one_line_exit_2(
        done,
        f"{path}: malformed snapshot ('{'7' * 27}...{'7' * 28}' is not an integer); the file is not one "
        "torch wrote",
    )


# ----------------------------------------------------------------------------- out of memory


def _out_of_memory(*args: object, **kwargs: object) -> None:
    raise MemoryError


@pytest.mark.parametrize("kind", ["JSON", "pickle"])
def test_running_out_of_memory_reading_a_recording_names_it(tmp_path, monkeypatch, kind):
    if kind == "JSON":
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"traceEvents": []}))
        monkeypatch.setattr(trace_module, "_loads", _out_of_memory)
    else:
        path = _bomb(tmp_path / "s.pickle", {"segments": []})
        monkeypatch.setattr(snapshot_module._BuiltinsOnlyUnpickler, "load", _out_of_memory)
    result = CliRunner().invoke(app, ["analyze", "-q", str(path)])
    assert (result.exit_code, result.stderr) == (
        2,
        f"memprof: error: {path}: not enough memory to read it ({path.stat().st_size} B of {kind}); give "
        "memprof more memory, or record a shorter trace\n",
    )


def test_running_out_of_memory_in_the_analysis_names_the_file(tmp_path, monkeypatch):
    import memprof.pipeline.assemble

    trace = _trace_with_a_long_name(tmp_path / "t.json", 10, ops=3)
    monkeypatch.setattr(memprof.pipeline.assemble, "analyze", _out_of_memory)
    result = CliRunner().invoke(app, ["analyze", "-q", str(tmp_path)])
    size = trace.stat().st_size
    assert (result.exit_code, result.stderr) == (
        2,
        f"memprof: error: {trace}: not enough memory to read and analyse it ({size:,} B); give memprof more "
        "memory, or record a shorter trace\n",
    )


def test_the_limits_page_states_the_limits_in_force():
    from memprof.core.errors import TRACEBACK_CHARS, TRACEBACK_LINES
    from memprof.core.reading import DECOMPRESSED_LIMIT_BYTES, STDIN_LIMIT_BYTES
    from memprof.core.text import NAME_LIMIT, QUOTE_LIMIT
    from memprof.frontends.commands.common import MESSAGE_LIMIT

    page = (ROOT / "docs" / "reference" / "limits.md").read_text()
    stated = {
        "**2 GiB**": DECOMPRESSED_LIMIT_BYTES == 2 * GIB,
        "**1 GiB**": STDIN_LIMIT_BYTES == GIB,
        "**1,010 characters**: a longer one keeps its first 1,000 characters": NAME_LIMIT == 1000,
        "**200 characters**": QUOTE_LIMIT == 200,
        "**2,000 characters**": MESSAGE_LIMIT == 2000,
        "**100 lines**": TRACEBACK_LINES == 100,
        "**8,000 characters** in all": TRACEBACK_CHARS == 8000,
    }
    assert {words: (words in page, holds) for words, holds in stated.items()} == dict.fromkeys(
        stated, (True, True)
    )


def test_running_out_of_memory_reading_a_report_names_it(tmp_path, monkeypatch):
    from conftest import make_single_report

    from memprof.core import reading

    path = tmp_path / "r.json"
    path.write_text(make_single_report().to_json())
    monkeypatch.setattr(reading, "parse_json", _out_of_memory)
    result = CliRunner().invoke(app, ["check", str(path), "--budget", "1GB"])
    assert (result.exit_code, result.stderr) == (
        2,
        f"memprof: error: report {str(path)!r} is too large to read in the memory memprof has; give memprof "
        "more memory\n",
    )
