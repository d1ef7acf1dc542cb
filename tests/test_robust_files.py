"""Hostile files and folders: special files, endless input, deep nesting, writes that fail, outputs
that would replace the run's own inputs, bad bytes. Each case gets its documented exit code and
one-line message, never a traceback, a hang or a half-written file.

Commands that could hang or eat memory on the code before these checks (``/dev/zero``, a FIFO
without a writer) run in a subprocess with a time limit and a memory limit."""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import make_single_report
from typer.testing import CliRunner

from memprof.core import writing
from memprof.core.errors import InputError
from memprof.frontends.cli import app
from memprof.pipeline import load_report

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
CPU_TABLE = DATA / "cpu_memory.txt"
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def memprof_cli(
    *args: str, stdin: Any = None, timeout: float = 30, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m memprof ARGS`` with at most 2 GiB of memory: a reader that does not stop
    fails here instead of exhausting the machine."""

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "memprof", *args],
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        preexec_fn=limit_memory,
        cwd=cwd,
    )


def report_file(tmp_path: Path, name: str = "report.json") -> Path:
    path = tmp_path / name
    path.write_text(make_single_report().to_json())
    return path


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


@pytest.fixture
def unix_socket(tmp_path: Path):
    path = Path(tempfile.mkdtemp(prefix="ms")) / "s"  # socket paths must be short
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    yield path
    listener.close()
    shutil.rmtree(path.parent)


def finishes(call: Callable[[], Any], fifo: Path | None = None, seconds: float = 20) -> Any:
    """``call()``'s result or its exception, failing the test when it blocks (then a writer is
    opened on ``fifo`` so that the blocked reader, and the test, can end)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY))
        thread.join(seconds)
        pytest.fail(f"blocked for {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


# ------------------------------------------------------------------------------- special files


def _kinds(fifo: Path, unix_socket: Path) -> dict[str, tuple[str, str]]:
    return {
        "character device": ("/dev/zero", "a character device"),
        "fifo": (str(fifo), "a FIFO (named pipe)"),
        "socket": (str(unix_socket), "a socket"),
    }


@pytest.mark.parametrize("kind", ["character device", "fifo", "socket"])
@pytest.mark.parametrize("command", ["check", "parse", "baseline"])
def test_special_files_are_refused_at_once(tmp_path, fifo, unix_socket, kind, command):
    path, words = _kinds(fifo, unix_socket)[kind]
    if command == "check":
        result = memprof_cli("check", path, "--budget", "1MB")
        what = "report"
    elif command == "parse":
        result = memprof_cli("parse", path)
        what = "input"
    else:
        result = memprof_cli("check", str(report_file(tmp_path)), "--baseline", path)
        what = "report"
    assert result.returncode == 2
    assert result.stderr == (
        f"memprof: error: {what} {path!r} is {words}, not a regular file; save the content to a file "
        "and give that\n"
    )


def test_readers_of_traces_snapshots_and_reports_refuse_a_fifo_without_blocking(fifo):
    from memprof.sources.files.readers import input_kind
    from memprof.sources.files.snapshot import read_snapshot
    from memprof.sources.files.trace import read_trace

    for what, read in (("trace", read_trace), ("snapshot", read_snapshot), ("report", load_report)):
        with pytest.raises(InputError) as caught:
            finishes(lambda read=read: read(fifo), fifo)
        assert str(caught.value) == (
            f"{what} {str(fifo)!r} is a FIFO (named pipe), not a regular file; save the content to a file "
            "and give that"
        )
    assert finishes(lambda: input_kind(fifo), fifo) is None
    assert finishes(lambda: input_kind("/dev/zero")) is None


def test_a_fifo_named_as_a_target_file_or_module_is_refused(tmp_path):
    os.mkfifo(tmp_path / "piped.py")
    result = memprof_cli("run", "piped.py:f", "-q", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "memprof: error: 'piped.py' in target 'piped.py:f' is a FIFO (named pipe); name a .py file\n"
    )
    result = memprof_cli("run", "piped:f", "-q", cwd=tmp_path)  # Python's import skips it
    assert result.returncode == 2
    assert result.stderr.startswith("memprof: error: module 'piped' not found")


def test_standard_input_is_read_up_to_its_limit(runner, monkeypatch):
    import memprof.core.reading

    monkeypatch.setattr(memprof.core.reading, "STDIN_LIMIT_BYTES", 1000)
    result = runner.invoke(app, ["parse", "-"], input=b"x" * 1001)
    assert result.exit_code == 2
    assert result.stderr == (
        "memprof: error: standard input holds more than 1000 B, the most memprof reads from it; save it "
        "to a file and give the file\n"
    )
    result = runner.invoke(app, ["parse", "-"], input=b"x" * 1000)  # at the limit: read, no table
    assert result.exit_code == 2
    assert result.stderr.startswith("memprof: error: standard input: no torch profiler table found")


def test_endless_standard_input_ends_with_an_error():
    code = (
        "import memprof.core.reading, memprof.frontends.cli; "
        "memprof.core.reading.STDIN_LIMIT_BYTES = 1 << 20; "
        "memprof.frontends.cli.main(['parse', '-'])"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open("/dev/zero", "rb") as zeros:
        result = subprocess.run(
            [sys.executable, "-c", code], stdin=zeros, capture_output=True, text=True, env=env, timeout=60
        )
    assert result.returncode == 2
    assert result.stderr == (
        "memprof: error: standard input holds more than 1.0 MiB, the most memprof reads from it; save it "
        "to a file and give the file\n"
    )


# ----------------------------------------------------------------------------- deep nesting


@pytest.mark.parametrize("text", [DEEP, '{"a":' * 100_000 + "1" + "}" * 100_000])
def test_deeply_nested_reports_and_baselines_are_exit_2(runner, tmp_path, text):
    deep = tmp_path / "deep.json"
    deep.write_text(text)
    message = (
        f"memprof: error: report {str(deep)!r} nests arrays or objects too deeply to be read; it is not a "
        "file memprof wrote\n"
    )
    result = runner.invoke(app, ["check", str(deep), "--budget", "1B"])
    assert (result.exit_code, result.stderr) == (2, message)
    result = runner.invoke(app, ["check", str(report_file(tmp_path)), "--baseline", str(deep)])
    assert (result.exit_code, result.stderr) == (2, message)


def test_a_deeply_nested_chrome_trace_is_an_input_error(tmp_path):
    from memprof.sources.files.trace import read_trace

    path = tmp_path / "trace.json"
    for text in (DEEP, '{"traceEvents": [' + '{"a":' * 2000 + "1" + "}" * 2000 + "]}"):
        path.write_text(text)
        with pytest.raises(InputError) as caught:
            read_trace(path)
        assert (
            str(caught.value) == f"{path}: the JSON nests arrays or objects too deeply to be a chrome trace"
        )


# ---------------------------------------------------------------------------- failed writes


def _failing_fdopen(monkeypatch: pytest.MonkeyPatch, failure: OSError, skip: int = 0) -> None:
    """Files opened for writing (after the first ``skip``) take half of what is written, then
    fail with ``failure``."""
    real = os.fdopen
    opened = []

    class Failing:
        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def __enter__(self) -> Failing:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

        def write(self, text: str) -> int:
            self.handle.write(text[: len(text) // 2])
            self.handle.flush()
            raise failure

        def flush(self) -> None:
            self.handle.flush()

    def fdopen(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real(fd, mode, *args, **kwargs)
        if "w" not in mode:
            return handle
        opened.append(handle)
        return Failing(handle) if len(opened) > skip else handle

    monkeypatch.setattr(writing, "_fdopen", fdopen)  # the function memprof bound when imported


@pytest.mark.parametrize(
    ("failure", "hint"),
    [
        (
            OSError(errno.ENOSPC, "No space left on device"),
            "No space left on device; free some space or write elsewhere",
        ),
        (
            PermissionError(errno.EACCES, "Permission denied"),
            "Permission denied; make the folder writable or write elsewhere",
        ),
    ],
)
def test_a_failing_write_is_exit_2_and_leaves_nothing(runner, tmp_path, monkeypatch, failure, hint):
    csv_path, json_path = tmp_path / "ops.csv", tmp_path / "ops.json"
    json_path.write_text("the old file\n")
    _failing_fdopen(monkeypatch, failure)
    result = runner.invoke(app, ["parse", str(CPU_TABLE), "--csv", str(csv_path), "--json", str(json_path)])
    assert result.exit_code == 2
    assert result.stderr == f"memprof: error: cannot write {str(csv_path)!r}: {hint}; nothing was written\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ops.json"]  # no temporary file left
    assert json_path.read_text() == "the old file\n"


def test_all_outputs_or_none(runner, tmp_path, monkeypatch):
    # The disk fills while the second file is written: the first, complete, replaces nothing.
    csv_path, json_path = tmp_path / "ops.csv", tmp_path / "ops.json"
    csv_path.write_text("the old file\n")
    _failing_fdopen(monkeypatch, OSError(errno.ENOSPC, "No space left on device"), skip=1)
    result = runner.invoke(app, ["parse", str(CPU_TABLE), "--csv", str(csv_path), "--json", str(json_path)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"memprof: error: cannot write {str(json_path)!r}: No space left on device; free some space or "
        "write elsewhere; nothing was written\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ops.csv"]
    assert csv_path.read_text() == "the old file\n"


DELETES_OUTPUT_FOLDER = """
import shutil

import torch

def f():
    shutil.rmtree("out", ignore_errors=True)
    return torch.ones(1024)
"""


def test_output_folder_deleted_during_the_run_is_exit_2(runner, make_module, tmp_path):
    module = make_module(DELETES_OUTPUT_FOLDER)
    (tmp_path / "out").mkdir()
    result = runner.invoke(
        app, ["run", f"{module}:f", "-q", "--device", "cpu", "--json", "out/r.json", "--csv", "out/o.csv"]
    )
    assert result.exit_code == 2
    folder = tmp_path / "out"
    assert result.stderr == (
        f"memprof: error: cannot write {str(folder / 'r.json')!r}: No such file or directory; its folder "
        f"{str(folder)!r} no longer exists; create it or write elsewhere; nothing was written\n"
    )
    assert not folder.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_permission_taken_away_during_the_run_is_exit_2(runner, make_module, tmp_path):
    module = make_module(
        "import os\nimport torch\ndef f():\n    os.chmod('out', 0o500)\n    return torch.ones(4)\n"
    )
    (tmp_path / "out").mkdir()
    try:
        result = runner.invoke(app, ["run", f"{module}:f", "-q", "--device", "cpu", "--json", "out/r.json"])
    finally:
        os.chmod(tmp_path / "out", 0o700)
    assert result.exit_code == 2
    assert result.stderr == (
        f"memprof: error: cannot write {str(tmp_path / 'out' / 'r.json')!r}: Permission denied; make the "
        "folder writable or write elsewhere; nothing was written\n"
    )
    assert list((tmp_path / "out").iterdir()) == []


def test_a_full_disk_for_real(tmp_path):
    """A 16 KiB tmpfs in a private mount namespace (skipped where one cannot be mounted)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    rows = "\n".join(f"{'op' + str(k):>20}  {k:>10}" for k in range(2000))
    dash = "-" * 20 + "  " + "-" * 10
    table = tmp_path / "big.txt"
    table.write_text(f"{dash}\n{'Name':>20}  {'# of Calls':>10}\n{dash}\n{rows}\n{dash}\n")
    disk = tmp_path / "disk"
    disk.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    script = (
        f"mount -t tmpfs -o size=16k tmpfs {disk} || exit 99; "
        f"{sys.executable} -m memprof parse {table} --csv {disk}/ops.csv; echo rc=$?; ls -A {disk}"
    )
    result = subprocess.run(
        ["unshare", "-r", "-m", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    if result.returncode == 99 or "rc=" not in result.stdout:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    assert result.stdout == "rc=2\n"  # and the disk is empty
    assert result.stderr == (
        f"memprof: error: cannot write {str(disk / 'ops.csv')!r}: No space left on device; free some "
        "space or write elsewhere; nothing was written\n"
    )


# ------------------------------------------------------------------ outputs that are inputs


TARGET = """
from pathlib import Path

import torch

def f():
    Path("ran").touch()
    return torch.ones(4)

def make():
    return ()
"""


def _refused(result, option: str, path: Path, what: str, source: Path, tmp_path: Path) -> None:
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"memprof: error: {option} {str(path)!r} is {what} ({str(source)!r}); writing the report there "
        "would replace it: give another file\n"
    )
    assert not (tmp_path / "ran").exists()  # refused before profiling


def test_an_output_that_is_the_target_file_is_refused(runner, make_module, tmp_path):
    module = make_module(TARGET)
    source = tmp_path / f"{module}.py"
    before = source.read_text()
    file_target = f"{source}:f"
    result = runner.invoke(app, ["run", file_target, "-q", "--json", str(source)])
    _refused(result, "--json", source, f"the source file of {file_target!r}", source, tmp_path)
    result = runner.invoke(app, ["run", f"{module}:f", "-q", "--csv", f"{module}.py"])
    _refused(result, "--csv", Path(f"{module}.py"), f"the source file of '{module}:f'", source, tmp_path)
    assert source.read_text() == before


def test_an_output_that_is_the_inputs_file_is_refused(runner, make_module, tmp_path):
    module, helpers = make_module(TARGET), make_module(TARGET)
    source = tmp_path / f"{helpers}.py"
    result = runner.invoke(
        app, ["run", f"{module}:f", "-q", "--inputs", f"{helpers}:make", "--markdown", str(source)]
    )
    _refused(result, "--markdown", source, f"the source file of '{helpers}:make'", source, tmp_path)
    result = runner.invoke(
        app, ["compare", f"{module}:f", f"{module}:f@{source}:make", "-q", "--html", str(source)]
    )
    _refused(result, "--html", source, f"the source file of '{source}:make'", source, tmp_path)


def test_an_output_that_is_the_baseline_is_refused_by_every_name(runner, make_module, tmp_path):
    module = make_module(TARGET)
    baseline = report_file(tmp_path, "memprof.json")
    before = baseline.read_text()
    (tmp_path / "link.json").symlink_to(baseline)
    os.link(baseline, tmp_path / "hard.json")
    for args, option, path in [
        (["--json", "memprof.json"], "--json", Path("memprof.json")),
        (["--save-baseline", "./memprof.json"], "--save-baseline", Path("memprof.json")),
        (["--out", "."], "--json", Path("memprof.json")),
        (["--json", "link.json"], "--json", Path("link.json")),
        (["--json", "hard.json"], "--json", Path("hard.json")),
    ]:
        result = runner.invoke(app, ["run", f"{module}:f", "-q", "--baseline", "memprof.json", *args])
        _refused(result, option, path, "the baseline", Path("memprof.json"), tmp_path)
    assert baseline.read_text() == before


def test_parse_refuses_to_write_over_its_input(runner, tmp_path):
    log = tmp_path / "train.log"
    shutil.copy(CPU_TABLE, log)
    result = runner.invoke(app, ["parse", str(log), "--csv", str(log)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"memprof: error: --csv {str(log)!r} is the table's input file ({str(log)!r}); writing the report "
        "there would replace it: give another file\n"
    )
    assert log.read_text() == CPU_TABLE.read_text()


# ------------------------------------------------------------------- tables, numbers, bytes


def test_a_header_with_name_twice_is_parsed(runner, tmp_path):
    dash = "------  ------  ----------"
    table = tmp_path / "t.txt"
    for rows in (["aten    x                1"], []):
        table.write_text("\n".join([dash, "Name    Name    # of Calls", dash, *rows, dash, ""]))
        out = tmp_path / "t.json"
        result = runner.invoke(app, ["parse", str(table), "--json", str(out)])
        assert result.exit_code == 0, result.output
        document = json.loads(out.read_text())
        assert document["columns"] == ["name", "name_truncated", "name_2", "calls"]
        assert (
            document["rows"]
            == [{"name": "aten", "name_truncated": False, "name_2": "x", "calls": 1}][: len(rows)]
        )


NINES = "9" * 400 + "%"


def test_a_huge_tolerance_is_exit_2_before_anything_runs(runner, make_module, tmp_path):
    message = (
        f"memprof: error: --tolerance: not a percentage: '{'9' * 27}...{'9' * 27}%' is too large; write it "
        "like '5%' or '5' (five percent), '0.5%'\n"
    )
    module = make_module(TARGET)
    baseline = report_file(tmp_path)
    result = runner.invoke(
        app, ["run", f"{module}:f", "-q", "--baseline", str(baseline), "--tolerance", NINES]
    )
    assert (result.exit_code, result.stderr) == (2, message)
    assert not (tmp_path / "ran").exists()
    result = runner.invoke(app, ["check", str(baseline), "--baseline", str(baseline), "--tolerance", NINES])
    assert (result.exit_code, result.stderr) == (2, message)


def test_standard_input_that_is_not_utf8_is_exit_2_with_the_offset(runner):
    result = runner.invoke(app, ["parse", "-"], input=b"abc\xff\xfedef")
    assert result.exit_code == 2
    assert result.stderr == (
        "memprof: error: standard input is not UTF-8 text: byte 3 (0xff) is invalid; is it the right file? "
        "save it as UTF-8\n"
    )
    result = runner.invoke(app, ["parse", "-"], input="\ufeffNAME".encode("utf-16"))
    assert result.exit_code == 2
    assert result.stderr == (
        "memprof: error: standard input is not UTF-8 text: byte 0 (0xff) is invalid; it is UTF-16 (it "
        "starts with a UTF-16 byte-order mark); convert it, e.g. iconv -f UTF-16 -t UTF-8\n"
    )


def test_a_byte_order_mark_does_not_hide_the_table_or_the_report(runner, tmp_path):
    text = "\ufeff" + CPU_TABLE.read_text()
    result = runner.invoke(app, ["parse", "-"], input=text.encode("utf-8"))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "13 rows from table 0 (header at line 2)"
    table = tmp_path / "bom.txt"
    table.write_bytes(text.encode("utf-8"))
    assert runner.invoke(app, ["parse", str(table)]).stdout == result.stdout
    report = tmp_path / "bom.json"
    report.write_bytes(b"\xef\xbb\xbf" + make_single_report().to_json().encode())
    assert load_report(report).runs["eager"].peak_bytes == 8 * 2**20


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (
            lambda t: t.replace('"peak_bytes": 8388608', '"peak_bytes": -1'),
            "runs.eager.peak_bytes must be a number of bytes (a whole number, 0 or more), got -1",
        ),
        (
            lambda t: t.replace('"peak_bytes": 8388608', '"peak_bytes": 1.5'),
            "runs.eager.peak_bytes must be a number of bytes (a whole number, 0 or more), got 1.5",
        ),
        (
            lambda t: t.replace('"peak_bytes": 8388608', '"peak_bytes": "8388608"'),
            "runs.eager.peak_bytes must be a number of bytes (a whole number, 0 or more), got '8388608'",
        ),
        (
            lambda t: t.replace('"peak_bytes": 8388608', '"peak_bytes": true'),
            "runs.eager.peak_bytes must be a number of bytes (a whole number, 0 or more), got True",
        ),
        (
            lambda t: t.replace('"peak_bytes": 8388608', '"peak_bytes": 1e400'),
            "runs.eager.peak_bytes must be a number of bytes (a whole number, 0 or more), got inf",
        ),
        (
            lambda t: t.replace('"peak_bytes": 8388608', '"peak_bytes": 99999999999999999999999'),
            "runs.eager.peak_bytes must be a number of bytes (a whole number, 0 or more), got "
            "99999999999999999999999",
        ),
        (
            lambda t: t.replace('"wall_ms": 12.5', '"wall_ms": 1e400'),
            "runs.eager.wall_ms must be a number or null, got inf",
        ),
        (
            lambda t: t.replace('"calls": 3', '"calls": -3'),
            "runs.eager.ops[0].calls must be a count (a whole number, 0 or more), got -3",
        ),
    ],
)
def test_impossible_numbers_in_a_report_are_exit_2(runner, tmp_path, edit, problem):
    path = tmp_path / "r.json"
    text = make_single_report().to_json()
    edited = edit(text)
    assert edited != text
    path.write_text(edited)
    result = runner.invoke(app, ["check", str(path), "--budget", "1GB"])
    assert (result.exit_code, result.stderr) == (2, f"memprof: error: {path}: {problem}\n")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"schema_version": 2, "a": NaN}', "is not valid JSON for memprof: NaN is not a JSON number"),
        (
            '{"schema_version": 2, "a": -Infinity}',
            "is not valid JSON for memprof: -Infinity is not a JSON number",
        ),
        (
            '{"schema_version": 2, "schema_version": 1}',
            "is not valid JSON for memprof: the key 'schema_version' appears twice in one object",
        ),
        ("", "is not valid JSON: Expecting value at line 1 column 1"),
        ("\x00\x01binary", "is not valid JSON: Expecting value at line 1 column 1"),
    ],
)
def test_json_that_is_not_plain_data_is_exit_2(runner, tmp_path, text, problem):
    path = tmp_path / "r.json"
    path.write_text(text)
    result = runner.invoke(app, ["check", str(path), "--budget", "1GB"])
    assert (result.exit_code, result.stderr) == (2, f"memprof: error: report {str(path)!r} {problem}\n")


def test_a_run_label_repeated_in_a_baseline_is_exit_2(runner, tmp_path):
    # json.loads would keep the second "eager" silently: the gate would read a number nobody chose.
    run = make_single_report().to_dict()["runs"]["eager"]
    text = (
        make_single_report().to_json().replace('"runs": {', '"runs": {"eager": ' + json.dumps(run) + ",", 1)
    )
    path = tmp_path / "twice.json"
    path.write_text(text)
    result = runner.invoke(app, ["check", str(report_file(tmp_path)), "--baseline", str(path)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"memprof: error: report {str(path)!r} is not valid JSON for memprof: the key 'eager' appears twice "
        "in one object\n"
    )


def test_a_timeline_whose_times_and_bytes_do_not_pair_is_exit_2(runner, tmp_path):
    document = make_single_report().to_dict()
    document["runs"]["eager"]["timeline"] = {"t_ns": [0, 1, 2], "bytes": [1]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    result = runner.invoke(app, ["check", str(path), "--budget", "1GB"])
    assert result.exit_code == 2
    assert result.stderr == (
        f"memprof: error: {path}: runs.eager.timeline.bytes has 1 values but t_ns has 3; they go in pairs\n"
    )


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ([], "{path}: expected a memprof report (a JSON object), got list"),
        ("report", "{path}: expected a memprof report (a JSON object), got str"),
        (
            {"schema_version": 2, "target": "t", "runs": {"a\nb": {"peak_bytes": -1, "ops": []}}},
            "{path}: runs.'a\\nb'.peak_bytes must be a number of bytes (a whole number, 0 or more), got -1",
        ),
        (
            {
                "schema_version": 2,
                "target": "t",
                "runs": {"eager": {"peak_bytes": "9" * 1_000_000, "ops": []}},
            },
            "{path}: runs.eager.peak_bytes must be a number of bytes (a whole number, 0 or more), got "
            f"'{'9' * 27}...{'9' * 28}'",
        ),
    ],
)
def test_reports_of_the_wrong_shape_are_exit_2_in_one_short_line(runner, tmp_path, document, problem):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    result = runner.invoke(app, ["check", str(path), "--budget", "1GB"])
    assert (result.exit_code, result.stderr) == (2, f"memprof: error: {problem.format(path=path)}\n")


@pytest.mark.parametrize(
    ("points_to", "what"),
    [("/dev/null", "is a character device"), ("/proc/self/fd/1", "is an open file of a process")],
)
def test_an_output_linked_to_a_device_or_an_open_file_is_refused(runner, tmp_path, points_to, what):
    # Renaming a file over the link's target would replace /dev/null, or what stdout is open on.
    link = tmp_path / "out.csv"
    link.symlink_to(points_to)
    result = runner.invoke(app, ["parse", str(CPU_TABLE), "--csv", str(link)])
    assert result.exit_code == 2
    assert result.stderr == f"memprof: error: --csv {str(link)!r} {what}; give a file name\n"
    assert link.is_symlink() and os.readlink(link) == points_to


def test_an_output_name_too_long_is_exit_2(runner, tmp_path):
    long = tmp_path / ("x" * 300 + ".csv")
    result = runner.invoke(app, ["parse", str(CPU_TABLE), "--csv", str(long)])
    assert result.exit_code == 2
    assert result.stderr == f"memprof: error: --csv {str(long)!r} cannot be written: File name too long\n"


def test_a_trailing_slash_names_a_folder_not_a_file(tmp_path):
    result = memprof_cli("run", "m:f", "--json", f"{tmp_path}/new/")
    assert result.returncode == 2
    assert result.stderr == (
        f"memprof: error: Invalid value for '--json': '{tmp_path}/new/' is a folder; give a file name; "
        "see 'memprof run --help'\n"
    )
    assert not (tmp_path / "new").exists()


def test_analyze_refuses_special_files_and_outputs_over_its_recordings(runner, tmp_path, fifo):
    for path, words in (("/dev/zero", "a character device"), (str(fifo), "a FIFO (named pipe)")):
        result = memprof_cli("analyze", path)
        assert result.returncode == 2
        assert result.stderr == (
            f"memprof: error: {path} is {words}, not a regular file; save the content to a file and "
            "give that\n"
        )
    trace = tmp_path / "traces" / "rank0.json"
    trace.parent.mkdir()
    trace.write_text('{"traceEvents": []}')
    for given in (trace, trace.parent):
        result = runner.invoke(app, ["analyze", str(given), "--json", str(trace)])
        assert result.exit_code == 2
        assert result.stderr == (
            f"memprof: error: --json {str(trace)!r} is a recording read ({str(trace)!r}); writing the "
            "report there would replace it: give another file\n"
        )
    assert trace.read_text() == '{"traceEvents": []}'
