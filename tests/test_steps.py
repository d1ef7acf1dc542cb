"""What the training callbacks share (memprof/integrations/steps.py), without a framework: which
steps are profiled and when, gradient accumulation, training that stops inside a step, the
options' errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from memprof.core.errors import UsageError
from memprof.integrations.steps import BudgetExceeded, ProfiledSteps, StepProfiler, budget_bytes, check_steps
from memprof.pipeline import load_report
from memprof.sources import block

MiB = 1024 * 1024


def profiler(tmp_path: Path, **options: object) -> StepProfiler:
    settings: dict[str, object] = {
        "framework": "loop",
        "steps": [2],
        "out": tmp_path,
        "explain": False,
        "budget": None,
        "formats": ("json",),
        "device": None,
        "verbose": False,
    }
    return StepProfiler(**{**settings, **options})  # type: ignore[arg-type]


def test_step_n_runs_from_the_hook_before_it_to_the_hook_after_its_optimizer_step(tmp_path: Path) -> None:
    steps = profiler(tmp_path, steps=[2])
    model = torch.nn.Linear(4, 4)
    made: list[torch.Tensor] = []
    for global_step in range(3):  # two "batches" per optimizer step, as with accumulation
        for _ in range(2):
            steps.begin(global_step + 1, {"model": model}, model)
            made.append(torch.ones(MiB // 4))
        report = steps.end(global_step + 1)
        assert (report is not None) == (global_step + 1 == 2)
    assert list(steps.reports) == [2]
    run = load_report(tmp_path / "step-2.json").runs["step-2"]
    assert run.peak_bytes == 2 * MiB  # both batches of step 2, nothing of steps 1 and 3
    assert steps.reports[2].target == "loop step 2 (Linear)"
    assert steps.log_values(steps.reports[2]) == {
        "memprof/peak_bytes": 2 * MiB,
        "memprof/footprint_bytes": run.footprint_bytes,
    }
    assert steps.profiling is None and not block._active


def test_a_step_left_by_an_exception_is_stopped_by_the_next_hook_or_stop(tmp_path: Path) -> None:
    steps = profiler(tmp_path, steps=[1, 2])
    model = torch.nn.Linear(4, 4)
    steps.begin(1, {}, model)  # ... and training raised before the step ended
    assert steps.profiling == 1 and block._active
    steps.begin(2, {}, model)  # the next step's hook: step 1 is dropped, step 2 profiled
    assert steps.profiling == 2
    callback = ProfiledSteps(steps=[1], out=tmp_path / "cb")
    callback.profiler, stale = steps, steps
    callback.stop()
    assert stale.profiling is None and not block._active
    never = r"^memprof: step\(s\) 1, 2 were not profiled: training ended after step 1 "
    with pytest.warns(UserWarning, match=never):
        steps.finish()


def test_over_the_budget_the_step_raises_after_its_report(tmp_path: Path) -> None:
    steps = profiler(tmp_path, steps=[1], budget="1MB")
    model = torch.nn.Linear(4, 4)
    steps.begin(1, {}, model)
    kept = torch.ones(2 * MiB // 4)
    report = steps.end(1)
    assert report is not None
    with pytest.raises(BudgetExceeded) as raised:
        steps.check_budget(1, report)
    assert str(raised.value) == (
        f"memprof: loop step 1 peaked at 2.0 MiB (2,097,152 B above the step's start), over the budget "
        f"of 1.0 MiB (1,048,576 B); report: {tmp_path / 'step-1.json'}"
    )
    del kept


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: check_steps([0]), "steps 0 is not a step number: steps are counted from 1"),
        (lambda: check_steps([]), "steps lists no step: steps are counted from 1"),
        (lambda: check_steps("3"), "steps must list optimizer steps (1 or more), e.g. steps=[3]"),
        (lambda: budget_bytes("lots"), "budget 'lots': not a size: 'lots'"),
        (lambda: budget_bytes(0), "budget must be a size like '2GB' or a number of bytes, got 0"),
        (lambda: ProfiledSteps(formats=("pdf",)), "formats=('pdf',): unknown 'pdf'; choose among json"),
    ],
)
def test_bad_options_are_one_line_usage_errors(call: object, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        call()  # type: ignore[operator]
    assert raised.value.message.startswith(message)
    assert check_steps(3) == (3,) and check_steps([3, 1, 3]) == (1, 3)
    assert budget_bytes("2GB") == 2 << 30 and budget_bytes(None) is None


def test_out_must_be_a_folder(tmp_path: Path) -> None:
    file = tmp_path / "reports"
    file.write_text("")
    with pytest.raises(UsageError, match=r"^out '.*reports' is a file; give a folder for the reports$"):
        profiler(tmp_path, out=file)
