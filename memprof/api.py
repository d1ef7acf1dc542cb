"""The Python API: profile a callable, or a list of variants, into a :class:`Report`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memprof.errors import UsageError, UserCodeError
from memprof.model import Report, RunResult
from memprof.sources.options import RunOptions
from memprof.sources.target import Inputs

MODES = ("eager", "compile", "both")


@dataclass(frozen=True)
class Variant:
    """One thing to profile: ``func(*inputs)`` in ``mode``, shown as ``label``."""

    label: str
    func: Callable[..., Any]
    inputs: Inputs
    mode: str = "eager"
    name: str = "target"


def run_variants(
    target: str,
    variants: Sequence[Variant],
    options: RunOptions | None = None,
    status: Callable[[str], None] | None = None,
) -> tuple[Report, UserCodeError | None]:
    """Profile each variant in turn (``options.mode`` is taken from each variant). A variant
    whose code fails is kept as a failed run and the rest still run; the first failure is
    returned next to the report (the CLI exits 3 on it)."""
    from memprof.sources.live import environment, resolve_device, run_target

    options = options or RunOptions()
    resolved = resolve_device(options.device)
    base = replace(options, device=resolved)
    runs: dict[str, RunResult] = {}
    first_error: UserCodeError | None = None
    for variant in variants:
        options = replace(base, mode=variant.mode)
        try:
            runs[variant.label] = run_target(
                variant.func, variant.inputs, options, label=variant.label, name=variant.name, status=status
            )
        except UserCodeError as error:
            if len(variants) == 1:
                raise
            first_error = first_error or error
            runs[variant.label] = RunResult.failed_run(variant.label, variant.mode, error.message)
    report = Report(target=target, device=resolved, runs=runs, environment=environment(resolved))
    return report, first_error


def mode_variants(func: Callable[..., Any], inputs: Inputs, mode: str, name: str) -> list[Variant]:
    """``eager``, ``compile`` or ``both`` (eager, then compiled) variants of one function."""
    if mode not in MODES:
        raise UsageError(f"mode {mode!r} is not one of {', '.join(MODES)}; e.g. mode='compile'")
    modes = ["eager", "compile"] if mode == "both" else [mode]
    return [Variant(label=m, func=func, inputs=inputs, mode=m, name=name) for m in modes]


def profile(
    fn: Callable[..., Any],
    *args: Any,
    mode: str = "eager",
    device: str | None = None,
    warmup: int = 1,
    repeat: int = 1,
    compile_mode: str = "default",
    backend: str = "inductor",
    **kwargs: Any,
) -> Report:
    """Profile ``fn(*args, **kwargs)`` and return a :class:`memprof.Report`.

    ``mode`` is "eager", "compile" (torch.compile, compiled before profiling) or "both".
    ``device`` "auto"/None picks CUDA when available; it selects whose allocator is measured
    (your arguments must already live there). ``report.runs["eager"].ops`` is a DataFrame of
    per-op numbers; ``report.runs["eager"].peak_bytes`` the exact peak. Raises
    :class:`memprof.errors.UserCodeError` if ``fn`` raises.

    >>> import torch, memprof
    >>> report = memprof.profile(torch.ones, 1024, 1024)
    >>> report.runs["eager"].peak_bytes
    4194304
    """
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    inputs = Inputs(args=tuple(args), kwargs=dict(kwargs), source="python")
    report, error = run_variants(
        f"{getattr(fn, '__module__', '') or ''}:{name}".lstrip(":"),
        mode_variants(fn, inputs, mode, name),
        RunOptions(
            device=device or "auto", warmup=warmup, repeat=repeat, compile_mode=compile_mode, backend=backend
        ),
    )
    if error is not None:
        raise error
    return report
