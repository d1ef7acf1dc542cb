"""What explaining the peak costs, on a GPT training step with ~100k profiler events.

    PYTHONPATH=. python scripts/bench_explain.py               # 3 rounds, GPT with 80 blocks
    PYTHONPATH=. python scripts/bench_explain.py --layers 8 --rounds 1    # a quick look

Each variant runs in a fresh process (the first profiler session in a process is slow to
start, and torch's CPU memory reporter remembers earlier profiles), alternately, and prints its
phases; the medians over rounds are tabled:

- ``bare``: the bare profiler script: one warm-up step, one step under
  ``profile(profile_memory=True)``, ``print(prof.key_averages().table())``.
- ``explained``: what ``memprof run`` does with attribution on: one warm-up step; the measured
  step with program state tracked, its records read and its numbers computed; one attribution
  step with ops, lines and saved tensors tracked, its records (with addresses) read, the peak
  explained.
- ``measured``: the explained run without the attribution step (``--no-explain``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_common import cpu_name

ROOT = Path(__file__).resolve().parents[1]

COMMON = textwrap.dedent(
    """
    import json, sys, time
    t_start = time.perf_counter()
    c_start = time.process_time()
    class Phase:
        # Wall and CPU seconds of a block (CPU time is less disturbed by other load).
        def __init__(self, name):
            self.name = name
        def __enter__(self):
            self.wall, self.cpu = time.perf_counter(), time.process_time()
        def __exit__(self, *exc):
            phases[self.name] = [time.perf_counter() - self.wall, time.process_time() - self.cpu]
    phases = {{}}
    import torch
    torch.set_num_threads({threads})
    from torch.profiler import ProfilerActivity, profile, record_function
    from memprof.examples import gpt
    config = gpt.GPTConfig(n_layer={layers}, n_embd=64, batch=4, vocab_size=4096, context=64)
    inputs = gpt.train_step_inputs(config=config)
    phases["import_and_setup"] = [time.perf_counter() - t_start, time.process_time() - c_start]
    with Phase("warmup_step"):
        gpt.train_step(*inputs)
    """
)

BARE = COMMON + textwrap.dedent(
    """
    with Phase("profiled_step"):
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            gpt.train_step(*inputs)
    with Phase("key_averages_table"):
        table = prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=15)
    print(table, file=sys.stderr)
    events = {{"profile": len(prof.profiler.kineto_results.events())}}
    print(json.dumps({{"phases": phases, "events": events, "cpu": time.process_time() - c_start}}))
    """
)

EXPLAINED = COMMON + textwrap.dedent(
    """
    from memprof.analysis.attribution import attribute, combine
    from memprof.analysis.peaks import analyze
    from memprof.core.records import CALL_MARKER
    from memprof.sources.live.kineto import raw_from_profiler
    from memprof.sources.tracking import Tracker

    def profiled(tracker):
        with tracker, profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            with record_function(CALL_MARKER):
                gpt.train_step(*inputs)
        return prof

    with Phase("measured_step"):
        light = Tracker(inputs, func=gpt.train_step, module=gpt, ops=False)
        prof = profiled(light)
    with Phase("measured_analysis"):  # what memprof run computes today, and the exact peak
        raw = raw_from_profiler(prof)
        analysis = analyze(raw)
        measured = attribute(raw, light.facts(prof))
    events = {{"measured": len(prof.profiler.kineto_results.events())}}
    if {explain}:
        with Phase("attribution_step"):
            full = Tracker(inputs, func=gpt.train_step, module=gpt)
            prof = profiled(full)
        with Phase("attribution_analysis"):
            # The attribution pass needs no flat event list: the tree walk reads all it needs.
            explained = combine(measured, attribute(None, full.facts(prof)))
        events["attribution"] = len(prof.profiler.kineto_results.events())
        assert explained.at_peak.footprint_bytes == explained.footprint_bytes, explained.notes
    print(json.dumps({{"phases": phases, "events": events, "cpu": time.process_time() - c_start}}))
    """
)


def run(code: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process"] = time.perf_counter() - start
    return result


def machine() -> str:
    cpu = cpu_name(platform.machine())
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    import torch

    return (
        f"{platform.platform()}, {cpu}, {os.cpu_count()} CPUs, load average {load:.2f}; "
        f"Python {platform.python_version()}, torch {torch.__version__}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--layers", type=int, default=80, help="GPT blocks (80: ~100k events)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (1: on a shared machine, OpenMP threads spinning for a core "
        "make the steps' times vary several-fold)",
    )
    options = parser.parse_args()
    variants = {
        "bare": BARE.format(layers=options.layers, threads=options.threads),
        "measured": EXPLAINED.format(layers=options.layers, explain=False, threads=options.threads),
        "explained": EXPLAINED.format(layers=options.layers, explain=True, threads=options.threads),
    }
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for _ in range(options.rounds):
        for name, code in variants.items():
            results[name].append(run(code))
    print(f"Machine: {machine()}")
    print(
        f"Workload: memprof.examples.gpt train_step, {options.layers} blocks, n_embd 64, batch 4; "
        f"torch threads {options.threads}"
    )
    print(f"Rounds: {options.rounds} (medians; each variant a fresh process, run alternately)\n")
    print("| variant | phase | wall s | CPU s |")
    print("|---|---|---|---|")
    for name, rounds in results.items():
        for phase in rounds[0]["phases"]:  # type: ignore[union-attr]
            wall = _median(rounds, lambda r, p=phase: r["phases"][p][0])
            cpu = _median(rounds, lambda r, p=phase: r["phases"][p][1])
            print(f"| {name} | {phase} | {wall:.2f} | {cpu:.2f} |")
        print(
            f"| {name} | **whole process** | **{_median(rounds, lambda r: r['process']):.2f}** | "
            f"**{_median(rounds, lambda r: r['cpu']):.2f}** |"
        )
    for name, rounds in results.items():
        print(f"events ({name}): {rounds[0]['events']}")
    print()
    for clock, index in (("wall", 0), ("CPU", 1)):
        table = _median(results["bare"], lambda r, i=index: r["phases"]["key_averages_table"][i])
        own = _median(
            results["explained"],
            lambda r, i=index: sum(
                r["phases"][p][i] for p in ("measured_analysis", "attribution_step", "attribution_analysis")
            ),
        )
        analysis = _median(results["explained"], lambda r, i=index: r["phases"]["attribution_analysis"][i])
        print(
            f"{clock}: explaining (numbers + attribution step + its analysis) {own:.2f} s, of which the "
            f"attribution's analysis {analysis:.2f} s; torch's key_averages().table() {table:.2f} s"
        )
    cpu_ratio = _median(results["explained"], lambda r: r["cpu"]) / _median(
        results["bare"], lambda r: r["cpu"]
    )
    print(f"explained run / bare profiler script, whole processes, CPU time: {cpu_ratio:.2f}x")


def _median(rounds: list[dict[str, Any]], value: Callable[[dict[str, Any]], float]) -> float:
    return statistics.median(float(value(r)) for r in rounds)


if __name__ == "__main__":
    main()
