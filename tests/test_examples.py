"""The built-in examples show what docs/guides/compare.md says they show: direction and rough size, on CPU.

Slow tier (about 35 s, each example compared with --repeat 3): the quick tier checks every
example's exact peak through test_estimate's agreement and test_explain's reconciliation."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from reconcile import assert_reconciled
from typer.testing import CliRunner

import memprof
from memprof.core.units import format_bytes
from memprof.frontends.cli import app
from memprof.model import Report

MiB = 1024 * 1024
# The guide's example figures were measured with this build; oneDNN's buffers may differ in others.
GUIDE_BUILD = torch.__version__ == "2.13.0+cpu"

pytestmark = pytest.mark.slow


def compare(module: str, *funcs: str, repeat: int = 1) -> Report:
    """Profile ``memprof.examples.<module>:<func>`` for each func, on CPU, first one the base."""
    report = memprof.compare(
        *(f"memprof.examples.{module}:{f}" for f in funcs), device="cpu", warmup=1, repeat=repeat
    )
    assert list(report.runs) == list(funcs)
    assert_reconciled(report)
    return report


def test_no_grad_keeps_two_activations_instead_of_all() -> None:
    report = compare("no_grad", "with_autograd", "no_grad", "inference_mode")
    activation = 512 * 1024 * 4  # one (512, 1024) float32 activation
    # 8 blocks of Linear + GELU: autograd keeps all 16 outputs alive until the result is dropped;
    # without it, a layer's input is freed once the next output exists: two at a time.
    assert report.runs["with_autograd"].peak_bytes == 16 * activation
    assert report.runs["no_grad"].peak_bytes == 2 * activation
    assert report.runs["inference_mode"].peak_bytes == 2 * activation


def test_activation_checkpointing_halves_the_training_step_peak() -> None:
    report = compare("activation_checkpointing", "plain_step", "checkpointed_step")
    plain = report.runs["plain_step"].peak_bytes
    checkpointed = report.runs["checkpointed_step"].peak_bytes
    # Each block keeps two (1024, 1024) float32 hidden activations (4 MiB each) for backward;
    # checkpointing keeps them for one block at a time: at least 3 blocks' worth minus
    # recomputation slack, and the peak falls by more than 40%.
    assert plain - checkpointed > 2 * 8 * MiB
    assert checkpointed < 0.6 * plain
    # Recomputation: the checkpointed step allocates more in total.
    assert report.runs["checkpointed_step"].allocated_bytes > report.runs["plain_step"].allocated_bytes
    if GUIDE_BUILD:  # the exact figures the guide quotes
        assert (plain, checkpointed) == (45_089_796, 23_089_092)
        assert format_bytes(report.runs["plain_step"].allocated_bytes) == "86.0 MiB"
        assert format_bytes(report.runs["checkpointed_step"].allocated_bytes) == "118.1 MiB"


def test_channels_last_saves_about_one_activation_on_cpu() -> None:
    report = compare("channels_last", "contiguous", "channels_last")
    saved = report.runs["contiguous"].peak_bytes - report.runs["channels_last"].peak_bytes
    # The contiguous conv reorders its 64-channel output through an extra buffer of the same size
    # (8 x 64 x 64 x 64 float32 = 8 MiB); channels_last does not.
    assert saved == pytest.approx(8 * MiB, rel=0.05)
    assert report.runs["contiguous"].peak_op == "aten::conv2d"
    if GUIDE_BUILD:  # the exact figures the guide quotes
        assert report.runs["contiguous"].peak_bytes == 25_313_280
        assert report.runs["channels_last"].peak_bytes == 16_937_008


def test_checkpoint_load_full_mmap_and_map_location() -> None:
    from memprof.examples.checkpoint_load import checkpoint_path

    file_bytes = checkpoint_path().stat().st_size
    report = compare("checkpoint_load", "full_load", "mmap_load", "map_location_load", repeat=3)
    full, mmap, located = (report.runs[k] for k in ("full_load", "mmap_load", "map_location_load"))
    # A full load allocates the 8 storages of 8 MiB each.
    assert full.peak_bytes == 64 * MiB
    # torch's profiler records the mapped file as one CPU allocation of the file's size, so by
    # the allocator's records mmap does not lower the peak; it avoids reading and copying.
    assert file_bytes <= mmap.peak_bytes < file_bytes + 4096
    if GUIDE_BUILD:  # the exact figures the guide quotes
        assert (file_bytes, mmap.peak_bytes) == (67_112_375, 67_113_113)
    # What mmap saves is time (no read, no copy), which the benchmarks measure; here, that the
    # runs were timed at all.
    assert mmap.wall_ms > 0 and full.wall_ms > 0
    # On CPU map_location="cpu" is the full load.
    assert located.peak_bytes == full.peak_bytes


RSS_SCRIPT = textwrap.dedent(
    """
    import sys
    from memprof.examples import checkpoint_load

    def rss():
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024

    path = checkpoint_load.checkpoint_path()
    before = rss()
    state = getattr(checkpoint_load, sys.argv[1])(path, "cpu")
    print(rss() - before)
    """
)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_mmap_load_adds_under_5_percent_of_a_full_load_to_resident_memory() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def growth(func: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", RSS_SCRIPT, func], capture_output=True, text=True, env=env, check=True
        )
        return int(done.stdout.strip().splitlines()[-1])

    full, mmap = growth("full_load"), growth("mmap_load")
    assert full > 60 * MiB
    assert mmap < 0.05 * full


def test_the_ddp_example_runs_alone_as_a_group_of_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.distributed as dist

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    try:
        report = memprof.compare("memprof.examples.ddp:step", device="cpu", warmup=2)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    run = report.runs["eager"]
    # 256 rows: the ReLU output, its gradient and threshold_backward's result (256 x 1024
    # float32 each) and the loss gradient (256 x 256), next to the second layer's weight and
    # bias gradients and the loss (tests/test_distributed.py has the two-rank job).
    assert run.peak_bytes == 256 * (3 * 1024 + 256) * 4 + 256 * 1024 * 4 + 256 * 4 + 4
    assert (run.peak_op, run.net_bytes) == ("aten::threshold_backward", 0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_pinned_memory_needs_cuda_and_says_so() -> None:
    result = CliRunner().invoke(
        app,
        ["compare", "memprof.examples.pinned_memory:pageable", "memprof.examples.pinned_memory:pinned", "-q"],
    )
    assert result.exit_code == 2
    assert "the pinned_memory example needs CUDA" in result.stderr
    assert result.stdout == ""


def test_examples_run_from_the_command_line_with_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        app,
        [
            "compare",
            "memprof.examples.no_grad:with_autograd",
            "memprof.examples.no_grad:inference_mode",
            "-q",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0
    assert "inference_mode vs with_autograd: peak -87.5%, wall time " in result.stdout
