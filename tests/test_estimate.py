"""`memprof estimate` and `memprof.estimate`: fake execution agrees with what a real run measures,
the CUDA allocator model's reserve, capacities, sweeps, factory parameters, the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from explaining import profile_calls
from typer.testing import CliRunner

import memprof
from memprof.analysis.allocator import round_size
from memprof.core.errors import UsageError
from memprof.frontends.cli import app
from memprof.model import Recipe
from memprof.sources.targets.target import build_inputs, resolve

MiB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[1]

WORKLOAD = """
import torch

MiB = 1024 * 1024

def grow(size_mib):
    a = torch.empty(size_mib * MiB, dtype=torch.uint8)
    b = torch.empty(1000, dtype=torch.uint8)
    del a
    return b

def grow_inputs(size_mib=12):
    return (size_mib,)

def count_nonzero(x):
    return x.nonzero()

def count_nonzero_inputs():
    return (torch.ones(8),)
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def estimate_cli(runner: CliRunner, *args: str) -> object:
    return runner.invoke(app, ["estimate", *args, "-q"])


# ---- the estimate agrees with the real run ------------------------------------------------------

QUICK = [
    "memprof.examples.similarity:similarity",
    "memprof.examples.no_grad:with_autograd",
    "memprof.examples.channels_last:contiguous",
    "memprof.examples.gpt:train_step",
]
SLOW = [
    "memprof.examples.no_grad:no_grad",
    "memprof.examples.no_grad:inference_mode",
    "memprof.examples.channels_last:channels_last",
    "memprof.examples.activation_checkpointing:plain_step",
    "memprof.examples.activation_checkpointing:checkpointed_step",
]


# The estimated peaks docs/accuracy/estimates.md shows (fake tensors: the same
# bytes in every process).
ESTIMATED_PEAK = {
    "memprof.examples.similarity:similarity": 834_000_000,
    "memprof.examples.no_grad:with_autograd": 33_554_432,
    "memprof.examples.no_grad:no_grad": 4_194_304,
    "memprof.examples.no_grad:inference_mode": 4_194_304,
    "memprof.examples.channels_last:contiguous": 25_313_280,
    "memprof.examples.channels_last:channels_last": 16_937_008,
    "memprof.examples.activation_checkpointing:plain_step": 45_089_796,
    "memprof.examples.activation_checkpointing:checkpointed_step": 23_089_092,
    "memprof.examples.gpt:train_step": 39_827_976,
}


def _agreement(spec: str) -> None:
    """Estimate on fake tensors (CPU) and measure for real, the way memprof run does: the peak
    above the start, the footprint and what was live at the start agree within 1%."""
    target = resolve(spec)
    inputs = build_inputs(target, None, "cpu")
    _, measured = profile_calls(target.func, inputs.args, inputs.kwargs, module=target.module, explain=False)
    assert measured is not None
    report = memprof.estimate(spec, device="cpu")
    run = report.runs["estimate"]
    assert run.footprint_bytes is not None and run.live_at_start_bytes is not None
    # It explains its peak as a run does: every byte of the footprint in an entry at the peak,
    # in the JSON too.
    at_peak = run.at_peak
    assert at_peak is not None and report.to_dict()["runs"]["estimate"]["at_peak"]["entries"]
    assert sum(at_peak.by_category.values()) == run.footprint_bytes
    entries = sum(e.bytes for e in at_peak.entries) + sum(u.bytes for u in at_peak.unattributed)
    assert entries == run.footprint_bytes
    if spec.endswith("gpt:train_step"):  # the logits' log-softmax, on the loss line, as measured
        assert at_peak.entries[0].source == "memprof/examples/gpt.py:109" and run.module_stats
    assert run.live_at_start_bytes == measured.live_at_start_bytes
    assert run.peak_bytes == ESTIMATED_PEAK[spec]
    if spec.endswith("channels_last:contiguous"):
        # The last convolution reorders its (8, 64, 64, 64) float32 input and its 64x64x3x3
        # weights inside the op: 8 MiB + 147,456 B, the same in every process.
        assert run.estimate is not None
        assert run.estimate.workspace_ops["aten::convolution"] == 8 * 64 * 64 * 64 * 4 + 64 * 64 * 3 * 3 * 4
    assert run.peak_bytes == pytest.approx(measured.peak_bytes, rel=0.01)
    assert run.footprint_bytes == pytest.approx(measured.footprint_bytes, rel=0.01)
    if "zero_grad" not in (target.func.__doc__ or "") and "train_step" not in spec:
        # No tensor made before the call is freed in it: the profiler's own peak is exact too.
        # Only the peak is compared: no explaining call, no calls timed without the profiler.
        real = memprof.profile(
            target.func, *inputs.args, device="cpu", explain=False, time_budget=0, **inputs.kwargs
        ).runs["eager"]
        assert run.peak_bytes == pytest.approx(real.peak_bytes, rel=0.01)
        # Where each run's numbers come from, and how the code ran.
        sources = ((run.source, run.mode), (real.source, real.mode))
        assert sources == (("estimate", "eager"), ("live", "eager"))


