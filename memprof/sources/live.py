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
import gc
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from memprof.analysis.attribution import Attribution, attribute, combine, with_device_counters
from memprof.analysis.peaks import analyze, responsible_op, stack_at
from memprof.analysis.running import ops_at
from memprof.errors import MemprofError, UsageError, UserCodeError, format_user_traceback, param, what_it_did
from memprof.model import RunResult
from memprof.model.timeline import CategoryTimeline, Timeline
from memprof.names import aten_names, fused_kernels
from memprof.pipeline import build_run
from memprof.records import CALL_MARKER, Allocations, RawProfile, TrackedFacts
from memprof.sources.allocator_history import History, recorded, with_addresses
from memprof.sources.failures import out_of_memory_message, traced_error, traced_user_error
from memprof.sources.kineto import raw_from_profiler
from memprof.sources.mapped import MAPPED_RANGE, mapped_files, mapped_note
from memprof.sources.noise import Heard, hidden_torch_messages
from memprof.sources.options import RunOptions
from memprof.sources.settle import settle_other_threads
from memprof.sources.target import Inputs, restore_import_path, unrun_result
from memprof.sources.timing import Timed, time_calls
from memprof.sources.tracking import CompileTracking, Tracker
from memprof.units import format_bytes

StatusFn = Callable[[str], None]


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


