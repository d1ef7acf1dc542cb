"""memprof for Hugging Face ``transformers.Trainer``: profile chosen training steps.

>>> from memprof.integrations.transformers import MemprofCallback
>>> callback = MemprofCallback(steps=[3], out="memprof", formats=("json", "html"))
>>> trainer = Trainer(model, args, train_dataset=data, callbacks=[callback])  # doctest: +SKIP
>>> trainer.train()  # doctest: +SKIP

Step ``N`` is the Trainer's ``N``-th optimizer step: it starts at ``on_step_begin`` (when
``state.global_step == N - 1``) and ends at ``on_step_end`` (``state.global_step == N``): the
forward and backward of every micro-batch of gradient accumulation, gradient clipping, the
optimizer step, the scheduler step and ``zero_grad``, as the Trainer runs them. Needs
``transformers`` (``pip install 'torch-memprof[hf]'``), imported with this module.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from memprof.integrations.steps import FOOTPRINT_KEY, PEAK_KEY, BudgetExceeded, ProfiledSteps, loop_roots

__all__ = ["FOOTPRINT_KEY", "PEAK_KEY", "BudgetExceeded", "MemprofCallback"]

_DISPATCH = "trainer_callback.py"  # transformers' module that calls the callbacks' hooks


class MemprofCallback(ProfiledSteps, TrainerCallback):  # type: ignore[misc]
    """A ``TrainerCallback`` that profiles the chosen optimizer steps (``steps``, counted from
    1, as ``state.global_step`` counts them once the step is done) and writes one explained
    report per step: ``out/step-3.json`` (``formats``: any of "json", "html", "markdown").

    Each profiled step's peak (above the step's start) and footprint (everything live at the
    peak: parameters, gradients, optimizer state, activations) are added to the Trainer's
    ``state.log_history`` as ``memprof/peak_bytes`` and ``memprof/footprint_bytes``.
    ``budget`` (bytes, or a size like "2GB"): a step that peaks above it stops training with
    :class:`BudgetExceeded`, after its report is written. ``explain=False`` keeps the numbers
    and leaves out what is live at the peak. ``device``: whose allocator is measured (default:
    the model's device). ``reports`` maps each profiled step to its :class:`memprof.Report`.
    """

    framework = "transformers.Trainer"

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.profiler.abort()

    def on_step_begin(
        self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None, **kwargs: Any
    ) -> None:
        # The Trainer's loop: the step's batch, the last step's loss, the Trainer itself.
        roots = {**loop_roots(_DISPATCH), "model": model, "optimizer": optimizer}
        self.profiler.begin(state.global_step + 1, roots, model)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = state.global_step
        report = self.profiler.end(step)
        if report is None:
            return
        state.log_history.append({**self.profiler.log_values(report), "step": step})
        self.profiler.check_budget(step, report)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.profiler.finish()
