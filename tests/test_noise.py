"""torch's own warnings and log records stay out of the output during memprof's runs, counted;
``-v`` lets them through. The user's own warnings always pass."""

from __future__ import annotations

import logging
import os
import warnings

import pytest
import torch
from typer.testing import CliRunner

from memprof.frontends.cli import app
from memprof.sources.live.noise import hidden_torch_messages

TORCH_FILE = os.path.join(os.path.dirname(torch.__file__), "_dynamo", "somewhere.py")


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def torch_handler():
    """A handler on torch's logger, as torch's own or a test runner's capture would be."""
    handler = Collect()
    logger = logging.getLogger("torch")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def test_torch_log_records_are_kept_from_every_handler_and_counted(torch_handler: Collect) -> None:
    import torch._dynamo  # noqa: F401 - torch's loggers with handlers of their own exist

    root, dynamo = Collect(), Collect()
    logging.getLogger().addHandler(root)
    logging.getLogger("torch._dynamo").addHandler(dynamo)
    try:
        with hidden_torch_messages() as heard:
            for _ in range(12):
                logging.getLogger("torch._dynamo.eval_frame").warning(
                    "Profiler record function will be ignored"
                )
            logging.getLogger("torch.__trace").debug("a structured trace record")  # never shown anyway
            logging.getLogger("torch._inductor").error("failed while attempting to run meta for aten.mm")
            logging.getLogger("mypkg").warning("the user's own logger")
    finally:
        logging.getLogger().removeHandler(root)
        logging.getLogger("torch._dynamo").removeHandler(dynamo)
    assert torch_handler.records == [] and dynamo.records == []
    assert [r.getMessage() for r in root.records] == ["the user's own logger"]
    assert heard.count == 13
    assert heard.lines() == (
        ("Profiler record function will be ignored", 12),
        ("failed while attempting to run meta for aten.mm", 1),
    )
    # Afterwards torch's handlers are back.
    logging.getLogger("torch.memprof_test").warning("after")
    assert [r.getMessage() for r in torch_handler.records] == ["after"]


def test_shown_when_asked(torch_handler: Collect) -> None:
    with hidden_torch_messages(show=True) as heard:
        logging.getLogger("torch.memprof_test").warning("graph break")
    assert [r.getMessage() for r in torch_handler.records] == ["graph break"] and heard.count == 0


def test_torch_warnings_are_counted_and_the_users_own_pass() -> None:
    with pytest.warns(UserWarning, match="the user's warning") as passed:
        with hidden_torch_messages() as heard:
            warnings.warn_explicit("TF32 is on", UserWarning, TORCH_FILE, 10)
            warnings.warn("the user's warning", UserWarning, stacklevel=1)
    assert [str(w.message) for w in passed] == ["the user's warning"]
    assert heard.lines() == (("UserWarning: TF32 is on", 1),)


def test_a_failure_still_passes_the_users_warnings_on() -> None:
    with pytest.warns(UserWarning, match="before failing"), pytest.raises(ValueError):
        with hidden_torch_messages():
            warnings.warn("before failing", UserWarning, stacklevel=1)
            raise ValueError("boom")


NOISY = """
import logging
import torch

def noisy():
    for _ in range(3):
        logging.getLogger("torch.memprof_test").warning("Graph break from `Tensor.item()`")
    return torch.ones(256)
"""


def test_the_command_line_says_how_many_were_hidden_and_v_shows_them(
    make_module, torch_handler: Collect
) -> None:
    module = make_module(NOISY)
    result = CliRunner().invoke(app, ["run", f"{module}:noisy", "--time-budget", "0"])
    assert result.exit_code == 0, result.output
    # 1 warm-up call, 1 profiled call and the call that explains the peak, 3 records each.
    assert (
        "memprof: 9 torch warnings hidden (Graph break from `Tensor.item()` x9); -v shows them"
        in result.stderr
    )
    assert torch_handler.records == []
    result = CliRunner().invoke(app, ["run", f"{module}:noisy", "--time-budget", "0", "-v"])
    assert result.exit_code == 0, result.output
    assert "hidden" not in result.stderr
    assert [r.getMessage() for r in torch_handler.records] == ["Graph break from `Tensor.item()`"] * 9


def test_the_api_keeps_what_was_hidden_with_the_run(make_module) -> None:
    import memprof

    report = memprof.compare(f"{make_module(NOISY)}:noisy", time_budget=0, device="cpu")
    # 3 records in each call: the warm-up, the profiled and the explaining call.
    assert report.runs["eager"].torch_messages == (("Graph break from `Tensor.item()`", 9),)


def test_the_unknown_block_warning_is_one_note_without_a_count(capfd: pytest.CaptureFixture[str]) -> None:
    """torch's CPU reporter warns once per thousand frees of blocks it never saw allocated, in
    the whole process: its lines say that such frees happened, not how many. Its other lines
    are passed on."""
    from memprof.sources.live.profiling import UNKNOWN_BLOCKS, quiet_profiler_stderr

    warning = (
        "[W1127 03:52:25.962557302 CPUAllocator.cpp:245] Memory block of unknown size was allocated "
        "before the profiling started, profiler results will not include the deallocation event\n"
    )
    notes: list[str] = []
    with quiet_profiler_stderr(notes):
        os.write(2, (warning * 2 + "something else\n").encode())
    assert notes == [
        f"{UNKNOWN_BLOCKS}; those frees are not in the records, so the live bytes never dip below the start"
    ]
    assert not any(char.isdigit() for char in notes[0])
    assert capfd.readouterr().err == "something else\n"
