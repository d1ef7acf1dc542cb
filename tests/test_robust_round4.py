"""Fourth round of hostile cases: every path the system refuses (a name too long, a loop of
links, a file where a folder should be), integers too large for the arrays, CSV cells a
spreadsheet would evaluate, control characters in ``repr``, generators handed to ``track``,
outputs over the running program's own files. Each gets its documented exit code and one line,
never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.frontends.cli import app

DATA = Path(__file__).parent / "data"
REPORT = DATA / "similarity.json"
LONG = "a" * 300  # one name over the 255 bytes a file system allows


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _refused_paths(tmp_path: Path) -> dict[str, str]:
    """One path per way the system refuses a path."""
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    (tmp_path / "file").write_text("x")
    return {
        "name too long": str(tmp_path / f"{LONG}.json"),
        "folder name too long": str(tmp_path / LONG / "x.json"),
        "through a loop of links": str(tmp_path / "loop1" / "x.json"),
        "through a file": str(tmp_path / "file" / "x.json"),
    }


def _one_error_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert "Traceback" not in output
    assert lines[0].startswith("memprof: error: "), output
    return lines[0]


@pytest.mark.parametrize("option", ["--json", "--html", "--markdown", "--csv", "--at-peak-csv", "--table"])
@pytest.mark.parametrize(
    "case", ["name too long", "folder name too long", "through a loop of links", "through a file"]
)
def test_every_output_option_refuses_a_path_the_system_refuses_with_exit_2(
    runner: CliRunner, tmp_path: Path, option: str, case: str
) -> None:
    path = _refused_paths(tmp_path)[case]
    result = runner.invoke(app, ["analyze", str(REPORT), option, path])
    assert result.exit_code == 2, result.output
    assert option in _one_error_line(result.output)


@pytest.mark.parametrize(
    "case", ["name too long", "folder name too long", "through a loop of links", "through a file"]
)
def test_an_input_or_baseline_the_system_refuses_is_exit_2(
    runner: CliRunner, tmp_path: Path, case: str
) -> None:
    path = _refused_paths(tmp_path)[case]
    for args in (["analyze", path], ["check", str(REPORT), "--baseline", path], ["diff", path, str(REPORT)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        _one_error_line(result.output)


def test_a_loop_of_links_as_analyze_input_is_named_as_a_loop(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = runner.invoke(app, ["analyze", str(tmp_path / "a")])
    assert result.exit_code == 2
    assert "symbolic links" in _one_error_line(result.output)


def test_an_os_error_of_a_path_that_reaches_the_command_line_is_one_line_and_exit_2(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backstop: whatever reads or writes a path, the system's refusal of it is a usage error."""
    import errno

    import memprof.library.recordings

    def refuse(*args: object, **kwargs: object) -> object:
        raise OSError(errno.ENAMETOOLONG, "File name too long", "/x/" + LONG)

    monkeypatch.setattr(memprof.library.recordings, "_read_all", refuse)
    result = runner.invoke(app, ["analyze", str(REPORT)])
    assert result.exit_code == 2
    assert "File name too long" in _one_error_line(result.output)


# ------------------------------------------------------------------ integers past 64 bits


