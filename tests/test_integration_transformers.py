"""``memprof.integrations.transformers.MemprofCallback`` in a real ``transformers.Trainer``: a
tiny GPT-2 made from a config (random weights, nothing downloaded), trained on the CPU for a
few steps. The report's parameter and optimizer-state bytes are checked against the model's and
the optimizer's own tensors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install 'torch-memprof[hf]')"
)
pytest.importorskip("accelerate", reason="accelerate is not installed (pip install 'torch-memprof[hf]')")

from state_bytes import optimizer_state_bytes, parameter_bytes  # noqa: E402

from memprof.integrations.transformers import BudgetExceeded, MemprofCallback  # noqa: E402
from memprof.model import Report  # noqa: E402
from memprof.pipeline import load_report  # noqa: E402

STEP = 3


class Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Sixteen fixed sequences of 16 tokens, each its own label."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(index))
        return {"input_ids": ids, "labels": ids}


class OptimizerSteps(transformers.TrainerCallback):  # type: ignore[misc]
    """What the optimizer itself counts at each ``on_step_end``: global_step -> AdamW's step."""

    def __init__(self) -> None:
        self.seen: dict[int, float] = {}

    def on_step_end(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kwargs: Any) -> None:
        first = next(iter(optimizer.state.values()))
        self.seen[state.global_step] = float(first["step"])


def train(out: Path, callback: MemprofCallback, *extra: Any) -> transformers.Trainer:
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
    config.bos_token_id = config.eos_token_id = 0
    args = transformers.TrainingArguments(
        output_dir=str(out / "trainer"),
        max_steps=STEP + 1,
        per_device_train_batch_size=2,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    model = transformers.GPT2LMHeadModel(config)
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=Tokens(), callbacks=[callback, *extra]
    )
    trainer.train()
    return trainer


def test_the_third_optimizer_step_is_profiled_explained_and_logged(tmp_path: Path) -> None:
    witness = OptimizerSteps()
    callback = MemprofCallback(steps=[STEP], out=tmp_path / "reports", formats=("json", "html"))
    trainer = train(tmp_path, callback, witness)
    report = load_report(tmp_path / "reports" / f"step-{STEP}.json")
    assert (tmp_path / "reports" / f"step-{STEP}.html").read_text(encoding="utf-8").count("memprof-report")
    written = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert written == [f"step-{STEP}.html", f"step-{STEP}.json"]
    assert list(callback.reports) == [STEP] and isinstance(callback.reports[STEP], Report)
    run = report.runs[f"step-{STEP}"]
    assert report.target == f"transformers.Trainer step {STEP} (GPT2LMHeadModel)"
    # Step N ends at on_step_end with global_step == N: the optimizer has stepped N times.
    assert witness.seen[STEP] == float(STEP)
    assert {op.name: op.calls for op in run.op_stats if op.name.startswith("Optimizer.step#")} == {
        "Optimizer.step#AdamW.step": 1
    }
    assert run.at_peak is not None
    params = parameter_bytes(trainer.model)
    state = optimizer_state_bytes(trainer.optimizer)
    assert run.at_peak.by_category["parameter"] == params
    assert run.at_peak.by_category["optimizer_state"] == state
    assert state == 2 * params + 4 * len(trainer.optimizer.state)  # AdamW: two moments and a step each
    logged = [entry for entry in trainer.state.log_history if "memprof/peak_bytes" in entry]
    assert logged == [
        {"memprof/peak_bytes": run.peak_bytes, "memprof/footprint_bytes": run.footprint_bytes, "step": STEP}
    ]


def test_a_step_over_the_budget_stops_training_after_its_report(tmp_path: Path) -> None:
    callback = MemprofCallback(steps=[2], out=tmp_path / "reports", budget="1KB")
    with pytest.raises(BudgetExceeded) as raised:
        train(tmp_path, callback)
    error = raised.value
    written = tmp_path / "reports" / "step-2.json"
    peak = load_report(written).base.peak_bytes
    assert (error.step, error.peak_bytes, error.budget_bytes) == (2, peak, 1024)
    assert error.exit_code == 1
    assert str(error).startswith("memprof: transformers.Trainer step 2 peaked at ")
    assert str(error).endswith(
        f" ({peak:,} B above the step's start), over the budget of 1.0 KiB (1,024 B); report: {written}"
    )
