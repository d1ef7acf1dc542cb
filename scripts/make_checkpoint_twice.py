"""Write tests/data/checkpoint-twice.json: the eager and compiled runs of
tests/data/checkpoint_twice.py:step (the checkpointed compile regression), as

    memprof.compare("tests/data/checkpoint_twice.py:step", mode="both", time_budget=0)

from the repository's root, each run's timelines (live bytes, and by category) cut to their 50
highest-per-bucket points (the peak kept) so that the file stays small. Rerun after a change
that moves what the report holds, then the tests that pin it (tests/test_peak_diff.py,
tests/test_cli_diff.py's golden file).

    PYTHONPATH=. python scripts/make_checkpoint_twice.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

import memprof
from memprof.analysis.timeline import highest_per_bucket

ROOT = Path(__file__).resolve().parents[1]
POINTS = 50


def main() -> None:
    os.chdir(ROOT)
    report = memprof.compare("tests/data/checkpoint_twice.py:step", mode="both", time_budget=0)
    document = report.to_dict()
    for run in document["runs"].values():
        timeline = run["timeline"]
        keep = sorted(set(highest_per_bucket(np.asarray(timeline["bytes"]), POINTS).tolist()))
        for key in ("t_ns", "bytes", "op_at"):
            timeline[key] = [timeline[key][i] for i in keep]
        stacked = timeline.get("by_category")
        if stacked:
            total = np.sum([np.asarray(v) for v in stacked["bytes"].values()], axis=0)
            keep = sorted(set(highest_per_bucket(total, POINTS).tolist()))
            stacked["t_ns"] = [stacked["t_ns"][i] for i in keep]
            stacked["bytes"] = {name: [v[i] for i in keep] for name, v in stacked["bytes"].items()}
    path = ROOT / "tests" / "data" / "checkpoint-twice.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