@pytest.mark.parametrize("spec", QUICK)
def test_estimate_on_cpu_agrees_with_the_measured_run(spec: str) -> None:
    _agreement(spec)


@pytest.mark.slow
@pytest.mark.parametrize("spec", SLOW)
def test_estimate_on_cpu_agrees_with_the_measured_run_on_every_example(spec: str) -> None:
    _agreement(spec)


def test_an_address_freed_inside_a_call_and_given_to_its_output_is_not_the_outputs() -> None:
    from memprof.sources.fake.workspaces import call_bytes

    # oneDNN's convolution of an (8, 64, 64, 64) NCHW float32 input, as recorded: the input
    # reordered (8 MiB at A), the weight reordered (147,456 B), the blocked output (8 MiB at B),
    # both reorders freed, the output (8 MiB) given address A again, the blocked one freed.
    a, w, b = 0xA000, 0xC000, 0xB000
    sizes = [8 * MiB, 147_456, 8 * MiB, -147_456, -8 * MiB, 8 * MiB, -8 * MiB]
    ptrs = [a, w, b, w, a, a, b]
    assert call_bytes(sizes, ptrs, {a}) == (16 * MiB + 147_456, 8 * MiB)
    # The same call with the output at a fresh address: the same answer.
    assert call_bytes(sizes, [a, w, b, w, a, 0xD000, b], {0xD000}) == (16 * MiB + 147_456, 8 * MiB)
    # A free of a tensor made before the call lowers the live bytes, never below the start.
    assert call_bytes([-4 * MiB, 1 * MiB], [0xE000, a], {a}) == (0, 1 * MiB)


REUSE = """
import ctypes
import torch
from torch.utils._pytree import tree_flatten
from memprof.sources.fake.workspaces import _Case, _caps, _describe, _measure

# A fixed mmap threshold: a freed 1 MiB block is unmapped and the next one of its size mapped
# at the same address, every time (glibc moves the threshold otherwise).
assert ctypes.CDLL(None).mallopt(-3, 1 << 17) == 1
REUSED = []

@torch.library.custom_op("memprof_test::reorder_like", mutates_args=())
def reorder_like(x: torch.Tensor) -> torch.Tensor:
    staged = torch.empty_like(x)
    scratch = torch.empty_like(x).fill_(1.0)
    where = staged.untyped_storage().data_ptr()
    del staged
    out = torch.empty_like(x)
    REUSED.append(out.untyped_storage().data_ptr() == where)
    return out.copy_(scratch)

x = torch.ones(1 << 18)
leaves, spec = tree_flatten(([x], {}))
case = _Case(torch.ops.memprof_test.reorder_like.default, spec, tuple(_describe(v) for v in leaves))
# Another thread of the profiler may map memory into the freed hole now and then: measured again
# until the measured call (after the warm-up) got the address back, at most 5 times.
for _ in range(5):
    REUSED.clear()
    measured = _measure([("reorder_like", case)], _caps)["reorder_like"]
    n = 1 << 18
    print(REUSED[-1], len(REUSED), measured.workspace.bytes_at(n), measured.outputs[0].bytes_at(n))
    if REUSED[-1]:
        break
"""


