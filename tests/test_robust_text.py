"""Invisible and control characters in names: a bidirectional override (U+202E), isolates
(U+2066-2069), zero-width characters, C0 and C1 controls, ANSI escape sequences. The renderers
for people (terminal, Markdown, HTML, the gate's lines, parsed tables, error messages) show them
escaped as Python writes them (``\\u202e``); CSV and JSON keep the exact text, since they are data."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

import pytest
from conftest import make_single_report
from typer.testing import CliRunner

from memprof.frontends.cli import app
from memprof.model import Report
from memprof.outputs import renderer
from memprof.outputs.terminal import render_terminal
from memprof.pipeline import load_report

HIDDEN = {
    "\u202e": "\\u202e",  # right-to-left override
    "\u2066": "\\u2066",  # left-to-right isolate
    "\u2067": "\\u2067",
    "\u2068": "\\u2068",
    "\u2069": "\\u2069",  # pop directional isolate
    "\u200b": "\\u200b",  # zero-width space
    "\u200f": "\\u200f",  # right-to-left mark
    "\ufeff": "\\ufeff",  # zero-width no-break space
    "\x1b": "\\x1b",  # ESC: ANSI escape sequences
    "\x07": "\\x07",  # bell
    "\x85": "\\x85",  # C1 next line
    "\x9b": "\\x9b",  # C1 control sequence introducer
    "\u2028": "\\u2028",  # line separator
    "\r": "\\x0d",
}
OP = "aten::add\u202e)tnemmoc(\u2066x\u2069\u2067\u2068\u200b\u200f\ufeff"
ANSI_OP = "\x1b[31mred\x1b[0m\x07\x85\x9b[2J\u2028\rend"
LABEL = "eager\u202e"


def hostile_report() -> Report:
    report = make_single_report()
    run = report.runs["eager"]
    ops = (replace(run.op_stats[0], name=OP), replace(run.op_stats[1], name=ANSI_OP), *run.op_stats[2:])
    run = replace(run, label=LABEL, op_stats=ops, peak_op=ANSI_OP, notes=(f"note about {OP}",))
    return replace(report, target="m:f\u202e", runs={LABEL: run})


def assert_escaped(text: str) -> None:
    leaked = sorted({repr(char) for char in HIDDEN if char in text})
    assert not leaked, f"shown raw: {leaked}"
    assert "aten::add\\u202e)tnemmoc(\\u2066x\\u2069" in text
    assert "\\x1b[31mred\\x1b[0m\\x07" in text


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_markdown_and_html_show_hidden_characters_escaped(fmt):
    assert_escaped(renderer(fmt)(hostile_report()))


def test_the_terminal_summary_shows_hidden_characters_escaped():
    text = render_terminal(hostile_report())
    assert_escaped(text)
    # escaped before the table is laid out (wide enough for whole names): a carriage return does
    # not split the op's row, and the columns stay aligned
    text = render_terminal(hostile_report(), width=200)
    assert_escaped(text)
    row = next(line for line in text.splitlines() if line.startswith("\\x1b[31mred"))
    header = next(line for line in text.splitlines() if line.startswith("op "))
    assert row.index(" 1 ") + 2 == header.index("calls") + len("calls")  # the calls column's right edge
    assert row.split()[:3] == ["\\x1b[31mred\\x1b[0m\\x07\\x85\\x9b[2J\\u2028\\x0dend", "1", "4.0"]


def test_csv_and_json_keep_the_exact_text(tmp_path):
    report = hostile_report()
    rows = list(csv.DictReader(io.StringIO(renderer("csv")(report), newline="")))
    assert {row["name"] for row in rows} >= {OP, ANSI_OP}
    path = tmp_path / "r.json"
    path.write_text(report.to_json())
    loaded = load_report(path)
    assert [op.name for op in loaded.runs[LABEL].op_stats][:2] == [OP, ANSI_OP]
    assert json.loads(path.read_text())["target"] == "m:f\u202e"


def test_command_line_output_shows_hidden_characters_escaped(tmp_path):
    report = hostile_report()
    path, base = tmp_path / "r.json", tmp_path / "base.json"
    path.write_text(report.to_json())
    smaller = replace(
        report.runs[LABEL],
        op_stats=tuple(replace(op, peak_bytes=op.peak_bytes // 2) for op in report.runs[LABEL].op_stats),
    )
    base.write_text(replace(report, runs={LABEL: smaller}).to_json())
    result = CliRunner().invoke(app, ["check", str(path), "--baseline", str(base), "--per-op"])
    assert result.exit_code == 1
    assert_escaped(result.stdout)
    assert "eager\\u202e op aten::add\\u202e)tnemmoc(" in result.stdout


def test_a_parsed_table_shows_names_escaped_and_writes_them_exactly(tmp_path):
    dash = "-" * 30 + "  " + "----------"
    name = "\x1b[2Jevil\u202e\rx"
    text = "\n".join([dash, f"{'Name':<30}  {'# of Calls':>10}", dash, f"{name:<30}  {1:>10}", dash, ""])
    runner = CliRunner()
    result = runner.invoke(app, ["parse", "-"], input=text.encode())
    assert result.exit_code == 0, result.output
    assert "\\x1b[2Jevil\\u202e\\x0dx" in result.stdout
    assert not {"\x1b", "\u202e", "\r"} & set(result.stdout)
    out, table = tmp_path / "t.json", tmp_path / "t.csv"
    args = ["parse", "-", "--json", str(out), "--csv", str(table)]
    assert runner.invoke(app, args, input=text.encode()).exit_code == 0
    assert json.loads(out.read_text())["rows"][0]["name"] == name
    with table.open(newline="") as handle:
        assert [row["name"] for row in csv.DictReader(handle)] == [name]
