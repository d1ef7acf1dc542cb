"""The main job's time against a plain script that does the same work by hand: whole processes,
side by side, with Inductor's on-disk cache warm and cold.

    PYTHONPATH=. python scripts/bench_compile_once.py                  # 5 warm rounds, 3 cold
    PYTHONPATH=. python scripts/bench_compile_once.py --warm 3 --cold 1
    PYTHONPATH=. python scripts/bench_compile_once.py --update docs/data/performance.json

A: ``memprof run memprof.examples.gpt:train_step --compare-compile`` (explained, as users run
it: the eager step profiled and explained, the step compiled, profiled and explained, both
timed without the profiler, the report printed). B: ``scripts/compile_baseline.py``, which
makes the same step, warms it up and profiles it eagerly and compiled with
``torch.profiler.profile(profile_memory=True)``. Each round runs A then B (then B then A in the
next round, so that neither always goes first), and the ratio A/B is taken round by round, so
that load from other jobs on a shared machine touches both sides alike.

Warm: both use one cache folder of their own, filled by one run of each before the rounds.
Cold: each process gets a new, empty ``TORCHINDUCTOR_CACHE_DIR`` (its compile starts from
nothing: graphs, kernels and the C++ compiler's output). Targets: warm <= 1.3x, cold <= 1.1x.

``--update FILE`` writes the figures into the benchmark page's data (the table under the
heading :data:`HEADING`); then run ``scripts/gen_data_pages.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
MAIN_JOB = [PY, "-m", "memprof", "run", "memprof.examples.gpt:train_step", "--compare-compile"]
BASELINE = [PY, str(ROOT / "scripts" / "compile_baseline.py"), "--quiet"]
HEADING = "Compiled runs: the main job against a plain script"
TARGETS = {"warm": 1.3, "cold": 1.1}


def measured(cmd: list[str], cache: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one whole process with ``cache`` as Inductor's cache folder."""
    environment = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    child = subprocess.Popen(
        cmd, env=environment, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert child.stderr is not None
    errors = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{errors.decode(errors='replace')[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime


def rounds(kind: str, count: int, folder: Path) -> list[tuple[float, float, float, float]]:
    """``count`` rounds of (A wall, A CPU, B wall, B CPU) with the cache ``kind`` says."""
    results = []
    if kind == "warm":
        warm = {name: folder / f"warm-{name}" for name in ("a", "b")}
        measured(MAIN_JOB, warm["a"])  # fills the caches: not counted
        measured(BASELINE, warm["b"])
    for index in range(count):
        if kind == "warm":
            caches = warm
        else:
            caches = {name: folder / f"cold-{index}-{name}" for name in ("a", "b")}
        order = ["a", "b"] if index % 2 == 0 else ["b", "a"]
        got = {name: measured(MAIN_JOB if name == "a" else BASELINE, caches[name]) for name in order}
        if kind == "cold":
            for cache in caches.values():
                shutil.rmtree(cache, ignore_errors=True)
        results.append((*got["a"], *got["b"]))
        a, b = got["a"][0], got["b"][0]
        print(
            f"  {kind} round {index + 1}: memprof {a:.1f} s, script {b:.1f} s, ratio {a / b:.2f}", flush=True
        )
    return results


def summary(kind: str, results: list[tuple[float, float, float, float]]) -> list[str]:
    """One table row: min and median of each side, the median (min-max) of the rounds' ratios."""
    a = [r[0] for r in results]
    b = [r[2] for r in results]
    ratios = [r[0] / r[2] for r in results]
    cpu = [r[1] / r[3] for r in results]
    return [
        f"{kind} ({len(results)} rounds)",
        f"{min(a):.1f} / {statistics.median(a):.1f} s",
        f"{min(b):.1f} / {statistics.median(b):.1f} s",
        f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}); "
        f"CPU {statistics.median(cpu):.2f}x",
        f"<= {TARGETS[kind]}x",
    ]


def update(path: Path, rows: list[list[str]], text: str) -> None:
    """Write the text and table under :data:`HEADING` in the data file (the section is added at
    the end when missing; other blocks of it, notes written by hand, are kept)."""
    data = json.loads(path.read_text())
    body = data["body"]
    table = {
        "table": {
            "columns": [
                "Inductor's cache",
                "memprof: min / median",
                "script: min / median",
                "ratio",
                "target",
            ],
            "align": ["left", "right", "right", "right", "right"],
            "rows": rows,
        }
    }
    at = next((i for i, block in enumerate(body) if block.get("heading") == HEADING), None)
    if at is None:
        body.extend([{"heading": HEADING}, {"text": text}, table])
    else:
        end = next((i for i in range(at + 1, len(body)) if "heading" in body[i]), len(body))
        kept = [block for block in body[at + 1 : end] if "text" not in block and "table" not in block]
        body[at + 1 : end] = [{"text": text}, table, *kept]
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=5, help="rounds with the cache warm")
    parser.add_argument("--cold", type=int, default=3, help="rounds with the cache empty")
    parser.add_argument(
        "--update", type=Path, help="the benchmark page's data file to write the figures into"
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    cpus = os.cpu_count()
    print(
        f"{platform.platform()}, {cpus} CPUs, Python {platform.python_version()}; load {load:.2f}", flush=True
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="memprof-bench-compile-") as folder:
        for kind, count in (("warm", args.warm), ("cold", args.cold)):
            if count > 0:
                rows.append(summary(kind, rounds(kind, count, Path(folder))))
    end_load = os.getloadavg()[0]
    print(
        "\n| Inductor's cache | memprof: min / median | script: min / median "
        "| ratio (median, range) | target |"
    )
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\nLoad average {load:.2f} at the start, {end_load:.2f} at the end.")
    if args.update is not None:
        import torch

        text = (
            "`memprof run memprof.examples.gpt:train_step --compare-compile` (the eager and the "
            "compiled step each profiled, explained and timed, the report printed) against "
            "`scripts/compile_baseline.py` (the same step made, warmed up and profiled eagerly and "
            "compiled with `torch.profiler.profile(profile_memory=True)`): whole processes, in "
            "turn, the ratio taken round by round; warm: one Inductor cache folder for each, filled "
            "before the rounds; cold: a new, empty `TORCHINDUCTOR_CACHE_DIR` for every process. "
            "An explained compiled run keeps what explains its kernels in the compiled graphs, so "
            "Inductor's cache serves it like any other compile (before, it bypassed Inductor's graph "
            "caches: 23.5 s against 9.6 s, 2.45x, with the cache warm, when that was reported). "
            f"Measured with `PYTHONPATH=. python scripts/bench_compile_once.py --warm {args.warm} "
            f"--cold {args.cold}` on {platform.platform()}, {cpus} CPUs, torch {torch.__version__}, "
            f"load average {load:.1f} at the start and {end_load:.1f} at the end: where other jobs "
            "share the machine, the wall times spread widely, and the medians of the ratios and the "
            "CPU-time ratios are the figures to read."
        )
        update(args.update, rows, text)
        print(f"wrote {args.update}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
