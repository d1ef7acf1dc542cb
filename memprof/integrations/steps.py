"""What the training callbacks share: which steps to profile, one profiled block per step
(:class:`memprof.sources.block.Block`), the report files, the numbers for the framework's logs,
and the budget. No framework is imported here.

A step is numbered as the frameworks number their optimizer steps: step ``N`` is the ``N``-th
optimizer step of the run (1-based), from the hook that starts it (``global_step == N - 1``) to
the hook after its optimizer step (``global_step == N``), every micro-batch of gradient
accumulation included.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof.analysis.gate import parse_budget
from memprof.core.errors import GateFailed, UsageError, param
from memprof.core.units import format_bytes
from memprof.library.blocks import block_report, check_formats, write_report

if TYPE_CHECKING:
    from memprof.model.report import Report
    from memprof.sources.block import Block

SUFFIXES = {"json": ".json", "html": ".html", "markdown": ".md"}

PEAK_KEY = "memprof/peak_bytes"
"""The key of a profiled step's peak (above the step's start) in the framework's logs."""
FOOTPRINT_KEY = "memprof/footprint_bytes"
"""The key of a profiled step's footprint (everything live at its peak) in the logs."""


class BudgetExceeded(GateFailed):
    """A profiled training step peaked above the callback's budget: raised from the hook that
    ends the step, after its report was written. ``step``, ``peak_bytes``, ``budget_bytes`` and
    ``report`` say which and by how much."""

    shown = False

    def __init__(
        self, message: str, *, step: int, peak_bytes: int, budget_bytes: int, report: Report
    ) -> None:
        super().__init__(message)
        self.step = step
        self.peak_bytes = peak_bytes
        self.budget_bytes = budget_bytes
        self.report = report


def check_steps(steps: object) -> tuple[int, ...]:
    """``steps`` as sorted distinct step numbers (1 or more); a one-line error otherwise."""
    chosen = (steps,) if isinstance(steps, int) else steps
    if not isinstance(chosen, Iterable) or isinstance(chosen, str | bytes):
        raise UsageError(
            f"{param('steps')} must list optimizer steps (1 or more), e.g. {param('steps', [3])}"
        )
    numbers = list(chosen)
    bad = [s for s in numbers if isinstance(s, bool) or not isinstance(s, int) or s < 1]
    if bad or not numbers:
        what = f"{bad[0]!r} is not a step number" if bad else "lists no step"
        raise UsageError(
            f"{param('steps')} {what}: steps are counted from 1 (the first optimizer step), e.g. "
            f"{param('steps', [3])}"
        )
    return tuple(sorted(set(numbers)))


def budget_bytes(budget: object) -> int | None:
    """``budget`` in bytes: a number of bytes, or a size written as ``memprof run --budget``
    takes one (``"2GB"``); None for no budget."""
    if budget is None:
        return None
    if isinstance(budget, str) and "=" not in budget:
        budget = parse_budget(budget).default
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise UsageError(f"{param('budget')} must be a size like '2GB' or a number of bytes, got {budget!r}")
    return budget