@contextlib.contextmanager
def _quiet_profiler_stderr(notes: list[str]) -> Iterator[None]:
    """Keep torch's C++ lines (``USDT … profiler_start``, "Memory block of unknown size …") off
    the terminal; everything else written to fd 2 meanwhile is passed on afterwards."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real fd 2 (embedded interpreters)
        yield
        return
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            unknown_blocks = 0
            for line in sink.read().decode("utf-8", "replace").splitlines(keepends=True):
                if line.startswith("USDT:") or "SyncActivityProfilerHandler" in line:
                    continue
                if "Memory block of unknown size was allocated before the profiling started" in line:
                    unknown_blocks += 1
                    continue
                sys.stderr.write(line)
            if unknown_blocks:
                notes.append(
                    f"{unknown_blocks} block(s) allocated before profiling were freed during it; "
                    "those frees are not in the records, so the live bytes never dip below the start"
                )


@contextlib.contextmanager
def _ticker(status: StatusFn | None, what: str, expect: str = "") -> Iterator[None]:
    """Tell the user what is happening and for how long, every 5 s, until done; the first of
    those lines adds ``expect`` (what to expect when it takes long)."""
    if status is None:
        yield
        return
    status(f"{what} ...")
    start = time.perf_counter()
    done = threading.Event()

    def tick() -> None:
        said = False
        while not done.wait(5.0):
            hint = f" ({expect})" if expect and not said else ""
            status(f"{what} ... {time.perf_counter() - start:.0f} s{hint}")
            said = True

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@contextlib.contextmanager
def _thread_starts() -> Iterator[list[str]]:
    """Names of the Python threads started meanwhile: torch's profiler records only the calling
    thread, so what those threads allocate is missing from the numbers and deserves a warning."""
    started: list[str] = []
    original = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        original(self)

    threading.Thread.start = start  # type: ignore[method-assign]
    try:
        yield started
    finally:
        threading.Thread.start = original  # type: ignore[method-assign]


def _is_out_of_memory(error: BaseException) -> bool:
    # CPU allocation failures surface as RuntimeError from c10's DefaultCPUAllocator.
    return isinstance(error, torch.OutOfMemoryError | MemoryError) or (
        isinstance(error, RuntimeError) and "can't allocate memory" in str(error)
    )


def _is_compile_error(error: BaseException) -> bool:
    module = type(error).__module__ or ""
    return module.startswith(("torch._dynamo", "torch._inductor")) or type(error).__name__ in {
        "BackendCompilerFailed",
        "InductorError",
        "InvalidCxxCompiler",
    }


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def _compile_config(options: RunOptions) -> contextlib.AbstractContextManager[Any]:
    """Inductor settings that make compiled runs explain themselves: fused kernels and the
    wrapper call appear as profiler ranges. They are part of the compile cache key, so
    compiled code is cached under them like any other configuration."""
    if options.mode != "compile" or options.backend != "inductor":
        return contextlib.nullcontext()
    import torch._inductor.config as inductor_config

    patch: dict[str, Any] = {"cpp.enable_kernel_profile": True, "profiler_mark_wrapper_call": True}
    if options.fresh_compile:
        patch["force_disable_caches"] = True
    return inductor_config.patch(patch)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(torch.device(device))


def run_target(
    func: Callable[..., Any],
    inputs: Inputs,
    options: RunOptions,
    *,
    label: str | None = None,
    name: str = "target",
    status: StatusFn | None = None,
    module: ModuleType | None = None,
) -> RunResult:
    """Profile ``func(*inputs.args, **inputs.kwargs)`` and return its :class:`RunResult`.

    Steps: warm up (compiling there, in compile mode), profile ``options.repeat`` calls (with
    program state tracked), explain the peak (``options.explain``: one more call in eager
    mode), time calls without the profiler (``options.time_budget``), assemble the run.
    ``module`` is the target's module: its globals may hold the model and the optimizer.
    Raises :class:`UserCodeError` (exit 3) when the function or its compilation fails; the
    message carries the peak reached before the failure and the op that was running.
    """
    if options.repeat < 1:
        raise UsageError(f"{param('repeat')} must be 1 or more, got {options.repeat}")
    if options.warmup < 0:
        raise UsageError(f"{param('warmup')} must be 0 or more, got {options.warmup}")
    if not options.time_budget >= 0:
        raise UsageError(f"{param('time_budget')} must be 0 or more seconds, got {options.time_budget}")
    explaining = _Explaining(func, module)
    import_path = list(sys.path)
    with hidden_torch_messages(show=options.verbose) as heard, _counted(heard), _compile_config(options):
        with explaining.compiling(options):
            warm = _warm_up(func, inputs, options, name, status)
            restore_import_path(import_path)  # the profiler imports lazily: what the calls removed
            measured = _profile_calls(
                warm.fn,
                inputs,
                options,
                label=label or options.mode,
                name=name,
                status=status,
                explaining=explaining,
            )
            restore_import_path(import_path)
        if measured.explained is not None and options.explain and options.mode == "eager":
            measured.explained = _explaining_call(warm.fn, inputs, options, explaining, measured)
            restore_import_path(import_path)
        # Timed last: the profiled call is the first after the warm-up (with --warmup 0, the
        # first of all), and state the calls leave (an optimizer's) does not grow before it.
        timed = _time(warm, inputs, options, name, status)
        restore_import_path(import_path)
    return _assemble(measured, warm, inputs, options, timed, heard)


@contextlib.contextmanager
def _counted(heard: Heard) -> Iterator[None]:
    """A failure carries how many of torch's messages were hidden meanwhile."""
    try:
        yield
    except MemprofError as error:
        error.hidden_messages = heard
        raise


def _time(warm: _Warm, inputs: Inputs, options: RunOptions, name: str, status: StatusFn | None) -> Timed:
    """The wall times: calls timed without the profiler, after the profiled calls (and the
    call that explains the peak). A timed call that fails ends the timing; the profiled calls'
    numbers stand."""
    if warm.failed or options.time_budget <= 0:
        return Timed(())
    if status:
        status(f"timing {name} ({options.mode}, without the profiler)")

    def call() -> Any:
        result = warm.fn(*inputs.args, **inputs.kwargs)
        _sync(options.device)
        return result

    return time_calls(call, options.time_budget)


