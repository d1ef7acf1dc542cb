"""The Python API, the library's front door: profile a callable (:func:`profile`), compare
several (:func:`compare`), profile a block of code where it runs (:func:`track`), or read
traces and snapshots recorded elsewhere (:func:`analyze`), into a :class:`memprof.Report`. The
command line calls the same functions."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from memprof.core.errors import UsageError, UserCodeError, param
from memprof.library.blocks import track as track  # the API's front door for blocks of code
from memprof.library.estimating import estimate as estimate  # ... and for estimates
from memprof.model.recipe import Recipe
from memprof.model.recorded import Source
from memprof.model.report import Report
from memprof.model.run import RunResult
from memprof.pipeline import build_report, failed_run
from memprof.sources.options import RunOptions, StatusFn
from memprof.sources.targets.target import Inputs, InputsFactory, Target

if TYPE_CHECKING:
    import pandas as pd

    from memprof.core.recording import Recording

MODES = ("eager", "compile", "both")


@dataclass(frozen=True)
class Variant:
    """One thing to profile: ``target`` (a callable, or a ``pkg.mod:func`` /
    ``path/to/file.py:func`` spec) called with ``inputs`` in ``mode``, shown as ``label``.

    ``inputs``: :class:`memprof.sources.targets.target.Inputs` (the arguments themselves), an inputs
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
    timeout: float | None = None,
    group_modules: str | Sequence[str] | None = None,
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
    progress lines (``status=memprof.library.api.slow_steps(sys.stderr)``: only steps that take long,
    as :func:`profile` says them). ``settings`` are those of :class:`memprof.sources.options.RunOptions`:
    ``device`` ("auto", the default, picks CUDA when available), ``warmup``, ``repeat``,
    ``compile_mode``, ``backend``, ``fresh_compile``, ``keep_table`` (keep torch's printed
    table of each run), ``time_budget`` (seconds of calls timed without the profiler for the
    wall time, default 0.2; 0: the profiled calls' times), ``verbose`` (let torch's own
    warnings and log messages through), ``explain`` (default True: explain each peak, see
    :func:`profile`). ``timeout``: seconds the whole comparison may take (the targets' imports
    and inputs included); past them, :class:`memprof.core.errors.UserCodeError` naming the line
    the code was at (default: no limit). ``group_modules``: each explained run's modules also
    grouped by ``"class"`` or path patterns (``run.module_groups``, as :func:`group_modules`).

    When a target's code fails, the others are still profiled; then the first failure is
    raised (:class:`memprof.core.errors.UserCodeError`) with ``error.report`` holding every run,
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
    options = _run_options(settings)
    grouping = module_grouping(group_modules)
    from memprof.sources.deadline import time_limit

    try:
        with time_limit(timeout):
            return grouped_modules(_profile_variants(variants, options, status), grouping)
    except UserCodeError as error:
        if error.report is not None:  # what did run, grouped as asked
            error.report = grouped_modules(error.report, grouping)
        raise


def module_grouping(by: str | Sequence[str] | None) -> tuple[str, ...]:
    """``group_modules`` read: ``("class",)``, path patterns, or () when not given; a bad
    grouping is a usage error naming the parameter."""
    if not by:
        return ()
    from memprof.analysis.module_groups import parse_grouping

    try:
        return parse_grouping(by)
    except UsageError as error:
        raise UsageError(f"{param('group_modules')}: {error.message}") from None


def grouped_modules(report: Report, grouping: Sequence[str]) -> Report:
    """``report`` with each explained run's modules grouped by ``grouping`` (``run.module_groups``)."""
    if not grouping:
        return report
    from memprof.analysis.module_groups import group_modules as grouped

    runs = {
        label: replace(run, module_groups=grouped(run.module_stats, grouping))
        for label, run in report.runs.items()
    }
    return replace(report, runs=runs)


SLOW_STEP_SECONDS, SLOW_STEP_EVERY = 5, 30
""":func:`slow_steps` says nothing of a step that takes less than :data:`SLOW_STEP_SECONDS`
(a compile, say), and of a longer one a line then and every :data:`SLOW_STEP_EVERY` seconds."""


