"""An estimate never silently wrong: every value fake execution had to guess is counted where it
was asked for, and a guess that steers the program (a branch, a loop, a size) makes the
estimate unreliable, which every format says first and no fits verdict claims."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import memprof
from memprof.frontends.cli import app

MiB = 1024 * 1024

CODE = """
import torch

MiB = 1024 * 1024


def loop_on_data(x):
    kept = []
    while bool((x > 0).all()) and len(kept) < 10:
        kept.append(torch.empty(MiB, dtype=torch.uint8))
        x = x - 1
    return kept


def loop_on_data_inputs():
    return (torch.full((4,), 3.0),)


def logs_loss(x):
    y = x * 2
    value = y.sum().item()
    return y, value * 0.5


def logs_loss_inputs():
    return (torch.ones(1024),)


def branches_on_loss(x):
    y = x * 2
    scaled = y.sum().item() / 4
    if scaled > 100:
        return torch.empty(4 * MiB, dtype=torch.uint8)
    return y


def branches_on_loss_inputs():
    return (torch.ones(1024),)
"""


def _line(text: str) -> int:
    """The line of ``text`` in CODE (1-based, as the written module numbers it)."""
    return next(n for n, line in enumerate(CODE.splitlines(), 1) if text in line)


def test_a_loop_that_stops_on_a_tensor_value_is_not_reliable(make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(CODE)
    # For real, the loop runs 3 times (x is 3, 2, 1, then 0): 3 MiB kept. Fake tensors cannot
    # know when (x > 0).all() turns false: the guess (true) runs it to the cap of 10.
    real = memprof.compare(f"{module}:loop_on_data", time_budget=0, explain=False, device="cpu")
    assert real.base.peak_bytes < 4 * MiB
    run = memprof.estimate(f"{module}:loop_on_data", device="cpu").runs["estimate"]
    assert run.estimate is not None and not run.estimate.reliable
    (guess,) = [g for g in run.estimate.guesses if g.steers]
    assert guess.kind == "bool" and guess.source == f"{module}.py:{_line('while bool(')}"
    # The condition is tested 11 times a call (the 11th ends the loop at the cap), in the
    # warm-up call and the estimated one.
    assert guess.count == 22 and "while bool((x > 0).all())" in guess.source_text
    assert run.notes[0].startswith("NOT RELIABLE")


def test_a_float_only_carried_along_is_a_harmless_guess(make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(CODE)
    run = memprof.estimate(f"{module}:logs_loss", device="cpu").runs["estimate"]
    assert run.estimate is not None and run.estimate.reliable
    (guess,) = run.estimate.guesses
    assert (guess.kind, guess.steers, guess.count) == ("float", False, 2)  # warm-up and estimate
    assert guess.source == f"{module}.py:{_line('value = y.sum().item()')}"
    assert not any(note.startswith("NOT RELIABLE") for note in run.notes)


def test_a_float_compared_after_arithmetic_steers(make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(CODE)
    run = memprof.estimate(f"{module}:branches_on_loss", device="cpu").runs["estimate"]
    assert run.estimate is not None and not run.estimate.reliable
    (guess,) = run.estimate.guesses
    assert (guess.kind, guess.steers) == ("float", True)
    # Asked for on one line, compared (after a division) on another: both are said.
    assert guess.source == f"{module}.py:{_line('scaled = y.sum().item() / 4')}"
    assert guess.steered_at == f"{module}.py:{_line('if scaled > 100:')}"


def test_the_verdict_and_json_say_not_reliable_and_no_fit_is_claimed(make_module, tmp_path) -> None:  # type: ignore[no-untyped-def]
    module = make_module(CODE)
    out = tmp_path / "estimate.json"
    plain = CliRunner().invoke(app, ["estimate", f"{module}:loop_on_data", "--json", str(out), "-q"])
    assert plain.exit_code == 0, plain.output
    last_paragraph = plain.output.strip().split("\n\n")[-1]
    assert last_paragraph.startswith("NOT RELIABLE"), plain.output
    estimate = json.loads(out.read_text())["runs"]["estimate"]["estimate"]
    assert estimate["reliable"] is False
    assert estimate["guesses"][0]["steers"] is True
    fits = CliRunner().invoke(app, ["estimate", f"{module}:loop_on_data", "--gpu", "H100", "-q"])
    assert fits.exit_code == 2, fits.output
    assert "cannot say whether it fits" in fits.output
    assert f"{module}.py:{_line('while bool(')}" in fits.output


def test_an_unreliable_estimate_is_never_said_to_fit(make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(CODE)
    report = memprof.estimate(f"{module}:loop_on_data", device="cpu", capacity="1GB")
    assert report.fits is not None and not report.fits.fits and not report.fits.reliable


@pytest.mark.parametrize("name", ["logs_loss", "branches_on_loss"])
def test_guesses_leave_the_tensor_methods_as_they_were(make_module, name: str) -> None:  # type: ignore[no-untyped-def]
    import torch

    before = {m: vars(torch.Tensor).get(m) for m in ("item", "__bool__", "__int__", "__float__", "tolist")}
    memprof.estimate(f"{make_module(CODE)}:{name}", device="cpu")
    assert {m: vars(torch.Tensor).get(m) for m in before} == before
