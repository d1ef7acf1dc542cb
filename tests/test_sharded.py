"""Sharded jobs: `memprof estimate --world-size N` runs the target as each rank of an N-rank job
under torch's fake process group, and a DTensor's local shard is the parameter, gradient or
optimizer state it belongs to (in estimates and in measured runs alike)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
import torch.distributed as dist
from typer.testing import CliRunner

import memprof
from memprof.examples import fsdp
from memprof.frontends.cli import app

PARAMETERS = fsdp.parameter_count()  # 2,626,560 float32 parameters in 18 tensors
PARAMETER_TENSORS = 2 + fsdp.LAYERS * 4
# Each parameter's first dimension (1024, 256, 1024, 1024 or 256 rows) splits evenly over 2 or 4.


BLOCK = 4 * fsdp.WIDTH * fsdp.WIDTH * 2 + 4 * fsdp.WIDTH + fsdp.WIDTH  # 525,568 parameters


def shards(run: memprof.RunResult) -> int:
    """The parameters at the peak that are this rank's shards (not gathered by FSDP)."""
    assert run.at_peak is not None
    return sum(e.bytes for e in run.at_peak.entries if e.category == "parameter" and not e.role)


def roles(run: memprof.RunResult) -> dict[tuple[str, str], int]:
    """Bytes at the peak by (category, role), of the entries FSDP's machinery holds."""
    assert run.at_peak is not None
    found: dict[tuple[str, str], int] = {}
    for entry in run.at_peak.entries:
        if entry.role:
            found[entry.category, entry.role] = found.get((entry.category, entry.role), 0) + entry.bytes
    return found


@pytest.fixture(scope="module")
def fsdp_two() -> memprof.Report:
    return memprof.estimate("memprof.examples.fsdp:step", device="cpu", world_size=2)


def test_each_rank_holds_its_shard_of_the_parameters_and_adamws_state(fsdp_two: memprof.Report) -> None:
    assert PARAMETERS == 2_626_560
    assert list(fsdp_two.runs) == ["rank0", "rank1"]
    for rank, run in enumerate(fsdp_two.runs.values()):
        assert run.rank == rank
        assert run.at_peak is not None
        categories = run.at_peak.by_category
        assert shards(run) == PARAMETERS * 4 // 2 == 5_253_120
        # exp_avg and exp_avg_sq of each shard, and a 4-byte step per parameter tensor.
        assert categories["optimizer_state"] == 2 * PARAMETERS * 4 // 2 + 4 * PARAMETER_TENSORS == 10_506_312
        # Live when the step starts: the shards and their state (the batch too).
        assert run.live_at_start_bytes == 5_253_120 + 10_506_312 + 2 * 8 * 64 * 8


def test_what_fsdp_gathers_and_reduce_scatters_is_named(fsdp_two: memprof.Report) -> None:
    # The peak is in blocks.2's backward (threshold_backward): blocks.2's parameters are gathered
    # whole, and the root's (embedding and head) kept gathered from forward; blocks.3's
    # gradients wait in the flat reduce-scatter buffer, and blocks.2's gathered in the all-gather's;
    # the head's gradient and blocks.2.proj's are whole, not yet reduce-scattered.
    run = fsdp_two.runs["rank0"]
    assert run.peak_op == "aten::threshold_backward"
    root = 2 * fsdp.VOCAB * fsdp.WIDTH
    proj = 4 * fsdp.WIDTH * fsdp.WIDTH + fsdp.WIDTH
    assert roles(run) == {
        ("parameter", "fsdp_unsharded_parameter"): (BLOCK + root) * 4,
        ("gradient", "fsdp_unsharded_gradient"): (fsdp.VOCAB * fsdp.WIDTH + proj) * 4,
        ("other", "fsdp_all_gather_buffer"): BLOCK * 4,
        ("gradient", "fsdp_reduce_scatter_buffer"): BLOCK * 4,
    }
    assert BLOCK * 4 == 2_102_272


def test_ranks_alike_say_so_and_the_job_is_named(fsdp_two: memprof.Report) -> None:
    first, second = fsdp_two.runs.values()
    assert second.peak_bytes == first.peak_bytes and second.footprint_bytes == first.footprint_bytes
    assert second.notes[0] == "alike rank 0: the same peak, footprint, categories and entries at the peak"
    assert not any(note.startswith("alike") for note in first.notes)
    assert fsdp_two.environment["world_size"] == "2"
    assert fsdp_two.environment["backend"] == "fake (estimate)"
    assert fsdp_two.ranks is not None and [row.rank for row in fsdp_two.ranks.rows] == [0, 1]


