"""Benchmarks of memprof's own costs, with public tools only. Prints Markdown tables.

    PYTHONPATH=. python scripts/bench.py            # everything (the 1M-event key_averages takes minutes)
    PYTHONPATH=. python scripts/bench.py --quick    # skips the 1M-event profiles and the compile section
    PYTHONPATH=. python scripts/bench.py --only hi --steps 36 --rounds 3    # issue 18's ratios
    PYTHONPATH=. python scripts/bench.py --only f --step transformer --steps 55 --rounds 3

(a) ``memprof run`` on the built-in example against a bare script that profiles the same call
    with torch.profiler and prints ``key_averages().table()``: wall times of whole processes,
    measured alternately, median ratio.
(b) memprof's analysis (``raw_from_kineto`` + ``analyze``) against ``key_averages()`` (which
    includes torch's own event parsing) on the same real profiles of 10k, 100k and 1M events;
    each measurement in a fresh process, with the peak RSS it added.
(c) table parsing rows per second (``memprof.sources.files.table.read_table``), when that module exists.
(d) ``memprof --help`` and ``from memprof.frontends.cli import app`` wall time.
(e) compile seconds with Inductor's on-disk cache and with ``--fresh-compile``, and of an
    explained compiled run (its provenance cached with the graphs; ``scripts/bench_compile_once.py``
    times the main job against a plain script).
(f) ``memprof run`` on a CPU training step against the profile floor: the same script profiling
    the same step with ``profile_memory=True`` and doing nothing after. ~98k and ~1.58M events;
    ``memprof run`` as users run it (one warm-up call, the unprofiled call(s) timed for the wall
    time within ``--time-budget``, the profiled call) and with ``--time-budget 0`` (no timing
    call), and with ``--time-budget 0 --no-explain`` (nor the explaining call: what reading the
    profile and the analysis add to the floor);
    wall, CPU time and peak RSS of whole processes, alternating, medians. ``--step transformer``:
    the same on a step of another shape (a 2-layer transformer encoder, SGD with momentum).
(g) where memprof's own time and memory go on those profiles, in a fresh process each: torch's
    ``kineto_results.events()`` alone (what any reader of the events pays), then memprof's
    reading (``raw_from_profiler``, which includes it) and ``analyze``.
(h) ``memprof run`` on the first (f) profile (~98k events) against the bare profiler script that
    prints ``key_averages().table()`` after the same profile, and ``memprof run --json`` and
    ``--out`` (every report file) in the same rounds: ``--out`` / ``--json`` is what the HTML,
    CSV and Markdown reports add (none of them builds torch's table; only ``--table`` does).
(i) ``memprof analyze`` of the 54 MB V100 trace (``$MEMPROF_GPU_DATA/traces``) against
    ``json.loads`` of the same text: in one process, and as whole commands
    (``scripts/bench_analyze.py``'s sections (a) and (c)).
(j) ``memprof estimate --device cpu`` against ``memprof run`` of the same training step (the GPT
    example), at two sizes: whole processes, alternating, medians; the estimate's own fake
    execution seconds; the peaks each reports.
(k) explaining the peak: ``memprof run`` of a GPT training step with ~100k profiler events,
    explained (the default) and with ``--no-explain``, against a bare script that profiles the
    same step and prints ``key_averages().table()``; whole processes, alternately, one torch
    thread each (``scripts/bench_explain.py`` splits the explained run into its phases).
(l) A 1 GB folder of 8 per-rank chrome traces (the V100 trace's events repeated 3 times per
    rank, ~126 MB of JSON each), made in a temporary folder: peak RSS (VmHWM) and wall time of
    ``memprof analyze FOLDER -q --json`` against ``memprof analyze`` of one rank's file and a
    process that only ``json.loads`` one rank's file (and one that only ``orjson.loads`` it, the
    parser memprof uses where installed). Bounded memory: the folder's peak is about one rank's,
    not 8 times it.

Every ratio is a median of per-round ratios of commands run in turn, side by side, so that
load from other jobs on a shared machine touches both sides alike; the machine and its load
average are printed first.

``--against PATH`` also measures (f) and (g) with the memprof package found under PATH (another
checkout, e.g. the one before a change), in the same alternating rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bench_common import env, machine, timed

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def wall(cmd: list[str]) -> float:
    """Wall seconds of a whole process; fails loudly if it fails."""
    return timed(cmd)[0]


def measured(cmd: list[str], environment: dict[str, str], cwd: str) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one whole process, from its own rusage."""
    start = time.perf_counter()
    child = subprocess.Popen(
        cmd, env=environment, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, cmd)
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # ru_maxrss: KiB on Linux


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
        settings = ((1, []), (0, []), (1, ["--no-explain"]), (1, ["--no-explain", "--time-budget", "0"]))
        for warmup, extra in settings:
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
    from memprof.sources.live.kineto import raw_from_profiler
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


