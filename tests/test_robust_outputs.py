"""Outputs all or none, links, names as long as a file system allows, and user code that breaks
the interpreter memprof runs in: each case gets its exit code and one line, never a traceback,
never some outputs replaced and others not, never a write through a link."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.core import writing
from memprof.core.errors import OutputError
from memprof.frontends.cli import app, interrupted
from memprof.frontends.commands.distributed import noting_outputs

ROOT = Path(__file__).resolve().parents[1]
CPU_TABLE = Path(__file__).parent / "data" / "cpu_memory.txt"
LINK_REFUSED = (
    "memprof does not write through links, so that a link planted in a shared folder cannot make it "
    "replace another file: give the path of the file itself, or remove the link"
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def parse(runner: CliRunner, *outputs: str):
    return runner.invoke(app, ["parse", str(CPU_TABLE), *outputs])


def memprof_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "memprof", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


# ---------------------------------------------------------------------------------- links


def test_an_output_that_is_a_link_is_refused_and_its_target_left_alone(runner, tmp_path):
    (tmp_path / "reports").mkdir()
    target = tmp_path / "reports" / "ops.csv"
    target.write_text("someone else's file\n")
    link = tmp_path / "ops.csv"
    link.symlink_to(target)
    result = parse(runner, "--csv", str(link))
    assert result.exit_code == 2
    assert result.stderr == (
        f"memprof: error: --csv {str(link)!r} is a symbolic link (to {str(target)!r}); {LINK_REFUSED}\n"
    )
    assert link.is_symlink() and target.read_text() == "someone else's file\n"


def test_a_link_planted_while_memprof_runs_is_replaced_not_written_through(tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    link = tmp_path / "report.json"
    link.symlink_to(target)  # after the up-front check: the write itself never follows it
    writing.atomic_write_text(link, "{}\n", remember=False)
    assert not link.is_symlink() and link.read_text() == "{}\n"
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize("also", [[], ["--save-baseline", "b.json"]], ids=["alone", "with a baseline"])
@pytest.mark.parametrize("loop", ["self", "pair"])
def test_an_output_that_is_a_loop_of_links_is_exit_2(runner, tmp_path, loop, also):
    path = tmp_path / "r.json"
    if loop == "self":
        path.symlink_to(path)
    else:
        (tmp_path / "other").symlink_to(path)
        path.symlink_to(tmp_path / "other")
    result = runner.invoke(app, ["analyze", str(tmp_path / "missing.json"), "--json", str(path), *also])
    assert result.exit_code == 2
    assert result.stderr == (
        f"memprof: error: --json {str(path)!r} is a symbolic link (to {os.readlink(path)!r}); "
        f"{LINK_REFUSED}\n"
    )


def test_an_output_beside_a_baseline_given_as_a_loop_of_links_is_checked(runner, tmp_path):
    # The same-file check resolved links with Path.resolve(), which raises on a loop.
    (tmp_path / "base.json").symlink_to(tmp_path / "base.json")
    out = tmp_path / "r.json"
    result = runner.invoke(
        app,
        ["analyze", str(tmp_path / "t.json"), "--json", str(out), "--baseline", str(tmp_path / "base.json")],
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output and len(result.stderr.splitlines()) == 1


# ----------------------------------------------------------------------------- all or none


def _failing_replace(monkeypatch: pytest.MonkeyPatch, fail_at: int, failure: BaseException) -> list[str]:
    """memprof's os.replace fails at its ``fail_at``-th call (from 1) with ``failure``."""
    real = writing._replace
    calls: list[str] = []

    def replace(source: str, destination: str | Path) -> None:
        calls.append(str(destination))
        if len(calls) == fail_at:
            raise failure
        real(source, destination)

    monkeypatch.setattr(writing, "_replace", replace)
    return calls


