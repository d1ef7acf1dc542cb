"""The Python API, the library's front door: profile a callable (:func:`profile`), compare
several (:func:`compare`), profile a block of code where it runs (:func:`track`), or read
traces and snapshots recorded elsewhere (:func:`analyze`), into a :class:`memprof.Report`. The
command line calls the same functions."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from memprof.blocks import track as track  # the API's front door for blocks of code
from memprof.errors import UsageError, UserCodeError, param
from memprof.model import Report, RunResult, Source
from memprof.pipeline import build_report, failed_run
from memprof.sources.options import RunOptions
from memprof.sources.target import Inputs, InputsFactory, Target

if TYPE_CHECKING:
    import pandas as pd

MODES = ("eager", "compile", "both")

StatusFn = Callable[[str], None]


@dataclass(frozen=True)
class Variant:
    """One thing to profile: ``target`` (a callable, or a ``pkg.mod:func`` /
    ``path/to/file.py:func`` spec) called with ``inputs`` in ``mode``, shown as ``label``.

    ``inputs``: :class:`memprof.sources.target.Inputs` (the arguments themselves), an inputs
    factory or its spec (``pkg.mod:make``; it returns a tuple/list of args, a dict of kwargs or
    one argument, and gets ``device`` when it accepts it), or None: the target's own
    ``<func>_inputs`` factory when it needs arguments. ``inputs_kwargs`` are passed to that
    factory by keyword. Fields left None take the values given to :func:`compare`.
    """

    target: Callable[..., Any] | str
    inputs: Inputs | InputsFactory | None = None
    mode: str | None = None
    label: str | None = None
    inputs_kwargs: Mapping[str, Any] | None = None


def default_labels(names: Sequence[str]) -> list[str]:
    """Function names (``pkg.mod:f`` -> ``f``); a name seen before gets ``#2``, ``#3``, ..."""
    labels: list[str] = []
    for spec in names:
        name = spec.rpartition(":")[2] or spec
        label, n = name, 1
        while label in labels:
            n += 1
            label = f"{name}#{n}"
        labels.append(label)
    return labels


def compare(
    *targets: Callable[..., Any] | str | Variant,
    labels: Sequence[str] | None = None,
    inputs: Inputs | InputsFactory | None = None,
    mode: str = "eager",
    status: StatusFn | None = None,
    inputs_kwargs: Mapping[str, Any] | None = None,
    **settings: Any,
) -> Report:
    """Profile each target in turn and return one :class:`memprof.Report`; the first run is the
    base that ``report.diffs`` compares every other with.

    ``targets``: callables, ``pkg.mod:func`` specs, or :class:`Variant` (a target with its own
    inputs, mode and label). ``inputs``: for every target without its own (see
    :class:`Variant`); ``inputs_kwargs``: keyword arguments for the inputs factory of every
    target without its own. ``mode``: "eager" or "compile" for every target without its own, or
    "both" to compare one target with its compiled self. ``labels``: one per run (default: the
    function names, ``f#2`` when repeated; for one target, its mode). ``status`` receives
    progress lines. ``settings`` are those of :class:`memprof.sources.options.RunOptions`:
    ``device`` ("auto", the default, picks CUDA when available), ``warmup``, ``repeat``,
    ``compile_mode``, ``backend``, ``fresh_compile``, ``keep_table`` (keep torch's printed
    table of each run), ``time_budget`` (seconds of calls timed without the profiler for the
    wall time, default 0.2; 0: the profiled calls' times), ``verbose`` (let torch's own
    warnings and log messages through), ``explain`` (default True: explain each peak, see
    :func:`profile`).

    When a target's code fails, the others are still profiled; then the first failure is
    raised (:class:`memprof.errors.UserCodeError`) with ``error.report`` holding every run,
    the failed ones marked ``status="failed"``. With a single run there is no such report.

    >>> import memprof
    >>> report = memprof.compare("memprof.examples.no_grad:with_autograd", "memprof.examples.no_grad:no_grad")
    >>> report.diff.verdict  # doctest: +SKIP
    'no_grad lowers peak memory vs with_autograd by 28.0 MiB (-87.5%): 32.0 MiB -> 4.0 MiB'
    """
    variants = _variants(targets, inputs, mode)
    if inputs_kwargs:
        variants = [
            v if v.inputs_kwargs is not None else replace(v, inputs_kwargs=inputs_kwargs) for v in variants
        ]
    named = _labels(variants, labels)
    variants = [replace(v, label=label) for v, label in zip(variants, named, strict=True)]
    return _profile_variants(variants, _run_options(settings), status)


