"""Eager and compiled runs of a target under torch.profiler. The only module that drives it.

One run: build nothing (inputs are made before), warm up without the profiler (compiling
there, timed as ``compile_seconds``), then profile ``repeat`` calls, each inside a
``record_function`` range so the analysis knows exactly where each call starts and ends.

Explained runs (the default) are made in two passes, because an op tracker (a dispatch mode)
changes what torch allocates: the measured calls track program state only (parameters,
gradients, optimizer state, inputs: their allocations are exactly an untracked run's, and the
frees of tensors made before the call give the exact peak), then, in eager mode, one more call
is profiled with ops, source lines, modules and saved tensors tracked, and explains the
measured peak (:mod:`memprof.sources.tracking`, :mod:`memprof.analysis.attribution`).
Compiled runs are explained in one pass from Inductor's provenance of each kernel.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
from torch.profiler import record_function

from memprof.core.errors import MemprofError, UsageError, UserCodeError, first_line, param, what_it_did
from memprof.core.gcpause import hold_to_end, imports_frozen, release_held, survivors_frozen
from memprof.core.names import aten_names
from memprof.core.recording import Recording
from memprof.core.records import CALL_MARKER, RawProfile, TrackedFacts
from memprof.model.kind import BLOCK_SOURCE, LIVE_SOURCE
from memprof.sources.failures import CallsFailed, check_ran, warm_up_error
from memprof.sources.live.dynamo_watch import DynamoWatch, frames_compiled
from memprof.sources.live.explaining import Explaining, explaining_call
from memprof.sources.live.mapped import mapped_files
from memprof.sources.live.measured import read_session
from memprof.sources.live.noise import Heard, hidden_torch_messages
from memprof.sources.live.profiling import (
    UNKNOWN_BLOCKS,
    cuda_counters_after,
    cuda_counters_before,
    cuda_device,
    memory_profile,
    quiet_profiler_stderr,
    sync,
    thread_starts,
    ticker,
    warm_profiler,
)
from memprof.sources.live.settle import settle_other_threads
from memprof.sources.live.timing import Timed, time_calls, timed_once
from memprof.sources.options import RunOptions, StatusFn
from memprof.sources.targets.target import Inputs, restore_import_path


def resolve_device(spec: str | None) -> str:
    """``auto`` (or None) -> "cuda:0" when CUDA is available, else "cpu"; validates the rest."""
    text = (spec or "auto").strip().lower()
    if text == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if text == "cpu":
        return "cpu"
    if text == "cuda" or (text.startswith("cuda:") and text[5:].isdigit()):
        if not torch.cuda.is_available():
            raise UsageError(
                f"{param('device', spec)}: CUDA is not available here (torch {torch.__version__}); "
                f"use {param('device', 'cpu')} or {param('device', 'auto')}"
            )
        index = int(text[5:]) if ":" in text else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise UsageError(
                f"{param('device', spec)}: there are {torch.cuda.device_count()} CUDA devices (0-based)"
            )
        return f"cuda:{index}"
    raise UsageError(
        f"{param('device')} {spec!r} is not a device; use auto, cpu, cuda or cuda:N (e.g. cuda:0)"
    )


def environment(device: str) -> dict[str, str]:
    """What the numbers depend on: torch, python, platform, the device's name."""
    if device.startswith("cuda"):
        device_name = torch.cuda.get_device_name(torch.device(device))
    else:
        device_name = platform.processor() or platform.machine()
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device_name": device_name,
        "cpu_count": str(os.cpu_count()),
    }


def tensor_bytes(obj: Any) -> int:
    """Bytes of the distinct tensor storages reachable from ``obj`` (args, lists, dicts, modules)."""
    seen: set[tuple[str, int]] = set()
    total = 0

    def visit(item: Any, depth: int) -> None:
        nonlocal total
        if depth > 6:
            return
        if isinstance(item, torch.Tensor):
            try:
                storage = item.untyped_storage()
                key = (str(item.device), storage.data_ptr())
                if key not in seen:
                    seen.add(key)
                    total += storage.nbytes()
            except (RuntimeError, NotImplementedError):
                total += item.numel() * item.element_size()
            return
        if isinstance(item, torch.nn.Module):
            for tensor in [*item.parameters(), *item.buffers()]:
                visit(tensor, depth + 1)
            return
        if isinstance(item, dict):
            for value in item.values():
                visit(value, depth + 1)
        elif isinstance(item, list | tuple | set):
            for value in item:
                visit(value, depth + 1)

    visit(obj, 0)
    return total