def test_ranks_between_the_first_and_the_last_are_not_estimated_again_when_nothing_reads_the_rank() -> None:
    lines: list[str] = []
    report = memprof.estimate("memprof.examples.fsdp:step", device="cpu", world_size=4, status=lines.append)
    assert list(report.runs) == ["rank0", "rank1", "rank2", "rank3"]
    assert [run.rank for run in report.runs.values()] == [0, 1, 2, 3]
    assert lines[-1].startswith("2 rank(s) estimated in ")
    ranks = [line for line in lines if line.startswith("rank ")]
    assert ranks == ["rank 0 of 4 (1 of 4)", "rank 3 of 4 (2 of 4)"]
    first, second, third, last = report.runs.values()
    for middle in (second, third):
        assert middle.notes[0] == (
            "alike rank 0 (not estimated on its own): no code outside torch reads the rank, and ranks 0 "
            "and 3 are alike, so torch shards this rank as theirs"
        )
        assert middle.footprint_bytes == first.footprint_bytes and middle.at_peak == first.at_peak
    assert last.notes[0].startswith("alike rank 0: the same peak")


READS_ENV = """
import os
import torch
from torch import nn

def step(model, x):
    model(x).sum().backward()

def step_inputs():
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    return nn.Linear(64, 64), torch.randn(8 * (1 + rank % 2), 64)
"""


def test_code_that_reads_its_rank_is_estimated_on_every_rank(tmp_path: Path) -> None:
    (tmp_path / "reads.py").write_text(textwrap.dedent(READS_ENV))
    lines: list[str] = []
    target = f"{tmp_path / 'reads.py'}:step"
    report = memprof.estimate(target, device="cpu", world_size=4, status=lines.append)
    assert lines[-1].startswith("4 rank(s) estimated in ")
    inputs = [run.at_peak.by_category["input"] for run in report.runs.values() if run.at_peak]
    assert inputs == [8 * 64 * 4, 16 * 64 * 4, 8 * 64 * 4, 16 * 64 * 4]
    assert report.runs["rank0"].notes[0].startswith("the code reads its rank (at ")
    assert report.runs["rank0"].notes[0].endswith("reads.py:10): each rank estimated")
    assert report.runs["rank2"].notes[0].startswith("alike rank 0: the same peak")


def test_the_process_group_and_the_environment_are_put_back(fsdp_two: memprof.Report) -> None:
    assert not dist.is_initialized()
    assert "RANK" not in os.environ and "WORLD_SIZE" not in os.environ
    # A later estimate of another world size starts afresh: a quarter of the model per rank.
    report = memprof.estimate("memprof.examples.fsdp:step", device="cpu", world_size=4, ranks=[3])
    (run,) = report.runs.values()
    assert run.label == "rank3" and run.rank == 3
    assert shards(run) == PARAMETERS * 4 // 4


RANKED = """
import torch
import torch.distributed as dist
from torch import nn

def step(model, x):
    model(x).sum().backward()

def step_inputs():
    dist.init_process_group("nccl")  # the job's own backend: the fake group stands in for it
    rank = dist.get_rank()
    model = nn.Linear(256, 256)
    # The last rank holds a pipeline's extra stage; every rank trains on rank+1 rows of 1,024.
    if rank == dist.get_world_size() - 1:
        model = nn.Sequential(model, nn.Linear(256, 256))
    return model, torch.randn((rank + 1) * 1024, 256)
"""


def test_code_that_branches_on_the_rank_is_estimated_per_rank(tmp_path: Path) -> None:
    (tmp_path / "ranked.py").write_text(textwrap.dedent(RANKED))
    report = memprof.estimate(f"{tmp_path / 'ranked.py'}:step", device="cpu", world_size=3)
    inputs = [run.at_peak.by_category["input"] for run in report.runs.values() if run.at_peak]
    assert inputs == [(rank + 1) * 1024 * 256 * 4 for rank in range(3)]
    parameters = [run.at_peak.by_category["parameter"] for run in report.runs.values() if run.at_peak]
    layer = (256 * 256 + 256) * 4
    assert parameters == [layer, layer, 2 * layer]
    assert not any(note.startswith("alike") for run in report.runs.values() for note in run.notes)