class _Explaining:
    """What explaining a run needs besides the call: the target (its parameters name the
    arguments; a bound method adds its object), its module, and in compile mode Inductor's
    provenance (:class:`CompileTracking`, entered around the compiling call and the measured
    calls). Tracking that fails to start leaves a note and the run unexplained, never failed."""

    def __init__(self, func: Callable[..., Any], module: ModuleType | None) -> None:
        self.func = func
        self.module = module
        self.tracking: CompileTracking | None = None
        self.notes: list[str] = []
        # The measured calls' records and facts, when their explanation was left for later.
        self._measured: tuple[RawProfile | None, TrackedFacts, bool] | None = None

    @contextlib.contextmanager
    def compiling(self, options: RunOptions) -> Iterator[None]:
        """In compile mode with Inductor and ``explain``: Inductor's provenance tracking."""
        if not (options.explain and options.mode == "compile" and options.backend == "inductor"):
            yield
            return
        tracking = CompileTracking()
        try:
            tracking.__enter__()
        except Exception as error:  # private Inductor settings moved: explain by kernel only
            self.notes.append(f"Inductor's provenance is not available ({_first_line(error)})")
            yield
            return
        self.tracking = tracking
        try:
            yield
        finally:
            tracking.__exit__(None, None, None)

    def tracker(self, inputs: Inputs, options: RunOptions, *, ops: bool) -> Tracker:
        return Tracker(
            inputs.args,
            inputs.kwargs,
            func=self.func,
            module=self.module,
            device=options.device,
            ops=ops,
            compiled=options.mode == "compile",
        )

    @contextlib.contextmanager
    def tracked(self, tracker: Tracker | None) -> Iterator[Tracker | None]:
        """``tracker`` entered (None when it could not start: a note says why)."""
        if tracker is not None:
            try:
                tracker.__enter__()
            except Exception as error:
                self.notes.append(f"program state could not be tracked ({_first_line(error)})")
                tracker = None
        try:
            yield tracker
        finally:
            if tracker is not None:
                tracker.__exit__(None, None, None)

    def attribute(
        self,
        tracker: Tracker,
        prof: Any,
        raw: RawProfile | None,
        *,
        warm: bool,
        explain: bool = True,
        later: bool = False,
        complete: Callable[[Allocations], Allocations | None] | None = None,
    ) -> Attribution | None:
        """The tracked calls' peak explained (``explain=False``: their numbers only; ``later``:
        what explaining them needs is kept for :meth:`measured`); None (with a note) when that
        fails."""
        try:
            facts = tracker.facts(prof, compiled=self.tracking, complete=complete)
            if later:
                self._measured = (raw, facts, warm)
            return attribute(raw, facts, warm=warm, explain=explain)
        except Exception as error:
            self.notes.append(
                f"memprof could not explain the peak ({_first_line(error)}); the numbers are the "
                "allocator records'"
            )
            return None

    def measured(self, numbers: Attribution) -> Attribution:
        """The measured calls explained by the program state they tracked: what an explained
        eager run shows when its explaining call cannot explain more (``numbers``: those calls'
        attribution without the explanation, returned as is when it cannot be made)."""
        if self._measured is None:
            return numbers
        raw, facts, warm = self._measured
        try:
            return attribute(raw, facts, warm=warm)
        except Exception as error:
            self.notes.append(f"memprof could not explain the peak ({_first_line(error)})")
            return numbers