# ---- (f) memprof run vs the profile floor, (g) reading and analysis --------------------------

# ~2,726 events per step (half ops, half allocator records): 36 steps ~ 98k, 585 ~ 1.59M.
TRAIN_STEP = textwrap.dedent(
    """
    import os

    import torch

    STEPS = int(os.environ["MEMPROF_BENCH_STEPS"])


    def train_inputs():
        torch.manual_seed(0)
        layers = []
        for _ in range(8):
            layers += [torch.nn.Linear(64, 64), torch.nn.LayerNorm(64), torch.nn.GELU()]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(64, 10))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
        return model, optimizer, torch.randn(32, 64), torch.randint(0, 10, (32,))


    def train(model, optimizer, x, y):
        for _ in range(STEPS):
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        return loss.detach()
    """
)

# A second ~100k-event step of another shape (55 steps ~ 108k events, ~1,970 each): attention,
# dropout and SGD with momentum, for the (f) goal on more than one kind of step (`--step`).
TRANSFORMER_STEP = textwrap.dedent(
    """
    import os

    import torch

    STEPS = int(os.environ["MEMPROF_BENCH_STEPS"])


    def train_inputs():
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True)
        encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        model = torch.nn.Sequential(encoder, torch.nn.Linear(64, 10))
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=False)
        return model, optimizer, torch.randn(4, 16, 64), torch.randint(0, 10, (4, 16))


    def train(model, optimizer, x, y):
        for _ in range(STEPS):
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
            loss.backward()
            optimizer.step()
        return loss.detach()
    """
)
TRAIN_STEPS = {"mlp": TRAIN_STEP, "transformer": TRANSFORMER_STEP}

# The floor: what `memprof run` (one warm-up call, then the profiled call) cannot avoid.
FLOOR_SCRIPT = textwrap.dedent(
    """
    import sys

    import torch
    from torch.profiler import ProfilerActivity, profile

    sys.path.insert(0, sys.argv[1])
    from train_step import train, train_inputs

    inputs = train_inputs()
    train(*inputs)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train(*inputs)
    mode = sys.argv[2] if len(sys.argv) > 2 else "floor"
    if mode == "count":
        print(len(prof.profiler.kineto_results.events()))
    elif mode == "table":  # the bare profiler script: what users print without memprof
        print(prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=15))
    """
)