def _trace(path: Path, memory: list[dict[str, int]]) -> Path:
    events: list[dict[str, object]] = [
        {"ph": "X", "name": "aten::add", "ts": 0, "dur": 10, "pid": 1, "tid": 1, "cat": "cpu_op"}
    ]
    for ts, args in enumerate(memory, start=1):
        base = {"Device Type": 0, "Device Id": -1}
        events.append(
            {"ph": "i", "name": "[memory]", "ts": ts, "pid": 1, "tid": 1, "s": "t", "args": base | args}
        )
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize(
    "memory",
    [
        [{"Bytes": -(2**63)}, {"Bytes": -(2**63)}],  # each fits 64 bits; their sum does not
        [{"Bytes": 2**62}, {"Bytes": 2**62}, {"Bytes": 2**62}],
        [{"Bytes": 2**63 + 5}],  # past int64, read as an unsigned 64-bit integer
        [{"Bytes": 2**64}, {"Bytes": 5}],
        [{"Bytes": 2**100}],
        [{"Bytes": 5, "Total Allocated": 2**63 - 1}, {"Bytes": 5, "Total Allocated": 2**63 - 1}],
        [{"Bytes": 5, "Total Allocated": 5, "Total Reserved": 2**64 - 1}],
    ],
    ids=[
        "two-int64-min",
        "three-2**62",
        "unsigned-2**63",
        "2**64",
        "2**100",
        "total-int64-max",
        "reserved-2**64",
    ],
)
def test_trace_byte_counts_past_64_bits_are_refused_with_exit_2(
    runner: CliRunner, tmp_path: Path, memory: list[dict[str, int]]
) -> None:
    trace = _trace(tmp_path / "t.pt.trace.json", memory)
    result = runner.invoke(app, ["analyze", str(trace), "-q"])
    assert result.exit_code == 2, result.output
    assert "the trace is malformed" in _one_error_line(result.output)


