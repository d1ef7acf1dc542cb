"""Benchmarks of memprof's own costs, with public tools only. Prints Markdown tables.

    PYTHONPATH=. python scripts/bench.py            # everything (the 1M-event key_averages takes minutes)
    PYTHONPATH=. python scripts/bench.py --quick    # skips the 1M-event profile and the compile section

(a) ``memprof run`` on the built-in example against a bare script that profiles the same call
    with torch.profiler and prints ``key_averages().table()``: wall times of whole processes,
    measured alternately, median ratio.
(b) memprof's analysis (``raw_from_kineto`` + ``analyze``) against ``key_averages()`` (which
    includes torch's own event parsing) on the same real profiles of 10k, 100k and 1M events;
    each measurement in a fresh process, with the peak RSS it added.
(c) table parsing rows per second (``memprof.table.read_table``), when that module exists.
(d) ``memprof --help`` and ``from memprof.cli import app`` wall time.
(e) compile seconds with Inductor's on-disk cache and with ``--fresh-compile``, and of an
    explained compiled run (Inductor's graph caches off for its provenance).
(f) explaining the peak: ``memprof run`` of a GPT training step with ~100k profiler events,
    explained (the default) and with ``--no-explain``, against a bare script that profiles the
    same step and prints ``key_averages().table()``; whole processes, alternately, one torch
    thread each (``scripts/bench_explain.py`` splits the explained run into its phases).
(g) ``memprof estimate --device cpu`` against ``memprof run`` of the same training step (the GPT
    example), at two sizes: whole processes, alternating, medians; the estimate's own fake
    execution seconds; the peaks each reports.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), out.get("PYTHONPATH", "")]))
    return out


def wall(cmd: list[str]) -> float:
    """Wall seconds of a whole process; fails loudly if it fails."""
    return timed(cmd)[0]


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of a whole process. CPU time (user + system) is less disturbed by
    other load on the machine than wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = ""
    try:
        kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        )
        ram = f"{kb / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration):
        pass
    versions = subprocess.run(
        [
            PY,
            "-c",
            "import torch, numpy, pandas; print(torch.__version__, numpy.__version__, pandas.__version__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return (
        f"{platform.platform()}, {cpu} ({platform.processor() or platform.machine()}), "
        f"{os.cpu_count()} CPUs, {ram}; Python {platform.python_version()}, torch {versions[0]}, "
        f"numpy {versions[1]}, pandas {versions[2]}"
    )


# ---- (a) memprof run vs a bare profiler script ------------------------------------------------

BARE_SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    from torch.profiler import ProfilerActivity, profile


    def similarity(x, y):
        xy = x[:, :, None] - y[:, None, :]
        return xy.abs().lt(1).sum(axis=0)


    generator = torch.Generator().manual_seed(0)
    x = torch.randn(256, 500, generator=generator)
    y = torch.randn(256, 500, generator=generator)
    for _ in range(int(sys.argv[1])):  # warm-up calls, unprofiled, as memprof run --warmup N
        similarity(x, y)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = similarity(x, y)
    print(prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=15))
    """
)