def _compile_config(options: RunOptions) -> contextlib.AbstractContextManager[Any]:
    """Inductor settings that make compiled runs explain themselves: the wrapper call appears
    as a profiler range. They are part of the compile cache key, so
    compiled code is cached under them like any other configuration."""
    if options.mode != "compile" or options.backend != "inductor":
        return contextlib.nullcontext()
    import torch._inductor.config as inductor_config

    # Each C++ kernel's own range is opened from its Python wrapper (CompileTracking), not
    # compiled into the kernel (``cpp.enable_kernel_profile``): the kernels are the user's own.
    patch: dict[str, Any] = {"profiler_mark_wrapper_call": True}
    if options.fresh_compile:
        patch["force_disable_caches"] = True
    return inductor_config.patch(patch)


def run_target(
    func: Callable[..., Any],
    inputs: Inputs,
    options: RunOptions,
    *,
    label: str | None = None,
    name: str = "target",
    status: StatusFn | None = None,
    module: ModuleType | None = None,
) -> Recording:
    """Profile ``func(*inputs.args, **inputs.kwargs)``: what it recorded, for
    :func:`memprof.pipeline.assemble.run_of` to make the run of.

    Steps: warm up (compiling there, in compile mode), profile ``options.repeat`` calls (with
    program state tracked), explain the peak (``options.explain``: one more call in eager
    mode), time calls without the profiler (``options.time_budget``), assemble the run.
    ``module`` is the target's module: its globals may hold the model and the optimizer.
    Raises :class:`UserCodeError` (exit 3) when the warm-up or the compilation fails, and
    :class:`CallsFailed` when a profiled call fails (with the records up to the failure: the
    error reported carries the peak reached before it and the op that was running).
    """
    if options.repeat < 1:
        raise UsageError(f"{param('repeat')} must be 1 or more, got {options.repeat}")
    if options.warmup < 0:
        raise UsageError(f"{param('warmup')} must be 0 or more, got {options.warmup}")
    if not options.time_budget >= 0:
        raise UsageError(f"{param('time_budget')} must be 0 or more seconds, got {options.time_budget}")
    explaining = Explaining(func, module)
    watch = DynamoWatch() if options.mode == "compile" else None
    import_path = list(sys.path)
    with hidden_torch_messages(show=options.verbose) as heard, _counted(heard), _compile_config(options):
        with survivors_frozen() as collect:
            with explaining.compiling(options), watch.watching() if watch else contextlib.nullcontext():
                with imports_frozen():
                    warm = _warm_up(func, inputs, options, name, status, watch)
                restore_import_path(import_path)  # the profiler imports lazily: what the calls removed
                measured = _profile_calls(
                    warm.fn,
                    inputs,
                    options,
                    label=label or options.mode,
                    name=name,
                    status=status,
                    explaining=explaining,
                    collect=collect,
                )
                restore_import_path(import_path)
            if measured.facts is not None and options.explain and options.mode == "eager":
                measured.explaining, measured.explaining_counters = explaining_call(
                    warm.fn, inputs, options, explaining
                )
                restore_import_path(import_path)
        # Timed last: the profiled call is the first after the warm-up (with --warmup 0, the
        # first of all), and state the calls leave (an optimizer's) does not grow before it.
        # With nothing frozen: a collection during a timed call walks what it would in the program.
        timed = _time(warm, inputs, options, name, status)
        restore_import_path(import_path)
    return _recording(measured, warm, inputs, options, timed, heard, watch)


@contextlib.contextmanager
def _counted(heard: Heard) -> Iterator[None]:
    """A failure carries how many of torch's messages were hidden meanwhile."""
    try:
        yield
    except (MemprofError, CallsFailed) as error:
        error.hidden_messages = heard
        raise