def test_byte_counts_up_to_4_eib_in_all_still_read(runner: CliRunner, tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.pt.trace.json", [{"Bytes": 2**60}, {"Bytes": -(2**60)}])
    result = runner.invoke(app, ["analyze", str(trace), "-q", "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["runs"][next(iter(report["runs"]))]["peak_bytes"] == 2**60


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 2**200])
def test_report_byte_counts_past_64_bits_are_refused_with_exit_2(
    runner: CliRunner, tmp_path: Path, value: int
) -> None:
    report = json.loads(REPORT.read_text())
    report["runs"][next(iter(report["runs"]))]["peak_bytes"] = value
    (tmp_path / "r.json").write_text(json.dumps(report))
    for args in (
        ["check", str(tmp_path / "r.json"), "--budget", "1GB"],
        ["diff", str(tmp_path / "r.json"), str(REPORT)],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        _one_error_line(result.output)


# ------------------------------------------------------------------ CSV formula injection

FORMULAS = ['=HYPERLINK("http://x","y")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx", "\rx"]


def _op_trace(path: Path, name: str) -> Path:
    events: list[dict[str, object]] = [
        {"ph": "X", "name": name, "ts": 0, "dur": 10, "pid": 1, "tid": 1, "cat": "cpu_op"},
        {
            "ph": "i",
            "name": "[memory]",
            "ts": 1,
            "pid": 1,
            "tid": 1,
            "s": "t",
            "args": {"Device Type": 0, "Device Id": -1, "Bytes": 64, "Total Allocated": 64},
        },
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _csv_cells(path: Path) -> list[str]:
    import csv

    with path.open(newline="") as handle:
        return [cell for row in csv.reader(handle) for cell in row]


@pytest.mark.parametrize("name", FORMULAS)
def test_csv_cells_a_spreadsheet_would_evaluate_get_a_leading_quote(
    runner: CliRunner, tmp_path: Path, name: str
) -> None:
    trace = _op_trace(tmp_path / "t.pt.trace.json", name)
    out = tmp_path / "ops.csv"
    assert runner.invoke(app, ["analyze", str(trace), "-q", "--csv", str(out)]).exit_code == 0
    cells = _csv_cells(out)
    assert "'" + name in cells
    assert name not in cells
    assert not any(cell.startswith(("=", "+", "@", "\t", "\r")) for cell in cells)

    exact = tmp_path / "exact.csv"
    result = runner.invoke(app, ["analyze", str(trace), "-q", "--csv", str(exact), "--exact-csv"])
    assert result.exit_code == 0
    assert name in _csv_cells(exact)


def test_parse_csv_neutralises_formulas_and_keeps_numbers(runner: CliRunner, tmp_path: Path) -> None:
    table = (DATA / "cpu_memory.txt").read_text()
    first_op = table.splitlines()[3].split()[0]
    (tmp_path / "t.txt").write_text(table.replace(first_op, "=cmd|calc", 1))
    out = tmp_path / "t.csv"
    result = runner.invoke(app, ["parse", str(tmp_path / "t.txt"), "--csv", str(out)])
    assert result.exit_code == 0, result.output
    cells = _csv_cells(out)
    assert "'=cmd|calc" in cells and "=cmd|calc" not in cells
    assert any(cell.startswith("-") for cell in cells)  # negative byte counts stay numbers
    result = runner.invoke(app, ["parse", str(tmp_path / "t.txt"), "--csv", str(out), "--exact-csv"])
    assert result.exit_code == 0
    assert "=cmd|calc" in _csv_cells(out)


def test_spreadsheet_safe_leaves_plain_numbers_and_other_text_alone() -> None:
    from memprof.core.text import spreadsheet_safe

    assert spreadsheet_safe("-8") == "-8"
    assert spreadsheet_safe("+1.5e3") == "+1.5e3"
    assert spreadsheet_safe("aten::mm") == "aten::mm"
    assert spreadsheet_safe("-1+2") == "'-1+2"
    assert spreadsheet_safe("=1") == "'=1"


# ------------------------------------------------------------------ control characters in repr

HOSTILE = "\x1b[2J\r\u202e\nmemprof gate: passed (1 checks)\x07"


def test_repr_and_summary_of_a_loaded_report_escape_control_characters(tmp_path: Path) -> None:
    from memprof.pipeline import load_report

    data = json.loads(REPORT.read_text())
    data["target"] = "t" + HOSTILE
    runs = data["runs"]
    first = next(iter(runs))
    runs[first]["label"] = "eager" + HOSTILE
    runs[first]["peak_op"] = "aten::sum" + HOSTILE
    runs["eager" + HOSTILE] = runs.pop(first)
    (tmp_path / "r.json").write_text(json.dumps(data))
    report = load_report(tmp_path / "r.json")
    run = report.runs["eager" + HOSTILE]
    for text in (repr(report), run.summary(), repr(run)):
        assert text.isprintable(), text  # no ESC, CR, RLO, BEL, newline
        assert "\\x1b[2J\\x0d\\u202e\\x0amemprof gate: passed (1 checks)\\x07" in text
    assert "aten::sum\\x1b" in run.summary()
    pretty = pytest.importorskip("IPython.lib.pretty").pretty  # terminal IPython's display
    assert pretty(report) == repr(report)


# ------------------------------------------------------------------ track() on code that runs nothing


def test_track_refuses_a_generator_function_or_async_def_as_memprof_run_does() -> None:
    import memprof
    from memprof.core.errors import UsageError

    def steps():  # type: ignore[no-untyped-def]
        yield 1

    async def step() -> None:
        return None

    async def agen():  # type: ignore[no-untyped-def]
        yield 1

    for fn, kind in (
        (steps, "a generator function"),
        (step, "an async function"),
        (agen, "an async generator"),
    ):
        with pytest.raises(UsageError, match=f"is {kind}.*runs none of its body"):
            memprof.track(device="cpu")(fn)


def test_track_refuses_a_call_that_returned_a_generator() -> None:
    import memprof
    from memprof.core.errors import UsageError

    @memprof.track(device="cpu")
    def lazy():  # type: ignore[no-untyped-def]
        return (i for i in range(3))

    with pytest.raises(UsageError, match="returned a generator, so its body never ran"):
        lazy()


# ------------------------------------------------------------------ outputs over the program's files


def test_track_refuses_to_write_over_the_callers_own_script(tmp_path: Path) -> None:
    import memprof
    from memprof.core.errors import UsageError

    before = Path(__file__).read_bytes()
    with pytest.raises(UsageError, match="is a file of the running program"):
        memprof.track(device="cpu", json=__file__)
    assert Path(__file__).read_bytes() == before


@pytest.mark.parametrize("link", [False, True])
def test_no_output_replaces_a_module_the_program_imported(tmp_path: Path, link: bool) -> None:
    """By its path or by a hard link to it, checked before and when writing."""
    import importlib
    import sys

    from memprof.core import writing
    from memprof.core.errors import UsageError

    source = tmp_path / "imported_helper_mod.py"
    source.write_text("X = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("imported_helper_mod")
        target = tmp_path / "other-name.json" if link else source
        if link:
            target.hardlink_to(source)
        with pytest.raises(UsageError, match="imported_helper_mod"):
            writing.check_output_paths([("json", target)])
        with pytest.raises(UsageError, match="is a file of the running program"):
            writing.atomic_write_text(target, "{}", remember=False)
        assert source.read_text() == "X = 1\n"
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".memprof")) == []
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("imported_helper_mod", None)


def test_the_command_line_refuses_to_write_over_memprofs_own_source(runner: CliRunner) -> None:
    import memprof.frontends.cli

    result = runner.invoke(app, ["analyze", str(REPORT), "--json", memprof.frontends.cli.__file__])
    assert result.exit_code == 2
    assert "is a file of the running program" in _one_error_line(result.output)


# ------------------------------------------------------------------ blocks across threads, left open


def test_two_threads_entering_track_at_once_get_one_block_and_one_nesting_error() -> None:
    import threading

    import torch

    import memprof
    from memprof.core.errors import MemprofError

    errors: list[str] = []
    peaks: list[int] = []
    barrier = threading.Barrier(2)

    def work() -> None:
        barrier.wait()
        try:
            with memprof.track(device="cpu", explain=False) as t:
                torch.ones(256, 256)
                barrier_after.wait(timeout=5)  # both threads are inside (or refused) at once
            peaks.append(t.run.peak_bytes)
        except MemprofError as error:
            errors.append(str(error))
            barrier_after.wait(timeout=5)

    barrier_after = threading.Barrier(2)
    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert peaks == [256 * 256 * 4]
    assert len(errors) == 1 and "on another thread: blocks do not nest" in errors[0]
    with memprof.track(device="cpu", explain=False) as t:  # the slot is free again
        torch.ones(16)
    assert t.run.peak_bytes == 64


LEFT_OPEN = """
import sys, torch
from memprof.integrations.steps import ProfiledSteps

class Callback(ProfiledSteps):
    framework = "test"

model = torch.nn.Linear(4, 4)
first, second = Callback(steps=[1], out=sys.argv[1]), Callback(steps=[1], out=sys.argv[1])
first.profiler.begin(1, {"model": model}, model)
model(torch.ones(2, 4)).sum().backward()  # then the step raises; the script catches it
try:
    second.profiler.begin(1, {"model": model}, model)  # two callbacks profiling one step
except Exception as error:
    print(error)
print("leaving with the step open")
"""


def test_a_step_left_open_by_the_training_loop_does_not_crash_the_interpreter_at_exit(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    script = tmp_path / "left_open.py"
    script.write_text(LEFT_OPEN)
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]  # was -11: a segfault in torch's teardown
    assert "blocks do not nest" in done.stdout
    assert done.stdout.rstrip().endswith("leaving with the step open")


# ------------------------------------------------------------------ callbacks checked when made


def _callback(**kwargs: object) -> object:
    from memprof.integrations.steps import ProfiledSteps

    class Callback(ProfiledSteps):
        framework = "test"

    return Callback(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("/proc/memprof-reports", "cannot be made: '/proc' is not writable"),  # read-only, even for root
        ("{tmp}/file/reports", "is a file, so the folder cannot be made there"),
        ("{tmp}/file", "is a file; give a folder for the reports"),
        ("{tmp}/" + LONG, "File name too long"),
    ],
)
def test_a_callback_refuses_a_folder_it_cannot_write_when_made(
    tmp_path: Path, out: str, message: str
) -> None:
    from memprof.core.errors import UsageError

    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match=message.replace("(", "\\(")):
        _callback(out=out.format(tmp=tmp_path))


def test_a_callback_refuses_a_report_name_it_cannot_write_when_made(tmp_path: Path) -> None:
    from memprof.core.errors import UsageError

    (tmp_path / "step-2.json").mkdir()
    with pytest.raises(UsageError, match="step-2.json' is a folder"):
        _callback(out=tmp_path)


@pytest.mark.parametrize(
    ("device", "message"), [("tpu", "'tpu' is not a device"), (3, "must be a device name")]
)
def test_a_callback_refuses_a_device_that_is_not_one_when_made(
    tmp_path: Path, device: object, message: str
) -> None:
    from memprof.core.errors import UsageError

    with pytest.raises(UsageError, match=message):
        _callback(out=tmp_path, device=device)
    assert list(tmp_path.iterdir()) == []  # no probe or report left behind


# ------------------------------------------------------------------ signals while outputs are written

SIGNAL_AT_EVERY_STEP = r'''
import os, signal, sys
from pathlib import Path
from memprof.core import writing

folder, signum = Path(sys.argv[1]), int(sys.argv[2])
names = ["a.json", "b.html", "c.md", "d.csv"]
PRIMITIVES = ("_open", "_fdopen", "_chmod", "_link", "_replace", "_unlink", "_lstat")


def instrumented(at):
    """Each primitive of memprof.core.writing counted; the signal sent right after the at-th call returns."""
    count = [0]
    for name in PRIMITIVES:
        real = getattr(writing, name)
        def wrapper(*args, _real=real, **kwargs):
            result = _real(*args, **kwargs)
            count[0] += 1
            if count[0] == at:
                os.kill(os.getpid(), signum)
            return result
        setattr(writing, name, wrapper)
    return count


def trial(at):
    for name in names:
        (folder / name).write_text("old")
    pid = os.fork()
    if pid == 0:
        count = instrumented(at)
        try:
            writing.atomic_write_texts([(folder / name, "new " * 1000) for name in names])
        except KeyboardInterrupt:
            os._exit(130)
        os._exit(0 if count[0] >= at else 99)  # 99: fewer steps than at, the trials are over
    _, status = os.waitpid(pid, 0)
    contents = {(folder / name).read_text()[:3] for name in names}
    left = sorted(p.name for p in folder.iterdir() if p.name not in names)
    return status, contents, left


at = 1
while True:
    status, contents, left = trial(at)
    code = os.waitstatus_to_exitcode(status)
    if code == 99:
        break
    print(at, code, sorted(contents), left)
    at += 1
'''


@pytest.mark.parametrize("signum", [2, 15], ids=["SIGINT", "SIGTERM"])
def test_a_signal_after_any_step_of_writing_leaves_all_outputs_old_or_all_new_and_no_temporary_file(
    tmp_path: Path, signum: int
) -> None:
    import os
    import subprocess
    import sys

    script = tmp_path / "every_step.py"
    script.write_text(SIGNAL_AT_EVERY_STEP)
    (tmp_path / "out").mkdir()
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "out"), str(signum)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    trials = [line.split(" ", 2) for line in done.stdout.splitlines()]
    assert len(trials) >= 20  # every step of four files' writing and renaming
    outcomes = set()
    for at, code, rest in trials:
        contents, left = rest.rsplit(" [", 1)
        assert contents in ("['new']", "['old']"), (at, code, rest)  # never some of each
        assert left == "]", (at, code, rest)  # no temporary or backup file left
        # interrupted (130) or ended by SIGTERM (-15), or (the signal after the last rename) written
        assert int(code) in (130, -15, 0), (at, code, rest)
        outcomes.add((int(code), contents))
    killed = 130 if signum == 2 else -15
    assert (killed, "['old']") in outcomes and (killed, "['new']") in outcomes


