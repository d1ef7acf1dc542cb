"""What every live profile of memprof shares: torch's own lines kept off the terminal, status
lines while a long step runs, the Python threads a call starts, the device waited for, the
profiler started once per process before anything is timed, and CUDA's own counters around
the profiled calls."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch  # noqa: TID253 - a live source's helpers, like sources/live.py

from memprof.sources.options import StatusFn

UNKNOWN_BLOCKS = "blocks allocated before profiling were freed during it"


@contextlib.contextmanager
def quiet_profiler_stderr(notes: list[str]) -> Iterator[None]:
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
            unknown_blocks = False
            for line in sink.read().decode("utf-8", "replace").splitlines(keepends=True):
                if line.startswith("USDT:") or "SyncActivityProfilerHandler" in line:
                    continue
                if "Memory block of unknown size was allocated before the profiling started" in line:
                    unknown_blocks = True
                    continue
                sys.stderr.write(line)
            if unknown_blocks:
                # torch's CPU reporter warns once per thousand such frees in the whole process:
                # the lines say that some were freed, not how many.
                notes.append(
                    f"{UNKNOWN_BLOCKS}; those frees are not in the records, so the live bytes "
                    "never dip below the start"
                )


@contextlib.contextmanager
def ticker(
    status: StatusFn | None, what: str, expect: str = "", detail: Callable[[], str] | None = None
) -> Iterator[None]:
    """Tell the user what is happening and for how long, every 5 s, until done; the first of
    those lines adds ``expect`` (what to expect when it takes long), each what ``detail`` says
    of the progress so far (``, 2 graphs so far``)."""
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
            progress = ""
            if detail is not None:
                with contextlib.suppress(Exception):  # what it reads moved: the seconds alone
                    progress = detail()
            status(f"{what} ... {time.perf_counter() - start:.0f} s{progress}{hint}")
            said = True

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@contextlib.contextmanager
def thread_starts() -> Iterator[list[str]]:
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


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(torch.device(device))


def memory_profile(device: str) -> torch.autograd.profiler.profile:
    """A profiler session of the CPU (and of the GPU when ``device`` is CUDA) that records the
    allocator: the Kineto session ``torch.profiler.profile(activities=..., profile_memory=True)``
    starts, without that wrapper. Its every start looks up Inductor's CUDA-graph setting, which
    imports ``torch._dynamo`` and ``torch._inductor`` (``scripts/bench_phases.py`` part 3 times
    that import), where the profiled code may need neither (a model's forward; an optimizer
    imports them anyway)."""
    return torch.autograd.profiler.profile(
        use_cpu=True,
        use_device="cuda" if device.startswith("cuda") else None,
        profile_memory=True,
        use_kineto=True,
    )


_profiler_started: set[bool] = set()


def warm_profiler(device: str) -> None:
    """Start and stop one throw-away profile per process and kind of device (milliseconds):
    calls timed inside the first profiler session of a process often ran slower than the same
    calls in later sessions; without this, the first of several compared runs would tend to
    look slower than it is."""
    key = device.startswith("cuda")
    if key in _profiler_started:
        return
    notes: list[str] = []
    with quiet_profiler_stderr(notes), memory_profile(device):
        torch.ones(1).add_(1)
    _profiler_started.add(key)


def cuda_counters_before(device: str) -> dict[str, int]:
    where = torch.device(device)
    torch.cuda.synchronize(where)
    torch.cuda.reset_peak_memory_stats(where)
    return {"memory_allocated_start_bytes": int(torch.cuda.memory_allocated(where))}


def cuda_counters_after(device: str) -> dict[str, int]:
    where = torch.device(device)
    return {
        "max_memory_allocated_bytes": int(torch.cuda.max_memory_allocated(where)),
        "max_memory_reserved_bytes": int(torch.cuda.max_memory_reserved(where)),
    }


def cuda_device(device: str) -> dict[str, Any]:
    """The GPU's name and total memory, as torch reports them."""
    properties = torch.cuda.get_device_properties(torch.device(device))
    return {"device_name": properties.name, "device_total_bytes": int(properties.total_memory)}