def _time(warm: _Warm, inputs: Inputs, options: RunOptions, name: str, status: StatusFn | None) -> Timed:
    """The wall times: calls timed without the profiler, after the profiled calls (and the
    call that explains the peak). A timed call that fails ends the timing; the profiled calls'
    numbers stand."""
    if warm.failed or options.time_budget <= 0:
        return Timed(())
    if warm.last_ms is not None and timed_once(warm.last_ms / 1e3, options.time_budget):
        # A call that takes the budget alone is timed once: the warm-up call, unprofiled, was.
        return Timed((warm.last_ms,), warm_up=True)
    if status:
        status(f"timing {name} ({options.mode}, without the profiler)")

    def call() -> Any:
        result = warm.fn(*inputs.args, **inputs.kwargs)
        sync(options.device)
        return result

    return time_calls(call, options.time_budget)


@dataclass
class _Warm:
    """What warming up gives: the function to profile (compiled in compile mode), the compile
    time, and notes (an eager warm-up call that failed)."""

    fn: Callable[..., Any]
    compile_seconds: float | None = None
    notes: list[str] = field(default_factory=list)
    failed: bool = False
    last_ms: float | None = None
    """The last warm-up call's wall time, when it times the call honestly: not the call that
    compiled, and on a GPU not the first call (which loads kernels and makes library handles)."""


def _compiled(func: Callable[..., Any], options: RunOptions, name: str) -> Callable[..., Any]:
    import torch._dynamo

    torch._dynamo.reset()
    kwargs: dict[str, Any] = {"backend": options.backend}
    if options.compile_mode != "default":
        kwargs["mode"] = options.compile_mode
    try:
        return torch.compile(func, **kwargs)
    except Exception as error:
        raise UserCodeError(
            f"torch.compile({name}) failed: {first_line(error)}; try {param('mode', 'eager')}"
        ) from None


def _warm_up(
    func: Callable[..., Any],
    inputs: Inputs,
    options: RunOptions,
    name: str,
    status: StatusFn | None,
    watch: DynamoWatch | None = None,
) -> _Warm:
    """The unprofiled calls; in compile mode at least one, which compiles and is timed, and up
    to :data:`EXTRA_WARM_UPS` more while the last one still compiled (a recompile inside the
    measured call would count the compiler's allocations as the call's)."""
    compiling = options.mode == "compile"
    warm = _Warm(fn=_compiled(func, options, name) if compiling else func)
    calls = max(options.warmup, 1) if compiling else options.warmup
    index = -1
    while (index := index + 1) < calls:
        what = (
            f"compiling {name} with torch.compile (backend {options.backend})"
            if index == 0 and compiling
            else None
        )
        start = time.perf_counter()
        compiled_before = frames_compiled() if compiling else 0
        try:
            progress = watch.progress if watch is not None and what else None
            with ticker(status if what else None, what or "", FIRST_COMPILE_HINT, progress):
                result = warm.fn(*inputs.args, **inputs.kwargs)
                sync(options.device)
        except (MemprofError, KeyboardInterrupt):
            raise
        except BaseException as error:  # sys.exit() included: the user's code failing
            if compiling:
                raise warm_up_error(error, name) from None
            # Eager: go straight to the profiled call, which fails the same way and so tells
            # how much memory was reached and where (what an out-of-memory user needs).
            warm.notes.append(f"warm-up call {index + 1} {what_it_did(error)}")
            warm.failed = True
            break
        check_ran(result, name)
        del result
        if index == calls - 1 and calls < max(options.warmup, 1) + EXTRA_WARM_UPS and compiling:
            # The last call compiled again (a guard failed: the state the first call made, an
            # optimizer's): one more, so that the measured call compiles nothing.
            calls += frames_compiled() != compiled_before
        if not what and (index > 0 or options.device == "cpu"):
            warm.last_ms = (time.perf_counter() - start) * 1e3
        if what:
            made = watch.first_call_done() if watch is not None else ""
            warm.compile_seconds = time.perf_counter() - start
            if status:
                status(f"compiled {name} in {warm.compile_seconds:.1f} s{made}")
        if index == calls - 1 and not compiling and _ddp_rebuilds(inputs):
            # Every rank decides alike (each has made the same calls), so the collectives meet.
            calls += 1
            warm.notes.append(
                "one more warm-up call than asked: DistributedDataParallel rebuilds its gradient "
                "buckets during its second training call, which the measured call would have been"
            )
    return warm