# ------------------------------------------------------------------ the bytecode cache, private or not used


def _start_memprof(cache_home: Path) -> None:
    import os
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": root,
        "XDG_CACHE_HOME": str(cache_home),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", "import memprof.core.version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _plant(cache_home: Path, marker: Path) -> Path:
    """A compiled memprof.core.version that writes ``marker``, filed where memprof would look for it."""
    import marshal
    import sys
    from hashlib import blake2b
    from importlib.util import MAGIC_NUMBER

    import memprof.core.version

    path = memprof.core.version.__file__
    source = Path(path).read_bytes()
    digest = blake2b(b"%s\0%d\0" % (os.fsencode(path), sys.flags.optimize) + source, digest_size=20).digest()
    folder = cache_home / "memprof" / "bytecode" / (sys.implementation.cache_tag or "python")
    folder.mkdir(parents=True, exist_ok=True)
    code = compile(f"open({str(marker)!r}, 'w').close()\n__version__ = '0'\n", path, "exec")
    entry = folder / f"{digest.hex()}.pyc"
    entry.write_bytes(MAGIC_NUMBER + digest + marshal.dumps(code))
    entry.chmod(0o600)
    folder.chmod(0o700)
    return entry


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's file needs root")
@pytest.mark.parametrize(
    "hostile", ["folder open to others", "entry of another user", "entry writable by others"]
)
def test_a_planted_compiled_module_is_never_run(tmp_path: Path, hostile: str) -> None:
    marker = tmp_path / "ran"
    entry = _plant(tmp_path, marker)
    if hostile == "folder open to others":
        entry.parent.chmod(0o777)
    elif hostile == "entry of another user":
        os.chown(entry, 65534, 65534)
    else:
        entry.chmod(0o666)
    _start_memprof(tmp_path)
    assert not marker.exists()


