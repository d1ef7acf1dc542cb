"""The plain script that ``memprof run memprof.examples.gpt:train_step --compare-compile`` is
measured against (``scripts/bench_compile_once.py``): the same training step made the same
way, then eagerly and compiled, each warmed up and profiled with torch.profiler's
``profile_memory=True``, and each profile's peak printed. Nothing of memprof is imported (the
example's file is loaded on its own: it needs only torch).

    python scripts/compile_baseline.py              # the GPT example's default sizes
    python scripts/compile_baseline.py --quiet      # print nothing (for timing)

What it does is what a user would write by hand to compare the two modes: one warm-up call
for the eager step; for the compiled step a first call that compiles and more calls while the
last one still compiled (the optimizer's step compiles again once its state exists), then one
profiled call of each.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch
from torch._dynamo.utils import counters
from torch.profiler import ProfilerActivity, profile

GPT = Path(__file__).resolve().parents[1] / "memprof" / "examples" / "gpt.py"


def peak_bytes(prof: profile) -> int:
    """The highest live total of the allocator records (bytes above the call's start)."""
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        live += event.nbytes()
        peak = max(peak, live)
    return peak


def profiled(step: object, inputs: tuple[object, ...]) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step(*inputs)  # type: ignore[operator]
    return peak_bytes(prof)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    say = (lambda *a: None) if args.quiet else print
    spec = importlib.util.spec_from_file_location("gpt_example", GPT)
    assert spec is not None and spec.loader is not None
    gpt = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gpt  # its dataclasses look their module up
    spec.loader.exec_module(gpt)
    train_step, train_step_inputs = gpt.train_step, gpt.train_step_inputs

    inputs = train_step_inputs()
    train_step(*inputs)  # warm-up
    say(f"eager peak {profiled(train_step, inputs):,} B")

    inputs = train_step_inputs()
    compiled = torch.compile(train_step)
    start = time.perf_counter()
    compiled(*inputs)  # compiles
    for _ in range(3):  # again while the last call still compiled
        before = counters["frames"]["total"]
        compiled(*inputs)
        if counters["frames"]["total"] == before:
            break
    say(f"compiled in {time.perf_counter() - start:.1f} s")
    say(f"compiled peak {profiled(compiled, inputs):,} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
