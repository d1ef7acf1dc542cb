"""Estimates of Hugging Face workloads against the same workloads measured: a GPT-2 training
step estimated on the CPU is within 1% of its measured peak and footprint; Llama's
``generate`` (whose stopping check reads a value fake tensors cannot know) is measured exactly
and its estimate is either within 10% of that or flagged NOT RELIABLE (and never said to fit);
the largest batch an H100 sweep says fits leaves room on the card for what lies outside the
caching allocator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="transformers is not installed (pip install 'torch-memprof[hf]')")

from typer.testing import CliRunner  # noqa: E402

import memprof  # noqa: E402
from memprof.core.gpus import find_gpu  # noqa: E402
from memprof.frontends.cli import app  # noqa: E402
from real_models import workloads  # noqa: E402

pytestmark = pytest.mark.slow

MiB = 1024 * 1024
WORKLOADS = Path(workloads.__file__)


def test_a_gpt2_training_step_is_estimated_within_one_percent_of_its_run(profiled: Any) -> None:
    measured = profiled("gpt2_step").run
    report = memprof.estimate(workloads.gpt2_step, inputs=workloads.gpt2_step_inputs, device="cpu")
    estimated = report.runs["estimate"]
    assert estimated.estimate.reliable and not estimated.estimate.guesses
    for field in ("peak_bytes", "footprint_bytes"):
        error = abs(getattr(estimated, field) - getattr(measured, field))
        assert error <= 0.01 * getattr(measured, field), (
            field,
            getattr(estimated, field),
            getattr(measured, field),
        )


def test_generate_is_measured_exactly_and_its_estimate_is_close_or_flagged(profiled: Any) -> None:
    done = profiled("llama_generate")
    measured = done.run
    assert measured.peak_bytes == done.replayed_peak_bytes > 0
    assert done.report.runs["eager"].net_bytes > 0  # the generated tokens are its result
    report = memprof.estimate(workloads.llama_generate, inputs=workloads.llama_generate_inputs, gpu="H100")
    estimated = report.runs["estimate"]
    if estimated.estimate.reliable:
        assert abs(estimated.peak_bytes - measured.peak_bytes) <= 0.10 * measured.peak_bytes
        return
    # Flagged: each guess named where transformers asked for it, the stopping check among them.
    assert any(
        g.steers and g.source.startswith("transformers/generation/") for g in estimated.estimate.guesses
    )
    assert report.fits is not None and not report.fits.reliable and not report.fits.fits
    result = CliRunner().invoke(app, ["estimate", f"{WORKLOADS}:llama_generate", "--gpu", "H100", "-q"])
    assert result.exit_code == 2, result.output
    verdict = [line for line in result.output.splitlines() if line.startswith("NOT RELIABLE")]
    assert verdict and "cannot be said" in " ".join(result.output.split())
    assert "memprof: error: cannot say whether it fits" in result.output


def test_the_largest_batch_that_fits_an_h100_leaves_room_outside_the_allocator(tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    result = CliRunner().invoke(
        app,
        [
            "estimate", f"{WORKLOADS}:gpt2_step", "--gpu", "H100", "--sweep", "batch=64,128,256",
            "--set", "seq=1024", "-q", "--json", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    sweep = json.loads(out.read_text())["sweep"]
    card = find_gpu("H100")
    assert sweep["capacity_bytes"] == card.memory_bytes
    assert sweep["reserve_bytes"] >= 512 * MiB
    largest = sweep["largest_fitting"]
    assert largest is not None and int(largest) > 256
    needed = {point["value"]: point["needed_bytes"] for point in sweep["points"]}
    assert card.memory_bytes - needed[largest] >= 512 * MiB
    # Every value estimated above it needs more than the card less the reserve.
    above = [v for v in needed if int(v) > int(largest)]
    assert above and all(needed[v] > card.memory_bytes - sweep["reserve_bytes"] for v in above)


def test_a_decoding_loop_that_stops_on_a_token_stops_the_estimate_at_its_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On fake tensors the last token is never the end of sequence: the loop would run for
    # ever. The estimate stops it (a small bound here; 10,000 guesses or 2 minutes by default),
    # exit 3, naming the loop's line and what to do.
    import inspect

    from memprof.sources.fake import guesses

    monkeypatch.setattr(guesses, "GUESSED_LOOP_LIMIT", 20)
    lines, first = inspect.getsourcelines(workloads.llama_decode_until_eos)
    (loop,) = [first + n for n, text in enumerate(lines) if text.strip().startswith("while (ids[:, -1]")]
    result = CliRunner().invoke(app, ["estimate", f"{WORKLOADS}:llama_decode_until_eos", "--device", "cpu"])
    assert result.exit_code == 3, result.output
    message = " ".join(result.output.split())
    assert f"workloads.py:{loop} (while (ids[:, -1] != model.config.eos_token_id).any():)" in message
    assert "was guessed (21 times in" in message and "max_new_tokens" in message
    assert "Partial and not reliable:" in message
