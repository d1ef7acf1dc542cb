"""How a live run is made: the runner's options. Plain data, importable without torch, so the
command line and the API build them before torch loads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

StatusFn = Callable[[str], None]
"""Where a run says what it is doing (``profiling step (eager, 1 call)``): a line at a time."""

DEFAULT_RANK_TIMEOUT = 300.0
"""Seconds a rank of a distributed job that has finished waits for the others (rank 0) or for
rank 0 to take its report (the others), before it names who did not come."""


@dataclass(frozen=True)
class RunOptions:
    """How to run: ``mode`` "eager" or "compile"; ``device`` "auto", "cpu", "cuda" or "cuda:N"
    (resolved before running); ``warmup`` unprofiled and ``repeat`` profiled calls; compile
    options; ``keep_table`` keeps torch's own printed table of the run; ``time_budget``: seconds
    of calls timed without the profiler, for the wall time (at least 5 calls; 0: the profiled
    calls' times); ``verbose`` lets torch's own warnings and log messages through (they are
    hidden during the run by default, and counted); ``explain`` explains the peak (what is live
    at it, by category, module and line: one more, instrumented call in eager mode; Inductor's
    provenance, kept with each compiled graph in Inductor's caches, in compile mode). Without it
    the numbers are the same, only the explanation is left out."""

    mode: str = "eager"
    device: str = "auto"
    warmup: int = 1
    repeat: int = 1
    compile_mode: str = "default"
    backend: str = "inductor"
    fresh_compile: bool = False
    keep_table: bool = False
    time_budget: float = 0.2
    verbose: bool = False
    explain: bool = True


@dataclass(frozen=True)
class EstimateOptions:
    """How to estimate: ``device`` "cpu" or "cuda" (whose allocator is modelled; the run itself
    is always on fake CPU tensors); ``warmup`` calls before the estimated one (optimizer state
    is made there, as in a real run); ``capacity_bytes``, the device's memory the CUDA
    allocator model may reserve (None: unlimited); ``workspaces``: measure what ops allocate
    inside their kernels (CPU estimates)."""

    device: str = "cuda"
    warmup: int = 1
    capacity_bytes: int | None = None
    workspaces: bool = True