def bench_run(rounds: int) -> list[tuple[str, float, float, float, float]]:
    """Per warm-up setting: median walls, median wall ratio, median CPU-time ratio."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare.py"
        bare.write_text(BARE_SCRIPT)
        # Explained (the default: one more, instrumented call), then the numbers alone.
        for warmup, extra in ((1, []), (0, []), (1, ["--no-explain"])):
            memprof_cmd = [PY, "-m", "memprof", "run", "memprof.examples.similarity:similarity", "-q"]
            memprof_cmd += ["--device", "cpu", "--warmup", str(warmup), *extra]
            bare_cmd = [PY, str(bare), str(warmup)]
            wall(bare_cmd)  # warm the file cache for both
            wall(memprof_cmd)
            ours, theirs = [], []
            for _ in range(rounds):
                ours.append(timed(memprof_cmd))
                theirs.append(timed(bare_cmd))
            rows.append(
                (
                    f"warm-up calls: {warmup}{', ' + ' '.join(extra) if extra else ''}",
                    statistics.median(a[0] for a in ours),
                    statistics.median(b[0] for b in theirs),
                    statistics.median(a[0] / b[0] for a, b in zip(ours, theirs, strict=True)),
                    statistics.median(a[1] / b[1] for a, b in zip(ours, theirs, strict=True)),
                )
            )
    return rows


# ---- (b) analysis vs key_averages on real profiles -------------------------------------------

ANALYSIS_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import torch
    from torch.profiler import ProfilerActivity, profile

    target, which = int(sys.argv[1]), sys.argv[2]
    x = torch.ones(8)
    # `x + 1` makes 11 events: add, to, _to_copy, empty_strided, copy_, lift_fresh... and the
    # allocator records of its scalar tensor and its output.
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(max(target // 11, 1)):
            y = x + 1
            del y

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key))

    rss_before = status("VmRSS:")
    try:
        with open("/proc/self/clear_refs", "w") as f:  # restart VmHWM from here
            f.write("5")
        hwm_reset = True
    except OSError:
        hwm_reset = False
    # Imports happen before the clock starts, as torch's own are already done.
    from memprof.analysis.peaks import analyze
    from memprof.sources.kineto import raw_from_profiler
    start = time.perf_counter()
    if which == "memprof":
        raw = raw_from_profiler(prof)  # includes reading kineto_results.events()
        count = len(raw.mem_time) + len(raw.op_name)
        analysis = analyze(raw)
        rows = len(analysis.ops)
    else:
        averages = prof.key_averages()
        count = sum(a.count for a in averages)
        rows = len(averages)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "events": count, "rows": rows, "rss_before": rss_before,
                      "hwm": status("VmHWM:"), "hwm_reset": hwm_reset,
                      "kineto_events": len(prof.profiler.kineto_results.events())}))
    """
)