@pytest.mark.parametrize(
    ("failure", "exit_code", "message"),
    [
        (
            OSError(errno.EIO, "Input/output error"),
            2,
            "memprof: error: cannot write {path!r}: Input/output error; write elsewhere; nothing was "
            "written\n",
        ),
        (KeyboardInterrupt(), 130, "memprof: interrupted; no output was written\n"),
    ],
)
def test_a_rename_that_fails_puts_back_the_outputs_already_renamed(
    runner, tmp_path, monkeypatch, failure, exit_code, message
):
    csv_path, json_path = tmp_path / "ops.csv", tmp_path / "ops.json"
    csv_path.write_text("the old table\n")
    calls = _failing_replace(monkeypatch, 2, failure)
    result = parse(runner, "--csv", str(csv_path), "--json", str(json_path))
    assert (result.exit_code, result.stderr) == (exit_code, message.format(path=str(json_path)))
    assert calls[:2] == [str(csv_path), str(json_path)]  # the first renamed, then put back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ops.csv"]  # no temporary or backup file
    assert csv_path.read_text() == "the old table\n"


MAKES_A_FOLDER = """
import os

import torch

def f():
    os.makedirs("ops.csv", exist_ok=True)
    return torch.ones(1024)
"""


def test_a_folder_made_at_an_output_path_replaces_none_of_the_outputs(runner, make_module, tmp_path):
    module = make_module(MAKES_A_FOLDER)
    (tmp_path / "r.json").write_text("the old report\n")
    result = runner.invoke(
        app, ["run", f"{module}:f", "-q", "--device", "cpu", "--json", "r.json", "--csv", "ops.csv"]
    )
    assert result.exit_code == 2
    assert result.stderr == (
        f"memprof: error: cannot write {str(tmp_path / 'ops.csv')!r}: it is a folder now (made while memprof "
        "ran?); remove it or write elsewhere; nothing was written\n"
    )
    assert (tmp_path / "r.json").read_text() == "the old report\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".memprof")) == []


def test_outputs_are_replaced_together_and_keep_their_mode(runner, tmp_path):
    csv_path, json_path = tmp_path / "ops.csv", tmp_path / "ops.json"
    csv_path.write_text("old\n")
    csv_path.chmod(0o640)
    result = parse(runner, "--csv", str(csv_path), "--json", str(json_path))
    assert result.exit_code == 0, result.output
    assert csv_path.read_text().startswith("name,") and json.loads(json_path.read_text())
    assert csv_path.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ops.csv", "ops.json"]


def test_a_name_as_long_as_a_file_name_can_be_is_written(runner, tmp_path):
    # The temporary file beside it was named after it, 20 bytes longer than any name can be.
    longest = tmp_path / ("x" * 251 + ".csv")
    result = parse(runner, "--csv", str(longest))
    assert result.exit_code == 0, result.output
    assert longest.read_text().startswith("name,")
    assert [p.name for p in tmp_path.iterdir()] == [longest.name]


def test_writing_records_what_was_written_unless_told_not_to(tmp_path):
    before = len(writing.WRITTEN)
    writing.atomic_write_texts([(tmp_path / "a", "1"), (tmp_path / "b", "2")])
    writing.atomic_write_text(tmp_path / "c", "3", remember=False)
    assert writing.WRITTEN[before:] == [tmp_path / "a", tmp_path / "b"]


def test_a_write_that_fails_before_any_rename_is_an_output_error(tmp_path, monkeypatch):
    monkeypatch.setattr(writing, "_link", _raise(OSError(errno.EPERM, "Operation not permitted")))
    (tmp_path / "a").write_text("old")
    writing.atomic_write_text(tmp_path / "a", "new", remember=False)  # no hard links: a copy is kept
    assert (tmp_path / "a").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["a"]
    monkeypatch.setattr(writing, "_replace", _raise(OSError(errno.EROFS, "Read-only file system")))
    with pytest.raises(OutputError) as failed:
        writing.atomic_write_text(tmp_path / "a", "newer", remember=False)
    assert str(failed.value) == (
        f"cannot write {str(tmp_path / 'a')!r}: Read-only file system; write to a writable file system; "
        "nothing was written"
    )
    assert (tmp_path / "a").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["a"]


def _raise(error: BaseException):
    def fail(*args: object, **kwargs: object) -> None:
        raise error

    return fail


# ------------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_after_the_outputs_were_written_says_which(runner, tmp_path, monkeypatch):
    import memprof.frontends.commands.common

    # The gate is evaluated first (the Markdown summary shows it), its verdict printed after the
    # files are written: Ctrl-C there.
    monkeypatch.setattr(memprof.frontends.commands.common, "report_gate", _raise(KeyboardInterrupt()))
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [_memory_event(0, 100)]}))
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["analyze", str(trace), "--json", str(out), "--budget", "1GB", "-q"])
    assert result.exit_code == 130
    assert (
        result.stderr
        == f"memprof: interrupted after writing {str(out)!r} in full; nothing else was written\n"
    )
    assert json.loads(out.read_text())["runs"]