def profile(
    fn: Callable[..., Any],
    *args: Any,
    mode: str = "eager",
    device: str | None = None,
    warmup: int = 1,
    repeat: int = 1,
    compile_mode: str = "default",
    backend: str = "inductor",
    time_budget: float = 0.2,
    verbose: bool = False,
    explain: bool = True,
    **kwargs: Any,
) -> Report:
    """Profile ``fn(*args, **kwargs)`` and return a :class:`memprof.Report`.

    ``mode`` is "eager", "compile" (torch.compile, compiled before profiling) or "both".
    ``device`` "auto"/None picks CUDA when available; it selects whose allocator is measured
    (your arguments must already live there). ``time_budget``: seconds of calls timed without
    the profiler for the wall time (at least 5 calls; 0 times the profiled calls instead).
    ``verbose`` lets torch's own warnings and log messages through (hidden by default; each
    run's ``torch_messages`` lists them). ``report.runs["eager"].ops`` is a DataFrame of
    per-op numbers; ``report.runs["eager"].peak_bytes`` the exact peak (above what was live
    when the call started; ``footprint_bytes`` counts that too). ``explain`` (default True)
    explains the peak: ``run.at_peak`` (``run.at_peak.frame`` as a DataFrame) says what is live
    at it by category, module and source line, ``run.modules`` per module; it makes one more,
    instrumented call in eager mode and compiles with Inductor's caches off in compile mode.
    Raises :class:`memprof.errors.UserCodeError` if ``fn`` raises.

    >>> import torch, memprof
    >>> report = memprof.profile(torch.ones, 1024, 1024)
    >>> report.runs["eager"].peak_bytes
    4194304
    """
    inputs = Inputs(args=tuple(args), kwargs=dict(kwargs), source="python")
    return compare(
        Variant(target=fn, inputs=inputs),
        mode=mode,
        device=device,
        warmup=warmup,
        repeat=repeat,
        compile_mode=compile_mode,
        backend=backend,
        time_budget=time_budget,
        verbose=verbose,
        explain=explain,
    )


def analyze(
    *paths: str | os.PathLike[str],
    expandable_segments: bool = False,
    max_split_size_mb: int | None = None,
    status: StatusFn | None = None,
) -> Report:
    """Read chrome traces and CUDA memory snapshots recorded elsewhere (by ``torch.profiler``'s
    ``export_chrome_trace``/``tensorboard_trace_handler`` or ``torch.cuda.memory._dump_snapshot``)
    into a :class:`memprof.Report`, without torch and without a GPU.

    ``paths``: trace files (``.json``, ``.json.gz``), snapshot pickles, or folders of them (one
    per rank); each file's kind is read from its content. One run per device, rank and file:
    labelled ``cuda:0`` for one file, ``rank1/cuda:0`` for files of distinct ranks,
    ``<file stem>/cuda:0`` otherwise. ``expandable_segments``/``max_split_size_mb``: also replay
    each snapshot's allocations under these allocator settings (``run.snapshot.what_if``).
    ``status`` receives progress lines. A path that is not a readable trace or snapshot raises
    :class:`memprof.errors.InputError`; a snapshot that names any Python global is refused
    before anything in it runs.

    >>> import memprof
    >>> report = memprof.analyze("rank0.pt.trace.json.gz")  # doctest: +SKIP
    >>> report.runs["cuda:0"].footprint_bytes  # doctest: +SKIP
    """
    from memprof.analysis.allocator import AllocatorSettings
    from memprof.recordings import analyze_recordings

    settings = None
    if max_split_size_mb is not None and (isinstance(max_split_size_mb, bool) or max_split_size_mb < 1):
        raise UsageError(f"{param('max_split_size_mb')} must be 1 or more (MiB), got {max_split_size_mb}")
    if expandable_segments or max_split_size_mb is not None:
        settings = AllocatorSettings(
            expandable_segments=expandable_segments,
            max_split_size_bytes=None if max_split_size_mb is None else max_split_size_mb << 20,
        )
    return analyze_recordings(paths, what_if_settings=settings, status=status)