def test_a_capacity_is_answered_for_the_neediest_rank(tmp_path: Path) -> None:
    (tmp_path / "ranked.py").write_text(textwrap.dedent(RANKED))
    report = memprof.estimate(f"{tmp_path / 'ranked.py'}:step", device="cpu", world_size=2, capacity="4MB")
    needs = {label: run.footprint_bytes for label, run in report.runs.items()}
    assert report.fits is not None and report.fits.run == "rank1" == max(needs, key=lambda k: needs[k] or 0)
    assert report.fits.needed_bytes == needs["rank1"]


def test_a_sweep_fits_a_value_only_when_every_rank_fits(tmp_path: Path) -> None:
    source = RANKED.replace("def step_inputs():", "def step_inputs(rows=1024):").replace(
        "(rank + 1) * 1024", "(rank + 1) * rows"
    )
    (tmp_path / "ranked.py").write_text(textwrap.dedent(source))
    report = memprof.estimate(
        f"{tmp_path / 'ranked.py'}:step", device="cpu", world_size=2, sweep=("rows", [256, 512])
    )
    assert list(report.runs) == ["rows=256", "rows=512"]
    for run in report.runs.values():
        assert run.rank == 1  # rank 1 holds twice rank 0's rows and a second layer
        assert run.notes[0].startswith("rank 1 of a 2-rank job, the neediest of the 2 rank(s) at rows=")


TWO_D = """
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(256, 1024)
        self.down = nn.Linear(1024, 256)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))

def step(model, optimizer, x):
    model(x).sum().backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

def step_inputs():
    dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (dist.get_world_size() // 2, 2), mesh_dim_names=("dp", "tp"))
    model = nn.Sequential(MLP(), MLP())
    for layer in model:
        parallelize_module(layer, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model, torch.optim.AdamW(model.parameters()), torch.randn(16, 256)
"""


def test_a_2d_job_fsdp_by_tensor_parallel_holds_a_quarter_of_each_weight_on_4_ranks(tmp_path: Path) -> None:
    (tmp_path / "two_d.py").write_text(textwrap.dedent(TWO_D))
    report = memprof.estimate(f"{tmp_path / 'two_d.py'}:step", device="cpu", world_size=4)
    # Per layer and rank: the weights split over tp (columns of up, rows of down) and dp; up's
    # bias split as its weight; down's bias replicated over tp, split over dp.
    per_layer = 1024 * 256 // 4 + 1024 // 4 + 256 * 1024 // 4 + 256 // 2
    assert per_layer == 131_456
    for run in report.runs.values():
        assert shards(run) == 2 * per_layer * 4
        assert run.at_peak is not None
        assert run.at_peak.by_category["optimizer_state"] == 2 * 2 * per_layer * 4 + 4 * 8


# ---- the command line ---------------------------------------------------------------------------


def test_cli_world_size_and_rank(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "r.json"
    done = runner.invoke(
        app,
        [
            "estimate",
            "memprof.examples.fsdp:step",
            "--world-size",
            "4",
            "--rank",
            "2",
            "--device",
            "cpu",
            "--json",
            str(out),
            "-q",
        ],
    )
    assert done.exit_code == 0, done.output
    report = json.loads(out.read_text())
    assert list(report["runs"]) == ["rank2"] and report["runs"]["rank2"]["rank"] == 2
    assert report["environment"]["world_size"] == "4"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rank", "1"], "--rank picks a rank of a distributed run"),
        (["--world-size", "2", "--rank", "2"], "rank 2 is not a rank of a 2-rank job; give ranks 0 to 1"),
        (["--world-size", "0"], "--world-size"),
    ],
)
def test_cli_bad_ranks_are_usage_errors(args: list[str], message: str) -> None:
    done = CliRunner().invoke(app, ["estimate", "memprof.examples.fsdp:step", "--device", "cpu", *args, "-q"])
    assert done.exit_code == 2, done.output
    assert message in done.output