def _memory_event(ts: int, nbytes: int) -> dict:
    args = {"Device Type": 1, "Device Id": 0, "Bytes": nbytes, "Total Allocated": nbytes, "Total Reserved": 0}
    return {"ph": "i", "name": "[memory]", "ts": ts, "tid": 1, "args": args}


def test_ctrl_c_while_the_ranks_run_names_what_rank_0_wrote(tmp_path):
    written, untouched, before = tmp_path / "job.json", tmp_path / "job.csv", len(writing.WRITTEN)
    untouched.write_text("old\n")
    with pytest.raises(KeyboardInterrupt), noting_outputs([written, untouched]):
        written.write_text("{}")  # what rank 0 did before Ctrl-C reached the launcher
        raise KeyboardInterrupt
    assert writing.WRITTEN[before:] == [written]
    del writing.WRITTEN[before:]
    assert (
        interrupted([written])
        == f"interrupted after writing {str(written)!r} in full; nothing else was written"
    )
    assert interrupted([]) == "interrupted; no output was written"


# ------------------------------------------------------------------ user code that breaks things


SABOTAGE = """
import builtins
import os
import sys

import torch

def closes_stdout():
    sys.stdout.close()
    return torch.ones(1024)

def replaces_json():
    sys.modules["json"] = object()
    return torch.ones(1024)

def replaces_open():
    def refuse(*args, **kwargs):
        raise OSError("open is not allowed here")
    builtins.open = refuse
    return torch.ones(1024)

def replaces_os_replace():
    os.replace = lambda *args, **kwargs: None
    return torch.ones(1024)

class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no message")

def raises_unprintable():
    raise Unprintable()

def raises_at_length():
    raise ValueError("x" * 5_000_000)
"""


@pytest.mark.parametrize(
    "function",
    [
        "replaces_open",
        # Each is a memprof process of its own (~6 s): the rest run in the slow tier.
        pytest.param("closes_stdout", marks=pytest.mark.slow),
        pytest.param("replaces_json", marks=pytest.mark.slow),
        pytest.param("replaces_os_replace", marks=pytest.mark.slow),
    ],
)
def test_user_code_that_breaks_the_interpreter_still_gets_its_report(tmp_path, function):
    (tmp_path / "sabotage.py").write_text(SABOTAGE)
    done = memprof_cli(
        "run",
        f"sabotage.py:{function}",
        "--device",
        "cpu",
        "--json",
        "r.json",
        "--html",
        "r.html",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "eager: peak 4.0 KiB above the call's start during aten::ones" in done.stdout
    assert json.loads((tmp_path / "r.json").read_text())["runs"]["eager"]["peak_bytes"] == 4096
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.slow  # a memprof process (~6 s); test_failures.py checks exit 3's line in-process
def test_an_exception_whose_message_fails_is_exit_3_in_one_line(tmp_path):
    (tmp_path / "sabotage.py").write_text(SABOTAGE)
    done = memprof_cli("run", "sabotage.py:raises_unprintable", "--device", "cpu", "-q", cwd=tmp_path)
    assert done.returncode == 3
    assert done.stderr.splitlines()[-1] == (
        "memprof: error: raises_unprintable raised Unprintable: <exception str() failed> "
        "(peak before the failure: 0 B)"
    )
    assert "in raises_unprintable" in done.stderr  # the user's traceback, without memprof's frames
    assert "memprof/" not in done.stderr


@pytest.mark.slow  # a memprof process (~6 s)
def test_an_exception_with_a_huge_message_is_shown_short(tmp_path):
    (tmp_path / "sabotage.py").write_text(SABOTAGE)
    done = memprof_cli("run", "sabotage.py:raises_at_length", "--device", "cpu", "-q", cwd=tmp_path)
    assert done.returncode == 3
    assert len(done.stderr) < 10_000
    assert done.stderr.splitlines()[-1] == (
        f"memprof: error: raises_at_length raised ValueError: {'x' * 200}… (peak before the failure: 0 B)"
    )
