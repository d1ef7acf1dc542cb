"""What memprof says on stderr while it works: within the width, in place on a terminal, one
line per step elsewhere, and a sweep's estimates counted (``4 of 11, 38 s``)."""

from __future__ import annotations

import io
import re

import pytest
from typer.testing import CliRunner

import memprof
from memprof.frontends.cli import app
from memprof.frontends.commands.common import hidden_line
from memprof.frontends.commands.status import StatusLine, clear_status, status_line

COMPILING = "compiling step with torch.compile (backend inductor)"
HINT = "(a first compile can take minutes; later runs reuse Inductor's cache)"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_a_log_each_step_is_one_line_within_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    stream = io.StringIO()
    status = StatusLine(stream)
    for message in (
        f"{COMPILING} ...",
        f"{COMPILING} ... 5 s {HINT}",
        f"{COMPILING} ... 10 s",
        f"{COMPILING} ... 15 s",
        "timing step (compile, without the profiler)",
    ):
        status(message)
    lines = stream.getvalue().splitlines()
    # The ticks that only count seconds are left out; the first, which says what to expect, stays.
    assert [line[:40] for line in lines] == [
        f"memprof: {COMPILING}"[:40],
        f"memprof: {COMPILING}"[:40],
        "memprof: timing step (compile, without t",
    ]
    assert all(len(line) <= 60 for line in lines) and lines[0].endswith("…")
    assert lines[2] == "memprof: timing step (compile, without the profiler)"


def test_on_a_terminal_the_line_is_updated_in_place_and_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "50")
    stream = Terminal()
    status = StatusLine(stream)
    status(f"{COMPILING} ...")
    status(f"{COMPILING} ... 5 s {HINT}")
    status("timing step")
    written = stream.getvalue()
    assert "\n" not in written
    shown = [part.removesuffix("\x1b[K") for part in written.split("\r")[1:]]
    # Every message replaces the one before, one column short of the width (no wrap).
    assert len(shown) == 3 and all(len(text) <= 49 for text in shown)
    assert shown[-1] == "memprof: timing step"
    status.clear()
    assert stream.getvalue().endswith("\r\x1b[K")


def test_a_line_printed_while_a_status_shows_starts_on_a_clean_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from memprof.frontends.commands.common import err

    stream = Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    status = status_line()
    status("profiling step (eager, 1 call)")
    err("memprof: warning: something to say")
    assert stream.getvalue().startswith("\rmemprof: profiling step (eager, 1 call)\x1b[K\r\x1b[K")
    clear_status()


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_hidden_warnings_line_fits_the_width(width: int) -> None:
    example = "Profiler function <class 'torch.autograd.profiler.record_function'> will be ignored" * 2
    line = hidden_line(12, [(example, 12), ("another", 1)], width)
    assert line is not None and len(f"memprof: {line}") <= width
    assert line.startswith("12 torch warnings hidden") and line.endswith("; -v shows them")
    assert hidden_line(0, [], width) is None


SMALL_GPT = {"n_layer": 1, "vocab_size": 256, "context": 16, "n_embd": 32, "n_head": 2}


def test_a_sweep_counts_its_estimates_and_the_time() -> None:
    said: list[str] = []
    memprof.estimate(
        "memprof.examples.gpt:train_step",
        device="cpu",
        inputs_kwargs=SMALL_GPT,
        sweep=("batch", [1, 2]),
        status=said.append,
    )
    counted = [m for m in said if m.split(": ", 1)[-1].startswith("estimating")]
    assert [re.sub(r"\d+ s:", "N s:", m) for m in counted] == [
        "1 of 2, N s: estimating train_step (batch=1) on fake tensors",
        "2 of 2, N s: estimating train_step (batch=2) on fake tensors",
    ]


def test_the_status_lines_of_a_run_fit_the_width(make_module) -> None:
    module = make_module(
        """
        import torch

        def a_function_with_a_rather_long_name_to_profile_here(n):
            return torch.ones(n * 1024)

        def a_function_with_a_rather_long_name_to_profile_here_inputs(device="cpu"):
            return (256,)
        """
    )
    target = f"{module}:a_function_with_a_rather_long_name_to_profile_here"
    result = CliRunner().invoke(app, ["run", target, "--device", "cpu"], env={"COLUMNS": "60"})
    assert result.exit_code == 0, result.output
    status = result.stderr.splitlines()
    assert status and all(line.startswith("memprof: ") and len(line) <= 60 for line in status), status
    assert max(map(len, result.stdout.splitlines())) <= 60
