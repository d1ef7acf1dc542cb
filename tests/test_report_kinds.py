"""Report kinds are an extension point: a kind declares its sections once
(:mod:`memprof.outputs.kinds`), its sections say what to draw, and every format of the one
renderer table draws it. A new kind is new files only: its payload (a report's detail), its
sections, its library call and its command, each found by its folder."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from memprof.core.errors import InputError
from memprof.model.report import Report
from memprof.model.run import RunResult
from memprof.model.sweep import Sweep
from memprof.outputs import RENDERERS, renderer
from memprof.outputs import document as doc
from memprof.outputs.build import build
from memprof.outputs.context import Context
from memprof.outputs.kinds import (
    KINDS,
    SECTIONS,
    Kind,
    kind_of,
    register_kind,
    register_section,
    unregister_kind,
)
from memprof.pipeline import build_report, report_from_dict

MiB = 1 << 20
TOY_TARGET = "toy:f"


def toy_section(context: Context) -> doc.Section:
    """A toy kind's one section: a sentence and a table of each run's peak."""
    rows = tuple(doc.Row((run.label, run.peak_bytes)) for run in context.detail.runs.values())
    table = doc.Table(
        (doc.Column("run", doc.LABEL), doc.Column("peak", doc.SIZE, strong=True)), rows, name="toy"
    )
    return doc.Section("toy", "Toy", (doc.Paragraph(doc.words("the toy kind says hello")), table))


@pytest.fixture
def toy_kind() -> Iterator[Kind]:
    register_section("toy", toy_section)
    kind = register_kind(
        Kind("toy", ("toy",), detects=lambda report: report.target == TOY_TARGET, page="toy: ")
    )
    yield kind
    unregister_kind("toy")
    del SECTIONS["toy"]


def toy_report() -> Report:
    run = RunResult(label="eager", mode="eager", peak_bytes=3 * MiB, allocated_bytes=3 * MiB, wall_ms=2.0)
    return build_report(target=TOY_TARGET, device="cpu", runs={"eager": run})


def test_a_registered_kind_lays_out_its_own_sections(toy_kind: Kind) -> None:
    report = toy_report()
    assert kind_of(report) is toy_kind
    document = build(report)
    assert (document.kind, document.name) == ("toy", "toy: toy:f")
    assert [section.id for section in document.sections] == ["toy"]


def test_a_registered_kind_is_drawn_by_every_format(toy_kind: Kind) -> None:
    report = toy_report()
    assert set(RENDERERS) == {
        "json",
        "csv",
        "at_peak_csv",
        "sweep_csv",
        "markdown",
        "html",
        "notebook",
        "terminal",
        "table",
    }
    out = {fmt: renderer(fmt)(report) for fmt in RENDERERS}
    # The formats that draw the document draw the toy's section and nothing else of a run's.
    assert out["terminal"] == (
        "memprof: toy:f on cpu (torch ?)\n\n"
        "the toy kind says hello\n\n"
        "run       peak\n-----  -------\neager  3.0 MiB\n"
    )
    assert out["markdown"] == (
        "## memprof: `toy:f` on cpu (torch ?)\n\n"
        "the toy kind says hello\n\n"
        "| run | peak |\n|---|---:|\n| eager | 3.0\xa0MiB |\n"
    )
    for fmt in ("html", "notebook"):
        page = out[fmt]
        assert '<section id="toy"><h2>Toy</h2>' in page
        assert "<p>the toy kind says hello</p>" in page and '<th scope="row">eager</th>' in page
        assert '<section id="runs"' not in page
    assert out["html"].count("<title>toy: toy:f</title>") == 1
    # The data formats write the report's data, whatever its kind.
    assert json.loads(out["json"])["runs"]["eager"]["peak_bytes"] == 3 * MiB
    assert next(csv.reader(io.StringIO(out["csv"])))[0] == "run"
    assert out["table"] == ""


def test_a_kind_names_only_sections_there_are() -> None:
    with pytest.raises(ValueError, match="report kind 'broken': no section 'nowhere'"):
        register_kind(Kind("broken", ("summary", "nowhere")))
    assert "broken" not in KINDS


def test_without_its_kind_the_report_is_a_report_of_runs() -> None:
    report = toy_report()
    assert kind_of(report).name == "run"
    shown = [section.id for section in build(report).sections]
    assert shown[:4] == ["summary", "verdict", "runs", "timeline"]


def test_a_kinds_payload_is_the_reports_one_detail_under_its_own_key() -> None:
    sweep = Sweep(parameter="batch", verdict="batch=8 fits")
    report = replace(toy_report(), detail=sweep)
    data = report.to_dict()
    assert data["sweep"] == {"parameter": "batch", "needed": "footprint_bytes", "points": []} | {
        "verified": False,
        "verdict": "batch=8 fits",
        "reserve_bytes": 0,
        "reliable": True,
    }
    assert "detail" not in data and "advice" not in data
    read = report_from_dict(data)
    assert (read.detail, read.sweep, read.advice) == (sweep, sweep, None)
    assert report_from_dict(toy_report().to_dict()).detail is None


def test_a_report_holding_two_payloads_is_refused() -> None:
    data = toy_report().to_dict() | {"sweep": {"parameter": "batch"}, "advice": {}}
    with pytest.raises(InputError) as caught:
        report_from_dict(data, "two.json")
    assert (
        caught.value.message
        == "two.json: holds 'advice' and 'sweep', but one of them at most belongs in it; keep one"
    )


# A new report kind, "toy", written as a contributor would: four new files in memprof's folders.
TOY_FILES = {
    "model/toy.py": """
        from dataclasses import dataclass

        from memprof.core import fields
        from memprof.model.detail import detail


        @detail("toy")
        @dataclass(frozen=True, kw_only=True)
        class Toy:
            greeting: str = fields.text(required=True)
    """,
    "outputs/toy.py": """
        from memprof.model.toy import Toy
        from memprof.outputs import document as doc
        from memprof.outputs.kinds import Kind


        def section(context):
            toy = context.detail.detail
            rows = tuple(doc.Row((run.label, run.peak_bytes)) for run in context.detail.runs.values())
            columns = (doc.Column("run", doc.LABEL), doc.Column("peak", doc.SIZE, strong=True))
            table = doc.Table(columns, rows, name="toy")
            said = doc.Paragraph(doc.words(f"the toy says {toy.greeting}"))
            return doc.Section("toy", "Toy", (said, table))


        SECTIONS = {"toy": section}
        KIND = Kind("toy", ("toy",), detects=lambda report: isinstance(report.detail, Toy), page="toy: ")
    """,
    "library/toy.py": """
        from memprof.model.run import RunResult
        from memprof.model.toy import Toy
        from memprof.pipeline import build_report


        def toy(greeting):
            run = RunResult(label="eager", mode="eager", peak_bytes=3 << 20, allocated_bytes=3 << 20)
            return build_report(target="toy:f", runs={"eager": run}, detail=Toy(greeting=greeting))
    """,
    "frontends/commands/toy.py": """
        import typer

        from memprof.frontends.commands import Command


        def toy(greeting: str = typer.Argument(...), format: str = typer.Option("terminal")) -> None:
            \"\"\"Say hello as a report.\"\"\"
            from memprof.library.toy import toy as make
            from memprof.outputs import renderer

            typer.echo(renderer(format)(make(greeting)), nl=False)


        COMMAND = Command(toy, place=90)
    """,
}

TOY_RUN = """
import json
from typer.testing import CliRunner
from memprof.frontends.cli import app
from memprof.outputs import RENDERERS
from memprof.pipeline import report_from_dict