def test_a_private_entry_is_used_so_the_planting_tests_can_fail(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    _plant(tmp_path, marker)
    _start_memprof(tmp_path)
    assert marker.exists()  # the same entry, private and memprof's: loaded (what the others refuse)


def test_a_linked_cache_folder_is_not_used_and_nothing_it_points_to_is_removed(tmp_path: Path) -> None:
    import sys

    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    for index in range(2001):
        (victim / f"{index:040x}.pyc").write_text("precious")
    folder = tmp_path / "cache" / "memprof" / "bytecode"
    folder.mkdir(parents=True)
    (folder / (sys.implementation.cache_tag or "python")).symlink_to(victim)
    _start_memprof(tmp_path / "cache")
    assert len(list(victim.iterdir())) == 2001


def test_emptying_a_full_cache_removes_only_memprofs_own_regular_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memprof.core import bytecode

    monkeypatch.setattr(bytecode, "_MAX_ENTRIES", 3)
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    keep = tmp_path / "keep.pyc"
    keep.write_text("keep")
    (folder / "notes.txt").write_text("not memprof's")
    (folder / f"{'a' * 40}.pyc").symlink_to(keep)  # a link with memprof's name: not a regular file
    (folder / f"{'b' * 40}.pyc").mkdir()  # a folder with memprof's name
    for index in range(3):
        (folder / f"{index:040x}.pyc").write_bytes(b"old entry")
    module = tmp_path / "mod.py"
    module.write_text("VALUE = 5\n")
    loader = bytecode._Loader("memprof_mod", str(module), str(folder))
    namespace: dict[str, object] = {}
    exec(loader.get_code("memprof_mod"), namespace)  # noqa: S102 - the test's own module
    assert namespace["VALUE"] == 5
    left = sorted(p.name for p in folder.iterdir())
    assert "notes.txt" in left and f"{'a' * 40}.pyc" in left and f"{'b' * 40}.pyc" in left
    assert not any(name.startswith("0" * 39) for name in left)  # memprof's old entries: removed
    assert len(left) == 4 and keep.read_text() == "keep"  # and the new entry


# ------------------------------------------------------------------ analysis time linear in the file's size


def _shared_name_snapshot(path: Path, scale: int) -> Path:
    """``1,000 * scale`` allocations, each with its own frame, every frame naming one file of
    ``100 KB * scale``: one string in the pickle (its memo), a thousand frames."""
    import pickle

    name = "m" * (100_000 * scale)
    events = [
        {
            "action": "alloc",
            "addr": 4096 * (i + 1),
            "size": 512,
            "stream": 0,
            "frames": [{"filename": name, "line": i, "name": "f"}],
        }
        for i in range(1_000 * scale)
    ]
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [events]}))
    return path


