"""How often a two-rank DDP job under memprof dies, and what the wait before each profile's end
costs. Prints the figures that the "Collectives and the end of a profile" paragraph of
docs/guides/distributed.md quotes.

    PYTHONPATH=. python scripts/ddp_jobs.py jobs --runs 100 --parallel 2
    PYTHONPATH=. python scripts/ddp_jobs.py wait --steps 50

``jobs``: fresh jobs of ``memprof run memprof.examples.ddp:step --warmup 2 --nproc-per-node 2``
(the race needs fresh processes: a warm process closes its collectives' ranges too fast to lose
it), ``--parallel`` at a time to load the cores as a busy machine does; counts the exit codes and
the jobs whose rank was killed by SIGABRT. ``wait``: a two-rank DDP loop under torchrun that
times ``settle_other_threads()`` inside each of ``--steps`` profiles; median and maximum per rank.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_WAIT_SCRIPT = """
import statistics, sys, time, torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile
from memprof.sources.live.settle import settle_other_threads

dist.init_process_group("gloo")
model = DistributedDataParallel(nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256)))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x, target = torch.randn(256, 256), torch.randn(256, 256)
waits = []
for _ in range(int(sys.argv[1])):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
        nn.functional.mse_loss(model(x), target).backward()
        optimizer.step()
        optimizer.zero_grad()
        start = time.perf_counter()
        settled = settle_other_threads()
        waits.append((time.perf_counter() - start) * 1e3)
        assert settled
print(f"rank {dist.get_rank()}: wait median {statistics.median(waits):.2f} ms, max {max(waits):.2f} ms")
dist.destroy_process_group()
"""


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    return env


def _job(_: int) -> tuple[int, bool]:
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "memprof", "run", "memprof.examples.ddp:step", "--warmup", "2"]
        done = subprocess.run(
            [*command, "--nproc-per-node", "2", "-q", "--json", "r.json"],
            cwd=folder,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
    return done.returncode, "killed by signal 6" in done.stderr


def jobs(runs: int, parallel: int) -> None:
    start = time.monotonic()
    with ThreadPoolExecutor(parallel) as pool:
        results = list(pool.map(_job, range(runs)))
    codes = collections.Counter(code for code, _ in results)
    aborted = sum(abort for _, abort in results)
    print(f"{runs} jobs, {parallel} at a time, {time.monotonic() - start:.0f} s; exit codes {dict(codes)}")
    print(f"jobs with a rank killed by SIGABRT: {aborted}; load average now {os.getloadavg()[0]:.1f}")


def wait(steps: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "wait.py"
        script.write_text(_WAIT_SCRIPT)
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
        done = subprocess.run(
            [*launcher, str(script), str(steps)], env=_env(), capture_output=True, text=True, timeout=600
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("rank ")]
    print("\n".join(sorted(lines)) if lines else done.stderr[-2000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["jobs", "wait"])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    if args.what == "jobs":
        jobs(args.runs, args.parallel)
    else:
        wait(args.steps)


if __name__ == "__main__":
    main()
