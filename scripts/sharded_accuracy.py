"""Sharded estimates against a measured job: the FSDP2 example (memprof.examples.fsdp) measured
with `memprof run --nproc-per-node 2` (gloo on this machine's CPU) and estimated with
`memprof estimate --world-size 2 --device cpu`, rank by rank; prints the rows of
docs/data/estimates.json's sharded table as JSON.

    PYTHONPATH=. python scripts/sharded_accuracy.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TARGET = "memprof.examples.fsdp:step"


def _shards(entries: list[dict[str, Any]]) -> int:
    return sum(e["bytes"] for e in entries if e["category"] == "parameter" and not e.get("role"))


def _figures(run: dict[str, Any]) -> dict[str, int]:
    entries = run["at_peak"]["entries"]

    def role(name: str) -> int:
        return sum(e["bytes"] for e in entries if e.get("role") == name)

    return {
        "peak": run["peak_bytes"],
        "footprint": run["footprint_bytes"],
        "live at start": run["live_at_start_bytes"],
        "parameter shards": _shards(entries),
        "gathered parameters": role("fsdp_unsharded_parameter"),
        "optimizer state": run["at_peak"]["by_category"]["optimizer_state"],
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        measured, estimated = Path(folder, "m.json"), Path(folder, "e.json")
        memprof = [sys.executable, "-m", "memprof"]
        run = ["run", TARGET, "--nproc-per-node", "2", "--device", "cpu", "--json", str(measured), "-q"]
        subprocess.run([*memprof, *run], check=True, capture_output=True)
        subprocess.run(
            [
                *memprof,
                "estimate",
                TARGET,
                "--world-size",
                "2",
                "--device",
                "cpu",
                "--json",
                str(estimated),
                "-q",
            ],
            check=True,
            capture_output=True,
        )
        m_runs, e_runs = (json.loads(p.read_text())["runs"] for p in (measured, estimated))
    for rank in ("rank0", "rank1"):
        m, e = _figures(m_runs[rank]), _figures(e_runs[rank])
        for name in m:
            print(json.dumps([f"{rank} {name}", m[name], e[name], e[name] - m[name]]))


if __name__ == "__main__":
    main()
