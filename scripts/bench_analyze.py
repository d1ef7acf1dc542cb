"""Benchmark of reading GPU traces: memprof against a plain ``json.loads``. Prints Markdown.

    PYTHONPATH=. python scripts/bench_analyze.py                 # the V100 trace, 8 and 20 ranks
    PYTHONPATH=. python scripts/bench_analyze.py --rounds 9 --ranks 8
    PYTHONPATH=. python scripts/bench_analyze.py --only command  # (c) alone

(a) Reading and analysing the 54 MB (uncompressed) V100 trace — ``read_trace`` (gunzip, parse,
    per-device records and numbers) plus ``analyze`` (the per-op table) of every device — side
    by side with ``json.loads`` of the already decompressed text, alternately, in one process;
    medians and their ratio. Once with orjson (when installed) and once with the standard
    library's parser forced.
(b) Peak RSS of a fresh process reading a folder of the V100 trace replicated to N ranks into
    one report (``memprof.analyze(folder)``: one file at a time, as the library reads a
    folder), against one process that only ``json.loads`` one rank's text: memory stays
    bounded by the largest file.
(c) The whole command: ``memprof analyze V100.json.gz -q`` (start-up, imports, reading, the
    per-op analysis, the terminal report) as a process, against a process that runs
    ``json.loads(gzip.open(path).read())``; alternately, medians of wall and CPU time and of
    the per-round ratios. With orjson (when installed), with the standard library's parser
    forced, and with every report file written (``--out``: JSON, CSV, Markdown, HTML).

The trace is read from ``$MEMPROF_GPU_DATA/traces`` (default ``<repo>/../shared/gpu_data``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import env, machine, timed

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
V100 = "hta_df_index_resolver_V100_2rank.json.gz"


def trace_path() -> Path:
    data = Path(os.environ.get("MEMPROF_GPU_DATA") or ROOT.parent / "shared" / "gpu_data")
    path = data / "traces" / V100
    if not path.exists():
        sys.exit(f"{path} is absent: set MEMPROF_GPU_DATA to the folder holding traces/{V100}")
    return path


def read_and_analyse(path: Path) -> int:
    from memprof.analysis.peaks import analyze
    from memprof.sources.files.trace import read_trace

    trace = read_trace(path)
    rows = 0
    for device in trace.devices:
        rows += len(analyze(device.raw).ops)
    return rows


def side_by_side(path: Path, rounds: int) -> tuple[list[float], list[float]]:
    text = gzip.decompress(path.read_bytes())
    read_and_analyse(path)  # imports and first-touch costs out of the measurement
    json.loads(text)
    ours: list[float] = []
    plain: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        read_and_analyse(path)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        document = json.loads(text)
        plain.append(time.perf_counter() - start)
        del document
    return ours, plain


def section_a(path: Path, rounds: int) -> None:
    import memprof.sources.files.trace as trace_module

    print(f"## (a) Reading + analysing {V100} vs json.loads of its text\n")
    print(f"{rounds} rounds each, alternating; medians. The trace: {path.stat().st_size:,} B gzip, ", end="")
    print(f"{len(gzip.decompress(path.read_bytes())):,} B of JSON.\n")
    print("| parser | memprof read_trace + analyze | json.loads | ratio |")
    print("|---|---|---|---|")
    parsers = [("standard library json", json.loads)]
    try:
        import orjson

        parsers.insert(0, (f"orjson {orjson.__version__}", orjson.loads))
    except ImportError:
        print("| orjson | not installed | | |")
    saved = trace_module._loads
    try:
        for label, loads in parsers:
            trace_module._loads = loads
            ours, plain = side_by_side(path, rounds)
            a, b = statistics.median(ours), statistics.median(plain)
            print(f"| {label} | {a:.3f} s | {b:.3f} s | {a / b:.2f}x |")
    finally:
        trace_module._loads = saved
    print()


CHILD = """
import json, gzip, sys, time
from pathlib import Path
start = time.perf_counter()
if sys.argv[1] == "folder":
    import memprof
    report = memprof.analyze(sys.argv[2])  # what `memprof analyze FOLDER` builds
    ranks = len(report.source.files)