def _unseen_frees_snapshot(path: Path, scale: int) -> Path:
    """``8,000 * scale`` frees requested and completed of addresses the trace never allocated."""
    import pickle

    events = [{"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "frames": []}]
    for i in range(8_000 * scale):
        for action in ("free_requested", "free_completed"):
            events.append({"action": action, "addr": 4096 * (i + 2), "size": 512, "stream": 0, "frames": []})
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [events]}))
    return path


def _analysis_seconds(path: Path) -> float:
    import time

    import memprof

    best = float("inf")
    for _ in range(2):  # CPU time, the better of two: other jobs on the machine move wall time
        started = time.process_time()
        memprof.analyze(path)
        best = min(best, time.process_time() - started)
    return best


@pytest.mark.parametrize(
    "make", [_shared_name_snapshot, _unseen_frees_snapshot], ids=["shared-name", "unseen-frees"]
)
def test_snapshot_analysis_time_grows_with_the_file_not_faster(tmp_path: Path, make: object) -> None:
    small = make(tmp_path / "small.pickle", 1)  # type: ignore[operator]
    large = make(tmp_path / "large.pickle", 10)  # type: ignore[operator]
    size_ratio = large.stat().st_size / small.stat().st_size
    assert 8 < size_ratio < 12
    _analysis_seconds(small)  # imports and caches warmed
    ratio = _analysis_seconds(large) / _analysis_seconds(small)
    # Linear: 11 to 14 measured; the quadratic frees were 25 to 32 here, the shared name 40 to 83.
    assert ratio < 20, f"10x the file took {ratio:.1f}x the time"


