"""sample_reports/ is what scripts/make_sample_reports.py writes today: regenerate and compare the
stable parts (files, structure, op names, byte figures), never timings or dates."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memprof.model import Report

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_reports"
HINT = "sample_reports/ is stale: regenerate with `PYTHONPATH=. python scripts/make_sample_reports.py`"
BYTE_FIELDS = ("calls", "self_bytes", "total_bytes", "allocated_bytes", "peak_bytes")


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_sample_reports", ROOT / "scripts/make_sample_reports.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ops_bytes(run: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    return {op["name"]: tuple(op[f] for f in BYTE_FIELDS) for op in run["ops"]}


def without_timings(markdown: str) -> str:
    """The Markdown with every time left out (sizes and times keep their unit with a
    non-breaking space; a wall time may carry its spread, ``67.4 ms ±6.5%``)."""
    markdown = markdown.replace("\u00a0", " ")
    markdown = re.sub(r"wall time [^(]*\([^)]*\)", "wall time <time>", markdown)
    return re.sub(r"\b\d+(?:\.\d+)? (?:ms|us|s)(?: ±\d+\.\d%)? \|", "<time> |", markdown)


def html_structure(page: str) -> tuple[list[str], list[str], list[str]]:
    sections = re.findall(r'<section id="([^"]+)">', page)
    names = sorted(re.findall(r'<td class="name" data-sort="([^"]*)">', page))
    runs = re.search(r'<section id="runs">(.*?)</section>', page, re.S)
    assert runs
    return sections, names, re.findall(r'data-sort="(-?\d+)"', runs.group(1))


@pytest.mark.slow
def test_sample_reports_are_current(similarity_report: Report, tmp_path: Path) -> None:
    written = load_script().write_reports(similarity_report, tmp_path)
    assert sorted(p.name for p in SAMPLES.iterdir()) == sorted(p.name for p in written.values()), HINT

    new = json.loads(written["json"].read_text(encoding="utf-8"))
    old = json.loads((SAMPLES / "similarity.json").read_text(encoding="utf-8"))
    # 256 x 500 x 500 float32 = 256,000,000 B per full-size temporary; see the example's docstring.
    assert new["runs"]["eager"]["peak_bytes"] == 834_000_000
    assert new["runs"]["compile"]["peak_bytes"] == 2_000_000  # only the (500, 500) int64 output
    assert list(new["runs"]) == list(old["runs"]) == ["eager", "compile"], HINT
    for label in new["runs"]:
        # Every field a run has today is in the sample (a field added to runs needs a regeneration).
        assert sorted(new["runs"][label]) == sorted(old["runs"][label]), f"{label} fields: {HINT}"
        assert new["runs"][label]["source"] == "live"
        for key in ("peak_bytes", "allocated_bytes", "net_bytes", "inputs_bytes", "peak_op", "peak_op_stack"):
            assert new["runs"][label][key] == old["runs"][label][key], f"{label}.{key}: {HINT}"
        assert ops_bytes(new["runs"][label]) == ops_bytes(old["runs"][label]), f"{label} ops: {HINT}"
    assert new["diff"]["verdict"] == old["diff"]["verdict"], HINT
    for label in new["runs"]:
        # What is live at each peak: the same entries, byte for byte.
        assert new["runs"][label]["at_peak"] == old["runs"][label]["at_peak"], f"{label}.at_peak: {HINT}"
    assert written["at_peak_csv"].read_text(encoding="utf-8") == (
        SAMPLES / "similarity-at-peak.csv"
    ).read_text(encoding="utf-8"), HINT

    def csv_rows(text: str) -> list[tuple[str, ...]]:
        return sorted(
            (r["run"], r["name"], *(r[f] for f in BYTE_FIELDS)) for r in csv.DictReader(io.StringIO(text))
        )

    assert csv_rows(written["csv"].read_text(encoding="utf-8")) == csv_rows(
        (SAMPLES / "similarity.csv").read_text(encoding="utf-8")
    ), HINT

    new_md = without_timings(written["markdown"].read_text(encoding="utf-8"))
    assert new_md == without_timings((SAMPLES / "similarity.md").read_text(encoding="utf-8")), HINT
    assert "**torch.compile lowers peak memory by 793.5 MiB (-99.8%): 795.4 MiB -> 1.9 MiB**" in new_md

    new_html = written["html"].read_text(encoding="utf-8")
    assert html_structure(new_html) == html_structure(
        (SAMPLES / "similarity.html").read_text(encoding="utf-8")
    )
    assert "<details><summary>compile</summary>" in new_html  # torch's tables were kept

    table_headers = [
        line for line in written["table"].read_text().splitlines() if line.startswith("memprof run")
    ]
    assert table_headers == [
        "memprof run eager: memprof.examples.similarity:similarity",
        "memprof run compile: memprof.examples.similarity:similarity",
    ]