EXTRA_WARM_UPS = 3
"""Calls added to a compiled run's warm-up while its last one still compiled."""


def _ddp_rebuilds(inputs: Inputs) -> bool:
    """Whether a DistributedDataParallel module among the arguments rebuilds its gradient
    buckets in its next training call."""
    from memprof.sources.tracking.state import ddp_class, rebuilds_buckets

    ddp = ddp_class()
    if ddp is None:
        return False
    values = [*inputs.args, *inputs.kwargs.values()]
    return any(
        isinstance(module, ddp) and rebuilds_buckets(module)
        for value in values
        if isinstance(value, torch.nn.Module)
        for module in value.modules()
    )


FIRST_COMPILE_HINT = "a first compile can take minutes; later runs reuse Inductor's cache"


@dataclass
class _Measured:
    """What the profiled calls give: the records, the wall time of each call, the device's own
    counters, torch's printed table (when kept), the program state tracked (None when not
    tracked; ``explaining``: that of the explaining call) and what the source noticed on the
    way."""

    label: str
    raw: RawProfile
    walls: list[float]
    device_counters: dict[str, int]
    notes: list[str]
    threads: list[str]
    table: str | None
    mapped: list[tuple[str, int]] = field(default_factory=list)
    facts: TrackedFacts | None = None
    explaining_notes: list[str] = field(default_factory=list)
    explaining: TrackedFacts | None = None
    explaining_counters: dict[str, int] = field(default_factory=dict)


def _profile_calls(
    fn: Callable[..., Any],
    inputs: Inputs,
    options: RunOptions,
    *,
    label: str,
    name: str,
    status: StatusFn | None,
    explaining: Explaining,
    collect: Callable[[], None],
) -> _Measured:
    """``options.repeat`` calls under torch.profiler, each in its ``record_function`` range,
    with program state tracked. Raises the failure of a call (:class:`CallsFailed`, with the
    records up to it) after reading the records."""
    cuda = options.device.startswith("cuda")
    counters = cuda_counters_before(options.device) if cuda else {}
    if status:
        status(f"profiling {name} ({label}, {options.repeat} call{'s' if options.repeat > 1 else ''})")
    warm_profiler(options.device)
    release_held()  # an earlier run's profile
    # Garbage made before (by the inputs factory, the warm-up, earlier runs in this process) is
    # collected now, not by a collection during a measured call, where its frees would count.
    collect()
    walls: list[float] = []
    failure: BaseException | None = None
    result: Any = None
    notes: list[str] = []
    with (
        quiet_profiler_stderr(notes),
        thread_starts() as threads,
        mapped_files() as mapped,
        explaining.tracked(explaining.tracker(inputs, options, ops=False)) as tracker,
        memory_profile(options.device) as prof,
    ):
        for _ in range(options.repeat):
            result = None  # the previous call's output is freed here, between calls
            try:
                with record_function(CALL_MARKER):
                    start = time.perf_counter()
                    result = fn(*inputs.args, **inputs.kwargs)
                    sync(options.device)
                    walls.append((time.perf_counter() - start) * 1e3)
            except KeyboardInterrupt:
                raise
            except BaseException as error:  # sys.exit() included: the user's code failing
                failure = error
                break
        settle_other_threads()  # a collective's worker may still be closing its profiler range
    check_ran(result, name)
    del result  # after the profile: the last output counts in net_bytes, its free is not recorded
    if cuda:
        counters.update(cuda_counters_after(options.device))
    raw, read = read_session(prof, options.device, tracker, compiled=options.mode == "compile")
    if failure is not None:
        raise CallsFailed(failure, name, raw, options)
    table = None
    if options.keep_table:
        sort_by = "self_cpu_memory_usage" if not cuda else "self_device_memory_usage"
        table = prof.key_averages().table(sort_by=sort_by, row_limit=-1)
    facts = explaining.facts(tracker, prof, read=read) if tracker is not None else None
    if not (options.explain and options.mode == "eager"):
        hold_to_end(prof)  # no explaining call follows, which must not find this profile alive
    return _Measured(label, raw, walls, counters, notes, threads, table, mapped, facts, explaining.notes)


