"""``memprof advise``'s optimizer state on the CPU (torchao's ``CPUOffloadOptimizer``, applied
by memprof to the step's own optimizer): a CUDA estimate counts only the device's memory, so
the state moved to the host leaves the device's figures, exactly the state's analytic size
(AdamW: two moments and a step counter per moved parameter, each rounded to the caching
allocator's 512-byte blocks); the host's share is said apart. A CPU estimate refuses it (the
state is in the CPU's memory already), and ``--verify`` cannot measure a CUDA plan on a machine
without a GPU: one line, exit 2.

The quick tier uses a one-block GPT; the built-in GPT's plans over ten budgets and a Hugging
Face Llama are in the slow tier."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

import memprof
from memprof.examples.gpt import train_step, train_step_inputs
from memprof.frontends.cli import app
from memprof.sources.fake.offload import offloaded
from memprof.sources.fake.techniques import _rebuild, applied, discover
from memprof.sources.targets.target import Inputs, build_inputs, resolve

GPT = "memprof.examples.gpt:train_step"
LLAMA = "tests/real_models/workloads.py:llama_step"
SMALL = {"n_layer": 1, "batch": 2}
MIB4 = 1024 * 1024 * 4  # a 1024 x 1024 float32 tensor

MINIMAL_SIZE = 4096  # torchao's minimal_size: smaller parameters keep their optimizer on the GPU


def block(nbytes: int) -> int:
    """CUDA's caching allocator rounds every request up to a multiple of 512 bytes."""
    return -(-nbytes // 512) * 512


def adamw_state(params: list[torch.Tensor]) -> tuple[int, int]:
    """(device bytes, host bytes) of AdamW's state of the parameters moved to the host: two fp32
    moments each and a 4-byte step counter; on the device rounded to blocks."""
    moved = [p for p in params if p.requires_grad and p.numel() >= MINIMAL_SIZE]
    device = sum(2 * block(4 * p.numel()) + block(4) for p in moved)
    host = sum(2 * 4 * p.numel() + 4 for p in moved)
    return device, host


def estimated(
    spec: str, params: dict[str, Any], keys: tuple[str, ...] = (), batch_param: str | None = None
) -> Any:
    """A CUDA estimate of ``spec`` with the techniques ``keys`` applied, in order, by the code
    advise applies them with."""
    target = resolve(spec)
    batch = params.get(batch_param or "")

    def inputs() -> Any:
        found, _ = discover(build_inputs(target, None, "cpu", params), batch_param, batch, "cuda")
        chosen = tuple(next(t for t in found if t.key == key) for key in keys)
        made, _ = applied(chosen, lambda given: build_inputs(target, None, "cpu", given), target.func)
        return made(params).args

    return memprof.estimate(spec, device="cuda", inputs=inputs).runs["estimate"]


# ---- quick: the engine, a one-block GPT ----------------------------------------------------------


HOST_STEP = """import torch

def step(x):
    h = x * 2        # 4 MiB on the device
    kept = h.cpu()   # a copy on the host
    del h
    return kept * 3  # computed on the host

def step_inputs():
    return (torch.ones(1024, 1024),)
"""


def test_a_cuda_estimate_counts_what_the_step_copies_to_the_host_on_the_host(tmp_path: Path) -> None:
    (tmp_path / "host_step.py").write_text(HOST_STEP)
    spec = f"{tmp_path / 'host_step.py'}:step"
    cuda = memprof.estimate(spec, device="cuda").runs["estimate"]
    assert cuda.footprint_bytes == 2 * MIB4  # the input and h; not the copy nor its product
    assert cuda.estimate.host_peak_bytes == 2 * MIB4
    cpu = memprof.estimate(spec, device="cpu").runs["estimate"]
    assert cpu.footprint_bytes == 3 * MIB4  # on the CPU the copy is the tensor itself
    assert cpu.estimate.host_peak_bytes is None


def test_the_state_moved_to_the_host_leaves_the_cuda_estimate_exactly() -> None:
    base, moved = estimated(GPT, SMALL), estimated(GPT, SMALL, ("offload",))
    model = train_step_inputs(**SMALL)[0]
    device, host = adamw_state(list(model.parameters()))
    assert base.footprint_bytes - moved.footprint_bytes == device
    state = [run.at_peak.by_category["optimizer_state"] for run in (base, moved)]
    assert state[0] - state[1] == device
    # The host holds a copy of each moved parameter, its gradient and the state (the fused CPU
    # AdamW torchao steps with makes nothing more); the plain step puts nothing there.
    big = sum(4 * p.numel() for p in model.parameters() if p.numel() >= MINIMAL_SIZE)
    assert moved.estimate.host_peak_bytes == 2 * big + host
    assert base.estimate.host_peak_bytes is None
    assert any("the host held up to" in note for note in moved.notes)


def test_with_gradient_accumulation_the_gradients_stay_and_the_state_still_leaves() -> None:
    """A later micro-step keeps the previous one's gradients (accumulation's zero_grad does
    nothing): offloading after it keeps that, and moves the same state."""
    params = {**SMALL, "batch": 4}
    alone = estimated(GPT, params, ("micro_batch:2",), "batch")
    both = estimated(GPT, params, ("micro_batch:2", "offload"), "batch")
    model = train_step_inputs(**params)[0]
    device, _ = adamw_state(list(model.parameters()))
    assert alone.footprint_bytes - both.footprint_bytes == device
    grads = sum(block(4 * p.numel()) for p in model.parameters())
    assert alone.at_peak.by_category["gradient"] == both.at_peak.by_category["gradient"] == grads


@pytest.mark.parametrize(
    ("device", "make", "stepped", "reason"),
    [
        ("cpu", "gpt", False, "a CPU estimate: the optimizer state is in the CPU's memory already"),
        ("cuda", "no optimizer", False, "no optimizer among the inputs factory's objects"),
        ("cuda", "gpt", True, "the optimizer already holds state; it cannot be rebuilt as new"),
        ("cuda", "small", False, "no parameter has 4,096 elements or more (smaller ones stay on the GPU)"),
    ],
)
def test_where_it_does_not_apply_it_is_refused_with_the_reason(
    device: str, make: str, stepped: bool, reason: str
) -> None:
    model = torch.nn.Linear(8, 8) if make == "small" else train_step_inputs(**SMALL)[0]
    objects: tuple[Any, ...] = (model,)
    if make != "no optimizer":
        objects += (torch.optim.AdamW(model.parameters()),)
    found, refused = discover(Inputs(args=objects), None, None, device, stepped)
    assert "offload" not in {t.key for t in found}
    assert next(r for r in refused if r.key == "offload").reason.startswith(reason)


def test_the_cuda_advice_ranks_it_with_the_line_that_applies_it() -> None:
    report = memprof.advise(GPT, device="cuda", inputs_kwargs=SMALL)
    row = next(t for t in report.advice.techniques if t.key == "offload")
    assert row.applies and row.saving_bytes > 0 and row.extra_flops == 0
    assert row.apply == (
        "CPUOffloadOptimizer(model.parameters(), torch.optim.AdamW, ...) "
        "(from torchao.optim import CPUOffloadOptimizer)"
    )
    assert row.cost.endswith("on the host at most)")


def test_the_offloaded_optimizer_steps_as_the_users_own() -> None:
    """On real CPU tensors: SGD with momentum gives the same parameters to the bit; AdamW (fused
    on the host, as torchao makes it) the same after a step within two float32 ulps."""
    for make, exact in (
        (lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9), True),
        (lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=False), False),
    ):
        model, _, x, y = train_step_inputs(**SMALL)
        twin = copy.deepcopy(model)
        plain, moved = make(model.parameters()), offloaded(make(twin.parameters()), _rebuild)
        for _ in range(3 if exact else 1):
            train_step(model, plain, x, y)
            train_step(twin, moved, x, y)
        for a, b in zip(model.parameters(), twin.parameters(), strict=True):
            assert torch.equal(a, b) if exact else torch.allclose(a, b, rtol=2.4e-7, atol=1e-8)
    with pytest.raises(ValueError, match="set_to_none=True"):
        moved.zero_grad(set_to_none=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has a GPU: --verify measures there")
def test_verify_says_in_one_line_that_a_cuda_plan_cannot_be_measured_here_exit_2() -> None:
    args = ["advise", GPT, "--device", "cuda", "--budget", "40MB", "--verify", "--set", "n_layer=1"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        "memprof: error: --verify measures the plan on this machine, which has no CUDA device: advise "
        "with --device cpu to compare like with like"
    ]


# ---- slow: the built-in GPT's plans, a Hugging Face Llama ---------------------------------------


@pytest.mark.slow  # the quick tier checks the saving on a one-block GPT
def test_the_gpt_cuda_plans_are_monotone_over_ten_budgets_and_offloading_takes_part() -> None:
    from memprof.library.advice import plans

    base = memprof.advise(GPT, device="cuda").advice.baseline.needed_bytes
    budgets = [int(base * f) for f in (1.0, 0.95, 0.9, 0.8, 0.7, 0.65, 0.6, 0.5, 0.4, 0.3)]
    planned = plans(GPT, budgets, device="cuda")
    needs = [plan.needed_bytes for plan in planned]
    assert needs == sorted(needs, reverse=True), needs
    for budget, plan in zip(budgets, planned, strict=True):
        assert plan.fits == (plan.needed_bytes <= budget)
    assert any("offload" in plan.keys for plan in planned), [plan.keys for plan in planned]


@pytest.mark.slow  # the quick tier checks the same on a one-block GPT
def test_on_a_hugging_face_llama_the_saving_is_adamws_state() -> None:
    pytest.importorskip("transformers")
    params = {"batch": 2, "seq": 32}
    base, moved = estimated(LLAMA, params), estimated(LLAMA, params, ("offload",))
    from tests.real_models.workloads import llama_model

    device, _ = adamw_state(list(llama_model().parameters()))
    assert base.footprint_bytes - moved.footprint_bytes == device