def test_a_ddp_job_is_estimated_as_it_measures_rank_by_rank() -> None:
    # memprof.examples.ddp: rank r trains on (r + 1) * 256 rows; measured as a 2-rank gloo job
    # (tests/test_distributed.py), its peaks are 4,457,476 and 7,865,348 B, and each rank holds
    # DDP's gradient bucket (the parameters' 2,102,272 B) from its start.
    report = memprof.estimate("memprof.examples.ddp:step", device="cpu", world_size=2)
    params = 2_102_272
    for rank, peak in ((0, 4_457_476), (1, 7_865_348)):
        run = report.runs[f"rank{rank}"]
        inputs = (rank + 1) * 256 * 256 * 4 * 2
        assert run.peak_bytes == peak
        assert run.live_at_start_bytes == params + params + inputs
        assert run.footprint_bytes == run.live_at_start_bytes + peak
        assert roles(run) == {("other", "ddp_gradient_bucket"): params}
    assert not dist.is_initialized()


# ---- a measured FSDP2 job (slow tier: two gloo ranks, ~20 s) ------------------------------------


@pytest.mark.slow
def test_a_measured_fsdp2_job_holds_each_ranks_shard_as_the_estimate_says(tmp_path: Path) -> None:
    # Quick tier: test_each_rank_holds_its_shard_of_the_parameters_and_adamws_state (estimated).
    from test_distributed import launched

    done = launched(tmp_path, "memprof.examples.fsdp:step", "--device", "cpu", "--json", "m.json")
    assert done.returncode == 0, done.stderr
    measured = json.loads((tmp_path / "m.json").read_text())["runs"]
    estimated = memprof.estimate("memprof.examples.fsdp:step", device="cpu", world_size=2).runs
    for label in ("rank0", "rank1"):
        entries = measured[label]["at_peak"]["entries"]
        categories = measured[label]["at_peak"]["by_category"]
        own = [e for e in entries if e["category"] == "parameter" and not e.get("role")]
        measured_shards = sum(e["bytes"] for e in own)
        assert measured_shards == PARAMETERS * 4 // 2 == shards(estimated[label])
        at_peak = estimated[label].at_peak
        assert at_peak is not None
        assert categories["optimizer_state"] == 10_506_312 == at_peak.by_category["optimizer_state"]
        gathered = sum(e["bytes"] for e in entries if e.get("role") == "fsdp_unsharded_parameter")
        assert gathered == roles(estimated[label])["parameter", "fsdp_unsharded_parameter"]
        assert measured[label]["live_at_start_bytes"] == estimated[label].live_at_start_bytes


TENSOR_PARALLEL = """
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

def step(model, optimizer, x):
    model(x).sum().backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

def step_inputs():
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256))
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    return model, torch.optim.AdamW(model.parameters()), torch.randn(64, 256)
"""


@pytest.mark.slow
def test_a_measured_tensor_parallel_job_holds_each_ranks_half_as_the_estimate_says(tmp_path: Path) -> None:
    # Quick tier: test_a_2d_job_fsdp_by_tensor_parallel_holds_a_quarter_of_each_weight_on_4_ranks.
    from test_distributed import launched

    (tmp_path / "tp.py").write_text(textwrap.dedent(TENSOR_PARALLEL))
    done = launched(tmp_path, "tp.py:step", "--device", "cpu", "--json", "m.json")
    assert done.returncode == 0, done.stderr
    measured = json.loads((tmp_path / "m.json").read_text())["runs"]
    estimated = memprof.estimate(f"{tmp_path / 'tp.py'}:step", device="cpu", world_size=2).runs
    # Column-parallel up (half its rows and bias), row-parallel down (half its columns, its bias
    # replicated): 262,912 float32 parameters a rank.
    half = (1024 * 256 // 2 + 1024 // 2 + 256 * 1024 // 2 + 256) * 4
    assert half == 1_051_648
    for label in ("rank0", "rank1"):
        categories = measured[label]["at_peak"]["by_category"]
        assert categories["parameter"] == half == shards(estimated[label])
        assert categories["optimizer_state"] == 2 * half + 4 * 4
        run = estimated[label]
        assert run.at_peak is not None and run.at_peak.by_category["optimizer_state"] == 2 * half + 4 * 4
        assert measured[label]["live_at_start_bytes"] == run.live_at_start_bytes
        # Equal to a few bytes, but in some runs gloo still holds its copy of the all-reduced
        # output (64 x 256 floats) at the peak: gloo's own, which an NCCL job does not make.
        assert 0 <= measured[label]["peak_bytes"] - run.peak_bytes <= 64 * 256 * 4 + 64
