"""`memprof run` writing reports: --out, --html/--markdown/--csv, names escaped per format."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import pytest
from conftest import SCRIPT_LABEL
from typer.testing import CliRunner

from memprof.frontends.cli import app
from memprof.outputs import STANDARD_NAMES

# 1000 x 1000 float32 = 4,000,000 B inside a record_function range with a hostile label.
WORKLOAD = f"""
import torch
from torch.profiler import record_function


def labelled():
    with record_function({SCRIPT_LABEL!r}):
        return torch.ones(1000, 1000)
"""


@pytest.fixture
def workload(tmp_path: Path) -> str:
    path = tmp_path / "workload.py"
    path.write_text(WORKLOAD, encoding="utf-8")
    return f"{path}:labelled"


def test_out_writes_every_format_with_standard_names(workload: str, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "new"  # made with its parents
    result = CliRunner().invoke(app, ["run", workload, "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted(STANDARD_NAMES.values())

    rows = list(csv.DictReader(io.StringIO((out / "memprof-ops.csv").read_text(encoding="utf-8"))))
    label_rows = [r for r in rows if r["name"] == SCRIPT_LABEL]  # intact in the CSV
    assert len(label_rows) == 1
    assert label_rows[0]["peak_bytes"] == "4000000"

    page = (out / "memprof.html").read_text(encoding="utf-8")
    assert SCRIPT_LABEL not in page
    assert "<code>&lt;script&gt;alert(1)&lt;/script&gt;</code>" in page
    assert 'id="torch-table"' not in page  # torch's table is made only when --table asks

    markdown = (out / "memprof.md").read_text(encoding="utf-8").replace("\u00a0", " ")
    # The label's range only repeats aten::ones inside it (the call the code made): left out,
    # and named in a code span.
    assert "| `aten::ones` | 1 | 3.8 MiB |" in markdown
    assert f"`aten::empty`, `{SCRIPT_LABEL}` (same figures as `aten::ones`)" in markdown
    assert "**eager: peak 3.8 MiB above the call's start" in markdown


def test_torch_table_is_embedded_escaped_only_when_table_asks(workload: str, tmp_path: Path) -> None:
    page, table = tmp_path / "report.html", tmp_path / "torch.txt"
    result = CliRunner().invoke(app, ["run", workload, "--html", str(page), "--table", str(table), "-q"])
    assert result.exit_code == 0, result.output
    text = page.read_text(encoding="utf-8")
    assert '<section id="torch-table"><h2>torch.profiler table</h2><details><summary>eager</summary>' in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text.split('id="torch-table"')[1]
    assert SCRIPT_LABEL in table.read_text(encoding="utf-8")


def test_reports_never_build_torchs_table_unless_table_asks(
    workload: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch.autograd.profiler
    import torch.profiler

    called: list[str] = []

    def key_averages(self: object, *args: object, **kwargs: object) -> None:
        called.append(type(self).__name__)
        raise AssertionError("key_averages() called")

    monkeypatch.setattr(torch.profiler.profile, "key_averages", key_averages)
    monkeypatch.setattr(torch.autograd.profiler.profile, "key_averages", key_averages)
    out = tmp_path / "out"
    assert CliRunner().invoke(app, ["run", workload, "--out", str(out), "-q"]).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(STANDARD_NAMES.values())
    paths = {"--html": "r.html", "--json": "r.json", "--csv": "r.csv", "--markdown": "r.md"}
    flags = [item for flag, name in paths.items() for item in (flag, str(tmp_path / name))]
    result = CliRunner().invoke(app, ["run", workload, *flags, "-q"])
    assert result.exit_code == 0, result.output
    assert all((tmp_path / name).stat().st_size > 0 for name in paths.values())
    assert called == []

    # The same patch makes --table fail: the check above would see a call.
    result = CliRunner().invoke(app, ["run", workload, "--table", str(tmp_path / "t.txt"), "-q"])
    assert result.exit_code != 0 and called


def test_markdown_and_html_paths(workload: str, tmp_path: Path) -> None:
    md, page = tmp_path / "summary.md", tmp_path / "report.html"
    result = CliRunner().invoke(app, ["run", workload, "--markdown", str(md), "--html", str(page), "-q"])
    assert result.exit_code == 0, result.output
    assert md.read_text(encoding="utf-8").startswith("## memprof: `")
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_html_needs_no_plotting_library(
    workload: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what a missing package looks like
    page = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["run", workload, "--html", str(page), "-q"])
    assert result.exit_code == 0, result.output
    assert '<svg class="mp-svg"' in page.read_text(encoding="utf-8")