def test_a_kernel_whose_output_reuses_a_freed_buffers_address_is_measured_exactly() -> None:
    # Like oneDNN's convolution: two 1 MiB buffers, one freed and its address given to the 1 MiB
    # output. Live inside: 2 MiB, of which 1 MiB is returned; 1 MiB of workspace in every process.
    done = subprocess.run(
        [sys.executable, "-c", REUSE], capture_output=True, text=True, cwd=ROOT, check=True, timeout=120
    )
    lines = [line.split() for line in done.stdout.splitlines()]
    assert lines[-1][0] == "True"  # the output was given the freed buffer's address
    # Warm-up and measured call; 1 MiB of workspace whether the address came back or not.
    assert all(line[1:] == ["2", str(1 * MiB), "0"] for line in lines)


def test_similarity_is_exact_with_sums_int64_copy_measured_inside_the_op() -> None:
    run = memprof.estimate("memprof.examples.similarity:similarity", device="cpu").runs["estimate"]
    # xy (256,000,000) + the bool mask (64,000,000) + sum's int64 copy of it (512,000,000, made and
    # freed inside sum: fake tensors cannot see it, it is measured) + the result (2,000,000).
    assert run.peak_bytes == 834_000_000
    assert run.footprint_bytes == 834_000_000 + 2 * 256 * 500 * 4
    assert run.peak_op == "aten::sum"
    assert run.estimate is not None
    assert run.estimate.workspace_ops["aten::sum"] == 512_000_000
    assert run.estimate.modelled_device == "cpu" and run.reserved_peak_bytes is None


def test_real_arguments_are_copied_into_fake_ones() -> None:
    from memprof.examples.similarity import similarity, similarity_inputs

    x, y = similarity_inputs(n=64)
    report = memprof.estimate(similarity, x, y, device="cpu")
    assert report.runs["estimate"].peak_bytes == 3_250_000 * 64 + 2_000_000
    assert not x.is_meta and x.untyped_storage().data_ptr() != 0  # the caller's tensors are untouched


def test_a_model_and_optimizer_given_for_real_estimate_like_the_factorys() -> None:
    from memprof.examples.gpt import train_step, train_step_inputs

    real = memprof.estimate(train_step, *train_step_inputs(), device="cpu").runs["estimate"]
    fake = memprof.estimate("memprof.examples.gpt:train_step", device="cpu").runs["estimate"]
    assert (real.peak_bytes, real.footprint_bytes) == (fake.peak_bytes, fake.footprint_bytes)
    assert any("placeholder" in note for note in real.notes)  # float(loss) has no value on fake tensors


# ---- CUDA: the caching allocator's blocks and segments ------------------------------------------


@pytest.mark.parametrize(
    ("size_mib", "reserved"),
    [
        (12, 12 * MiB + 2 * MiB),  # 12 MiB: its own segment (>= 10 MiB, 2 MiB multiple); 1000 B: small pool
        (4, 20 * MiB + 2 * MiB),  # 4 MiB: a 20 MiB segment (1-10 MiB requests); 1000 B: small pool
    ],
)
def test_cuda_rounds_to_blocks_and_reserves_whole_segments(make_module, size_mib: int, reserved: int) -> None:  # type: ignore[no-untyped-def]
    module = make_module(WORKLOAD)
    report = memprof.estimate(f"{module}:grow", inputs_kwargs={"size_mib": size_mib})
    run = report.runs["estimate"]
    assert report.device == "cuda" and run.device == "cuda"
    assert run.footprint_bytes == size_mib * MiB + round_size(1000) == size_mib * MiB + 1024
    assert run.reserved_peak_bytes == reserved
    assert run.estimate is not None and run.estimate.allocator is not None
    assert run.estimate.allocator.segments == 2


def test_cuda_reserve_is_at_least_the_allocated_peak_in_whole_segments() -> None:
    run = memprof.estimate("memprof.examples.gpt:train_step", device="cuda").runs["estimate"]
    replay = run.estimate.allocator if run.estimate is not None else None
    assert replay is not None and run.reserved_peak_bytes is not None and run.footprint_bytes is not None
    assert run.reserved_peak_bytes >= replay.allocated_peak_bytes >= run.footprint_bytes
    assert run.reserved_peak_bytes % (2 * MiB) == 0  # segments are multiples of 2 MiB
    assert run.footprint_bytes % 512 == 0 and run.peak_bytes % 512 == 0  # blocks are multiples of 512 B
    assert any("not modelled on CUDA" in note for note in run.notes)