def measure_analysis(target: int, which: str) -> dict[str, float]:
    done = subprocess.run(
        [PY, "-c", ANALYSIS_SCRIPT, str(target), which], env=env(), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_analysis(sizes: list[int]) -> list[str]:
    lines = [
        "| events | memprof analysis | peak RSS added | key_averages() | peak RSS added | speed-up |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    for size in sizes:
        ours = measure_analysis(size, "memprof")
        theirs = measure_analysis(size, "torch")
        added = [(m["hwm"] - m["rss_before"]) / 2**20 for m in (ours, theirs)]
        lines.append(
            f"| {ours['kineto_events']:,} | {ours['seconds']:.2f} s | {added[0]:.0f} MiB | "
            f"{theirs['seconds']:.2f} s | {added[1]:.0f} MiB | {theirs['seconds'] / ours['seconds']:.1f}x |"
        )
        print(lines[-1], flush=True)
    return lines


# ---- (c) table parsing -----------------------------------------------------------------------

TABLE_SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    rows = int(sys.argv[1])
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for i in range(rows):
            with record_function(f"step {i} <block>"):
                torch.empty(16 + i % 100)
    sys.stdout.write(prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=-1))
    """
)


def bench_table(rows: int) -> str:
    try:
        from memprof.table import read_table  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return "skipped (memprof.table not available)"
    done = subprocess.run([PY, "-c", TABLE_SCRIPT, str(rows)], capture_output=True, text=True, check=True)
    text = done.stdout
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "table.txt"
        path.write_text(text)
        start = time.perf_counter()
        try:
            frame = read_table(text)
        except Exception:
            frame = read_table(path)
        seconds = time.perf_counter() - start
    return f"{len(frame):,} rows in {seconds:.2f} s: {len(frame) / seconds:,.0f} rows/s"


# ---- (d) start-up ----------------------------------------------------------------------------


def bench_startup(rounds: int) -> list[tuple[str, float]]:
    commands = {
        "memprof --help": [PY, "-m", "memprof", "--help"],
        "from memprof.cli import app": [PY, "-c", "from memprof.cli import app"],
        "python -c pass (interpreter alone)": [PY, "-c", "pass"],
    }
    for cmd in commands.values():
        wall(cmd)
    return [(name, statistics.median(wall(cmd) for _ in range(rounds))) for name, cmd in commands.items()]


# ---- (g) estimate vs the real run ------------------------------------------------------------

ESTIMATE_SIZES = {
    "batch 8, context 64 (default)": ["--set", "batch=8", "--set", "context=64"],
    "batch 64, context 256": ["--set", "batch=64", "--set", "context=256"],
}


def bench_estimate(rounds: int) -> list[tuple[str, float, float, float, int, int]]:
    """(size, estimate wall, run wall, fake seconds, estimated peak, measured peak) per size."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, sets in ESTIMATE_SIZES.items():
            target = ["memprof.examples.gpt:train_step", "-q", "--device", "cpu", *sets]
            est_json, run_json = Path(tmp) / "e.json", Path(tmp) / "r.json"
            est = [PY, "-m", "memprof", "estimate", *target, "--json", str(est_json)]
            run = [PY, "-m", "memprof", "run", *target, "--json", str(run_json)]
            walls: dict[str, list[float]] = {"est": [], "run": []}
            for _ in range(rounds):
                walls["est"].append(wall(est))
                walls["run"].append(wall(run))
            estimated = json.loads(est_json.read_text())["runs"]["estimate"]
            measured = json.loads(run_json.read_text())["runs"]["eager"]
            rows.append(
                (
                    name,
                    statistics.median(walls["est"]),
                    statistics.median(walls["run"]),
                    float(estimated["estimate"]["seconds"]),
                    int(estimated["peak_bytes"]),
                    int(measured["peak_bytes"]),
                )
            )
    return rows


# ---- (e) compile cache -----------------------------------------------------------------------


def compile_seconds(fresh: bool, explain: bool = False) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        cmd = [PY, "-m", "memprof", "run", "memprof.examples.similarity:similarity", "-q", "--device", "cpu"]
        cmd += ["--mode", "compile", "--json", str(out)] + (["--fresh-compile"] if fresh else [])
        cmd += [] if explain else ["--no-explain"]
        subprocess.run(cmd, env=env(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return float(json.loads(out.read_text())["runs"]["compile"]["compile_seconds"])


# ---- (f) explaining the peak on a training step ----------------------------------------------

GPT_MODULE = textwrap.dedent(
    """
    import torch
    from memprof.examples import gpt

    torch.set_num_threads(1)
    CONFIG = gpt.GPTConfig(n_layer=80, n_embd=64, batch=4, vocab_size=4096, context=64)
    train_step = gpt.train_step


    def make():
        return gpt.train_step_inputs(config=CONFIG)
    """
)

GPT_BARE = textwrap.dedent(
    """
    import sys
    from torch.profiler import ProfilerActivity, profile
    from bench_gpt import make, train_step

    inputs = make()
    train_step(*inputs)  # the warm-up step, as memprof run --warmup 1
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train_step(*inputs)
    print(prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=15))
    print(len(prof.profiler.kineto_results.events()), file=sys.stderr)
    """
)


def bench_explain(rounds: int) -> list[tuple[str, float, float]]:
    """(variant, median wall, median CPU) of whole processes, measured alternately."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "bench_gpt.py").write_text(GPT_MODULE)
        (Path(tmp) / "bare.py").write_text(GPT_BARE)
        run = [PY, "-m", "memprof", "run", "bench_gpt:train_step", "--inputs", "bench_gpt:make", "-q"]
        run += ["--device", "cpu"]
        commands = {
            "bare profiler script + key_averages().table()": [PY, str(Path(tmp) / "bare.py")],
            "memprof run --no-explain": [*run, "--no-explain"],
            "memprof run (explained)": run,
        }
        environment = {
            **env(),
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": f"{tmp}{os.pathsep}{env()['PYTHONPATH']}",
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, cmd in commands.items():
                times[name].append(_timed_in(cmd, environment, tmp))
    return [
        (name, statistics.median(t[0] for t in runs), statistics.median(t[1] for t in runs))
        for name, runs in times.items()
    ]


def _timed_in(cmd: list[str], environment: dict[str, str], cwd: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        cmd, env=environment, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="skip the 1M-event profile and the compile section"
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds for (a)")
    parser.add_argument("--only", default="abcdefg", help="sections to run, e.g. 'bd'")
    args = parser.parse_args()

    print(f"Machine: {machine()}\n", flush=True)
    if "a" in args.only:
        print(
            "(a) memprof run vs a bare torch.profiler script (similarity example, eager, whole processes)\n"
        )
        print(
            f"| {args.rounds} alternating rounds | memprof run | bare script | wall ratio "
            "| CPU-time ratio |\n"
            "|---|---:|---:|---:|---:|"
        )
        for name, ours, theirs, ratio, cpu_ratio in bench_run(args.rounds):
            print(f"| {name} | {ours:.2f} s | {theirs:.2f} s | {ratio:.3f} | {cpu_ratio:.3f} |", flush=True)
        print()
    if "b" in args.only:
        print("(b) analysis of real profiles: memprof (raw_from_kineto + analyze) vs key_averages()\n")
        sizes = [10_000, 100_000] + ([] if args.quick else [1_000_000])
        bench_analysis(sizes)
        print()
    if "c" in args.only:
        print(f"(c) table parsing: {bench_table(100_000)}\n", flush=True)
    if "d" in args.only:
        print("(d) start-up (median of 10 runs)\n\n| command | wall |\n|---|---:|")
        for name, seconds in bench_startup(10):
            print(f"| `{name}` | {seconds:.3f} s |", flush=True)
        print()
    if "e" in args.only and not args.quick:
        cached = [compile_seconds(fresh=False) for _ in range(2)][-1]  # the first may fill the cache
        fresh = compile_seconds(fresh=True)
        explained = compile_seconds(fresh=False, explain=True)
        print(
            f"(e) compile of the similarity example: {cached:.1f} s with Inductor's on-disk cache "
            f"(--no-explain), {fresh:.1f} s with --fresh-compile, {explained:.1f} s explained "
            "(the default: Inductor's graph caches off for its provenance)\n"
        )
    if "f" in args.only:
        rows = bench_explain(max(args.rounds // 2, 1) if args.quick else args.rounds)
        bare_wall, bare_cpu = rows[0][1], rows[0][2]
        print("(f) explaining a GPT training step (80 blocks, ~100k profiler events), whole processes\n")
        print("| variant | wall | CPU | wall / bare | CPU / bare |\n|---|---:|---:|---:|---:|")
        for name, wall_s, cpu_s in rows:
            ratios = f"{wall_s / bare_wall:.2f} | {cpu_s / bare_cpu:.2f}"
            print(f"| {name} | {wall_s:.2f} s | {cpu_s:.2f} s | {ratios} |")
        print()
    if "g" in args.only:
        rounds = 3
        print(f"(g) memprof estimate --device cpu vs memprof run, GPT training step ({rounds} rounds)\n")
        print(
            "| size | estimate | run | ratio | fake execution | estimated peak | measured peak |\n"
            "|---|---:|---:|---:|---:|---:|---:|"
        )
        for name, est, run, fake, peak_est, peak_run in bench_estimate(rounds):
            print(
                f"| {name} | {est:.2f} s | {run:.2f} s | {est / run:.2f} | {fake:.2f} s "
                f"| {peak_est:,} B | {peak_run:,} B |",
                flush=True,
            )
        print()


if __name__ == "__main__":
    main()