def _explaining_call(
    fn: Callable[..., Any], inputs: Inputs, options: RunOptions, explaining: _Explaining, measured: _Measured
) -> Attribution | None:
    """One more eager call, profiled with ops, lines, modules and saved tensors tracked: what
    is live at the measured peak. The measured numbers stay those of the measured calls; a
    note says when this call's peak differs (:func:`combine`)."""
    assert measured.explained is not None
    cuda = options.device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    ignored: list[str] = []  # torch's lines about this call repeat the measured calls'
    gc.collect()  # as before the measured calls
    counters = _cuda_counters_before(options.device) if cuda else {}
    with explaining.tracked(explaining.tracker(inputs, options, ops=True)) as tracker:
        if tracker is None:
            # The call is still made: every rank of a distributed job makes as many calls
            # (their collectives must meet), whether or not its tracking started.
            try:
                fn(*inputs.args, **inputs.kwargs)
            except KeyboardInterrupt:
                raise
            except BaseException:  # sys.exit() included: the measured calls are what counts
                pass
            return explaining.measured(measured.explained)
        history = recorded(options.device) if cuda else contextlib.nullcontext(History())
        try:
            with (
                _quiet_profiler_stderr(ignored),
                history as allocator,
                profile(activities=activities, profile_memory=True) as prof,
            ):
                with record_function(CALL_MARKER):
                    # Its result is dropped at once, inside the profile: only the peak matters here.
                    fn(*inputs.args, **inputs.kwargs)
                    _sync(options.device)
                settle_other_threads()
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # sys.exit() included
            explaining.notes.append(
                f"the explaining call raised {_first_line(error)}: only program state (parameters, "
                "gradients, optimizer state, inputs) is explained"
            )
            return explaining.measured(measured.explained)
    complete = _completion(prof, options.device, allocator) if cuda else None
    explained = explaining.attribute(tracker, prof, None, warm=True, complete=complete)
    if explained is None:
        return explaining.measured(measured.explained)
    if cuda:
        counters.update(_cuda_counters_after(options.device))
        counted = counters["max_memory_allocated_bytes"] - counters["memory_allocated_start_bytes"]
        if _differ(counted, explained.peak_bytes):
            # The records could not all be read with their addresses (torch's event tree lacks
            # some, and the allocator's history did not line up with them): what they explain is
            # not this peak. The measured calls' own explanation is.
            explaining.notes.append(
                f"the explaining call's records put its peak {explained.peak_bytes:,} B above its "
                f"start, torch.cuda.max_memory_allocated() {counted:,} B (its records could not all be "
                "read with their addresses): what is live at the peak is explained from the measured "
                "calls, by program state only (no ops or source lines for what the call made)"
            )
            return explaining.measured(measured.explained)
    return combine(measured.explained, explained)


def _completion(
    prof: Any, device: str, history: History
) -> Callable[[Allocations], Allocations | None] | None:
    """What completes the explaining call's records of ``device`` read from the event tree
    (which lacks some frees on CUDA): the flat list's records, each with its address from the
    allocator's history, checked against the tree's. None when no history was recorded."""
    if history.sign is None:
        return None
    raw = raw_from_profiler(prof, device_type="CUDA", device_index=torch.device(device).index or 0)
    order = np.argsort(raw.mem_time, kind="stable")
    time, nbytes = raw.mem_time[order], raw.mem_bytes[order]
    return lambda tree: with_addresses(tree, time, nbytes, history)


def _differ(counted: int, recorded: int) -> bool:
    """More than 1% (and 1 MiB) apart: the records missed what the device's counters saw."""
    return abs(counted - recorded) > max(0.01 * max(counted, recorded), 1 << 20)


@dataclass
class _Warm:
    """What warming up gives: the function to profile (compiled in compile mode), the compile
    time, and notes (an eager warm-up call that failed)."""

    fn: Callable[..., Any]
    compile_seconds: float | None = None
    notes: list[str] = field(default_factory=list)
    failed: bool = False


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
            f"torch.compile({name}) failed: {_first_line(error)}; try {param('mode', 'eager')}"
        ) from None


def _warm_up(
    func: Callable[..., Any], inputs: Inputs, options: RunOptions, name: str, status: StatusFn | None
) -> _Warm:
    """The unprofiled calls; in compile mode at least one, which compiles and is timed."""
    compiling = options.mode == "compile"
    warm = _Warm(fn=_compiled(func, options, name) if compiling else func)
    for index in range(max(options.warmup, 1) if compiling else options.warmup):
        what = (
            f"compiling {name} with torch.compile (backend {options.backend})"
            if index == 0 and compiling
            else None
        )
        start = time.perf_counter()
        try:
            with _ticker(status if what else None, what or "", FIRST_COMPILE_HINT):
                result = warm.fn(*inputs.args, **inputs.kwargs)
                _sync(options.device)
        except (MemprofError, KeyboardInterrupt):
            raise
        except BaseException as error:  # sys.exit() included: the user's code failing
            if compiling:
                raise _warm_up_error(error, name) from None
            # Eager: go straight to the profiled call, which fails the same way and so tells
            # how much memory was reached and where (what an out-of-memory user needs).
            warm.notes.append(f"warm-up call {index + 1} {what_it_did(error)}")
            warm.failed = True
            break
        _check_ran(result, name)
        del result
        if what:
            warm.compile_seconds = time.perf_counter() - start
            if status:
                status(f"compiled {name} in {warm.compile_seconds:.1f} s")
    return warm