else:
    document = json.loads(gzip.decompress(Path(sys.argv[2]).read_bytes()))
    ranks = 1
# VmHWM, not ru_maxrss: Linux carries a parent's high-water mark into ru_maxrss across exec.
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"ranks": ranks, "seconds": time.perf_counter() - start, "max_rss_kib": hwm}))
"""


def child(mode: str, target: Path) -> dict[str, float]:
    out = subprocess.run(
        [PY, "-c", CHILD, mode, str(target)], env=env(), check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def section_b(path: Path, rank_counts: list[int]) -> None:
    text_bytes = len(gzip.decompress(path.read_bytes()))
    print("## (b) Peak RSS reading a folder of per-rank traces (fresh process each)\n")
    print("| what | JSON text read | wall | peak RSS |")
    print("|---|---|---|---|")
    plain = child("plain", path)
    print(
        f"| json.loads of one rank | {text_bytes / 2**20:.0f} MiB | {plain['seconds']:.1f} s | "
        f"{plain['max_rss_kib'] / 1024:.0f} MiB |"
    )
    for ranks in rank_counts:
        with tempfile.TemporaryDirectory(prefix="memprof-ranks-") as folder:
            for rank in range(ranks):
                shutil.copy(path, Path(folder) / f"worker_rank{rank}.pt.trace.json.gz")
            result = child("folder", Path(folder))
        assert result["ranks"] == ranks
        print(
            f"| memprof.analyze, {ranks} files (a run per file and device) | "
            f"{ranks * text_bytes / 2**20:,.0f} MiB | "
            f"{result['seconds']:.1f} s | {result['max_rss_kib'] / 1024:.0f} MiB |"
        )
    print()


# The command with orjson hidden: its import fails, so the standard library parses.
NO_ORJSON = (
    "import sys; sys.modules['orjson'] = None; from memprof.frontends.cli import main; main(sys.argv[1:])"
)


def section_c(path: Path, rounds: int) -> None:
    plain = [PY, "-c", f"import gzip, json; json.loads(gzip.open({str(path)!r}).read())"]
    print(f"## (c) `memprof analyze {V100} -q` vs a process that only json.loads it\n")
    print(f"{rounds} rounds, alternating, whole processes; medians (ratio: median of per-round ratios).\n")
    print("| memprof | wall | CPU | json.loads process: wall | CPU | ratio (wall) | ratio (CPU) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="memprof-bench-") as out:
        variants = [
            (
                "orjson" if _has_orjson() else "(orjson absent)",
                [PY, "-m", "memprof", "analyze", str(path), "-q"],
            ),
            ("standard library json", [PY, "-c", NO_ORJSON, "analyze", str(path), "-q"]),
            (
                "orjson, --out (all four files)",
                [PY, "-m", "memprof", "analyze", str(path), "-q", "--out", out],
            ),
        ]
        for label, command in variants:
            timed(command)  # warm the page cache and the bytecode
            ours, theirs = [], []
            for _ in range(rounds):
                ours.append(timed(command))
                theirs.append(timed(plain))
            wall_ratio = statistics.median(a[0] / b[0] for a, b in zip(ours, theirs, strict=True))
            cpu_ratio = statistics.median(a[1] / b[1] for a, b in zip(ours, theirs, strict=True))
            med = [statistics.median(x[i] for x in runs) for runs in (ours, theirs) for i in (0, 1)]
            print(
                f"| {label} | {med[0]:.2f} s | {med[1]:.2f} s | {med[2]:.2f} s | {med[3]:.2f} s "
                f"| {wall_ratio:.2f}x | {cpu_ratio:.2f}x |"
            )
    print()


def _has_orjson() -> bool:
    try:
        import orjson  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ranks", type=int, nargs="*", default=[8, 20])
    parser.add_argument("--only", choices=["read", "folder", "command"], help="run one section")
    args = parser.parse_args()
    path = trace_path()
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f}\n")
    if args.only in (None, "read"):
        section_a(path, args.rounds)
    if args.only in (None, "folder"):
        section_b(path, args.ranks)
    if args.only in (None, "command"):
        section_c(path, args.rounds)


if __name__ == "__main__":
    main()