def test_a_capacity_gives_a_fits_verdict(make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(WORKLOAD)
    fits = memprof.estimate(f"{module}:grow", capacity="20MB").fits
    assert fits is not None and fits.fits
    assert (fits.capacity_bytes, fits.needed_bytes, fits.headroom_bytes) == (20 * MiB, 14 * MiB, 6 * MiB)
    short = memprof.estimate(f"{module}:grow", capacity=13 * MiB).fits
    assert short is not None and not short.fits and short.headroom_bytes == -MiB


def test_a_gpu_by_name(make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(WORKLOAD)
    report = memprof.estimate(f"{module}:grow", gpu="H100")
    assert report.fits is not None and report.fits.capacity_bytes == 85_018_279_936
    assert report.fits.gpu == "NVIDIA H100 80GB HBM3"
    # A card's total is not all the allocator's: 1 GiB is kept for the CUDA context and the
    # libraries' workspaces, and the headroom is what is left after it.
    assert report.fits.reserve_bytes == 1 << 30
    assert report.fits.headroom_bytes == 85_018_279_936 - (1 << 30) - 14 * MiB
    from memprof.outputs.estimate import answer

    assert answer(report) == (
        "estimated peak 12.0 MiB allocated, 14.0 MiB reserved: fits the NVIDIA H100 80GB HBM3 "
        "(79.2 GiB less a 1.0 GiB reserve) with 78.2 GiB to spare"
    )


def test_the_reserve_is_kept_free_of_the_capacity(make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(WORKLOAD)
    # 14 MiB reserved fits 20 MiB; with 7 MiB of it kept free, 13 MiB are left: short by 1 MiB.
    assert memprof.estimate(f"{module}:grow", capacity="20MB").fits.fits  # type: ignore[union-attr]
    short = memprof.estimate(f"{module}:grow", capacity="20MB", reserve="7MB").fits
    assert short is not None and not short.fits
    assert (short.reserve_bytes, short.usable_bytes, short.headroom_bytes) == (7 * MiB, 13 * MiB, -MiB)
    none = memprof.estimate(f"{module}:grow", gpu="H100", reserve=0).fits
    assert none is not None and none.headroom_bytes == 85_018_279_936 - 14 * MiB
    with pytest.raises(UsageError, match="leaves nothing of the 20,971,520 B capacity"):
        memprof.estimate(f"{module}:grow", capacity="20MB", reserve="20MB")


def test_the_reserve_on_the_command_line(make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(WORKLOAD)
    fits = CliRunner().invoke(app, ["estimate", f"{module}:grow", "--capacity", "20MB", "-q"])
    assert fits.exit_code == 0, fits.output
    short = CliRunner().invoke(
        app, ["estimate", f"{module}:grow", "--capacity", "20MB", "--reserve", "7MB", "-q"]
    )
    assert short.exit_code == 1, short.output
    assert "does not fit 20.0 MiB less a 7.0 MiB reserve: short by 1.0 MiB" in short.output


# ---- sweeps -------------------------------------------------------------------------------------


def test_a_sweep_rises_monotonically_and_is_linear() -> None:
    report = memprof.estimate(
        "memprof.examples.similarity:similarity", device="cpu", sweep=("n", [64, 128, 256])
    )
    assert list(report.runs) == ["n=64", "n=128", "n=256"]
    sweep = report.sweep
    assert sweep is not None and sweep.needed == "footprint_bytes"
    needs = [point.needed_bytes for point in sweep.points]
    # Per row of n: xy 1,000,000 + mask 250,000 + sum's int64 copy 2,000,000 + inputs 4,000;
    # and the (500, 500) int64 result.
    assert needs == [3_254_000 * n + 2_000_000 for n in (64, 128, 256)]
    assert needs == sorted(needs)
    assert sweep.slope_bytes == 3_254_000 and sweep.intercept_bytes == 2_000_000
    assert sweep.linear is True and sweep.max_residual == 0
    # Each run records how it was made: the swept value among its factory's settings.
    recipe = report.runs["n=128"].recipe
    assert recipe == Recipe(
        target="memprof.examples.similarity:similarity",
        inputs="memprof.examples.similarity:similarity_inputs",
        settings={"n": "128"},
        mode="eager",
        device="cpu",
    )
    assert report.diffs[0].recipe_changes == ("n 64 -> 128",)


def test_the_largest_value_that_fits_is_found_and_verified() -> None:
    capacity = 1 << 30
    report = memprof.estimate(
        "memprof.examples.similarity:similarity",
        device="cpu",
        capacity=capacity,
        sweep=("n", [64, 128, 256]),
    )
    sweep = report.sweep
    assert sweep is not None
    largest = (capacity - 2_000_000) // 3_254_000  # 329
    assert sweep.largest_fitting == str(largest) and sweep.verified
    assert report.runs[f"n={largest}"].footprint_bytes == 3_254_000 * largest + 2_000_000 <= capacity
    assert report.runs[f"n={largest + 1}"].footprint_bytes > capacity  # estimated too: verified
    searched = [p.value for p in sweep.points if p.searched]
    assert searched == [str(largest), str(largest + 1)]
    assert f"largest n that fits 1.0 GiB: n={largest}" in sweep.verdict


def test_the_largest_batch_that_fits_a_gpu_under_the_allocator_model() -> None:
    report = memprof.estimate(
        "memprof.examples.similarity:similarity", capacity="2GB", sweep=("n", [64, 128, 256])
    )
    sweep = report.sweep
    assert sweep is not None and sweep.needed == "reserved_peak_bytes" and sweep.verified
    largest = int(sweep.largest_fitting or 0)
    fit, over = report.runs[f"n={largest}"], report.runs[f"n={largest + 1}"]
    assert fit.estimate is not None and fit.estimate.allocator is not None
    assert over.estimate is not None and over.estimate.allocator is not None
    assert fit.estimate.allocator.ooms == 0 and over.estimate.allocator.ooms > 0
    assert all(p.fits == (int(p.value) <= largest) for p in sweep.points)


# ---- fake execution never allocates the real sizes ----------------------------------------------


@pytest.mark.slow
def test_a_step_needing_hundreds_of_gigabytes_is_estimated_in_seconds_in_little_memory() -> None:
    script = textwrap.dedent(
        """
        import json, time
        import memprof
        start = time.perf_counter()
        report = memprof.estimate(
            "memprof.examples.gpt:train_step", device="cpu",
            inputs_kwargs=dict(batch=48, context=2048, n_layer=8, n_head=16, n_embd=2048, vocab_size=50304),
        )
        run = report.runs["estimate"]
        hwm = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
        seconds = time.perf_counter() - start
        print(json.dumps({"footprint": run.footprint_bytes, "seconds": seconds, "rss": hwm}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["footprint"] > 200e9  # the real step needs over 200 GB
    assert result["rss"] < 1.5 * 2**30  # the whole process, torch included, stays small
    assert result["seconds"] < 120


# ---- the command line ---------------------------------------------------------------------------


def said(result: Any) -> str:
    """What a command printed, its lines joined (the terminal report wraps at the width)."""
    return " ".join(result.output.split())


def test_cli_estimate_writes_the_report(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "estimate.json"
    result = estimate_cli(
        runner,
        "memprof.examples.similarity:similarity",
        "--device",
        "cpu",
        "--json",
        str(path),
        "--markdown",
        str(tmp_path / "estimate.md"),
    )
    assert result.exit_code == 0, result.output
    assert "allocated inside ops (measured on real tensors): aten::sum up to 488.3 MiB" in said(result)
    markdown = (tmp_path / "estimate.md").read_text()
    assert markdown.count("allocated inside ops") == 1
    assert "aten::sum up to 488.3" in markdown.replace("\u00a0", " ")
    assert "estimated peak 796.3 MiB (795.4 MiB above the 1000.0 KiB live at the start)" in said(result)
    data = json.loads(path.read_text())
    assert data["source"]["kind"] == "estimate"
    run = data["runs"]["estimate"]
    assert (run["peak_bytes"], run["footprint_bytes"], run["live_at_start_bytes"]) == (
        834_000_000,
        835_024_000,
        1_024_000,
    )
    assert run["estimate"]["workspace_ops"] == {"aten::sum": 512_000_000}
    assert memprof.load_report(path).runs["estimate"].peak_bytes == 834_000_000


def test_cli_fits_is_exit_0_and_does_not_fit_is_exit_1(runner: CliRunner, make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(WORKLOAD)
    fits = estimate_cli(runner, f"{module}:grow", "--capacity", "20MB")
    assert fits.exit_code == 0, fits.output
    assert (
        "estimated peak 12.0 MiB allocated, 14.0 MiB reserved: fits 20.0 MiB with 6.0 MiB to spare"
        in said(fits)
    )
    short = estimate_cli(runner, f"{module}:grow", "--capacity", "13MB")
    assert short.exit_code == 1
    line = (
        "memprof estimate: estimated peak 12.0 MiB allocated, 14.0 MiB reserved: does not fit 13.0 MiB: "
        "short by 1.0 MiB"
    )
    assert short.output.rstrip().endswith(line)


@pytest.mark.parametrize("width", [60, 80, 100])
def test_estimate_report_fits_the_terminal_width(make_module, width: int) -> None:  # type: ignore[no-untyped-def]
    from memprof.outputs.terminal import render_terminal

    module = make_module(WORKLOAD)
    report = memprof.estimate(f"{module}:grow", capacity="13MB", sweep=("size_mib", [4, 8, 12]))
    text = render_terminal(report, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    # The sweep's verdict comes last, as every report's verdict does.
    assert " ".join(text.split()).endswith(report.sweep.verdict)
    single = memprof.estimate(f"{module}:grow", capacity="20MB")
    text = render_terminal(single, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    answer = "estimated peak 12.0 MiB allocated, 14.0 MiB reserved: fits 20.0 MiB with 6.0 MiB to spare"
    assert " ".join(text.split()).endswith(answer)


def test_cli_sweep_table_and_csv(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    result = estimate_cli(
        runner,
        "memprof.examples.similarity:similarity",
        "--device",
        "cpu",
        "--sweep",
        "n=64,128,256",
        "--capacity",
        "1GB",
        "--sweep-csv",
        str(out),
        "--markdown",
        str(tmp_path / "s.md"),
    )
    assert result.exit_code == 0, result.output
    assert "Sweep of n:" in result.output
    assert "largest n that fits 1.0 GiB: n=329" in said(result)
    rows = out.read_text().splitlines()
    assert rows[0] == (
        "parameter,value,run,footprint_bytes,line_bytes,needed,needed_bytes,fits,searched,largest_fitting"
    )
    need = 3_254_000 * 64 + 2_000_000
    assert rows[1] == f"n,64,n=64,{need},{need},footprint_bytes,{need},true,false,false"
    assert rows[-2].startswith("n,329,n=329,") and rows[-2].endswith(",true,true,true")
    # Markdown keeps each size whole with a no-break space.
    assert "largest n that fits 1.0\u00a0GiB: n=329" in (tmp_path / "s.md").read_text()


def test_cli_sweep_where_nothing_fits_is_exit_1(runner: CliRunner) -> None:
    result = estimate_cli(
        runner,
        "memprof.examples.similarity:similarity",
        "--device",
        "cpu",
        "--sweep",
        "n=2,4",
        "--capacity",
        "1MB",
    )
    assert result.exit_code == 1
    assert "no n fits 1.0 MiB" in said(result)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--mode", "compile"], "--mode compile cannot be estimated"),
        (["--gpu", "k80"], "--gpu 'k80' is not a card memprof knows"),
        (["--gpu", "h100", "--capacity", "1GB"], "give --capacity or --gpu, not both"),
        (["--capacity", "lots"], "--capacity: not a size"),
        (["--set", "nn=3"], "has no parameter nn; it takes n, d"),
        (["--set", "n"], "--set 'n' is not NAME=VALUE"),
        (["--sweep", "n=1,,2"], "has an empty value"),
        (["--sweep", "n=64", "--set", "n=3"], "n is both swept and set (--set)"),
        (["--table", "t.txt"], "an estimate makes none"),
        (["--sweep-csv", "s.csv"], "--sweep-csv writes a sweep"),
    ],
)
def test_cli_bad_options_are_exit_2(runner: CliRunner, args: list[str], fragment: str) -> None:
    result = estimate_cli(runner, "memprof.examples.similarity:similarity", *args)
    assert result.exit_code == 2, result.output
    assert fragment in result.output


def test_the_library_reads_a_sweep_and_refuses_a_compile_gate_naming_its_parameters() -> None:
    from memprof.analysis.gate import GateConfig
    from memprof.library.estimating import checked_estimate, parse_sweep

    assert parse_sweep("batch=8,16, 32") == ("batch", [8, 16, 32])
    assert parse_sweep("dtype=bfloat16,'8'") == ("dtype", ["bfloat16", "8"])
    with pytest.raises(UsageError) as caught:
        memprof.estimate("memprof.examples.similarity:similarity", sweep="n=1,,2")
    assert caught.value.message == "sweep 'n=1,,2' has an empty value; write it like sweep='n=8,16,32'"
    with pytest.raises(UsageError) as caught:
        checked_estimate("x:y", gate=GateConfig(require_compile_saves=True))  # before anything is read
    refused = "require_compile_saves compares compiled with eager; an estimate is eager only"
    assert caught.value.message == refused


def test_gpu_list_prints_every_card_with_its_source(runner: CliRunner) -> None:
    result = runner.invoke(app, ["estimate", "x:y", "--gpu", "list"])
    assert result.exit_code == 0
    from memprof.core.gpus import GPUS

    for gpu in GPUS:
        assert gpu.key in result.output and f"{gpu.memory_bytes:,}" in result.output
    assert "85,018,279,936" in result.output and "reported" in result.output
    # The option is advise's too (one declaration): the same list.
    advised = runner.invoke(app, ["advise", "x:y", "--gpu", "list"])
    assert advised.exit_code == 0 and advised.output == result.output


def test_code_that_cannot_run_on_fake_tensors_is_exit_3(runner: CliRunner, make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(WORKLOAD)
    result = estimate_cli(runner, f"{module}:count_nonzero")
    assert result.exit_code == 3
    assert "aten::nonzero cannot run on fake tensors" in result.output


def test_code_that_calls_sys_exit_on_fake_tensors_is_exit_3(runner: CliRunner, make_module) -> None:  # type: ignore[no-untyped-def]
    # As in memprof run: leaving through sys.exit(0) is the estimated code failing, not a
    # successful estimate with no report.
    module = make_module("import sys\n\ndef leave():\n    sys.exit(0)\n")
    result = estimate_cli(runner, f"{module}:leave")
    assert result.exit_code == 3, result.output
    assert "leave called sys.exit(0) on fake tensors" in result.output


def test_an_inputs_factory_that_fails_on_fake_tensors_is_exit_3(runner: CliRunner, make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module("def f(x):\n    return x\n\ndef f_inputs():\n    raise ValueError('no data here')\n")
    result = estimate_cli(runner, f"{module}:f")
    assert result.exit_code == 3, result.output
    # The factory's own failure is said once, as memprof run says it, not wrapped again.
    assert result.output.endswith(
        f"memprof: error: inputs factory '{module}:f_inputs' failed: it raised ValueError: no data here\n"
    )


# ---- factory parameters for run and compare -----------------------------------------------------


def test_set_passes_factory_parameters_to_run(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    result = runner.invoke(
        app,
        [
            "run",
            "memprof.examples.similarity:similarity",
            "-q",
            "--device",
            "cpu",
            "--set",
            "n=64",
            "--json",
            str(path),
        ],
    )
    assert result.exit_code == 0, result.output
    run = json.loads(path.read_text())["runs"]["eager"]
    assert run["peak_bytes"] == 3_250_000 * 64 + 2_000_000
    # The report records how the run was made, --set values included.
    assert run["recipe"] == {
        "target": "memprof.examples.similarity:similarity",
        "inputs": "memprof.examples.similarity:similarity_inputs",
        "settings": {"n": "64"},
        "mode": "eager",
        "device": "cpu",
    }


def test_set_passes_factory_parameters_to_compare_and_rejects_unknown_names(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "compare.json"
    spec = "memprof.examples.similarity:similarity"
    args = ["compare", spec, spec, "--labels", "a,b", "-q", "--device", "cpu", "--json", str(path)]
    ok = runner.invoke(app, [*args, "--set", "n=8"])
    assert ok.exit_code == 0, ok.output
    runs = json.loads(path.read_text())["runs"]
    assert runs["a"]["peak_bytes"] == runs["b"]["peak_bytes"] == 3_250_000 * 8 + 2_000_000
    bad = runner.invoke(app, [*args, "--set", "batch=8"])
    assert bad.exit_code == 2
    assert (
        "inputs factory 'memprof.examples.similarity:similarity_inputs' has no parameter batch; it takes n, d"
        in (bad.output)
    )


def test_values_are_parsed_as_int_float_bool_or_string() -> None:
    from memprof.frontends.commands.options import FactoryOptions

    params = FactoryOptions(inputs_kwargs=["a=8", "b=0.5", "c=true", "d=gpt2", "e='8'", "f=1e-3"]).params()
    assert params == {"a": 8, "b": 0.5, "c": True, "d": "gpt2", "e": "8", "f": 0.001}
    assert isinstance(params["a"], int) and isinstance(params["c"], bool)


def test_estimate_sees_fake_tensors_only() -> None:
    # The session's tensors are fake: an estimate leaves no real tensor of the example's size.
    from torch._subclasses.fake_tensor import FakeTensor

    seen: list[bool] = []

    def step(x: torch.Tensor) -> torch.Tensor:
        seen.append(isinstance(x, FakeTensor))
        return x * 2

    memprof.estimate(step, torch.ones(4), device="cpu", warmup=0)
    assert seen == [True]


@pytest.mark.slow
def test_a_smaller_batch_can_need_a_larger_reserve_than_the_largest_that_fits() -> None:
    # docs/guides/estimate.md: the reserve is not monotonic in the batch (blocks fall into whole segments).
    def estimated(batch: int) -> tuple[int | None, bool | None]:
        # The allocator model's whole capacity (no reserve): the point is the model's, not the reserve's.
        report = memprof.estimate(
            "memprof.examples.gpt:train_step", gpu="l4", reserve=0, inputs_kwargs={"batch": batch}
        )
        assert report.fits is not None
        return report.runs["estimate"].reserved_peak_bytes, report.fits.fits

    assert estimated(4151) == (22_624_075_776, True)
    assert estimated(4152) == (26_977_763_328, False)
    assert estimated(4430)[1] is True


@pytest.mark.slow
def test_the_cuda_estimates_readme_sets_beside_an_h100() -> None:
    # docs/accuracy/estimates.md, against an H100: the estimated column (the H100's was measured there with
    # scripts/cuda_check.py, which needs a GPU).
    peaks = {
        "gpt:train_step": 39_828_992,
        "no_grad:with_autograd": 33_554_432,
        "no_grad:no_grad": 4_194_304,
        "no_grad:inference_mode": 4_194_304,
        "activation_checkpointing:plain_step": 44_042_240,
        "activation_checkpointing:checkpointed_step": 22_036_480,
        "channels_last:contiguous": 16_777_216,
        "channels_last:channels_last": 16_777_216,
        "similarity:similarity": 576_000_000,
    }
    for target, peak in peaks.items():
        assert memprof.estimate(f"memprof.examples.{target}", gpu="h100").runs["estimate"].peak_bytes == peak
    big = memprof.estimate("memprof.examples.gpt:train_step", gpu="h100", inputs_kwargs={"batch": 14_719})
    run = big.runs["estimate"]
    assert (run.peak_bytes, run.reserved_peak_bytes) == (80_097_799_680, 80_601_939_968)
    over = memprof.estimate("memprof.examples.gpt:train_step", gpu="h100", inputs_kwargs={"batch": 16_384})
    assert over.fits is not None and not over.fits.fits
    swept = memprof.estimate("memprof.examples.gpt:train_step", gpu="h100", sweep=("batch", [8, 16, 32]))
    # The largest the sweep says fits leaves the card's 1 GiB reserve free (the batch of 14,719
    # that ran on an H100 needs 80,601,939,968 B reserved; 16,384 ran out of memory there).
    assert swept.sweep is not None and swept.sweep.largest_fitting is not None
    assert 14_719 <= int(swept.sweep.largest_fitting) < 16_384
    assert swept.sweep.largest_fitting_bytes <= 85_018_279_936 - (1 << 30)