def _run_options(settings: dict[str, Any]) -> RunOptions:
    known = {f.name for f in fields(RunOptions)} - {"mode"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise UsageError(
            f"compare() got unknown settings {', '.join(unknown)}; it takes {', '.join(sorted(known))}"
        )
    return RunOptions(**{**settings, "device": settings.get("device") or "auto"})


def _variants(
    targets: Sequence[Callable[..., Any] | str | Variant], inputs: Inputs | InputsFactory | None, mode: str
) -> list[Variant]:
    """One variant per target, with the shared inputs and mode filled in; ``both`` makes the
    eager and the compiled variant of a single target."""
    if not targets:
        raise UsageError("compare needs at least one target")
    if mode not in MODES:
        raise UsageError(
            f"{param('mode')} {mode!r} is not one of {', '.join(MODES)}; e.g. {param('mode', 'compile')}"
        )
    variants = [t if isinstance(t, Variant) else Variant(target=t) for t in targets]
    variants = [replace(v, inputs=v.inputs if v.inputs is not None else inputs) for v in variants]
    if mode == "both":
        if len(variants) != 1:
            raise UsageError(f"{param('mode', 'both')} compares one target with its compiled self; give one")
        return [replace(variants[0], mode=m) for m in ("eager", "compile")]
    for v in variants:
        if v.mode not in (None, "eager", "compile"):
            raise UsageError(f"{param('mode')} {v.mode!r} of a variant is not one of eager, compile")
    return [replace(v, mode=v.mode or mode) for v in variants]


def _labels(variants: Sequence[Variant], labels: Sequence[str] | None) -> list[str]:
    """One non-empty, distinct label per variant: given, else the variant's own, else the
    function's name (the runs of one target in different modes: their modes)."""
    if labels is None:
        # Runs of one target that differ only in mode (profile(mode="both")) are named by mode.
        modes = {v.mode for v in variants}
        by_mode = len({_key(v.target) for v in variants}) == 1 and len(modes) == len(variants)
        names = default_labels([_target_name(v.target) for v in variants])
        labels = [
            v.label or (v.mode if by_mode and v.mode else name)
            for v, name in zip(variants, names, strict=True)
        ]
    labels = list(labels)
    if len(labels) != len(variants):
        raise UsageError(f"{param('labels')} gives {len(labels)} label(s) for {len(variants)} runs")
    if any(not label for label in labels):
        raise UsageError(f"{param('labels')} {labels!r} has an empty label; name every run")
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise UsageError(
            f"{param('labels')} {labels!r} repeats {', '.join(repeated)}; each label must be unique"
        )
    return labels


def _target_name(target: Callable[..., Any] | str) -> str:
    return target if isinstance(target, str) else Target.of(target).spec


def _profile_variants(variants: Sequence[Variant], options: RunOptions, status: StatusFn | None) -> Report:
    """Resolve the device, every target and its inputs (in order, before any profiling), then
    profile each variant. A failing variant is kept as a failed run while the rest still run."""
    from memprof.sources.live import environment, resolve_device, run_target
    from memprof.sources.target import restore_import_path

    device = resolve_device(options.device)
    import_path = list(sys.path)
    resolved = _resolve(variants, device)
    restore_import_path(import_path)  # what the target's import removed
    runs: dict[str, RunResult] = {}
    first_error: UserCodeError | None = None
    for variant, (target, inputs) in zip(variants, resolved, strict=True):
        assert variant.label is not None and variant.mode is not None
        run_options = replace(options, device=device, mode=variant.mode)
        try:
            runs[variant.label] = run_target(
                target.func,
                inputs,
                run_options,
                label=variant.label,
                name=target.attr_path,
                status=status,
                module=target.module,
            )
        except UserCodeError as error:
            if len(variants) == 1:
                raise
            first_error = first_error or error
            runs[variant.label] = failed_run(variant.label, variant.mode, error.message)
    names = " vs ".join(dict.fromkeys(target.spec for target, _ in resolved))
    report = build_report(
        target=names, device=device, runs=runs, environment=environment(device), source=Source(kind="live")
    )
    if first_error is not None:
        first_error.report = report
        raise first_error
    return report


def _resolve(variants: Sequence[Variant], device: str) -> list[tuple[Target, Inputs]]:
    """Each variant's target and inputs. A target named twice is imported once and, with the
    same inputs factory, shares one set of inputs (as eager and compiled runs of it do)."""
    from memprof.sources.target import build_inputs, check_measurable, resolve

    targets: dict[Any, Target] = {}
    made: dict[tuple[Any, Any, str], Inputs] = {}
    out = []
    for variant in variants:
        key = _key(variant.target)
        if key not in targets:
            spec = variant.target
            targets[key] = resolve(spec) if isinstance(spec, str) else Target.of(spec)
            check_measurable(targets[key].func, targets[key].spec)
        target = targets[key]
        params = dict(variant.inputs_kwargs or {})
        if isinstance(variant.inputs, Inputs):
            if params:
                raise UsageError(
                    f"{param('inputs_kwargs')} are for an inputs factory; this run was given its arguments"
                )
            inputs = variant.inputs
        else:
            factory_key = (key, _key(variant.inputs), repr(sorted(params.items())))
            if factory_key not in made:
                made[factory_key] = build_inputs(target, variant.inputs, device, params)
            inputs = made[factory_key]
        out.append((target, inputs))
    return out


def _key(thing: Any) -> Any:
    """Specs are the same target when equal; objects when they are the same object."""
    return thing if thing is None or isinstance(thing, str) else ("object", id(thing))


def group_modules(run: RunResult, by: str | Sequence[str] = "class") -> pd.DataFrame:
    """An explained run's module table grouped by layer kind: ``"class"`` (every
    ``GPT2Attention`` together) or path patterns where ``*`` matches anything
    (``"transformer.h.*.attn"``; several comma-separated or as a list), one row per group and
    phase: ``group``, ``by``, ``phase``, ``modules``, ``calls``, ``peak_bytes``,
    ``allocated_bytes``, ``at_peak_bytes``. A module inside another of its group counts once,
    through the outer one (:mod:`memprof.analysis.module_groups`).

    >>> memprof.group_modules(report.runs["eager"], "transformer.h.*.attn")  # doctest: +SKIP
    """
    from memprof.analysis.module_groups import group_modules as grouped
    from memprof.model.explanation import groups_frame

    return groups_frame(grouped(run.module_stats, by))


# ---- estimates ----------------------------------------------------------------------------------

ESTIMATE_LABEL = "estimate"


def estimate(
    fn: Callable[..., Any] | str,
    *args: Any,
    device: str = "cuda",
    capacity: int | str | None = None,
    gpu: str | None = None,
    inputs: InputsFactory | None = None,
    inputs_kwargs: Mapping[str, Any] | None = None,
    sweep: tuple[str, Sequence[Any]] | None = None,
    warmup: int = 1,
    status: StatusFn | None = None,
    reserve: int | str | None = None,
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
    ``"80GB"``) or ``gpu`` (a card's name, :mod:`memprof.gpus`): ``report.fits`` says whether
    the run fits and by how much, keeping ``reserve`` (bytes or a size) free for what lies
    outside the caching allocator (the CUDA context, libraries' workspaces): by default, of a
    ``gpu`` on CUDA, its measured figure or 1 GiB (:func:`memprof.gpus.reserve_of`); of a
    ``capacity``, nothing (it is what the run may use). An
    estimate whose code branched on values fake tensors cannot know is not reliable
    (``run.estimate.reliable``): it is never said to fit. ``sweep=("batch", [8, 16, 32])``
    estimates each value of one factory parameter (runs ``batch=8``, ...), fits the bytes
    needed against it and, with a capacity, finds the largest value that fits
    (``report.sweep``). ``warmup`` calls run first
    (optimizer state is made there). Raises :class:`memprof.errors.UserCodeError` when the code
    fails on fake tensors.

    >>> import memprof
    >>> report = memprof.estimate("memprof.examples.gpt:train_step", gpu="H100")  # doctest: +SKIP
    >>> report.fits.fits, report.runs["estimate"].reserved_peak_bytes  # doctest: +SKIP
    """
    from memprof.sources.options import EstimateOptions
    from memprof.sources.target import resolve

    modelled = _estimate_device(device)
    if warmup < 0:
        raise UsageError(f"{param('warmup')} must be 0 or more, got {warmup}")
    card, capacity_bytes, reserve_bytes = _device_memory(capacity, gpu, reserve, modelled)
    usable = capacity_bytes - reserve_bytes if capacity_bytes is not None else None
    if (args or kwargs) and (inputs is not None or inputs_kwargs or sweep is not None):
        raise UsageError(
            f"estimate takes the arguments themselves or an inputs factory ({param('inputs')}, "
            f"{param('inputs_kwargs')}, {param('sweep')}), not both"
        )
    target = resolve(fn) if isinstance(fn, str) else Target.of(fn)
    options = EstimateOptions(device=modelled, warmup=warmup, capacity_bytes=usable)
    progress = _Progress.of(status, sweep, capacity_bytes is not None)
    one = _estimator(target, options, args, kwargs, inputs, progress or status)
    params = dict(inputs_kwargs or {})
    needed = "reserved_peak_bytes" if modelled == "cuda" else "footprint_bytes"
    if sweep is None:
        runs = {ESTIMATE_LABEL: one(ESTIMATE_LABEL, params)}
        sweep_result = None
        fits = _fits(runs, needed, capacity_bytes, reserve_bytes, card.name if card else None)
    else:
        runs, sweep_result = _sweep(one, sweep, params, needed, capacity_bytes, reserve_bytes, progress)
        fits = None
    from memprof.sources.fake import estimate_environment

    return build_report(
        target=target.spec,
        device=modelled,
        runs=runs,
        environment=estimate_environment(modelled, card.name if card else None),
        source=Source(kind="estimate"),
        fits=fits,
        sweep=sweep_result,
    )


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
    from memprof.gpus import find_gpu

    if capacity is not None and gpu is not None:
        raise UsageError(f"give {param('capacity')} or {param('gpu')}, not both")
    card = find_gpu(gpu) if gpu is not None else None
    capacity_bytes = card.memory_bytes if card is not None else _capacity_bytes(capacity)
    return card, capacity_bytes, _reserve_bytes(reserve, capacity_bytes, card, device)


def _reserve_bytes(reserve: int | str | None, capacity: int | None, card: Any, device: str) -> int:
    """The reserve to keep free of the capacity: given, or the default for the card and device."""
    from memprof.gpus import reserve_of
    from memprof.units import parse_size

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
    from memprof.units import parse_size

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
    from memprof.sources.fake import estimate_target, fake_copy
    from memprof.sources.target import build_inputs

    def one(label: str, params: dict[str, Any]) -> RunResult:
        def make(session: Any) -> Inputs:
            if args or kwargs:
                fake_args, fake_kwargs = fake_copy((args, kwargs), session.mode, session.recorder.adopt)
                return Inputs(args=tuple(fake_args), kwargs=dict(fake_kwargs), source="python")
            return build_inputs(target, inputs, "cpu", params)

        name, module = target.attr_path, target.module
        return estimate_target(
            target.func, make, options, label=label, name=name, module=module, status=status
        )

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
    from memprof.model import Fits

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
