"""memprof for Lightning: profile chosen training steps of a ``lightning.Trainer``.

>>> from memprof.integrations.lightning import MemprofCallback
>>> trainer = lightning.Trainer(max_steps=5, callbacks=[MemprofCallback(steps=[2])])  # doctest: +SKIP
>>> trainer.fit(module, loader)  # doctest: +SKIP

Step ``N`` is the ``N``-th optimizer step: it starts at ``on_train_batch_start`` (when
``trainer.global_step == N - 1``) and ends at the ``on_train_batch_end`` after its optimizer
step (``trainer.global_step == N``): ``training_step``, backward, ``zero_grad`` and the
optimizer step of every batch it accumulates. The callback subclasses the ``Callback`` of
``lightning`` (``pip install 'torch-memprof[lightning]'``) or, where only it is installed, of
``pytorch_lightning``, imported with this module.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from memprof.integrations.steps import FOOTPRINT_KEY, PEAK_KEY, BudgetExceeded, ProfiledSteps, loop_roots


def _callback_class() -> type:
    """``lightning.pytorch.Callback``, else ``pytorch_lightning.Callback``."""
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return importlib.import_module(name).Callback  # type: ignore[no-any-return]
        except ModuleNotFoundError as error:
            if error.name is None or name.split(".")[0] != error.name.split(".")[0]:
                raise  # the package is there, and fails to import something of its own
    raise ModuleNotFoundError(
        "memprof.integrations.lightning needs lightning (pip install 'torch-memprof[lightning]') "
        "or pytorch_lightning",
        name="lightning",
    )


Callback: Any = _callback_class()

__all__ = ["FOOTPRINT_KEY", "PEAK_KEY", "BudgetExceeded", "MemprofCallback"]

_DISPATCH = os.path.join("trainer", "call.py")  # Lightning's module that calls the hooks


class MemprofCallback(ProfiledSteps, Callback):  # type: ignore[misc]
    """A Lightning ``Callback`` that profiles the chosen optimizer steps (``steps``, counted
    from 1, as ``trainer.global_step`` counts them once the step is done) and writes one
    explained report per step: ``out/step-2.json`` (``formats``: any of "json", "html",
    "markdown").

    Each profiled step's peak (above the step's start) and footprint are logged with
    ``LightningModule.log`` as ``memprof/peak_bytes`` and ``memprof/footprint_bytes`` (to the
    Trainer's loggers and ``trainer.callback_metrics``). ``budget`` (bytes, or a size like
    "2GB"): a step that peaks above it stops training with :class:`BudgetExceeded`, after its
    report is written. ``explain=False`` keeps the numbers and leaves out what is live at the
    peak. ``device``: whose allocator is measured (default: the module's device). ``reports``
    maps each profiled step to its :class:`memprof.Report`.
    """

    framework = "lightning.Trainer"

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.profiler.abort()

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        # The loop that runs the batch (it holds the trainer), then what the step works on.
        roots = {
            **loop_roots(_DISPATCH),
            "model": pl_module,
            "optimizers": list(trainer.optimizers),
            "batch": batch,
        }
        self.profiler.begin(trainer.global_step + 1, roots, pl_module)

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        step = trainer.global_step
        report = self.profiler.end(step)
        if report is None:
            return
        for key, value in self.profiler.log_values(report).items():
            # Logged as floats (Lightning's metrics are); the report holds the exact bytes.
            pl_module.log(key, float(value), on_step=True, on_epoch=False)
        self.profiler.check_budget(step, report)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.profiler.abort()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.profiler.finish()
