"""Report kinds are an extension point: a kind declares its sections once
(:mod:`memprof.outputs.kinds`), its sections say what to draw, and every format of the one
renderer table draws it."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

import pytest

from memprof.model.report import Report
from memprof.model.run import RunResult
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
from memprof.pipeline import build_report

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