def _recording(
    measured: _Measured,
    warm: _Warm,
    inputs: Inputs,
    options: RunOptions,
    timed: Timed,
    heard: Heard,
    watch: DynamoWatch | None = None,
    source: str = LIVE_SOURCE,
) -> Recording:
    """What the profiled calls recorded, with the program state tracked and what the source
    measured and noticed: the run's recording (:func:`memprof.pipeline.assemble.run_of` makes
    the run of it)."""
    tracked = measured.facts is not None
    notes = [*warm.notes, *(_reworded(note, tracked) for note in measured.notes)]
    if measured.threads:
        names = ", ".join(sorted(set(measured.threads))[:3])
        notes.append(
            f"{len(measured.threads)} Python thread(s) started during the call ({names}); "
            "torch's profiler records only the calling thread, so their allocations are not counted"
        )
    notes += measured.explaining_notes
    cuda = options.device.startswith("cuda")
    recording = Recording(
        label=measured.label,
        mode=options.mode,
        source=source,
        raw=measured.raw,
        device=options.device,
        facts=measured.facts,
        # Calls ran before the measured ones (warm-up calls, or the compiling call): not a block.
        warm=source == LIVE_SOURCE and (options.warmup > 0 or options.mode == "compile"),
        explain=options.explain,
        explaining=measured.explaining,
        explaining_counters=measured.explaining_counters,
        explained_by_call=options.explain and options.mode == "eager" and source == LIVE_SOURCE,
        op_tracked=source == BLOCK_SOURCE,
        counters=measured.device_counters,
        device_facts=cuda_device(options.device) if cuda else {},
        walls_ms=tuple(timed.walls_ms or measured.walls),
        wall_timing=("warm-up" if timed.warm_up else "timed") if timed.walls_ms else "profiled",
        repeat=options.repeat,
        inputs_bytes=tensor_bytes((inputs.args, inputs.kwargs)) if not tracked else 0,
        vocabulary=torch_aten_vocabulary(),
        notes=tuple(notes),
        mapped_files=tuple(measured.mapped),
        fields={
            "compile_seconds": warm.compile_seconds,
            "compile": watch.section() if watch is not None else None,
            "torch_table": measured.table,
            "torch_messages": heard.lines(),
        },
    )
    return recording


def block_run(
    raw: RawProfile,
    facts: TrackedFacts | None,
    *,
    label: str,
    options: RunOptions,
    inputs: Inputs,
    walls: list[float],
    counters: dict[str, int],
    notes: list[str],
    threads: list[str],
    mapped: list[tuple[str, int]],
    heard: Heard,
) -> Recording:
    """The recording of a block profiled in one pass where it runs (:mod:`memprof.sources.block`),
    its ops tracked: no warm-up, no timed calls, no explaining call; made as
    :func:`run_target`'s are."""
    measured = _Measured(label, raw, walls, counters, notes, threads, None, mapped, facts)
    warm = _Warm(fn=lambda: None)
    return _recording(measured, warm, inputs, options, Timed(()), heard, source=BLOCK_SOURCE)


def _reworded(note: str, tracked: bool) -> str:
    """torch's "memory block of unknown size" warning, said as what it means for the run: the
    tracked state's frees are counted in explained runs."""
    if not tracked or not note.startswith(UNKNOWN_BLOCKS):
        return note
    return (
        f"{UNKNOWN_BLOCKS} without a record of the free; memprof counts the frees of the "
        "arguments', model's and optimizer's tensors (and of tensors held by the target's module), "
        "not of others"
    )


@functools.cache
def torch_aten_vocabulary() -> frozenset[str]:
    """Every aten op name this torch knows (``add``, ``_to_copy``, ...): splits fused kernel
    names into the ops they replaced, stored with the run so a loaded report never needs it."""
    try:
        all_ops = torch._C._dispatch_get_all_op_names()
    except Exception:  # pragma: no cover - private API moved; the run's own names still work
        all_ops = []
    return aten_names(all_ops)
