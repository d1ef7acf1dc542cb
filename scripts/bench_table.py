"""How fast does read_table parse a large torch profiler table?

Builds a table with torch's own table code (``_build_table``) over synthetic events: CPU and
CUDA time and memory columns, input shapes, names with spaces and truncated names. Then times
``memprof.sources.files.table.read_table`` on it (best of ``--repeat`` runs) and prints rows/s and
the machine.

Run: python scripts/bench_table.py [--rows 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from pathlib import Path

# Measure this checkout, not an installed copy.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch.autograd import DeviceType  # noqa: E402
from torch.autograd.profiler_util import FunctionEventAvg, _build_table  # noqa: E402

from memprof.sources.files.table import read_table  # noqa: E402

NAMES = [
    "aten::mm",
    "aten::empty",
    "Torch-Compiled Region: 0/0",
    "my block: matmul & sum <fp32>",
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<Functor>>",
    "[memory]",
]


def build_table(rows: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    events = []
    for k in range(rows):
        evt = FunctionEventAvg()
        evt.key = f"{NAMES[k % len(NAMES)]} #{k}"
        evt.count = rng.randint(1, 10_000)
        evt.node_id = -1
        evt.use_device = "cuda"
        evt.device_type = DeviceType.CUDA
        evt.is_user_annotation = False
        evt.self_cpu_time_total = rng.uniform(0, 5e6)
        evt.cpu_time_total = evt.self_cpu_time_total + rng.uniform(0, 5e6)
        evt.self_device_time_total = rng.uniform(0, 5e6)
        evt.device_time_total = evt.self_device_time_total + rng.uniform(0, 5e6)
        evt.cpu_memory_usage = rng.randint(-(2**33), 2**33)
        evt.self_cpu_memory_usage = rng.randint(-(2**20), 2**20)
        evt.device_memory_usage = rng.randint(-(2**33), 2**33)
        evt.self_device_memory_usage = rng.randint(0, 2**30)
        evt.input_shapes = [[rng.randint(1, 4096), rng.randint(1, 4096)], []]
        events.append(evt)
    return _build_table(events, row_limit=-1, profile_memory=True)


def replicate_table(path: Path, rows: int) -> str:
    """A real captured table with its body rows repeated up to ``rows`` rows."""
    lines = path.read_text().split("\n")
    closing = max(k for k, line in enumerate(lines) if line.startswith("---"))
    body = lines[3:closing]
    repeated = (body * (rows // len(body) + 1))[:rows]
    return "\n".join(lines[:3] + repeated + lines[closing:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--replicate",
        type=Path,
        metavar="TABLE",
        help="repeat the rows of a captured table (e.g. tests/data/input_shapes.txt) instead",
    )
    args = parser.parse_args()

    start = time.perf_counter()
    text = replicate_table(args.replicate, args.rows) if args.replicate else build_table(args.rows)
    build_s = time.perf_counter() - start
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        frame = read_table(text)
        best = min(best, time.perf_counter() - start)
    assert len(frame) == args.rows, len(frame)

    lines = text.count("\n")
    print(
        f"read_table: {args.rows:,} rows x {frame.shape[1]} columns ({len(text) / 1e6:.1f} MB, "
        f"{lines:,} lines) in {best:.3f} s (best of {args.repeat}) = {args.rows / best:,.0f} rows/s"
    )
    source = f"rows of {args.replicate}" if args.replicate else "torch's _build_table"
    print(f"(building the table from {source} took {build_s:.1f} s)")
    print(
        f"machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs; python {platform.python_version()}, torch {torch.__version__}, "
        f"pandas {__import__('pandas').__version__}"
    )


if __name__ == "__main__":
    main()