SPLIT_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import torch
    from torch.profiler import ProfilerActivity, profile

    sys.path.insert(0, sys.argv[1])
    from train_step import train, train_inputs
    from memprof.analysis.peaks import analyze
    from memprof.core.gcpause import gc_paused
    from memprof.sources.live.kineto import raw_from_profiler

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key))

    inputs = train_inputs()
    train(*inputs)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train(*inputs)
    rss = status("VmRSS:")
    with open("/proc/self/clear_refs", "w") as f:  # VmHWM restarts from here
        f.write("5")
    out = {}
    start, cpu = time.perf_counter(), time.process_time()
    if sys.argv[2] == "events":
        with gc_paused():
            events = prof.profiler.kineto_results.events()
            out["events"] = len(events)
            del events
    else:
        raw = raw_from_profiler(prof)
        out["read_mib"] = (status("VmHWM:") - rss) / 2**20
    out["read_s"], out["read_cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
    if sys.argv[2] != "events":
        start, cpu = time.perf_counter(), time.process_time()
        analyze(raw)
        out["analyze_s"], out["analyze_cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
    out["added_mib"] = (status("VmHWM:") - rss) / 2**20
    print(json.dumps(out))
    """
)


def _labels(against: Path | None) -> dict[str, Path]:
    return {"memprof": ROOT} | ({"against": against} if against else {})


def _alternate(
    commands: dict[str, tuple[list[str], dict[str, str]]], rounds: int, cwd: str
) -> dict[str, list[tuple[float, float, float]]]:
    """(wall, CPU, peak RSS) of each command per round, the commands run in turn each round."""
    results: dict[str, list[tuple[float, float, float]]] = {label: [] for label in commands}
    for _ in range(rounds):
        for label, (cmd, environment) in commands.items():
            # cwd: a folder holding no memprof, so that PYTHONPATH decides which one runs
            results[label].append(measured(cmd, environment, cwd))
    return results


def _event_count(tmp: str, steps_env: dict[str, str]) -> int:
    done = subprocess.run(
        [PY, str(Path(tmp) / "floor.py"), tmp, "count"],
        env=env(**steps_env),
        cwd=tmp,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split()[-1])


def _ratio_rows(name: str, results: dict[str, list[tuple[float, float, float]]], reference: str) -> list[str]:
    """One row per command: medians, and the median of the per-round ratios to ``reference``."""
    base = results[reference]
    rows = [
        f"| {name}, {reference} | {_median(base, 0):.2f} s | {_median(base, 1):.2f} s "
        f"| {_median(base, 2):,.0f} MiB | | | |"
    ]
    for label, runs in results.items():
        if label == reference:
            continue
        ratio = statistics.median(a[0] / b[0] for a, b in zip(runs, base, strict=True))
        cpu_ratio = statistics.median(a[1] / b[1] for a, b in zip(runs, base, strict=True))
        added = statistics.median(a[2] - b[2] for a, b in zip(runs, base, strict=True))
        rows.append(
            f"| {name}, {label} | {_median(runs, 0):.2f} s | {_median(runs, 1):.2f} s "
            f"| {_median(runs, 2):,.0f} MiB | {ratio:.3f} | {cpu_ratio:.3f} | {added:+,.0f} MiB |"
        )
    return rows


def _train_folder(tmp: str, step: str = "mlp") -> None:
    (Path(tmp) / "train_step.py").write_text(TRAIN_STEPS[step])
    (Path(tmp) / "floor.py").write_text(FLOOR_SCRIPT)


def bench_floor(steps: int, rounds: int, against: Path | None, step: str = "mlp") -> list[str]:
    """``memprof run`` (and the --against checkout's) vs the floor, alternating rounds."""
    with tempfile.TemporaryDirectory() as tmp:
        _train_folder(tmp, step)
        steps_env = {"MEMPROF_BENCH_STEPS": str(steps)}
        count = _event_count(tmp, steps_env)
        run = [PY, "-m", "memprof", "run", f"{tmp}/train_step.py:train", "--device", "cpu", "-q"]
        commands = {"floor": ([PY, f"{tmp}/floor.py", tmp], env(**steps_env))}
        for label, root in _labels(against).items():
            commands[f"{label} run"] = (run, env(root, **steps_env))
            # Without the unprofiled timing call(s) made for the wall time: memprof's own cost.
            commands[f"{label} run --time-budget 0"] = ([*run, "--time-budget", "0"], env(root, **steps_env))
            # Nor the explaining call (a second, tracked call of the step): what reading the
            # events and the analysis add to the floor, the figure issue 18's goal was set on.
            bare = [*run, "--time-budget", "0", "--no-explain"]
            commands[f"{label} run --time-budget 0 --no-explain"] = (bare, env(root, **steps_env))
        results = _alternate(commands, rounds, tmp)
    name = f"{count:,} events" + (f" ({step} step)" if step != "mlp" else "")
    return _ratio_rows(name, results, "floor")


def bench_bare(steps: int, rounds: int) -> list[str]:
    """``memprof run`` and its report files vs the bare profiler script that prints torch's
    table; ``--out`` (every report file) vs ``--json`` alone, in the same rounds."""
    with tempfile.TemporaryDirectory() as tmp:
        _train_folder(tmp)
        steps_env = {"MEMPROF_BENCH_STEPS": str(steps)}
        count = _event_count(tmp, steps_env)
        run = [PY, "-m", "memprof", "run", f"{tmp}/train_step.py:train", "--device", "cpu", "-q"]
        commands = {
            "bare script": ([PY, f"{tmp}/floor.py", tmp, "table"], env(**steps_env)),
            "memprof run": (run, env(**steps_env)),
            "memprof run --time-budget 0": ([*run, "--time-budget", "0"], env(**steps_env)),
            "memprof run --json": ([*run, "--json", f"{tmp}/r.json"], env(**steps_env)),
            "memprof run --out": ([*run, "--out", f"{tmp}/out"], env(**steps_env)),
        }
        results = _alternate(commands, rounds, tmp)
    out_vs_json = statistics.median(
        a[0] / b[0] for a, b in zip(results["memprof run --out"], results["memprof run --json"], strict=True)
    )
    rows = _ratio_rows(f"{count:,} events", results, "bare script")
    return [
        *rows,
        f"| `--out` (JSON, CSV, Markdown, HTML) / `--json` alone, wall | | | | {out_vs_json:.3f} | | |",
    ]


def _median(runs: list[tuple[float, ...]], column: int) -> float:
    return statistics.median(r[column] for r in runs)


def bench_split(steps: int, rounds: int, against: Path | None) -> list[str]:
    """torch's events() alone, then memprof's read and analyze (each checkout), fresh processes."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "train_step.py").write_text(TRAIN_STEP)
        steps_env = {"MEMPROF_BENCH_STEPS": str(steps)}
        jobs = {"events() alone": (ROOT, "events")}
        jobs |= {label: (root, "memprof") for label, root in _labels(against).items()}
        results: dict[str, list[dict[str, float]]] = {label: [] for label in jobs}
        for _ in range(rounds):
            for label, (root, what) in jobs.items():
                done = subprocess.run(
                    [PY, "-c", SPLIT_SCRIPT, tmp, what],
                    env=env(root, **steps_env),
                    cwd=tmp,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                results[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    events = int(results["events() alone"][0]["events"])
    rows = []
    for label, runs in results.items():
        med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        analyze_s = f"{med['analyze_s']:.2f} s ({med['analyze_cpu_s']:.2f} s)" if "analyze_s" in med else ""
        read_mib = f"+{med['read_mib']:,.0f} MiB" if "read_mib" in med else ""
        rows.append(
            f"| {events:,} | {label} | {med['read_s']:.2f} s ({med['read_cpu_s']:.2f} s) | {read_mib} "
            f"| {analyze_s} | +{med['added_mib']:,.0f} MiB |"
        )
    return rows


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
        from memprof.sources.files.table import read_table  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return "skipped (memprof.sources.files.table not available)"
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
        "from memprof.frontends.cli import app": [PY, "-c", "from memprof.frontends.cli import app"],
        "python -c pass (interpreter alone)": [PY, "-c", "pass"],
    }
    for cmd in commands.values():
        wall(cmd)
    return [(name, statistics.median(wall(cmd) for _ in range(rounds))) for name, cmd in commands.items()]


# ---- (j) estimate vs the real run ------------------------------------------------------------

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


# ---- (l) a 1 GB folder of 8 per-rank traces: bounded memory --------------------------------

RANKS_L, COPIES_L = 8, 3  # 3 copies of the V100 trace's events: ~126 MB of JSON per rank

# A whole command or a json.loads in a fresh process; writes its VmHWM (KiB) to the file named
# by MEMPROF_BENCH_HWM at exit. VmHWM, not ru_maxrss: Linux carries the parent's high-water
# mark into a child's ru_maxrss across exec.
HWM_CHILD = """
import atexit, os, sys
def _hwm():
    kib = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    with open(os.environ["MEMPROF_BENCH_HWM"], "w") as out:
        out.write(str(kib))
atexit.register(_hwm)
if sys.argv[1] in ("--json-loads", "--orjson-loads"):
    import json
    loads = __import__("orjson").loads if sys.argv[1] == "--orjson-loads" else json.loads
    with open(sys.argv[2], "rb") as handle:
        document = loads(handle.read())
else:
    from memprof.frontends.cli import main
    main(sys.argv[1:])
"""


def repeated_events(events: list[dict], copies: int) -> list[dict]:
    """``events`` ``copies`` times, each copy after the previous one in time, with its ids
    (``id``, ``External id``, ``Ev Idx``, ``correlation``) moved past the previous copy's.
    Between two copies one ``[memory]`` record per device takes its Total Allocated back to
    where the first copy starts, so ``Total Allocated = previous + Bytes`` holds at the seams
    too and every copy has the original's peak. Metadata events (``ph`` M) appear once."""
    timed_events = [e for e in events if isinstance(e.get("ts"), int)]
    start = min(e["ts"] for e in timed_events)
    end = max(e["ts"] + int(e.get("dur", 0)) for e in timed_events)
    shift = end - start + 1000
    id_keys = ("External id", "Ev Idx", "correlation")
    id_step = 1 + max(
        [int(e.get("id", 0)) for e in events if isinstance(e.get("id"), int)]
        + [
            int(v)
            for e in events
            for k, v in (e.get("args") or {}).items()
            if k in id_keys and isinstance(v, int)
        ]
    )
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    first: dict[tuple[int, int], dict] = {}
    last: dict[tuple[int, int], dict] = {}
    for event in memory:
        key = (event["args"]["Device Type"], event["args"]["Device Id"])
        first.setdefault(key, event)
        last[key] = event
    out = list(events)
    for copy in range(1, copies):
        for key, event in last.items():
            args = event["args"]
            at_start = first[key]["args"]["Total Allocated"] - first[key]["args"]["Bytes"]
            bridge = dict(args, Bytes=at_start - args["Total Allocated"], **{"Total Allocated": at_start})
            out.append(dict(event, ts=end + (copy - 1) * shift + 500, args=bridge))
        for event in events:
            if event.get("ph") == "M" or event.get("cat") == "Trace":
                continue
            moved = dict(event)
            if isinstance(moved.get("ts"), int):
                moved["ts"] += copy * shift
            if isinstance(moved.get("id"), int):
                moved["id"] += copy * id_step
            if isinstance(moved.get("args"), dict):
                moved["args"] = {
                    k: v + copy * id_step if k in id_keys and isinstance(v, int) else v
                    for k, v in moved["args"].items()
                }
            out.append(moved)
    return out


def write_rank_folder(source: Path, folder: Path, ranks: int, copies: int) -> int:
    """``ranks`` files ``rank<N>.pt.trace.json`` in ``folder``, each the trace at ``source``
    with its events repeated ``copies`` times and ``distributedInfo`` naming its rank; bytes
    written."""
    import gzip

    try:
        import orjson

        dumps = orjson.dumps
    except ImportError:
        dumps = lambda value: json.dumps(value, separators=(",", ":")).encode()  # noqa: E731
    document = json.loads(gzip.decompress(source.read_bytes()))
    body = dumps(repeated_events(document.pop("traceEvents"), copies))
    written = 0
    for rank in range(ranks):
        meta = dict(document, distributedInfo={"backend": "nccl", "rank": rank, "world_size": ranks})
        path = folder / f"rank{rank}.pt.trace.json"
        with path.open("wb") as out:
            out.write(dumps(meta)[:-1] + b',"traceEvents":')
            out.write(body)
            out.write(b"}")
        written += path.stat().st_size
    return written


def peak_process(args: list[str], cwd: str) -> tuple[float, float]:
    """(wall s, peak RSS MiB) of ``args`` run by HWM_CHILD in a fresh process."""
    with tempfile.NamedTemporaryFile(dir=cwd, suffix=".hwm") as hwm:
        start = time.perf_counter()
        subprocess.run(
            [PY, "-c", HWM_CHILD, *args],
            env=env(MEMPROF_BENCH_HWM=hwm.name),
            cwd=cwd,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        seconds = time.perf_counter() - start
        return seconds, int(Path(hwm.name).read_text()) / 1024


def bench_rank_folder(rounds: int) -> list[str]:
    """Table rows of (l): each command in a fresh process per round, in turn; medians."""
    import bench_analyze  # this folder's module: where the V100 trace is

    rows = []
    with tempfile.TemporaryDirectory(prefix="memprof-ranks-") as tmp:
        folder = Path(tmp) / "ranks"
        folder.mkdir()
        total = write_rank_folder(bench_analyze.trace_path(), folder, RANKS_L, COPIES_L)
        one = folder / "rank0.pt.trace.json"
        commands = {
            f"`memprof analyze FOLDER -q --json` ({RANKS_L} ranks, {total / 1e9:.2f} GB)": [
                "analyze",
                str(folder),
                "-q",
                "--json",
                str(Path(tmp) / "out.json"),
            ],
            f"`memprof analyze ONE_RANK -q` ({one.stat().st_size / 1e6:.0f} MB)": ["analyze", str(one), "-q"],
            "a process that only `json.loads` one rank's file": ["--json-loads", str(one)],
        }
        if bench_analyze._has_orjson():  # memprof's reader where installed
            commands["a process that only `orjson.loads` one rank's file"] = ["--orjson-loads", str(one)]
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, args in commands.items():
                results[name].append(peak_process(args, tmp))
        report = json.loads((Path(tmp) / "out.json").read_text())
        peaks = {run["peak_bytes"] for label, run in report["runs"].items() if label.endswith("cuda:1")}
        assert len(report["runs"]) == 2 * RANKS_L and len(peaks) == 1, "every rank reads the same"
    walls = {name: statistics.median(r[0] for r in runs) for name, runs in results.items()}
    rss = {name: statistics.median(r[1] for r in runs) for name, runs in results.items()}
    one_rank, loads = list(commands)[1], list(commands)[2]
    for name in commands:
        rows.append(
            f"| {name} | {walls[name]:.1f} s | {rss[name]:,.0f} MiB | {rss[name] / rss[one_rank]:.2f} "
            f"| {rss[name] / rss[loads]:.2f} |"
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


# ---- (k) explaining the peak on a training step ----------------------------------------------

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


def _section_a(args: argparse.Namespace) -> None:
    print("(a) memprof run vs a bare torch.profiler script (similarity example, eager, whole processes)\n")
    print(
        f"| {args.rounds} alternating rounds | memprof run | bare script | wall ratio | CPU-time ratio |\n"
        "|---|---:|---:|---:|---:|"
    )
    for name, ours, theirs, ratio, cpu_ratio in bench_run(args.rounds):
        print(f"| {name} | {ours:.2f} s | {theirs:.2f} s | {ratio:.3f} | {cpu_ratio:.3f} |", flush=True)


def _section_b(args: argparse.Namespace) -> None:
    print("(b) analysis of real profiles: memprof (raw_from_kineto + analyze) vs key_averages()\n")
    bench_analysis([10_000, 100_000] + ([] if args.quick else [1_000_000]))


def _section_c(args: argparse.Namespace) -> None:
    print(f"(c) table parsing: {bench_table(100_000)}", flush=True)


def _section_d(args: argparse.Namespace) -> None:
    print("(d) start-up (median of 10 runs)\n\n| command | wall |\n|---|---:|")
    for name, seconds in bench_startup(10):
        print(f"| `{name}` | {seconds:.3f} s |", flush=True)


def _section_e(args: argparse.Namespace) -> None:
    if args.quick:
        return
    cached = [compile_seconds(fresh=False) for _ in range(2)][-1]  # the first may fill the cache
    fresh = compile_seconds(fresh=True)
    explained = compile_seconds(fresh=False, explain=True)
    print(
        f"(e) compile of the similarity example: {cached:.1f} s with Inductor's on-disk cache "
        f"(--no-explain), {fresh:.1f} s with --fresh-compile, {explained:.1f} s explained "
        "(the default: the provenance is cached with the graphs)"
    )


_RATIO_HEAD = (
    "| wall | CPU time | peak RSS | wall ratio | CPU ratio | RSS added |\n|---|---:|---:|---:|---:|---:|---:|"
)


def _steps(args: argparse.Namespace) -> list[int]:
    return [int(n) for n in args.steps.split(",")][: 1 if args.quick else None]


def _section_f(args: argparse.Namespace) -> None:
    print("(f) memprof run vs the profile floor (CPU training step, whole processes, medians)\n")
    print(f"| {args.rounds} alternating rounds {_RATIO_HEAD}")
    for steps in _steps(args):
        print("\n".join(bench_floor(steps, args.rounds, args.against, args.step)), flush=True)


def _section_g(args: argparse.Namespace) -> None:
    print("(g) reading and analysis alone, after the same profile (fresh process each, medians)\n")
    print(
        "| events | what | read: wall (CPU) | read: peak RSS added | analyze: wall (CPU) | peak RSS added |\n"
        "|---:|---|---:|---:|---:|---:|"
    )
    for steps in _steps(args):
        print("\n".join(bench_split(steps, max(args.rounds // 2, 1), args.against)), flush=True)


def _section_h(args: argparse.Namespace) -> None:
    steps = _steps(args)[0]
    print(
        "(h) memprof run vs the bare profiler script that prints torch's table, on the first "
        "--steps profile (whole processes, medians; ratios: medians of per-round ratios to the bare script)\n"
    )
    print(f"| {args.rounds} alternating rounds {_RATIO_HEAD}")
    print("\n".join(bench_bare(steps, args.rounds)), flush=True)


def _section_i(args: argparse.Namespace) -> None:
    """``memprof analyze`` of the V100 trace vs ``json.loads`` of it: scripts/bench_analyze.py's
    in-process (a) and whole-command (c) sections."""
    import bench_analyze  # this folder's module

    print("(i) memprof analyze vs json.loads of the same trace\n")
    path = bench_analyze.trace_path()
    bench_analyze.section_a(path, args.rounds)
    bench_analyze.section_c(path, args.rounds)


def _section_j(args: argparse.Namespace) -> None:
    rounds = 3
    print(f"(j) memprof estimate --device cpu vs memprof run, GPT training step ({rounds} rounds)\n")
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


def _section_k(args: argparse.Namespace) -> None:
    rows = bench_explain(max(args.rounds // 2, 1) if args.quick else args.rounds)
    bare_wall, bare_cpu = rows[0][1], rows[0][2]
    print("(k) explaining a GPT training step (80 blocks, ~100k profiler events), whole processes\n")
    print("| variant | wall | CPU | wall / bare | CPU / bare |\n|---|---:|---:|---:|---:|")
    for name, wall_s, cpu_s in rows:
        ratios = f"{wall_s / bare_wall:.2f} | {cpu_s / bare_cpu:.2f}"
        print(f"| {name} | {wall_s:.2f} s | {cpu_s:.2f} s | {ratios} |", flush=True)


def _section_l(args: argparse.Namespace) -> None:
    rounds = max(1, args.rounds // 3)
    print(
        f"(l) a {RANKS_L}-rank folder of ~1 GB of chrome traces vs one rank ({rounds} round(s), "
        "fresh processes, medians)\n"
    )
    print("| command | wall | peak RSS | RSS / one rank | RSS / json.loads |\n|---|---:|---:|---:|---:|")
    print("\n".join(bench_rank_folder(rounds)), flush=True)


SECTIONS = {
    "a": _section_a,
    "b": _section_b,
    "c": _section_c,
    "d": _section_d,
    "f": _section_f,
    "g": _section_g,
    "h": _section_h,
    "i": _section_i,
    "e": _section_e,
    "j": _section_j,
    "k": _section_k,
    "l": _section_l,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="skip the 1M-event profiles and the compile section"
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--only", default="abcdefghijkl", help="sections to run, e.g. 'bd'")
    parser.add_argument(
        "--against", type=Path, help="(f), (g): also measure the memprof package under this folder"
    )
    parser.add_argument(
        "--steps",
        default="36,585",
        help="(f), (g), (h): training steps per profile, ~2,726 events each (default 36,585: ~98k, ~1.59M; "
        "(h) uses the first)",
    )
    parser.add_argument(
        "--step",
        choices=sorted(TRAIN_STEPS),
        default="mlp",
        help="(f): the training step: 'mlp' (8 linear layers, AdamW; ~2,726 events a step) or "
        "'transformer' (a 2-layer encoder, SGD with momentum; ~1,970 events a step, 55 ~ 108k)",
    )
    args = parser.parse_args()
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} at the start\n", flush=True)
    for key, section in SECTIONS.items():
        if key in args.only:
            section(args)
            print(flush=True)
    print(f"Load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
