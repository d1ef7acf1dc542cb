"""A compiled run's graphs, graph breaks and recompiles in every format: the terminal gives one
line for the run and one per break (its line, the user's call, Dynamo's reason) and per
recompile, Markdown and HTML the same, the JSON the fields as written and read back; a report
without the section (eager, or written before memprof kept it) shows nothing of it. Each
at-peak entry of a compiled run says which graph made it, in every format, and a diff matches
entries whatever their graphs. The section's figures from a real compile:
tests/test_compile_own_code.py, the entries' graphs: tests/test_compiled_graph_entries.py (slow)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from memprof.model import CompileSection, GraphBreak, Recompile
from memprof.model.explanation import EAGER_GRAPH
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


def _with_graphs(run, graphs: dict[int, str]):  # type: ignore[no-untyped-def]
    """``run`` with the entries at the indices of ``graphs`` said to be made by those graphs."""
    entries = tuple(
        dataclasses.replace(entry, graph=graphs.get(n, "")) for n, entry in enumerate(run.at_peak.entries)
    )
    return dataclasses.replace(run, at_peak=dataclasses.replace(run.at_peak, entries=entries))


@pytest.fixture
def graphed():  # type: ignore[no-untyped-def]
    """The saved explained GPT report, its compiled run's two largest entries made by graph
    ``0/0 train_step`` and by eager code at a graph break."""
    loaded = load_report(DATA / "gpt-explained.json")
    runs = dict(loaded.runs)
    runs["compile"] = _with_graphs(runs["compile"], {0: "0/0 train_step", 1: EAGER_GRAPH})
    return dataclasses.replace(loaded, runs=runs)


@pytest.mark.parametrize("width", (60, 80, 120))
def test_the_terminal_says_which_graph_made_each_entry(graphed, capsys, monkeypatch, width: int) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", str(width))
    print_terminal(graphed)
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "      in graph 0/0 train_step" in lines
    assert "      ran eagerly, between graphs" in lines
    # Once each: the eager run's entries and the state made before the call name no graph.
    assert sum("in graph" in line for line in lines) == 1


def test_markdown_html_and_json_say_which_graph_made_each_entry(graphed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    markdown = renderer("markdown")(graphed)
    assert "<br>in graph `0/0 train_step`" in markdown and "<br>ran eagerly, between graphs" in markdown
    html = renderer("html")(graphed)
    assert "in graph <code>0/0 train_step</code>" in html and "ran eagerly, between graphs" in html
    text = renderer("json")(graphed)
    runs = json.loads(text)["runs"]
    written = [entry.get("graph") for entry in runs["compile"]["at_peak"]["entries"]]
    assert written[:3] == ["0/0 train_step", EAGER_GRAPH, None]
    assert all("graph" not in entry for entry in runs["eager"]["at_peak"]["entries"])
    (tmp_path / "r.json").write_text(text)
    assert load_report(tmp_path / "r.json").runs["compile"].at_peak == graphed.runs["compile"].at_peak


def test_a_diff_matches_entries_whatever_graph_made_them(graphed) -> None:  # type: ignore[no-untyped-def]
    from memprof.analysis.peak_diff import contributors

    base = graphed.runs["compile"]
    other = _with_graphs(base, {0: "3/1 train_step", 1: "2/0 torch_dynamo_resume_in_train_step_at_40"})
    rows = contributors(base.at_peak, other.at_peak)
    assert rows == contributors(
        load_report(DATA / "gpt-explained.json").runs["compile"].at_peak, other.at_peak
    )
    assert [row.delta_bytes for row in rows] == [0] * len(rows) and len(rows) > 10