def slow_steps(stream: Any) -> StatusFn:
    """Status lines for the Python API (:func:`profile` uses it): only steps that take long (``memprof:
    compiling step with torch.compile (backend inductor) ... 5 s (a first compile can take
    minutes; ...)``), on ``stream``, so that a long compile is never silent."""
    import re

    said: dict[str, float] = {}

    def status(message: str) -> None:
        found = re.fullmatch(r"(?P<what>.*?) \.\.\. (?P<seconds>\d+) s(?:\W.*)?", message)
        if found is None:
            return
        what, seconds = found.group("what"), float(found.group("seconds"))
        last = said.get(what)
        if seconds >= SLOW_STEP_SECONDS and (last is None or seconds - last >= SLOW_STEP_EVERY):
            said[what] = seconds
            print(f"memprof: {message}", file=stream, flush=True)

    return status


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
    timeout: float | None = None,
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
    instrumented call in eager mode and keeps Inductor's provenance of each kernel in compile
    mode (saved with the compiled graphs in Inductor's caches: a later run compiles nothing again).
    ``timeout``: seconds the calls may take in all (default: no limit). A step that takes more
    than 5 s (a compile) says so on stderr, then every 30 s. Raises
    :class:`memprof.core.errors.UserCodeError` if ``fn`` raises or runs past ``timeout``.

    >>> import torch, memprof
    >>> report = memprof.profile(torch.ones, 1024, 1024)
    >>> report.runs["eager"].peak_bytes
    4194304
    """
    inputs = Inputs(args=tuple(args), kwargs=dict(kwargs), source="python")
    return compare(
        Variant(target=fn, inputs=inputs),
        status=slow_steps(sys.stderr),  # a long compile is never silent
        mode=mode,
        device=device,
        warmup=warmup,
        repeat=repeat,
        compile_mode=compile_mode,
        backend=backend,
        time_budget=time_budget,
        verbose=verbose,
        explain=explain,
        timeout=timeout,
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
    :class:`memprof.core.errors.InputError`; a snapshot that names any Python global is refused
    before anything in it runs.

    >>> import memprof
    >>> report = memprof.analyze("rank0.pt.trace.json.gz")  # doctest: +SKIP
    >>> report.runs["cuda:0"].footprint_bytes  # doctest: +SKIP
    """
    from memprof.analysis.allocator import AllocatorSettings
    from memprof.library.recordings import analyze_recordings

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
    from memprof.core.gcpause import memprof_freezes

    with memprof_freezes():
        return _profiled(variants, options, status)


def _profiled(variants: Sequence[Variant], options: RunOptions, status: StatusFn | None) -> Report:
    from memprof.core.gcpause import imports_frozen
    from memprof.sources.live.run import environment, resolve_device, run_target
    from memprof.sources.targets.target import restore_import_path

    device = resolve_device(options.device)
    import_path = list(sys.path)
    with imports_frozen():
        resolved = _resolve(variants, device)
    restore_import_path(import_path)  # what the target's import removed
    runs: dict[str, RunResult] = {}
    first_error: UserCodeError | None = None
    for variant, (target, inputs) in zip(variants, resolved, strict=True):
        assert variant.label is not None and variant.mode is not None
        run_options = replace(options, device=device, mode=variant.mode)
        recipe = _recipe(target, inputs, variant, device)
        try:
            run = _run_of(
                run_target,
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
            run = failed_run(variant.label, variant.mode, error.message)
        runs[variant.label] = replace(run, recipe=recipe)
    names = " vs ".join(dict.fromkeys(target.spec for target, _ in resolved))
    report = build_report(
        target=names, device=device, runs=runs, environment=environment(device), source=Source(kind="live")
    )
    if first_error is not None:
        first_error.report = report
        raise first_error
    return report


def _run_of(run_target: Callable[..., Recording], *args: Any, **kwargs: Any) -> RunResult:
    """The run of what ``run_target(*args, **kwargs)`` recorded; a profiled call's failure
    reported with the peak its records reached before it."""
    from memprof.analysis.peaks import analyze
    from memprof.pipeline.assemble import run_of
    from memprof.sources.failures import CallsFailed

    try:
        return run_of(run_target(*args, **kwargs))
    except CallsFailed as failed:
        numbers = analyze(failed.raw).numbers
        raise failed.reported(numbers.peak_bytes, numbers.peak_op, numbers.net_bytes) from None


def _recipe(target: Target, inputs: Inputs, variant: Variant, device: str) -> Recipe:
    """How a run is made, as its report records it (``run.recipe``)."""
    settings = {name: str(value) for name, value in (variant.inputs_kwargs or {}).items()}
    return Recipe(
        target=target.spec,
        inputs=inputs.source,
        settings=settings,
        mode=variant.mode or "eager",
        device=device,
    )


def _resolve(variants: Sequence[Variant], device: str) -> list[tuple[Target, Inputs]]:
    """Each variant's target and inputs. A target named twice is imported once and, with the
    same inputs factory, shares one set of inputs (as eager and compiled runs of it do)."""
    from memprof.sources.targets.target import build_inputs, check_measurable, resolve

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
