"""``memprof.integrations.lightning.MemprofCallback`` in a real ``lightning.Trainer``: a tiny
module trained on the CPU for a few steps, with gradient accumulation. The report's parameter
and optimizer-state bytes are checked against the module's and the optimizer's own tensors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

lightning = pytest.importorskip(
    "lightning", reason="lightning is not installed (pip install 'torch-memprof[lightning]')"
)

from memprof.integrations.lightning import BudgetExceeded, MemprofCallback  # noqa: E402
from memprof.pipeline import load_report  # noqa: E402

STEP = 2
ACCUMULATE = 2  # batches per optimizer step


class Regression(lightning.LightningModule):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        self.optimizer_steps: dict[int, float] = {}  # global_step -> AdamW's own step count

    def training_step(self, batch: Any, index: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-3)

    def on_train_batch_end(self, outputs: Any, batch: Any, index: int) -> None:
        state = self.trainer.optimizers[0].state
        if state:
            self.optimizer_steps[self.trainer.global_step] = float(next(iter(state.values()))["step"])


def fit(callback: MemprofCallback) -> tuple[Any, Regression]:
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 32, generator=generator), torch.randn(32, 1))
    module = Regression()
    trainer = lightning.Trainer(
        max_steps=STEP + 1,
        accelerator="cpu",
        accumulate_grad_batches=ACCUMULATE,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback],
    )
    trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=4))
    return trainer, module


def test_the_second_optimizer_step_is_profiled_with_its_batches_and_logged(tmp_path: Path) -> None:
    callback = MemprofCallback(steps=[STEP], out=tmp_path, formats=("json", "markdown"))
    trainer, module = fit(callback)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"step-{STEP}.json", f"step-{STEP}.md"]
    report = load_report(tmp_path / f"step-{STEP}.json")
    run = report.runs[f"step-{STEP}"]
    assert report.target == f"lightning.Trainer step {STEP} (Regression)"
    # Step N ends with global_step == N, after the optimizer's N-th step, and spans its batches.
    assert module.optimizer_steps[STEP] == float(STEP)
    ops = {op.name: op.calls for op in run.op_stats}
    assert ops["Optimizer.step#AdamW.step"] == 1
    assert ops["aten::mse_loss"] == ACCUMULATE
    parameters = list(module.parameters())
    parameter_bytes = sum(p.numel() * p.element_size() for p in parameters)
    optimizer = trainer.optimizers[0]
    state_bytes = sum(
        value.untyped_storage().nbytes()
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    )
    assert state_bytes == 2 * parameter_bytes + 4 * len(parameters)  # AdamW: two moments and a step each
    assert run.at_peak is not None
    assert run.at_peak.by_category["parameter"] == parameter_bytes
    assert run.at_peak.by_category["optimizer_state"] == state_bytes
    logged = trainer.callback_metrics
    assert logged["memprof/peak_bytes"].item() == pytest.approx(run.peak_bytes, rel=1e-6)
    assert logged["memprof/footprint_bytes"].item() == pytest.approx(run.footprint_bytes, rel=1e-6)


def test_a_step_over_the_budget_stops_training_and_steps_never_reached_are_named(tmp_path: Path) -> None:
    over = r"^memprof: lightning\.Trainer step 1 peaked at .* over the budget"
    with pytest.raises(BudgetExceeded, match=over):
        fit(MemprofCallback(steps=[1], out=tmp_path, budget=16))
    assert (tmp_path / "step-1.json").is_file()
    never = r"^memprof: step\(s\) 9 were not profiled: training ended after step 3 "
    with pytest.warns(UserWarning, match=never):
        fit(MemprofCallback(steps=[STEP, 9], out=tmp_path / "later"))
    assert (tmp_path / "later" / f"step-{STEP}.json").is_file()