FIRST_COMPILE_HINT = "a first compile takes 10-60 s; later runs use the cache"


def _warm_up_error(error: BaseException, name: str) -> UserCodeError:
    """A failed first compiled call: the user's code failing while torch.compile traced it,
    the compiler's failure, or the user's code raising."""
    traced = traced_user_error(error)
    if traced is not None:
        return traced_error(traced, name)
    if _is_compile_error(error):
        return UserCodeError(
            f"torch.compile of {name} failed: {_first_line(error)}; try {param('mode', 'eager')}"
        )
    return UserCodeError(
        f"{name} {what_it_did(error)} (first compiled call)",
        user_traceback=format_user_traceback(error),
        raised=error,
    )


_profiler_started: set[tuple[str, ...]] = set()


def _warm_profiler(activities: list[ProfilerActivity]) -> None:
    """Start and stop one throw-away profile per process and set of activities. The first
    profiler session in a process is slow to start (~1 s), and calls timed inside it often ran
    slower than the same calls in later sessions: without this, the first of several compared
    runs would tend to look slower than it is."""
    key = tuple(sorted(str(a) for a in activities))
    if key in _profiler_started:
        return
    notes: list[str] = []
    with _quiet_profiler_stderr(notes), profile(activities=activities, profile_memory=True):
        torch.ones(1).add_(1)
    _profiler_started.add(key)


@dataclass
class _Measured:
    """What the profiled calls give: the records, the wall time of each call, the device's own
    counters, torch's printed table (when kept), the explained peak (None when not tracked)
    and what the source noticed on the way."""

    label: str
    raw: RawProfile
    walls: list[float]
    device_counters: dict[str, int]
    notes: list[str]
    threads: list[str]
    table: str | None
    mapped: list[tuple[str, int]] = field(default_factory=list)
    explained: Attribution | None = None
    explaining_notes: list[str] = field(default_factory=list)