class StepProfiler:
    """Profiles the chosen steps of a training run for a framework's callback: the callback
    calls :meth:`begin` from the hook before a step and :meth:`end` from the hook after it
    (both with the step's number), :meth:`abort` when training stops, :meth:`finish` at the
    end. ``reports`` holds each profiled step's report."""

    def __init__(
        self,
        *,
        framework: str,
        steps: object,
        out: str | Any,
        explain: bool,
        budget: object,
        formats: object,
        device: str | None,
        verbose: bool,
    ) -> None:
        self.framework = framework
        self.steps = check_steps(steps)
        self.formats = check_formats(formats)
        self.budget = budget_bytes(budget)
        self.out = report_folder(
            out, [f"step-{step}{SUFFIXES[fmt]}" for step in self.steps for fmt in self.formats]
        )
        self.explain = explain
        # Checked now, as memprof.track checks it, not at the first profiled step.
        self.device = None if device is None else _resolved(device)
        self.verbose = verbose
        self.reports: dict[int, Report] = {}
        self.files: dict[int, list[Path]] = {}
        self._block: Block | None = None
        self._step = 0
        self._model_name = ""
        self._last_step = 0

    @property
    def profiling(self) -> int | None:
        """The step being profiled now, if any."""
        return self._step if self._block is not None else None

    def begin(self, step: int, roots: Mapping[str, Any], model: Any) -> None:
        """Step ``step`` starts (again, for each micro-batch of gradient accumulation): it is
        profiled when chosen, with ``roots`` (the model, the optimizers, the batch)."""
        from memprof.sources.block import Block
        from memprof.sources.options import RunOptions

        self._last_step = max(self._last_step, step - 1)
        if self._block is not None:
            if self._step == step:
                return
            self.abort()  # a step that never ended: training left it by an exception
        if step not in self.steps or step in self.reports:
            return
        device = self.device if self.device is not None else model_device(model)
        options = RunOptions(device=device, explain=self.explain, verbose=self.verbose)
        block = Block(options, label=f"step-{step}", roots=roots)
        block.start()
        self._block, self._step = block, step
        self._model_name = type(model).__name__

    def end(self, step: int) -> Report | None:
        """The hook after an optimizer step, ``step`` being its number: the report of the step
        when it was profiled (written to the files), else None."""
        self._last_step = max(self._last_step, step)
        block = self._block
        if block is None or step != self._step:
            return None
        self._block = None
        recording = block.stop()
        report = block_report(
            f"{self.framework} step {step} ({self._model_name})", recording, block.options.device
        )
        self.reports[step] = report
        self.out.mkdir(parents=True, exist_ok=True)
        paths = {fmt: self.out / f"step-{step}{SUFFIXES[fmt]}" for fmt in self.formats}
        self.files[step] = write_report(report, paths)
        return report

    def log_values(self, report: Report) -> dict[str, int]:
        """What a profiled step adds to the framework's logs."""
        run = report.base
        values = {PEAK_KEY: run.peak_bytes}
        if run.footprint_bytes is not None:
            values[FOOTPRINT_KEY] = run.footprint_bytes
        return values

    def check_budget(self, step: int, report: Report) -> None:
        """Raise :class:`BudgetExceeded` when the step peaked above the budget (its peak above
        the step's start, as ``memprof run --budget`` checks a run)."""
        run = report.base
        if self.budget is None or run.peak_bytes <= self.budget:
            return
        written = self.files.get(step)
        where = f"; report: {written[0]}" if written else ""
        raise BudgetExceeded(
            f"memprof: {self.framework} step {step} peaked at {format_bytes(run.peak_bytes)} "
            f"({run.peak_bytes:,} B above the step's start), over the budget of "
            f"{format_bytes(self.budget)} ({self.budget:,} B){where}",
            step=step,
            peak_bytes=run.peak_bytes,
            budget_bytes=self.budget,
            report=report,
        )

    def abort(self) -> None:
        """Stop profiling a step that will not end (training stopped inside it)."""
        block, self._block = self._block, None
        if block is not None:
            block.abort()

    def finish(self) -> None:
        """Training ended: stop what is still running; warn about chosen steps never reached."""
        self.abort()
        missed = [step for step in self.steps if step not in self.reports]
        if missed:
            listed = ", ".join(map(str, missed))
            warnings.warn(
                f"memprof: step(s) {listed} were not profiled: training ended after step "
                f"{self._last_step} (steps count optimizer steps from 1)",
                stacklevel=2,
            )


def _resolved(device: str) -> str:
    from memprof.sources.live.run import resolve_device

    if not isinstance(device, str):
        raise UsageError(f"{param('device')} must be a device name (auto, cpu, cuda, cuda:N), got {device!r}")
    return resolve_device(device)


