"""Regenerate ``sample_reports/``: the real reports of the built-in similarity example.

Profiles ``memprof.examples.similarity:similarity`` eager and compiled (a torch.compile: about
12 s cold, 2 s with Inductor's cache warm) and writes every format memprof has:

    sample_reports/similarity.json  similarity.csv  similarity.md  similarity.html
    sample_reports/similarity-at-peak.csv       (what is live at each run's peak)
    sample_reports/similarity-torch-table.txt   (torch.profiler's own table of each run)

Usage: PYTHONPATH=. python scripts/make_sample_reports.py [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memprof.model import Report

ROOT = Path(__file__).resolve().parent.parent
TARGET = "memprof.examples.similarity:similarity"
STEM = "similarity"


def build_report() -> Report:
    """Run the example eager and compiled, keeping torch's tables."""
    import memprof

    return memprof.compare(
        TARGET,
        mode="both",
        device="cpu",
        keep_table=True,
        status=lambda message: print(f"memprof: {message}", file=sys.stderr),
    )


def write_reports(report: Report, out_dir: Path) -> dict[str, Path]:
    """Write every format of ``report`` into ``out_dir``; returns {format: path}."""
    from memprof.core.writing import atomic_write_text
    from memprof.outputs import renderer

    paths = {
        "json": out_dir / f"{STEM}.json",
        "csv": out_dir / f"{STEM}.csv",
        "at_peak_csv": out_dir / f"{STEM}-at-peak.csv",
        "markdown": out_dir / f"{STEM}.md",
        "html": out_dir / f"{STEM}.html",
        "table": out_dir / f"{STEM}-torch-table.txt",
    }
    rendered = {path: renderer(fmt)(report) for fmt, path in paths.items()}
    for path, text in rendered.items():
        atomic_write_text(path, text)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "sample_reports", help="output folder")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in write_reports(build_report(), args.out).values():
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
