"""``memprof advise`` and ``memprof.advise``: each technique applied to the step's own objects and
estimated on fake tensors, checked against a real run of the same technique on the CPU (the
measured footprint, as ``memprof run`` measures it); the plan for a budget (it fits, a smaller
budget never gets a larger plan, ``--verify`` measures it); the exit codes; the report in
every format.

The quick tier uses a tiny MLP (``tests/advise_steps.py:tiny_step``); the built-in GPT, a
small conv net and a Hugging Face Llama are in the slow tier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import memprof
from memprof.frontends.cli import app
from memprof.sources.fake.techniques import applied, discover
from memprof.sources.targets.target import build_inputs, resolve

ROOT = Path(__file__).resolve().parent.parent
TINY = "tests/advise_steps.py:tiny_step"
CONV = "tests/advise_steps.py:conv_step"
GPT = "memprof.examples.gpt:train_step"
LLAMA = "tests/real_models/workloads.py:llama_step"

# What a real CPU run of the GPT step allocates that its fake run does not see (the same in
# every technique's run, and in the plain step's): 16 bytes.
UNSEEN_BYTES = 16


def measured(spec: str, keys: tuple[str, ...], params: dict[str, Any], batch_param: str | None = None) -> int:
    """The footprint of a real CPU run of ``spec`` with the techniques ``keys`` applied by the
    same code advise applies them with, measured by ``memprof.compare`` (memprof run's engine)."""
    target = resolve(spec)

    def make(given: dict[str, Any]) -> Any:
        return build_inputs(target, None, "cpu", given)

    found, _ = discover(make(params), batch_param, params.get(batch_param or ""), "cpu")
    chosen = tuple(next(t for t in found if t.key == key) for key in keys)
    made, step = applied(chosen, make, target.func)
    run = memprof.compare(memprof.Variant(target=step, inputs=made(params)), device="cpu", time_budget=0).base
    assert run.footprint_bytes is not None
    return run.footprint_bytes


def advise_cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["advise", *args, "--device", "cpu", "-q"], env={"COLUMNS": "200"})


# ---- quick: the tiny MLP ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    """Advice for the tiny step with a budget only checkpointing meets, verified; its JSON."""
    path = tmp_path_factory.mktemp("advise") / "advice.json"
    result = advise_cli(TINY, "--budget", "800KB", "--verify", "--json", str(path))
    assert result.exit_code == 0, result.output
    return result, json.loads(path.read_text())


def test_a_budget_only_checkpointing_meets_gets_it_and_its_real_run_measures_the_prediction(
    tiny: Any,
) -> None:
    result, data = tiny
    advice = data["advice"]
    base = advice["baseline"]
    rows = {t["key"]: t for t in advice["techniques"]}
    checkpoint = rows["checkpoint:Block"]
    assert base["footprint_bytes"] > 800 * 1024 >= checkpoint["footprint_bytes"]
    # Each figure against a real run of the same step with the same technique.
    assert base["footprint_bytes"] == measured(TINY, (), {})
    assert checkpoint["footprint_bytes"] == measured(TINY, ("checkpoint:Block",), {})
    assert checkpoint["saving_bytes"] == base["footprint_bytes"] - checkpoint["footprint_bytes"]
    # Backward recomputes each block's forward up to the last tensor it needs (non-reentrant
    # checkpointing stops early there): its widening Linear, 2 x 64 x 64 x 256 FLOPs (batch 64,
    # width 64, 4x wider inside), twice.
    assert checkpoint["extra_flops"] == 2 * (2 * 64 * 64 * 256)
    plan = advice["plan"]
    assert plan["keys"] == ["checkpoint:Block"] and plan["fits"] is True
    assert plan["footprint_bytes"] == checkpoint["footprint_bytes"] == plan["measured_footprint_bytes"]
    assert plan["budget_bytes"] == 800 * 1024
    assert (
        "to fit 800.0 KiB: checkpoint every Block (-54.1 KiB, +18% FLOPs): 767.1 KiB, estimated"
        in " ".join(result.output.split())
    )


def test_what_is_live_at_the_baselines_and_the_plans_peaks_keeps_its_source_lines(tiny: Any) -> None:
    # FLOPs are counted on the same fake run without hiding the user's lines from the tracker.
    _, data = tiny
    for label in ("baseline", "plan"):
        sources = [e.get("source", "") for e in data["runs"][label]["at_peak"]["entries"]]
        assert any(source.startswith("tests/advise_steps.py:") for source in sources), label