def report_folder(out: Any, names: Iterable[str]) -> Path:
    """The folder ``out`` the reports ``names`` go to, checked when the callback is made (as
    :func:`memprof.track` checks its files): a file there, a folder that cannot be written or
    made (read-only, a file in its path), or a report name that cannot be written is a one-line
    :class:`UsageError`, not an ``OSError`` at the first profiled step."""
    import errno

    from memprof.core.errors import path_error
    from memprof.core.writing import absolute, check_output_paths

    if not isinstance(out, str | os.PathLike):
        raise UsageError(f"{param('out')} must be a folder's path, got {out!r}")
    folder = absolute(out)
    try:
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"{param('out')} {str(out)!r} is a file; give a folder for the reports")
        existing = next(p for p in (folder, *folder.parents) if p.exists())
    except OSError as error:
        raise UsageError(f"{param('out')}: {path_error(error, 'folder').message}") from None
    if not existing.is_dir():
        raise UsageError(
            f"{param('out')} {str(out)!r}: {str(existing)!r} is a file, so the folder cannot be made there"
        )
    if not _can_write(existing):
        what = (
            "is not writable" if existing == folder else f"cannot be made: {str(existing)!r} is not writable"
        )
        raise UsageError(
            f"{param('out')} {str(out)!r} {what} ({os.strerror(errno.EACCES)}); give a folder you can write"
        )
    if existing == folder:
        check_output_paths((param("out"), folder / name) for name in names)
    return folder


def _can_write(folder: Path) -> bool:
    """Whether a file can be made in ``folder``: tried (and removed), since permission bits do
    not tell (root, a read-only mount, access control lists)."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".memprof-probe-"):
            return True
    except OSError:
        return False


class ProfiledSteps:
    """The options every training callback takes, and its reports; mixed into each framework's
    callback class (before the framework's base class).

    ``steps``: the optimizer steps to profile, counted from 1 (default: step 2, the first
    that runs as every later one does: step 1 also makes the optimizer's state). ``out``: the
    folder of the reports (made when first written). ``formats``: any of "json", "html",
    "markdown". ``budget``: a size (``"2GB"``) or bytes. ``explain``, ``device`` (default:
    where the model's parameters are) and ``verbose`` as for :func:`memprof.track`."""

    framework = ""
    """The framework's name, as reports and messages give it."""

    def __init__(
        self,
        steps: Any = (2,),
        out: Any = "memprof",
        explain: bool = True,
        budget: int | str | None = None,
        formats: Any = ("json",),
        device: str | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__()
        self.profiler = StepProfiler(
            framework=self.framework,
            steps=steps,
            out=out,
            explain=explain,
            budget=budget,
            formats=formats,
            device=device,
            verbose=verbose,
        )

    @property
    def reports(self) -> dict[int, Report]:
        """Each profiled step's report, by step number."""
        return self.profiler.reports

    def stop(self) -> None:
        """Stop profiling a step that training left by an exception (the framework calls no
        hook after it): the profiler and the op tracker are off again at once."""
        self.profiler.abort()


def loop_roots(dispatch: str) -> dict[str, Any]:
    """The locals of the training loop that called the hook (the batch, the loss of the last
    step, the trainer): the first frame up the stack outside memprof and outside the
    framework's ``dispatch`` file (the module that calls the callbacks' hooks)."""
    import memprof.library.api
    from memprof.library.blocks import caller_roots

    package = os.path.dirname(os.path.dirname(os.path.abspath(memprof.library.api.__file__))) + os.sep
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(package) and not filename.endswith(dispatch):
            return caller_roots(frame)
        frame = frame.f_back  # type: ignore[assignment]
    return {}


def model_device(model: Any) -> str:
    """Where ``model``'s parameters live ("cpu", "cuda:0"), "auto" for a model without any."""
    from memprof.sources.live.run import resolve_device

    parameters = getattr(model, "parameters", None)
    first = next(iter(parameters()), None) if callable(parameters) else None
    if first is None:
        return resolve_device("auto")
    return resolve_device(str(first.device))
