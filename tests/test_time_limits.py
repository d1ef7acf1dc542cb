"""No run without end: an estimate stops a loop that only guessed values keep going (exit 3,
naming the loop's line and what to do), and every command that runs the user's code takes a
``--timeout`` (``timeout=`` in Python) past which it stops with exit 3, naming the line the
code was at."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

import memprof
from memprof.core.errors import UserCodeError
from memprof.frontends.cli import app
from memprof.sources.fake import guesses

CODE = """
import torch


def converge(w):
    loss = (w * w).sum()
    tol = 1e-3
    while loss > tol:
        w = w * 0.5
        loss = (w * w).sum()
    return w


def converge_inputs():
    return (torch.ones(100),)


def countdown(x):
    s = x.sum()
    while s.item() > 0:
        s = s - 64
    return s


def countdown_inputs():
    return (torch.ones(1000),)


def spins(x):
    for _ in range(10**9):
        x = x * 1.0
    return x


def spins_inputs():
    return (torch.ones(4),)


def waits(x):
    # No op: a profiled run stops at once (the profiler's stop costs seconds per 100k ops).
    n = 0
    while n >= 0:
        n += 1
    return x


def waits_inputs():
    return (torch.ones(4),)
"""


def _line(text: str) -> int:
    return next(n for n, line in enumerate(CODE.splitlines(), 1) if text in line)


def _one_line(text: str) -> str:
    return " ".join(text.split())  # typer's runner wraps nothing, the terminal may: compare words


@pytest.fixture
def small_bound(monkeypatch: pytest.MonkeyPatch) -> int:
    """The guessed-loop bound made small, so that a test reaches it in well under a second."""
    monkeypatch.setattr(guesses, "GUESSED_LOOP_LIMIT", 200)
    return 200


@pytest.mark.parametrize(
    ("target", "condition"),
    [("converge", "while loss > tol:"), ("countdown", "while s.item() > 0:")],
)
def test_a_loop_only_guesses_keep_going_stops_the_estimate_naming_its_line(
    make_module,
    small_bound: int,
    target: str,
    condition: str,  # type: ignore[no-untyped-def]
) -> None:
    module = make_module(CODE)
    started = time.perf_counter()
    result = CliRunner().invoke(app, ["estimate", f"{module}:{target}", "--device", "cpu"])
    assert result.exit_code == 3, result.output
    assert time.perf_counter() - started < 30
    message = _one_line(result.output)
    assert f"stopped in a loop at {module}.py:{_line(condition)} ({condition})" in message
    # The bound's guess was the one past it, in the warm-up call.
    assert f"was guessed ({small_bound + 1} times in" in message
    assert "give the loop its trip count" in message and "max_new_tokens" in message
    assert "Partial and not reliable:" in message and "live at most before it stopped" in message
    assert "Traceback" not in result.output


def test_a_guessed_loop_whose_rounds_are_slow_stops_on_time(
    make_module,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    # A loop whose every round runs a whole model reaches the count bound only after hours:
    # once it made GUESSED_LOOP_MIN guesses, GUESSED_LOOP_SECONDS since the first stops it.
    monkeypatch.setattr(guesses, "GUESSED_LOOP_MIN", 20)
    monkeypatch.setattr(guesses, "GUESSED_LOOP_SECONDS", 0.0)
    module = make_module(CODE)
    with pytest.raises(UserCodeError, match=r"\(20 times in \d+\.\d s\)") as caught:
        memprof.estimate(f"{module}:countdown", device="cpu")
    assert f"loop at {module}.py:{_line('while s.item()')}" in caught.value.message


def test_an_estimate_past_its_timeout_stops_naming_the_line(make_module) -> None:  # type: ignore[no-untyped-def]
    import memprof.sources.fake.run  # noqa: F401 - loaded: the limit runs out in the loop, not in imports

    module = make_module(CODE)
    started = time.perf_counter()
    result = CliRunner().invoke(app, ["estimate", f"{module}:spins", "--device", "cpu", "--timeout", "2"])
    assert result.exit_code == 3, result.output
    assert time.perf_counter() - started < 20
    message = _one_line(result.output)
    assert "did not finish within 2 s (--timeout 2.0)" in message
    # The loop's body or its header: wherever the code was when the time ran out.
    where = {f"{module}.py:{_line('for _ in range')}", f"{module}.py:{_line('x = x * 1.0')}"}
    assert any(f"it was at {line}" in message for line in where), message


def test_a_run_past_its_timeout_stops_naming_the_line(make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(CODE)
    started = time.perf_counter()
    result = CliRunner().invoke(
        app, ["run", f"{module}:waits", "--device", "cpu", "--timeout", "2", "--warmup", "0"]
    )
    assert result.exit_code == 3, result.output
    assert time.perf_counter() - started < 20
    message = _one_line(result.output)
    lines = [f"{module}.py:{_line(text)}" for text in ("while n >= 0", "n += 1")]
    assert any(f"did not finish within 2 s (--timeout 2.0): it was at {line}" in message for line in lines)


def test_the_python_api_takes_a_timeout_and_names_it_as_python_does(make_module) -> None:  # type: ignore[no-untyped-def]
    import torch

    module = make_module(CODE)
    with pytest.raises(UserCodeError, match=r"within 2 s \(timeout=2\): it was at") as caught:
        memprof.compare(f"{module}:waits", device="cpu", warmup=0, timeout=2)
    assert f"{module}.py:" in caught.value.message
    # A call that ends in time is untouched by the limit, and the limit does not outlive it.
    report = memprof.profile(torch.ones, 256, device="cpu", timeout=60, time_budget=0, explain=False)
    assert report.runs["eager"].peak_bytes == 1024
    time.sleep(0.1)


def test_a_timeout_of_zero_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["estimate", "memprof.examples.gpt:train_step", "--timeout", "0"])
    assert result.exit_code == 2
    assert "--timeout" in result.output


def test_a_long_fake_loop_keeps_only_its_live_storages_followed() -> None:
    # Memory stays bounded while a guessed loop runs: the recorder follows the deaths of live
    # storages only, not one finalizer per storage ever made.
    import torch

    from memprof.sources.fake.run import FakeSession

    with FakeSession(None) as session:
        s = torch.ones(1000)
        for _ in range(2000):
            s = s - 64
        following = len(session.recorder._finalizers)
    assert following <= 2
    assert len(session.recorder.bytes) == 2 * 2000 + 1  # each round: one allocation, one free


# A memprof process of its own (torch's import: seconds); the quick tests above cover the limit.
@pytest.mark.slow
def test_code_stuck_in_one_c_call_still_ends_the_command_with_exit_3(make_module) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    module = make_module(
        "import time, torch\n\n\ndef naps(x):\n    time.sleep(600)\n    return x\n\n\n"
        "def naps_inputs():\n    return (torch.ones(2),)\n"
    )
    script = (
        "import sys, memprof.sources.deadline as d; d.GRACE_SECONDS = 1\n"
        "from memprof.frontends.cli import main\n"
        f"sys.argv = ['memprof', 'run', '{module}:naps', '--device', 'cpu', '--timeout', '1',"
        " '--warmup', '0']\n"
        "main()\n"
    )
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert time.perf_counter() - started < 60
    assert done.stderr.splitlines()[-1] == (
        f"memprof: error: the profiled code did not finish within 1 s (--timeout 1.0): it was at "
        f"{module}.py:5 (time.sleep(600)); if that is a loop that never ends, make it stop (a fixed trip "
        "count); else give it more time"
    )