def _profile_calls(
    fn: Callable[..., Any],
    inputs: Inputs,
    options: RunOptions,
    *,
    label: str,
    name: str,
    status: StatusFn | None,
    explaining: _Explaining,
) -> _Measured:
    """``options.repeat`` calls under torch.profiler, each in its ``record_function`` range,
    with program state tracked. Raises the failure of a call (with the peak reached before it)
    after reading the records."""
    cuda = options.device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    counters = _cuda_counters_before(options.device) if cuda else {}
    if status:
        status(f"profiling {name} ({label}, {options.repeat} call{'s' if options.repeat > 1 else ''})")
    _warm_profiler(activities)
    # Garbage made before (by the inputs factory, the warm-up, earlier runs in this process) is
    # collected now, not by a collection during a measured call, where its frees would count.
    gc.collect()
    walls: list[float] = []
    failure: BaseException | None = None
    result: Any = None
    notes: list[str] = []
    with (
        _quiet_profiler_stderr(notes),
        _thread_starts() as threads,
        mapped_files() as mapped,
        explaining.tracked(explaining.tracker(inputs, options, ops=False)) as tracker,
        profile(activities=activities, profile_memory=True) as prof,
    ):
        for _ in range(options.repeat):
            result = None  # the previous call's output is freed here, between calls
            try:
                with record_function(CALL_MARKER):
                    start = time.perf_counter()
                    result = fn(*inputs.args, **inputs.kwargs)
                    _sync(options.device)
                    walls.append((time.perf_counter() - start) * 1e3)
            except KeyboardInterrupt:
                raise
            except BaseException as error:  # sys.exit() included: the user's code failing
                failure = error
                break
        settle_other_threads()  # a collective's worker may still be closing its profiler range
    _check_ran(result, name)
    del result  # after the profile: the last output counts in net_bytes, its free is not recorded
    if cuda:
        counters.update(_cuda_counters_after(options.device))
    raw = raw_from_profiler(
        prof,
        device_type="CUDA" if cuda else "CPU",
        device_index=int(options.device.split(":")[1]) if cuda else None,
    )
    if failure is not None:
        numbers = analyze(raw).numbers
        raise _failure_error(failure, name, numbers.peak_bytes, numbers.peak_op, options, numbers.net_bytes)
    table = None
    if options.keep_table:
        sort_by = "self_cpu_memory_usage" if not cuda else "self_device_memory_usage"
        table = prof.key_averages().table(sort_by=sort_by, row_limit=-1)
    warm = options.warmup > 0 or options.mode == "compile"
    # An explained eager run is explained by its explaining call: the measured calls' own
    # explanation is worked out only if that call cannot give one.
    explain = options.explain and options.mode == "compile"
    later = options.explain and not explain
    explained = (
        explaining.attribute(tracker, prof, raw, warm=warm, explain=explain, later=later)
        if tracker is not None
        else None
    )
    return _Measured(label, raw, walls, counters, notes, threads, table, mapped, explained, explaining.notes)


def _cuda_counters_before(device: str) -> dict[str, int]:
    where = torch.device(device)
    torch.cuda.synchronize(where)
    torch.cuda.reset_peak_memory_stats(where)
    return {"memory_allocated_start_bytes": int(torch.cuda.memory_allocated(where))}


def _cuda_counters_after(device: str) -> dict[str, int]:
    where = torch.device(device)
    return {
        "max_memory_allocated_bytes": int(torch.cuda.max_memory_allocated(where)),
        "max_memory_reserved_bytes": int(torch.cuda.max_memory_reserved(where)),
    }


def _assemble(
    measured: _Measured, warm: _Warm, inputs: Inputs, options: RunOptions, timed: Timed, heard: Heard
) -> RunResult:
    """The run: the analysis of the records, with what the source measured and noticed, and
    the numbers and explanation of the tracked calls (exact: frees of tensors made before the
    call included)."""
    analysis = analyze(measured.raw)
    explained = measured.explained
    notes = [*warm.notes, *(_reworded(note, explained) for note in measured.notes)]
    mapped = sum(op.allocated_bytes for op in analysis.ops if op.name == MAPPED_RANGE)
    notes += filter(None, [mapped_note(measured.mapped, mapped)])
    walls = list(timed.walls_ms) or measured.walls
    if measured.threads:
        names = ", ".join(sorted(set(measured.threads))[:3])
        notes.append(
            f"{len(measured.threads)} Python thread(s) started during the call ({names}); "
            "torch's profiler records only the calling thread, so their allocations are not counted"
        )
    notes += measured.explaining_notes
    op_names = [op.name for op in analysis.ops]
    device: dict[str, Any] = {"device": options.device}
    if options.device.startswith("cuda"):
        device.update(cuda_device(options.device))
    # CUDA's counters give the footprint and live at start; an explained run's own numbers
    # (cross-checked with those counters) take their place.
    numbers: dict[str, Any] = {**counted_memory(measured.device_counters)}
    if explained is not None:
        explained_numbers, explained_notes = _explained_numbers(explained, measured, options)
        numbers.update(explained_numbers)
        notes += [note for note in explained_notes if note not in notes]
    else:
        numbers["inputs_bytes"] = tensor_bytes((inputs.args, inputs.kwargs))
    if options.device.startswith("cuda"):
        # The peak the report gives: the tracked calls' (exact) or the records' own.
        note = cuda_crosscheck(
            measured.device_counters, numbers.get("peak_bytes", analysis.numbers.region_peak_bytes)
        )
        if note:
            notes.append(note)
    return build_run(
        analysis,
        label=measured.label,
        mode=options.mode,
        wall_ms=statistics.median(walls) if walls else float("nan"),
        wall_ms_all=tuple(walls),
        wall_timing="timed" if timed.walls_ms else "profiled",
        repeat=options.repeat,
        compile_seconds=warm.compile_seconds,
        fused_kernels=fused_kernels(op_names, torch_aten_vocabulary() | aten_names(op_names)),
        device_counters=measured.device_counters,
        torch_table=measured.table,
        notes=notes,
        torch_messages=heard.lines(),
        **device,
        **numbers,
    )


