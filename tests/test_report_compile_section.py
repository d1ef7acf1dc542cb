"""A compiled run's graphs, graph breaks and recompiles in every format: the terminal gives one
line for the run and one per break (its line, the user's call, Dynamo's reason) and per
recompile, Markdown and HTML the same, the JSON the fields as written and read back; a report
without the section (eager, or written before memprof kept it) shows nothing of it. The
section's figures from a real compile: tests/test_compile_own_code.py (slow)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from memprof.model import CompileSection, GraphBreak, Recompile
from memprof.outputs import renderer
from memprof.outputs.terminal import print_terminal
from memprof.pipeline import load_report

DATA = Path(__file__).parent / "data"

SECTION = CompileSection(
    graphs=3,
    breaks=(
        GraphBreak(
            reason="Unsupported Tensor.item() call with capture_scalar_outputs=False",
            source="transformers/models/gpt2/modeling_gpt2.py:703",
            source_text="if attention_mask.max() > 0:",
            user_source="train.py:12",
            user_source_text="out = model(ids)",
            count=2,
        ),
    ),
    recompiles=(Recompile(function="step", source="train.py:9", guard="x.size()[0] == 8"),),
)


@pytest.fixture
def report():  # type: ignore[no-untyped-def]
    loaded = load_report(DATA / "similarity-compare.json")
    label = next(label for label, run in loaded.runs.items() if run.mode == "compile")
    runs = dict(loaded.runs)
    runs[label] = dataclasses.replace(runs[label], compile=SECTION)
    return dataclasses.replace(loaded, runs=runs), label


def test_the_terminal_says_each_break_and_recompile_on_its_line(report, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    loaded, label = report
    monkeypatch.setenv("COLUMNS", "200")
    print_terminal(loaded)
    lines = capsys.readouterr().out.splitlines()
    assert f"{label}: torch.compile made 3 graphs, 2 graph breaks, 1 recompile:" in lines
    assert (
        "  graph break x2 at transformers/models/gpt2/modeling_gpt2.py:703 if attention_mask.max() > 0: "
        "(called from train.py:12): Unsupported Tensor.item() call with capture_scalar_outputs=False"
    ) in lines
    assert "  recompiled step at train.py:9: guard failed: x.size()[0] == 8" in lines


def test_markdown_and_html_show_the_same_lines(report) -> None:  # type: ignore[no-untyped-def]
    loaded, label = report
    markdown = renderer("markdown")(loaded)
    assert f"### {label}: torch.compile made 3 graphs, 2 graph breaks, 1 recompile" in markdown
    assert "- graph break x2 at `transformers/models/gpt2/modeling_gpt2.py:703`" in markdown
    html = renderer("html")(loaded)
    assert '<section id="compile"><h2>Compiled graphs</h2>' in html
    assert "called from <code>train.py:12</code>" in html


def test_the_json_holds_the_section_and_reads_it_back(report, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    loaded, label = report
    text = renderer("json")(loaded)
    written = json.loads(text)["runs"][label]["compile"]
    assert written == {
        "graphs": 3,
        "breaks": [
            {
                "reason": "Unsupported Tensor.item() call with capture_scalar_outputs=False",
                "source": "transformers/models/gpt2/modeling_gpt2.py:703",
                "source_text": "if attention_mask.max() > 0:",
                "user_source": "train.py:12",
                "user_source_text": "out = model(ids)",
                "count": 2,
            }
        ],
        "recompiles": [{"function": "step", "source": "train.py:9", "guard": "x.size()[0] == 8"}],
    }
    (tmp_path / "r.json").write_text(text)
    assert load_report(tmp_path / "r.json").runs[label].compile == SECTION


def test_a_report_without_the_section_shows_nothing_of_it(capsys) -> None:  # type: ignore[no-untyped-def]
    loaded = load_report(DATA / "similarity-compare.json")
    assert all(run.compile is None for run in loaded.runs.values())
    print_terminal(loaded)
    assert "torch.compile made" not in capsys.readouterr().out
    runs = json.loads(renderer("json")(loaded))["runs"]
    assert all("compile" not in run for run in runs.values())
