"""Estimates, the Python API's door to them: :func:`estimate` runs a target on fake tensors
(no memory used, any size) and says whether it fits a card; with a sweep, one estimate per
value of a parameter, the line through them and the largest value that fits. The command line's
``memprof estimate`` calls it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from memprof.core.errors import MemprofError, UsageError, param
from memprof.model.recipe import Recipe
from memprof.model.recorded import Source
from memprof.model.report import Report
from memprof.model.run import RunResult

if TYPE_CHECKING:
    from memprof.analysis.gate import GateConfig, GateResult
from memprof.pipeline import build_report
from memprof.sources.options import StatusFn
from memprof.sources.targets.target import Inputs, InputsFactory, Target

ESTIMATE_LABEL = "estimate"


def estimate(
    fn: Callable[..., Any] | str,
    *args: Any,
    device: str = "cuda",
    capacity: int | str | None = None,
    gpu: str | None = None,
    inputs: InputsFactory | None = None,
    inputs_kwargs: Mapping[str, Any] | None = None,
    sweep: tuple[str, Sequence[Any]] | str | None = None,
    warmup: int = 1,
    status: StatusFn | None = None,
    reserve: int | str | None = None,
    timeout: float | None = None,
    world_size: int | None = None,
    ranks: Sequence[int] | None = None,
    **kwargs: Any,
) -> Report:
    """Estimate the memory ``fn(*args, **kwargs)`` needs, without running it for real: on fake
    tensors (shapes and dtypes, no data, no compute), in seconds whatever the sizes.

    ``fn``: a callable or a ``pkg.mod:func`` spec. Its arguments: ``args``/``kwargs`` (real
    tensors, modules and optimizers are copied into fake ones), or an inputs factory
    (``inputs``, default the target's ``<func>_inputs``; called on fake tensors, so it makes
    nothing of the real size) with ``inputs_kwargs`` passed to it by keyword. ``device``:
    whose allocator is modelled, ``"cuda"`` (block rounding and the caching allocator's
    reserve, ``reserved_peak_bytes``) or ``"cpu"``. ``capacity`` (bytes, or a size such as
    ``"80GB"``) or ``gpu`` (a card's name, :mod:`memprof.core.gpus`): ``report.fits`` says whether
    the run fits and by how much, keeping ``reserve`` (bytes or a size) free for what lies
    outside the caching allocator (the CUDA context, libraries' workspaces): by default, of a
    ``gpu`` on CUDA, its measured figure or 1 GiB (:func:`memprof.core.gpus.reserve_of`); of a
    ``capacity``, nothing (it is what the run may use). An
    estimate whose code branched on values fake tensors cannot know is not reliable
    (``run.estimate.reliable``): it is never said to fit. ``sweep=("batch", [8, 16, 32])``
    (or ``"batch=8,16,32"``: :func:`parse_sweep`) estimates each value of one factory parameter
    (runs ``batch=8``, ...), fits the bytes needed against it and, with a capacity, finds the
    largest value that fits (``report.sweep``). ``warmup`` calls run first (optimizer state is
    made there). ``timeout``: seconds the estimate may take (a sweep: all
    of it; default: no limit). Raises :class:`memprof.core.errors.UserCodeError` when the code
    fails on fake tensors, runs past ``timeout`` (naming the line it was at), or loops on
    values fake tensors can only guess (a ``while`` whose condition is a tensor: it names the
    loop's line). ``world_size=8``: each of ``ranks`` (default all) of an 8-rank job (FSDP2,
    DDP, tensor parallel) on a fake process group (:mod:`memprof.library.sharded`), a run each.

    >>> import memprof
    >>> report = memprof.estimate("memprof.examples.gpt:train_step", gpu="H100")  # doctest: +SKIP
    >>> report.fits.fits, report.runs["estimate"].reserved_peak_bytes  # doctest: +SKIP
    """
    from memprof.sources.deadline import time_limit
    from memprof.sources.fake.run import estimate_environment
    from memprof.sources.options import EstimateOptions
    from memprof.sources.targets.target import resolve

    modelled = _estimate_device(device)
    sweep = parse_sweep(sweep) if isinstance(sweep, str) else sweep
    _check_arguments(
        warmup, bool(args or kwargs), inputs is not None or bool(inputs_kwargs) or sweep is not None
    )
    card, capacity_bytes, reserve_bytes = _device_memory(capacity, gpu, reserve, modelled)
    usable = capacity_bytes - reserve_bytes if capacity_bytes is not None else None
    job = _job(world_size, ranks, status)
    with time_limit(timeout):
        target = resolve(fn) if isinstance(fn, str) else Target.of(fn)
        options = EstimateOptions(device=modelled, warmup=warmup, capacity_bytes=usable)
        progress = _Progress.of(status, sweep, capacity_bytes is not None)
        one = _estimator(target, options, args, kwargs, inputs, progress or status)
        needed = "reserved_peak_bytes" if modelled == "cuda" else "footprint_bytes"
        memory = (needed, capacity_bytes, reserve_bytes, card.name if card else None)
        runs, sweep_result, fits = _runs(one, dict(inputs_kwargs or {}), sweep, job, memory, progress)
    environment = estimate_environment(modelled, card.name if card else None)
    environment.update(job.environment() if job is not None else {})
    return build_report(
        target=target.spec,
        device=modelled,
        runs=runs,
        environment=environment,
        source=Source(kind="estimate"),
        fits=fits,
        detail=sweep_result,
    )


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """``"batch=8,16,32"`` -> ``("batch", [8, 16, 32])``: each value an int, a float, true or
    false, else text (``'8'`` in quotes: text), as an inputs factory's settings are read."""
    from memprof.sources.targets.target import parse_value

    name, sep, listed = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise UsageError(
            f"{param('sweep')} {text!r} is not NAME=VALUE; write it like {param('sweep', 'batch=8,16,32')}"
        )
    values = listed.split(",")
    if any(not part.strip() for part in values):
        raise UsageError(
            f"{param('sweep')} {text!r} has an empty value; write it like {param('sweep', f'{name}=8,16,32')}"
        )
    parsed = [parse_value(part) for part in values]
    if len(set(map(repr, parsed))) != len(parsed):
        raise UsageError(f"{param('sweep')} {text!r} repeats a value; list each once")
    return name, parsed


@dataclass(frozen=True)
class CheckedEstimate:
    """An estimate and its checks, as ``memprof estimate`` writes, prints and exits on them:
    the report first, then ``unreliable`` (exit 2), ``problem`` (the gate could not be applied,
    exit 2), the ``gate``'s verdict (exit 1 when it failed), then ``unfit`` (exit 1)."""

    report: Report
    unreliable: str | None
    """Why asking whether it fits has no answer (the code branched on values fake tensors
    cannot know); else None."""
    gate: GateResult | None
    """The budgets' and the baseline's verdict (None without them)."""
    problem: MemprofError | None
    """Why the gate could not be applied (a budget naming no run, another device); else None."""
    unfit: str | None
    """The line saying that it does not fit the capacity (no value of a sweep does); else None."""


def checked_estimate(fn: Callable[..., Any] | str, *, gate: GateConfig, **settings: Any) -> CheckedEstimate:
    """:func:`estimate` with ``settings``, and the checks an estimate is gated by: ``gate``'s
    budgets and baseline, and whether it fits the capacity. What the gate cannot check of an
    estimate (compiled against eager, a budget for a run it will not make) is refused before
    anything runs."""
    if gate.require_compile_saves:
        raise UsageError(
            f"{param('require_compile_saves')} compares compiled with eager; an estimate is eager only"
        )
    world_size, ranks = settings.get("world_size"), settings.get("ranks")
    if settings.get("sweep") is None:
        labels = [f"rank{r}" for r in (ranks or range(world_size))] if world_size else [ESTIMATE_LABEL]
        gate.budgets.check_labels(labels)
    report = estimate(fn, **settings)
    from memprof.analysis.gate import evaluate
    from memprof.outputs.estimate import failed, unreliable_fit

    result, problem = None, None
    if gate.active:
        try:
            gate.budgets.check_labels(list(report.runs))
            result = evaluate(report, gate)
        except MemprofError as error:
            problem = error
    return CheckedEstimate(
        report=report, unreliable=unreliable_fit(report), gate=result, problem=problem, unfit=failed(report)
    )


def _runs(
    one: Callable[[str, dict[str, Any]], RunResult],
    params: dict[str, Any],
    sweep: tuple[str, Sequence[Any]] | None,
    job: Any,
    memory: tuple[str, int | None, int, str | None],
    progress: _Progress | None,
) -> tuple[dict[str, RunResult], Any, Any]:
    """The estimated runs (one, a sweep's or a job's ranks), the sweep and whether it fits;
    ``memory``: what is needed of the device, its capacity, the reserve and the card's name."""
    needed, capacity, reserve, card = memory
    if sweep is None:
        runs = job.runs(one, params) if job is not None else {ESTIMATE_LABEL: one(ESTIMATE_LABEL, params)}
        return runs, None, _fits(runs, needed, capacity, reserve, card)
    per_value = job.neediest(one, lambda run: _needed(run, needed)) if job is not None else one
    runs, sweep_result = _sweep(per_value, sweep, params, needed, capacity, reserve, progress)
    return runs, sweep_result, None


def _check_arguments(warmup: int, arguments: bool, factory: bool) -> None:
    if warmup < 0:
        raise UsageError(f"{param('warmup')} must be 0 or more, got {warmup}")
    if arguments and factory:
        raise UsageError(
            f"estimate takes the arguments themselves or an inputs factory ({param('inputs')}, "
            f"{param('inputs_kwargs')}, {param('sweep')}), not both"
        )


def _job(world_size: int | None, ranks: Sequence[int] | None, status: StatusFn | None) -> Any:
    """The sharded job estimated (:class:`memprof.library.sharded.Job`), or None for one device."""
    if world_size is None:
        if ranks is not None:
            raise UsageError(f"{param('ranks')} picks ranks of a sharded job; give {param('world_size')} too")
        return None
    from memprof.library.sharded import Job

    return Job.of(world_size, ranks, status)


def _estimate_device(device: str) -> str:
    text = (device or "").strip().lower()
    if text == "cpu":
        return "cpu"
    if text == "cuda" or (text.startswith("cuda:") and text[5:].isdigit()):
        return "cuda"
    raise UsageError(f"{param('device')} {device!r} cannot be estimated; use cuda or cpu")


def _device_memory(
    capacity: int | str | None, gpu: str | None, reserve: int | str | None, device: str
) -> tuple[Any, int | None, int]:
    """The card named (or None), the capacity to fit in (or None) and the reserve kept free."""
    from memprof.core.gpus import find_gpu

    if capacity is not None and gpu is not None:
        raise UsageError(f"give {param('capacity')} or {param('gpu')}, not both")
    card = find_gpu(gpu) if gpu is not None else None
    capacity_bytes = card.memory_bytes if card is not None else _capacity_bytes(capacity)
    return card, capacity_bytes, _reserve_bytes(reserve, capacity_bytes, card, device)


def _reserve_bytes(reserve: int | str | None, capacity: int | None, card: Any, device: str) -> int:
    """The reserve to keep free of the capacity: given, or the default for the card and device."""
    from memprof.core.gpus import reserve_of
    from memprof.core.units import parse_size

    if reserve is None:
        # A card's memory is its total, part of which is never the allocator's; a capacity
        # given as a size is what the run may use.
        value = reserve_of(card, device) if card is not None else 0
    elif isinstance(reserve, bool) or not isinstance(reserve, int | str):
        raise UsageError(f"{param('reserve')} must be a size in bytes or like '1GB', got {reserve!r}")
    else:
        try:
            value = parse_size(reserve) if isinstance(reserve, str) else int(reserve)
        except UsageError as error:
            raise UsageError(f"{param('reserve')}: {error.message}") from None
        if value < 0:
            raise UsageError(f"{param('reserve')} must be 0 bytes or more, got {reserve!r}")
    if capacity is not None and value >= capacity:
        raise UsageError(
            f"{param('reserve')} of {value:,} B leaves nothing of the {capacity:,} B capacity; "
            f"give a smaller {param('reserve')}"
        )
    return value


def _capacity_bytes(capacity: int | str | None) -> int | None:
    from memprof.core.units import parse_size

    if capacity is None:
        return None
    if isinstance(capacity, bool) or not isinstance(capacity, int | str):
        raise UsageError(f"{param('capacity')} must be a size in bytes or like '80GB', got {capacity!r}")
    try:
        value = parse_size(capacity) if isinstance(capacity, str) else int(capacity)
    except UsageError as error:
        raise UsageError(f"{param('capacity')}: {error.message}") from None
    if value <= 0:
        raise UsageError(f"{param('capacity')} must be more than 0 bytes, got {capacity!r}")
    return value


def _estimator(
    target: Target,
    options: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    inputs: InputsFactory | None,
    status: StatusFn | None,
) -> Callable[[str, dict[str, Any]], RunResult]:
    """A function estimating one run of the target: (label, factory parameters) -> run."""
    from memprof.pipeline.assemble import run_of
    from memprof.sources.fake.run import estimate_target, fake_copy
    from memprof.sources.targets.target import build_inputs

    def one(label: str, params: dict[str, Any]) -> RunResult:
        sources: list[str] = []  # where the inputs came from, for the run's recipe

        def make(session: Any) -> Inputs:
            if args or kwargs:
                fake_args, fake_kwargs = fake_copy((args, kwargs), session.mode, session.recorder.adopt)
                made = Inputs(args=tuple(fake_args), kwargs=dict(fake_kwargs), source="python")
            else:
                made = build_inputs(target, inputs, "cpu", params)
            sources.append(made.source)
            return made

        name, module = target.attr_path, target.module
        recording = estimate_target(
            target.func, make, options, label=label, name=name, module=module, status=status
        )
        run = run_of(recording)
        settings = {key: value_text(value) for key, value in params.items()}
        recipe = Recipe(
            target=target.spec,
            inputs=sources[0] if sources else "none",
            settings=settings,
            mode="eager",
            device=options.device,
        )
        return replace(run, recipe=recipe)

    return one


def _needed(run: RunResult, needed: str) -> int:
    """The bytes a run needs of a device: its footprint (CPU), or its reserve (CUDA: within the
    capacity when every request found room there, else on a device with no limit)."""
    replay = run.estimate.allocator if run.estimate is not None else None
    if needed == "reserved_peak_bytes" and replay is not None and not replay.ooms:
        if replay.capacity_reserved_peak_bytes is not None:
            return replay.capacity_reserved_peak_bytes
    value = getattr(run, needed)
    return int(value if value is not None else run.peak_bytes)


def run_fits(run: RunResult, needed: str, capacity: int) -> bool:
    """Whether an estimated run fits ``capacity``: its need is within it, and (CUDA) the
    allocator model found room for every request."""
    replay = run.estimate.allocator if run.estimate is not None else None
    return _needed(run, needed) <= capacity and not (replay is not None and replay.ooms)


def reliable(run: RunResult) -> bool:
    """Whether an estimated run can be relied on: no guessed value steered its code."""
    return run.estimate is None or run.estimate.reliable


def _fits(
    runs: dict[str, RunResult], needed: str, capacity: int | None, reserve: int, gpu: str | None
) -> Any:
    from memprof.model.estimate import Fits

    if capacity is None:
        return None
    label, run = max(runs.items(), key=lambda item: _needed(item[1], needed))
    need = _needed(run, needed)
    trusted = all(reliable(r) for r in runs.values())
    return Fits(
        capacity_bytes=capacity,
        fits=trusted and run_fits(run, needed, capacity - reserve),
        headroom_bytes=capacity - reserve - need,
        needed_bytes=need,
        needed=needed,
        run=label,
        gpu=gpu,
        reserve_bytes=reserve,
        reliable=trusted,
    )


def value_text(value: Any) -> str:
    """A swept value as its label shows it: ``8``, ``0.5``, ``true``, ``name``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Progress:
    """A sweep's status lines: each estimate's, with how many of how many and the time so far
    (``4 of 11, 38 s: estimating step (batch=4320) on fake tensors``); ``count`` goes up by
    one before each estimate."""

    def __init__(self, status: StatusFn, listed: int, search: int) -> None:
        self.status, self.listed, self.most = status, listed, listed + search
        self.count, self.start = 0, time.perf_counter()

    @classmethod
    def of(cls, status: StatusFn | None, sweep: Any, capacity: bool) -> _Progress | None:
        from memprof.analysis.sweep import MAX_SEARCH

        if status is None or sweep is None:
            return None
        return cls(status, len(dict.fromkeys(map(repr, sweep[1]))), MAX_SEARCH if capacity else 0)

    def __call__(self, message: str) -> None:
        total = str(self.listed) if self.count <= self.listed else f"at most {self.most}"
        self.status(f"{self.count} of {total}, {time.perf_counter() - self.start:.0f} s: {message}")


def _sweep(
    one: Callable[[str, dict[str, Any]], RunResult],
    sweep: tuple[str, Sequence[Any]],
    params: dict[str, Any],
    needed: str,
    card_capacity: int | None,
    reserve: int,
    progress: _Progress | None = None,
) -> tuple[dict[str, RunResult], Any]:
    """Estimate each listed value, fit the bytes needed, and with a capacity search for the
    largest value that fits within it less the reserve (whole values: the line's guess, then
    bisection, at most ``MAX_SEARCH`` more estimates; none when an estimate is not reliable)."""
    from memprof.analysis import sweep as fit

    capacity = card_capacity - reserve if card_capacity is not None else None

    name, values = sweep
    values = list(values)
    if not isinstance(name, str) or not name.isidentifier():
        raise UsageError(f"{param('sweep')} names a parameter {name!r}; write it like batch=8,16,32")
    if not values:
        raise UsageError(f"{param('sweep')} {name}= lists no values; write it like {name}=8,16,32")
    if name in params:
        raise UsageError(f"{name} is both swept and set ({param('inputs_kwargs')}); give it once")
    runs: dict[str, RunResult] = {}
    need: dict[Any, int] = {}
    fits: dict[Any, bool] = {}
    searched: list[Any] = []

    def estimate_value(value: Any) -> bool:
        """Estimate ``value``; whether it fits the capacity."""
        label = f"{name}={value_text(value)}"
        if progress is not None:
            progress.count += 1
        runs[label] = one(label, {**params, name: value})
        need[value] = _needed(runs[label], needed)
        fits[value] = capacity is not None and run_fits(runs[label], needed, capacity)
        return fits[value]

    for value in values:
        if value not in need:
            estimate_value(value)
    trusted = all(reliable(run) for run in runs.values())
    if not trusted:
        fits = dict.fromkeys(fits, False)
    numeric = all(fit.is_number(v) for v in values)
    footprints = [_needed(runs[f"{name}={value_text(v)}"], "footprint_bytes") for v in values]
    line = fit.fit_line(values, footprints) if numeric else None
    linear = None if line is None or len(set(values)) < 3 else line.max_residual <= fit.LINEAR_TOLERANCE
    whole = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    if trusted and capacity is not None and whole:
        guess = fit.line_value(line, capacity) if line is not None and linear is not False else None
        for _ in range(fit.MAX_SEARCH):
            value = fit.next_value(dict(fits), dict(need), capacity, guess)
            if value is None:
                break
            estimate_value(value)
            searched.append(value)
    if numeric:  # runs and points in order of value, the searched ones among the listed
        order = sorted(need, key=float)
        need = {v: need[v] for v in order}
        runs = {f"{name}={value_text(v)}": runs[f"{name}={value_text(v)}"] for v in order}
    result = _sweep_result(name, runs, need, fits, searched, line, linear, needed, capacity)
    if card_capacity is None:
        return runs, result
    result = replace(
        result,
        capacity_bytes=card_capacity,
        reserve_bytes=reserve,
        reliable=trusted,
        points=tuple(replace(p, fits=None) for p in result.points) if not trusted else result.points,
    )
    from memprof.analysis.sweep import verdict

    return runs, replace(result, verdict=verdict(result))


def _sweep_result(
    name: str,
    runs: dict[str, RunResult],
    need: dict[Any, int],
    fits: dict[Any, bool],
    searched: list[Any],
    line: Any,
    linear: bool | None,
    needed: str,
    capacity: int | None,
) -> Any:
    from memprof.analysis.sweep import is_number, verdict
    from memprof.model.sweep import Sweep, SweepPoint

    points = tuple(
        SweepPoint(
            value=value_text(value),
            label=f"{name}={value_text(value)}",
            footprint_bytes=_needed(runs[f"{name}={value_text(value)}"], "footprint_bytes"),
            fitted_bytes=line.at(value) if line is not None else None,
            needed_bytes=nbytes,
            fits=None if capacity is None else fits[value],
            searched=value in searched,
        )
        for value, nbytes in need.items()
    )
    fitting = [v for v, ok in fits.items() if ok]
    largest = max(fitting) if fitting and all(is_number(v) for v in fitting) else None
    # Verified: the next whole value was estimated too, and does not fit.
    verified = isinstance(largest, int) and (largest + 1) in need
    sweep = Sweep(
        parameter=name,
        needed=needed,
        points=points,
        slope_bytes=float(line.slope) if line is not None else None,
        intercept_bytes=float(line.intercept) if line is not None else None,
        max_residual=line.max_residual if line is not None else None,
        linear=linear,
        capacity_bytes=capacity,
        largest_fitting=value_text(largest) if largest is not None else None,
        largest_fitting_label=f"{name}={value_text(largest)}" if largest is not None else None,
        largest_fitting_bytes=need[largest] if largest is not None else None,
        verified=verified,
    )
    return replace(sweep, verdict=verdict(sweep))
