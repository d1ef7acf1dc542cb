"""What the benchmarks share: the environment a measured process runs in, timing a whole
process, and the machine the figures were taken on."""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def env(root: Path = ROOT, **extra: str) -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), out.get("PYTHONPATH", "")]))
    out.update(extra)
    return out


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


def cpu_name(default: str) -> str:
    """The processor's model name from /proc/cpuinfo (``default`` where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return default


def machine() -> str:
    cpu = cpu_name(platform.processor() or platform.machine())
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