# ------------------------------------------------------------------ code that ends the process or its streams

REAL_EXIT = os._exit
HARD_EXITS = """
import os
import sys
import threading

import torch


def exits():
    x = torch.ones(256)
    os._exit(0)


def exits_on_a_thread():
    thread = threading.Thread(target=os._exit, args=(0,))
    thread.start()
    thread.join()
    return torch.ones(4)


def forks_a_child_that_exits():
    import multiprocessing

    child = multiprocessing.get_context("fork").Process(target=os._exit, args=(7,))
    child.start()
    child.join()
    assert child.exitcode == 7, child.exitcode  # the child still ends as it asks
    return torch.ones(4)


def closes_its_streams():
    x = torch.ones(256)
    for fd in (0, 1, 2):
        try:
            os.close(fd)
        except OSError:
            pass  # closed by the warm-up call already
    return x
"""


def test_os_exit_in_the_profiled_function_is_a_failed_run_not_a_passed_gate(
    make_module: object, tmp_path: Path
) -> None:
    module = make_module(HARD_EXITS)  # type: ignore[operator]
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        app, ["run", f"{module}:exits", "-q", "--device", "cpu", "--budget", "1GB", "--json", str(out)]
    )
    assert result.exit_code == 3, result.output
    last = result.stderr.rstrip("\n").splitlines()[-1]
    assert last.startswith("memprof: error: exits called os._exit(0) (peak before the failure: 1.0 KiB")
    assert "os._exit(0)" in result.stderr  # the user's traceback says where
    assert not out.exists()
    assert os._exit is REAL_EXIT  # put back afterwards


def _memprof_run(tmp_path: Path, function: str) -> subprocess.CompletedProcess[str]:
    import sys

    (tmp_path / "hard.py").write_text(HARD_EXITS)
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "memprof",
            "run",
            f"hard.py:{function}",
            "-q",
            "--no-explain",
            "--budget",
            "1GB",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


def test_os_exit_on_another_thread_ends_memprof_with_exit_3_and_a_line(tmp_path: Path) -> None:
    done = _memprof_run(tmp_path, "exits_on_a_thread")
    assert done.returncode == 3, done.stderr
    assert done.stderr.splitlines() == [
        "memprof: error: the profiled code called os._exit(0) on a thread, which ends the process: nothing "
        "was reported and no gate ran"
    ]
    assert "memprof gate" not in done.stdout


def test_closed_standard_streams_and_forked_children_still_give_the_report_and_the_gate(
    tmp_path: Path,
) -> None:
    done = _memprof_run(tmp_path, "closes_its_streams")
    assert done.returncode == 0, done.stderr  # was 1, with nothing printed
    assert "memprof gate: passed (1 check)" in done.stdout
    forked = _memprof_run(tmp_path, "forks_a_child_that_exits")
    assert forked.returncode == 0, forked.stderr
    assert "memprof gate: passed (1 check)" in forked.stdout