def test_what_does_not_apply_is_refused_with_the_reason(tiny: Any) -> None:
    _, data = tiny
    refused = {t["key"]: t["reason"] for t in data["advice"]["techniques"] if not t["applies"]}
    assert refused["optimizer"] == "no optimizer among the inputs factory's objects"
    assert refused["micro_batch"] == "name the inputs factory's batch parameter (--batch-param)"
    assert refused["channels_last"] == "no 2-D convolution among the modules"
    assert refused["no_grad"].startswith("the step fails with it: tiny_step raised RuntimeError")
    assert refused["sharding"] == "give the number of GPUs to shard over (--world-size)"
    assert refused["offload"].startswith("a CPU estimate: the optimizer state is in the CPU's memory already")


def test_nothing_fits_a_budget_below_every_combination_exit_1() -> None:
    result = advise_cli(TINY, "--budget", "100KB")
    assert result.exit_code == 1, result.output
    last = " ".join(result.output.splitlines()[-1].split())
    assert last == (
        "memprof advise: nothing here fits 100.0 KiB: the closest is checkpoint every Block "
        "(-54.1 KiB, +18% FLOPs): 767.1 KiB, 667.1 KiB over"
    )


def test_files_are_said_first_and_the_answer_is_last(tmp_path: Path) -> None:
    out = tmp_path / "advice.json"
    args = ["advise", TINY, "--device", "cpu", "--json", str(out)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert out.exists()
    lines = result.output.splitlines()
    wrote = next(i for i, line in enumerate(lines) if line.startswith("memprof: wrote "))
    assert wrote < len(lines) - 1 and "advice.json" in lines[wrote]
    assert not lines[-1].startswith("memprof: ")  # the answer, not a status line


def test_advice_stops_at_its_timeout_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(
        "import time\nimport torch\n\ndef step(x):\n    start = time.monotonic()\n"
        "    while time.monotonic() - start < 60:\n        pass\n    return x * 2\n\n"
        "def step_inputs():\n    return (torch.ones(4),)\n"
    )
    result = advise_cli(f"{tmp_path / 'slow.py'}:step", "--timeout", "1")
    assert result.exit_code == 3, result.output
    assert "slow.py:6" in result.output or "slow.py:7" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--budget", "1MB", "--gpu", "H100"), "give --budget, --capacity or --gpu, only one"),
        (("--verify",), "--verify measures the plan for a budget; give --budget, --capacity or --gpu"),
        (("--budget", "lots"), "--budget"),
        (("--batch-param", "seq"), "the inputs factory takes no parameter 'seq'"),
        (("--budget", "1MB", "--world-size", "2", "--verify"), "give --verify or --world-size, not both"),
    ],
)
def test_bad_input_is_exit_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    result = advise_cli(TINY, *args)
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1].startswith("memprof: error: ")
    assert message in result.output


def test_markdown_and_html_draw_a_bar_per_technique(tiny: Any, tmp_path: Path) -> None:
    from memprof.outputs import renderer
    from memprof.pipeline import report_from_dict

    report = report_from_dict(tiny[1])
    assert report.kind is memprof.ReportKind.ADVICE
    markdown = renderer("markdown")(report)
    saving = [line for line in markdown.splitlines() if line.startswith("| checkpoint every Block |")]
    assert saving and "█" * 20 in saving[0]  # the largest saving: the longest bar
    html = renderer("html")(report)
    assert 'id="advice-chart' in html or "advice-chart" in html
    assert "Plan for the budget" in html and "verified: measured footprint" in html


# ---- slow: the built-in GPT, a conv net, a Hugging Face Llama -----------------------------------


@pytest.fixture(scope="module")
def gpt_advice() -> Any:
    return memprof.advise(GPT, device="cpu", inputs_kwargs={"batch": 8}, batch_param="batch")


@pytest.mark.slow  # the quick tier checks the same on the tiny MLP
def test_each_technique_on_the_gpt_is_its_real_runs_footprint(gpt_advice: Any) -> None:
    rows = [t for t in gpt_advice.advice.techniques if t.applies]
    assert {t.key for t in rows} >= {
        "checkpoint:Block",
        "checkpoint:CausalSelfAttention",
        "checkpoint:MLP",
        "selective:Block",
        "autocast:bf16",
        "autocast:fp16",
        "optimizer:foreach=False",
        "optimizer:fused=True",
        "zero_grad:set_to_none",
        "micro_batch:2",
        "micro_batch:4",
    }
    for row in rows:
        real = measured(GPT, (row.key,), {"batch": 8}, "batch")
        assert real - row.footprint_bytes == UNSEEN_BYTES, row.key
    savings = [t.saving_bytes for t in rows]
    assert savings == sorted(savings, reverse=True)  # ranked by saving