runner = CliRunner()
said = {"help": runner.invoke(app, ["--help"]).output}
for fmt in RENDERERS:
    done = runner.invoke(app, ["toy", "hello", "--format", fmt])
    said[fmt] = done.output if done.exit_code == 0 else f"exit {done.exit_code}: {done.output}"
read = report_from_dict(json.loads(said["json"]))
said["read back"] = f"{type(read.detail).__name__}: {read.detail.greeting}"
print(json.dumps(said))
"""


def _tree(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_a_new_kind_is_four_new_files_found_by_their_folders(tmp_path: Path) -> None:
    # A copy of memprof with the toy kind's four files added and nothing else touched.
    package = tmp_path / "memprof"
    shutil.copytree(
        Path(__file__).resolve().parents[1] / "memprof", package, ignore=shutil.ignore_patterns("__pycache__")
    )
    before = _tree(package)
    for name, text in TOY_FILES.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "100", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", TOY_RUN], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    after = _tree(package)
    assert {name: after[name] for name in before} == before  # no file of memprof edited
    assert sorted(set(after) - set(before)) == sorted(TOY_FILES)
    # memprof --help lists the new command where its place puts it: after every other one.
    listed = [
        line.split()[1] for line in said["help"].splitlines() if line.startswith("│ ") and line[2] != " "
    ]
    commands = [name for name in listed if not name.startswith("-")]
    assert commands == ["run", "compare", "estimate", "advise", "analyze", "check", "diff", "parse", "toy"]
    # Every format draws it: the document formats its one section, the data formats its data.
    assert said["terminal"] == (
        "memprof: toy:f on cpu (torch ?)\n\n"
        "the toy says hello\n\n"
        "run       peak\n-----  -------\neager  3.0 MiB\n"
    )
    assert said["markdown"].startswith("## memprof: `toy:f` on cpu (torch ?)\n\nthe toy says hello\n\n")
    for fmt in ("html", "notebook"):
        assert '<section id="toy"><h2>Toy</h2>' in said[fmt] and "<p>the toy says hello</p>" in said[fmt]
    assert "<title>toy: toy:f</title>" in said["html"]
    # Its payload is written under its own key and read back as its own type.
    assert json.loads(said["json"])["toy"] == {"greeting": "hello"}
    assert said["read back"] == "Toy: hello"
    assert next(csv.reader(io.StringIO(said["csv"])))[0] == "run"
    assert not any(text.startswith("exit ") for text in said.values())
