"""Time and memory of a sharded estimate at the scale people ask about: a Llama-3-8B-shaped bf16
training step (32 layers of 4096, grouped-query attention, vocabulary 128,256, sequence 2048,
AdamW), FSDP2 over 8 ranks, estimated for every rank (the first and the last are run; the
ranks between are alike them when no code reads the rank), against its floor: ranks 0 and 7's
factories and steps on fake tensors under the fake process group, nothing tracked; in separate
processes.

    PYTHONPATH=. python scripts/bench_sharded.py [--layers 32] [--rounds 1]

Needs transformers (the `hf` extra). Prints one JSON line per measurement and a summary; the
figures go to docs/data/performance.json by hand, with the machine they were measured on.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

JOB = Path(__file__).with_name("llama8b_fsdp_job.py")

FLOOR = """
import sys, time, torch, torch.distributed as dist
sys.path.insert(0, {folder!r})
import llama8b_fsdp_job as job
from memprof.sources.fake.job import FakeJob
from memprof.sources.fake.run import FakeSession
start = time.perf_counter()
for rank in (0, 7):
    with FakeJob(8, rank), FakeSession(None):
        model, optimizer, tokens = job.step_inputs(layers={layers})
        for _ in range(2):
            job.step(model, optimizer, tokens)
        del model, optimizer, tokens
print(time.perf_counter() - start)
"""


_NOT_RUN = "not estimated on its own"


def _child(code: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MiB, stdout) of a child process."""
    start = time.perf_counter()
    done = subprocess.run(code, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return wall, rss, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    for _ in range(args.rounds):
        floor = FLOOR.format(folder=str(JOB.parent), layers=args.layers)
        floor_wall, floor_rss, _ = _child([sys.executable, "-c", floor])
        out = Path("bench_sharded.json").resolve()
        wall, rss, _ = _child(
            [
                sys.executable,
                "-m",
                "memprof",
                "estimate",
                f"{JOB}:step",
                "--world-size",
                "8",
                "--set",
                f"layers={args.layers}",
                "--gpu",
                "H100",
                "--json",
                str(out),
                "-q",
            ]
        )
        runs = json.loads(out.read_text())["runs"]
        out.unlink()
        run = runs["rank0"]
        entries = run["at_peak"]["entries"]
        shards = sum(e["bytes"] for e in entries if e["category"] == "parameter" and not e.get("role"))
        gathered = sum(e["bytes"] for e in entries if e.get("role") == "fsdp_unsharded_parameter")
        print(
            json.dumps(
                {
                    "layers": args.layers,
                    "estimate_s": round(wall, 2),
                    "floor_s": round(floor_wall, 2),
                    "ratio": round(wall / floor_wall, 2),
                    "max_rss_mib": round(max(rss, floor_rss)),
                    "ranks": len(runs),
                    "ranks_estimated": sum(1 for r in runs.values() if _NOT_RUN not in " ".join(r["notes"])),
                    "parameter_shard_bytes": shards,
                    "gathered_parameter_bytes": gathered,
                    "optimizer_state_bytes": run["at_peak"]["by_category"]["optimizer_state"],
                    "footprint_bytes": run["footprint_bytes"],
                }
            )
        )


if __name__ == "__main__":
    main()