@pytest.mark.slow
def test_the_gpt_plan_is_monotone_over_ten_budgets_and_verified_at_three(gpt_advice: Any) -> None:
    from memprof.library.advice import plans

    base = gpt_advice.advice.baseline.needed_bytes
    budgets = [int(base * f) for f in (1.0, 0.95, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.45, 0.3)]
    planned = plans(GPT, budgets, device="cpu", inputs_kwargs={"batch": 8}, batch_param="batch")
    needs = [plan.needed_bytes for plan in planned]
    assert needs == sorted(needs, reverse=True), needs
    for budget, plan in zip(budgets, planned, strict=True):
        assert plan.fits == (plan.needed_bytes <= budget)
    assert planned[0].keys == () and planned[1].fits and not planned[-1].fits
    for budget in (budgets[2], budgets[5], budgets[7]):
        plan = memprof.advise(
            GPT, device="cpu", inputs_kwargs={"batch": 8}, batch_param="batch", budget=budget, verify=True
        ).advice.plan
        assert plan is not None and plan.fits and plan.measured_footprint_bytes is not None
        assert plan.measured_footprint_bytes <= budget
        assert plan.measured_footprint_bytes == pytest.approx(plan.footprint_bytes, rel=0.01)


@pytest.mark.slow
def test_each_technique_on_a_conv_net_is_its_real_runs_footprint() -> None:
    report = memprof.advise(CONV, device="cpu", inputs_kwargs={"batch": 8}, batch_param="batch")
    rows = {t.key: t for t in report.advice.techniques if t.applies}
    assert {"checkpoint:ConvBlock", "channels_last", "micro_batch:2", "autocast:bf16"} <= set(rows)
    for key, row in rows.items():
        assert row.footprint_bytes == pytest.approx(
            measured(CONV, (key,), {"batch": 8}, "batch"), rel=0.01
        ), key


@pytest.mark.slow
def test_each_technique_on_a_hugging_face_llama_is_its_real_runs_footprint() -> None:
    pytest.importorskip("transformers")
    params = {"batch": 4, "seq": 64}
    report = memprof.advise(LLAMA, device="cpu", inputs_kwargs=params, batch_param="batch")
    rows = {t.key: t for t in report.advice.techniques if t.applies}
    assert {"checkpoint:hf", "checkpoint:LlamaDecoderLayer", "autocast:bf16", "micro_batch:2"} <= set(rows)
    assert rows["checkpoint:hf"].apply.startswith("model.gradient_checkpointing_enable(")
    for key, row in rows.items():
        assert row.footprint_bytes == pytest.approx(measured(LLAMA, (key,), params, "batch"), rel=0.01), key


@pytest.mark.slow
def test_fsdp2_over_two_gpus_is_what_memprof_estimate_world_size_says_of_the_same_sharded_step(
    gpt_advice: Any,
) -> None:
    """The sharding technique's figure is the sharded-job estimate's (rank 0 of a 2-rank job on
    torch's fake process group) of the GPT step sharded by the same code: AdamW's moments per
    rank are half the unsharded step's."""
    report = memprof.advise(GPT, device="cpu", world_size=2)
    row = next(t for t in report.advice.techniques if t.key == "fsdp:2")
    target = resolve(GPT)

    def sharded_inputs() -> Any:
        made = build_inputs(target, None, "cpu", {})
        found, _ = discover(made, None, None, "cpu", world_size=2)
        return next(t for t in found if t.key == "fsdp:2").transform(made).args

    job = memprof.estimate(GPT, device="cpu", inputs=sharded_inputs, world_size=2, ranks=[0])
    rank0 = job.runs["rank0"]
    assert row.footprint_bytes == rank0.footprint_bytes
    from memprof.examples.gpt import make_model

    # AdamW's two moments are sharded; its step counters (a 4-byte scalar per parameter) are not.
    steps = 4 * len(list(make_model().parameters()))
    whole = gpt_advice.runs["baseline"].at_peak.by_category["optimizer_state"]
    assert rank0.at_peak is not None
    assert rank0.at_peak.by_category["optimizer_state"] == (whole - steps) // 2 + steps
