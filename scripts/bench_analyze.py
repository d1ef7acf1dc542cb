"""Benchmark of reading GPU traces: memprof against a plain ``json.loads``. Prints Markdown.

    PYTHONPATH=. python scripts/bench_analyze.py                 # the V100 trace, 8 and 20 ranks
    PYTHONPATH=. python scripts/bench_analyze.py --rounds 9 --ranks 8

(a) Reading and analysing the 54 MB (uncompressed) V100 trace — ``read_trace`` (gunzip, parse,
    per-device records and numbers) plus ``analyze`` (the per-op table) of every device — side
    by side with ``json.loads`` of the already decompressed text, alternately, in one process;
    medians and their ratio. Once with orjson (when installed) and once with the standard
    library's parser forced.
(b) Peak RSS of a fresh process reading a folder of the V100 trace replicated to N ranks (one
    file at a time, as ``iter_trace_folder`` does), against one process that only
    ``json.loads`` one rank's text: memory stays bounded by the largest file.

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

from bench import env, machine

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
    from memprof.sources.trace import read_trace

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
    import memprof.sources.trace as trace_module

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
import json, gzip, resource, sys, time
from pathlib import Path
start = time.perf_counter()
if sys.argv[1] == "folder":
    from memprof.analysis.peaks import analyze
    from memprof.sources.trace import iter_trace_folder
    ranks = 0
    for trace in iter_trace_folder(sys.argv[2]):
        for device in trace.devices:
            analyze(device.raw)
        ranks += 1
else:
    document = json.loads(gzip.decompress(Path(sys.argv[2]).read_bytes()))
    ranks = 1
print(json.dumps({"ranks": ranks, "seconds": time.perf_counter() - start,
                  "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
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
            f"| memprof, {ranks} ranks (read + per-op analysis) | {ranks * text_bytes / 2**20:,.0f} MiB | "
            f"{result['seconds']:.1f} s | {result['max_rss_kib'] / 1024:.0f} MiB |"
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ranks", type=int, nargs="*", default=[8, 20])
    args = parser.parse_args()
    path = trace_path()
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f}\n")
    section_a(path, args.rounds)
    section_b(path, args.ranks)


if __name__ == "__main__":
    main()