def block_run(
    raw: RawProfile,
    explained: Attribution | None,
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
) -> RunResult:
    """The run of a block profiled in one pass where it runs (:mod:`memprof.sources.block`):
    no warm-up, no timed calls; assembled as :func:`run_target`'s runs are."""
    measured = _Measured(label, raw, walls, counters, notes, threads, None, mapped, explained)
    return _assemble(measured, _Warm(fn=lambda: None), inputs, options, Timed(()), heard)


_UNKNOWN_BLOCKS = "block(s) allocated before profiling were freed during it"


def _reworded(note: str, explained: Attribution | None) -> str:
    """torch's "memory block of unknown size" count, said as what it means for the run: the
    tracked state's frees are counted in explained runs."""
    count, _, rest = note.partition(" ")
    if explained is None or not rest.startswith(_UNKNOWN_BLOCKS):
        return note
    return (
        f"{count} {_UNKNOWN_BLOCKS} without a record of the free; memprof counts the frees of the "
        "arguments', model's and optimizer's tensors (and of tensors held by the target's module), "
        "not of others"
    )


def _explained_numbers(
    explained: Attribution, measured: _Measured, options: RunOptions
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The run's numbers from the tracked calls: peak, footprint, live at start, net, inputs,
    the op at the exact peak, the exact timeline; and, with ``explain``, what is live at the
    peak, the modules, each call and the kernels. With the explanation's notes."""
    first, last = explained.calls[0], explained.calls[-1]
    numbers: dict[str, Any] = {
        # What memprof found live when the first measured call started (before CUDA's counters
        # add what it did not find): the arguments, model, optimizer state, module globals.
        "inputs_bytes": first.live_at_start_bytes,
        "net_bytes": last.live_at_end_bytes - last.live_at_start_bytes,
    }
    counters = measured.device_counters
    if "memory_allocated_start_bytes" in counters and "max_memory_allocated_bytes" in counters:
        explained = with_device_counters(
            explained, counters["memory_allocated_start_bytes"], counters["max_memory_allocated_bytes"]
        )
    stack = stack_at(measured.raw, explained.peak_at_ns) if explained.peak_bytes > 0 else ()
    numbers.update(
        peak_bytes=explained.peak_bytes,
        footprint_bytes=explained.footprint_bytes,
        live_at_start_bytes=explained.live_at_start_bytes,
        peak_op=responsible_op(stack) if explained.peak_bytes > 0 else None,
        peak_op_stack=stack,
        call_numbers=explained.calls,
        peak_call=explained.peak_call,
    )
    by_category = None
    if options.explain:
        by_category = CategoryTimeline(
            t_ns=explained.timeline_t_ns,
            # Categories that hold nothing during the call are left out.
            bytes={k: tuple(v) for k, v in explained.timeline_by_category.items() if any(v)},
        )
        numbers.update(at_peak=explained.at_peak, module_stats=explained.modules, kernels=explained.kernels)
    # The op running at each point, on the profiler's clock (the timeline starts with the first
    # measured call, as the records' own timeline does).
    op_names: tuple[str, ...] = ()
    op_at: tuple[int, ...] = ()
    if measured.raw.calls:
        start = min(call[0] for call in measured.raw.calls)
        op_names, at = ops_at(measured.raw, np.asarray(explained.live_t_ns, dtype=np.int64) + start)
        op_at = tuple(at.tolist())
    numbers["timeline"] = Timeline(
        t_ns=explained.live_t_ns,
        bytes=explained.live_bytes,
        op_names=op_names,
        op_at=op_at,
        by_category=by_category,
    )
    return numbers, explained.notes


def cuda_device(device: str) -> dict[str, Any]:
    """The GPU's name and total memory, as torch reports them."""
    properties = torch.cuda.get_device_properties(torch.device(device))
    return {"device_name": properties.name, "device_total_bytes": int(properties.total_memory)}


def counted_memory(counters: dict[str, int]) -> dict[str, int | None]:
    """The device-wide numbers of a run that the device's own counters give (CUDA): everything
    allocated at the highest point (``max_memory_allocated``, what was live before included),
    what was allocated when profiling began, and the highest reserve. Without the counters (CPU)
    they are not known: None."""
    return {
        "footprint_bytes": counters.get("max_memory_allocated_bytes"),
        "live_at_start_bytes": counters.get("memory_allocated_start_bytes"),
        "reserved_peak_bytes": counters.get("max_memory_reserved_bytes"),
    }


@functools.cache
def torch_aten_vocabulary() -> frozenset[str]:
    """Every aten op name this torch knows (``add``, ``_to_copy``, ...): splits fused kernel
    names into the ops they replaced, stored with the run so a loaded report never needs it."""
    try:
        all_ops = torch._C._dispatch_get_all_op_names()
    except Exception:  # pragma: no cover - private API moved; the run's own names still work
        all_ops = []
    return aten_names(all_ops)


def cuda_crosscheck(counters: dict[str, int], reported_peak_bytes: int) -> str | None:
    """Compare the CUDA caching allocator's own peak with the reported peak over the same span.

    Adds ``allocator_peak_above_start_bytes`` to ``counters``; returns a note when they differ by
    more than 1% (and 1 MiB): then something the profiler did not record (another thread, a
    stream callback) allocated meanwhile.
    """
    counted = counters["max_memory_allocated_bytes"] - counters["memory_allocated_start_bytes"]
    counters["allocator_peak_above_start_bytes"] = counted
    if _differ(counted, reported_peak_bytes):
        return (
            f"torch.cuda.max_memory_allocated() rose {format_bytes(counted)} above the start, the "
            f"reported peak {format_bytes(reported_peak_bytes)}: memory was allocated where the "
            "profiler does not record (another thread?)"
        )
    return None


def _failure_error(
    error: BaseException, name: str, peak: int, peak_op: str | None, options: RunOptions, live: int = 0
) -> MemprofError:
    where = f" while {peak_op} ran" if peak_op else ""
    if isinstance(error, MemprofError):
        return error
    if _is_out_of_memory(error):
        return UserCodeError(
            out_of_memory_message(name, _first_line(error), peak, peak_op, live),
            user_traceback=format_user_traceback(error),
            raised=error,
        )
    traced = traced_user_error(error) if options.mode == "compile" else None
    if traced is not None:
        return traced_error(traced, name)
    if options.mode == "compile" and _is_compile_error(error):
        return UserCodeError(
            f"torch.compile of {name} failed: {_first_line(error)}; try {param('mode', 'eager')}"
        )
    return UserCodeError(
        f"{name} {what_it_did(error)} (peak before the failure: {format_bytes(peak)}{where})",
        user_traceback=format_user_traceback(error),
        raised=error,
    )


def _check_ran(result: Any, name: str) -> None:
    """A call that returned a generator or coroutine ran none of its body: nothing to measure."""
    kind = unrun_result(result)
    if kind is not None:
        raise UsageError(
            f"{name} returned a {kind}, so its body never ran and nothing was measured; profile a "
            f"function that consumes it (list(...) for a generator, asyncio.run(...) for a coroutine)"
        )
