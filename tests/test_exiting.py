"""The command line's exit: what Python's exit does for the program (exit status, exit handlers,
open files flushed, threads waited for), without the interpreter's teardown."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def leave(body: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``body`` in a fresh interpreter that then leaves with ``exit_fast``."""
    script = tmp_path / "leave.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )


@pytest.mark.parametrize("code", [0, 1, 2, 3, 130])
def test_the_exit_status_is_kept(code: int, tmp_path: Path) -> None:
    done = leave(f"from memprof.frontends.exiting import exit_fast\nexit_fast({code})\n", tmp_path)
    assert done.returncode == code, done.stderr


def test_exit_handlers_run_and_open_files_are_flushed(tmp_path: Path) -> None:
    done = leave(
        """
        import atexit, sys, weakref
        from memprof.frontends.exiting import exit_fast

        log = open("log.txt", "w")  # never closed: Python's exit would flush it
        log.write("written by the program")
        atexit.register(lambda: open("atexit.txt", "w").write("ran"))

        class Held:
            pass

        held = Held()
        weakref.finalize(held, lambda: open("finalized.txt", "w").write("ran"))
        sys.stdout.write("no newline at the end")  # buffered: a pipe is not a terminal
        exit_fast(0)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "no newline at the end"
    assert (tmp_path / "log.txt").read_text() == "written by the program"
    assert (tmp_path / "atexit.txt").read_text() == "ran"
    assert (tmp_path / "finalized.txt").read_text() == "ran"


def test_a_running_thread_is_waited_for_as_python_waits(tmp_path: Path) -> None:
    done = leave(
        """
        import threading, time
        from memprof.frontends.exiting import exit_fast

        def late():
            time.sleep(0.3)
            open("thread.txt", "w").write("finished")

        threading.Thread(target=late).start()
        exit_fast(3)
        """,
        tmp_path,
    )
    assert done.returncode == 3, done.stderr
    assert (tmp_path / "thread.txt").read_text() == "finished"


def test_a_message_for_an_exit_status_is_printed_as_python_prints_it(tmp_path: Path) -> None:
    done = leave("from memprof.frontends.exiting import exit_fast\nexit_fast('memprof: gone')\n", tmp_path)
    assert done.returncode == 1 and done.stderr == "memprof: gone\n"
