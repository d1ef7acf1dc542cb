"""The Python API: ``memprof.compare`` (variants with labels and inputs) and messages that name
parameters the way a Python caller writes them."""

from __future__ import annotations

import pytest
import torch
from reconcile import assert_reconciled

import memprof
from memprof.core.errors import UsageError, UserCodeError

KiB = 1024


def alloc(n: int) -> torch.Tensor:
    return torch.empty(n, dtype=torch.uint8)


def alloc_inputs() -> tuple[int]:
    return (2 * KiB,)


def broken(n: int = 1) -> None:
    raise ValueError("broken on purpose")


def test_compare_callables_with_their_own_inputs_and_labels() -> None:
    report = memprof.compare(
        memprof.Variant(alloc, inputs=memprof.Inputs(args=(KiB,)), label="small"),
        memprof.Variant(alloc, inputs=memprof.Inputs(kwargs={"n": 4 * KiB}), label="big"),
        device="cpu",
    )
    assert_reconciled(report)
    assert list(report.runs) == ["small", "big"]
    assert (report.runs["small"].peak_bytes, report.runs["big"].peak_bytes) == (KiB, 4 * KiB)
    assert report.diff is not None and report.diff.peak_bytes_delta == 3 * KiB
    assert report.target == f"{__name__}:alloc"


def test_compare_default_labels_and_the_targets_own_inputs_factory() -> None:
    # No inputs given: each target's <function>_inputs (here alloc_inputs: 2 KiB).
    report = memprof.compare(alloc, alloc, inputs=None, device="cpu")
    assert_reconciled(report)
    assert list(report.runs) == ["alloc", "alloc#2"]
    assert report.runs["alloc#2"].peak_bytes == 2 * KiB


def test_compare_specs_with_one_inputs_factory_for_all() -> None:
    report = memprof.compare(
        f"{__name__}:alloc", f"{__name__}:alloc", inputs=lambda: 3 * KiB, labels=["a", "b"], device="cpu"
    )
    assert [run.peak_bytes for run in report.runs.values()] == [3 * KiB, 3 * KiB]


def test_a_failing_variant_raises_after_the_others_ran_with_the_report() -> None:
    with pytest.raises(UserCodeError, match="broken raised ValueError: broken on purpose") as caught:
        memprof.compare(alloc, broken, device="cpu")
    report = caught.value.report
    assert_reconciled(report)
    assert report.runs["alloc"].peak_bytes == 2 * KiB
    assert report.runs["broken"].status == "failed" and "broken on purpose" in report.runs["broken"].failed
    assert report.diffs == ()


def test_a_single_failing_run_raises_without_a_report() -> None:
    with pytest.raises(UserCodeError) as caught:
        memprof.profile(broken, 1)
    assert caught.value.report is None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: memprof.profile(alloc, 1, repeat=0), "repeat must be 1 or more, got 0"),
        (lambda: memprof.profile(alloc, 1, warmup=-1), "warmup must be 0 or more, got -1"),
        (lambda: memprof.profile(alloc, 1, mode="fast"), "mode 'fast' is not one of eager, compile, both"),
        (lambda: memprof.compare(alloc, alloc, mode="both"), "mode='both' compares one target"),
        (lambda: memprof.compare(alloc, alloc, labels=["x"]), "labels gives 1 label(s) for 2 runs"),
        (lambda: memprof.compare(alloc, alloc, labels=["x", "x"]), "repeats x"),
        (lambda: memprof.compare(alloc, repeats=2), "unknown settings repeats"),
        (
            lambda: memprof.compare(f"{__name__}:needs_two"),
            f"give them with inputs='{__name__}:make_pair'",  # a factory the module has that fits
        ),
    ],
)
def test_library_messages_name_parameters_not_flags(call, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        call()
    assert message in caught.value.message
    assert "--" not in caught.value.message


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_no_cuda_names_the_device_parameter() -> None:
    with pytest.raises(UsageError) as caught:
        memprof.profile(alloc, 1, device="cuda")
    assert caught.value.message.startswith("device='cuda': CUDA is not available here")
    assert caught.value.message.endswith("use device='cpu' or device='auto'")


def needs_two(a: int, b: int) -> None:
    return None


def make_pair() -> tuple[int, int]:  # fills needs_two's two arguments (alloc_inputs gives one)
    return (KiB, KiB)
