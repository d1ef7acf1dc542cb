"""The real-model corpus's shared profiles: each workload of ``workloads.py`` is profiled once
per session and shared by every test that checks it (a cold ``torch.compile`` of a Hugging Face
training step costs a minute or more on two cores), with the independent figures it is checked
against: a replay of the profiler's own allocation records of one more call.

Every test here is slow (CI runs them with ``--run-slow``) and skips without transformers.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

MiB = 1024 * 1024


@dataclass
class Profiled:
    """A workload profiled by memprof (``report``), the arguments it ran with (their state is
    the measured call's: parameters, optimizer state), and the peak of one more call replayed
    from torch.profiler's records (``replayed_peak_bytes``)."""

    report: Any
    args: tuple[Any, ...]
    replayed_peak_bytes: int

    @property
    def run(self) -> Any:
        return next(iter(self.report.runs.values()))


def replayed_peak(step: Callable[..., Any], args: tuple[Any, ...]) -> int:
    """The peak of ``step(*args)`` above its start, replayed from the ``[memory]`` records of
    torch.profiler's flat event list (the profiler's own allocation records, read without
    memprof): their sizes summed in time order, the highest running sum."""
    from torch.profiler import ProfilerActivity, profile

    gc.collect()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = step(*args)
    del result
    records = [
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]" and event.device_type().name == "CPU"
    ]
    live = peak = 0
    for _, nbytes in sorted(records, key=lambda record: record[0]):  # stable: ties keep their order
        live += nbytes
        peak = max(peak, live)
    return peak


@pytest.fixture(scope="session")
def workloads() -> Iterator[Any]:
    pytest.importorskip(
        "transformers", reason="transformers is not installed (pip install 'torch-memprof[hf]')"
    )
    from real_models import workloads as module

    yield module


@pytest.fixture(scope="session")
def profiled(workloads: Any) -> Callable[[str, str], Profiled]:
    """``profiled("gpt2_step", "eager")``: the workload profiled once per session in that mode
    (its inputs from ``<name>_inputs``)."""
    import memprof

    done: dict[tuple[str, str], Profiled] = {}

    def get(name: str, mode: str = "eager") -> Profiled:
        if (name, mode) not in done:
            step = getattr(workloads, name)
            args = getattr(workloads, f"{name}_inputs")()
            report = memprof.profile(step, *args, mode=mode, time_budget=0)
            peak = replayed_peak(step, args) if mode == "eager" else -1
            done[(name, mode)] = Profiled(report, args, peak)
        return done[(name, mode)]

    return get
