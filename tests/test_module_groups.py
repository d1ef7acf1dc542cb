"""The module table grouped by layer kind (``--group-modules class|PATTERN``): every module of a
class together, or every module whose path matches a pattern, each nested member counted once
(through the outermost member of its group). Checked on hand-made tables and on a profiled
model whose bytes live at the peak are known exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

import memprof
from memprof.analysis.module_groups import group_modules, parse_grouping
from memprof.core.errors import UsageError
from memprof.frontends.cli import app
from memprof.model import Report
from memprof.model.explanation import ModuleGroup, ModuleStats
from memprof.pipeline import load_report

ROWS, WIDTH = 64, 256
B = ROWS * WIDTH * 4  # one (64, 256) float32 output


def stats(module: str, cls: str, at_peak: int, *, phase: str = "forward", calls: int = 1, peak: int = 0,
          parent: str = "") -> ModuleStats:  # fmt: skip
    return ModuleStats(module, phase, calls, peak or at_peak, 2 * at_peak, at_peak, cls, parent)


def test_a_class_counts_a_member_inside_another_member_once() -> None:
    # A Sequential root holding a Sequential: the inner one's bytes are in the outer one's.
    table = [
        stats("Sequential", "Sequential", 300, peak=310),
        stats("0", "Sequential", 200, peak=250, parent="Sequential"),
        stats("0.0", "Linear", 120, parent="0"),
        stats("0.1", "Linear", 80, parent="0"),
        stats("1", "Linear", 100, calls=2, parent="Sequential"),
        stats("1", "Linear", 40, phase="backward", parent="Sequential"),
    ]
    groups = {(g.group, g.phase): g for g in group_modules(table, "class")}
    assert groups[("Sequential", "forward")] == ModuleGroup(
        "Sequential", "class", "forward", 1, 1, 310, 600, 300
    )
    assert groups[("Linear", "forward")] == ModuleGroup("Linear", "class", "forward", 3, 4, 120, 600, 300)
    assert groups[("Linear", "backward")] == ModuleGroup("Linear", "class", "backward", 1, 1, 40, 80, 40)
    # Most bytes live at the peak first.
    assert [g.at_peak_bytes for g in group_modules(table, "class")] == [300, 300, 40]


def test_patterns_take_each_module_into_the_first_that_matches() -> None:
    table = [
        stats("h.0", "Block", 100),
        stats("h.0.attn", "Attention", 60, parent="h.0"),
        stats("h.0.mlp", "MLP", 40, parent="h.0"),
        stats("h.1", "Block", 100),
        stats("h.1.attn", "Attention", 70, parent="h.1"),
        stats("h.1.mlp", "MLP", 30, parent="h.1"),
        stats("lm_head", "Linear", 500),
    ]
    groups = {g.group: g for g in group_modules(table, ["h.*.attn", "h.*"])}
    assert set(groups) == {"h.*.attn", "h.*"}  # lm_head matches no pattern: left out
    assert (groups["h.*.attn"].modules, groups["h.*.attn"].at_peak_bytes) == (2, 130)
    # h.*: the blocks (their mlp inside them), each once; the attentions went to h.*.attn.
    assert (groups["h.*"].modules, groups["h.*"].at_peak_bytes, groups["h.*"].calls) == (2, 200, 2)
    assert {g.by for g in groups.values()} == {"pattern"}
    # * matches dots too; a pattern without * is one path.
    assert group_modules(table, "*attn")[0].at_peak_bytes == 130
    assert group_modules(table, "lm_head")[0] == ModuleGroup(
        "lm_head", "pattern", "forward", 1, 1, 500, 1000, 500
    )


def test_reports_without_parents_nest_by_dotted_path() -> None:
    table = [stats("a", "Seq", 10), stats("a.b", "Seq", 7), stats("a.b.c", "Seq", 3), stats("ab", "Seq", 5)]
    (group,) = group_modules(table, "class")
    assert (group.modules, group.at_peak_bytes) == (2, 15)  # a and ab; a.b is inside a
    # Modules of no known class (a report written before classes were stored) are left out.
    assert group_modules([stats("a", "", 10)], "class") == ()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "name 'class' or path patterns like transformer.h.*.attn to group modules by"),
        (" , ", "name 'class' or path patterns like transformer.h.*.attn to group modules by"),
        ("class,h.*", "group modules by 'class' or by path patterns, not both"),
        (",".join(f"p{i}" for i in range(65)), "a module grouping takes at most 64 patterns, got 65"),
    ],
)
def test_a_bad_grouping_says_what_to_write(spec: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_grouping(spec)
    assert caught.value.message == message


def test_groupings_are_read_once_each_in_order() -> None:
    assert parse_grouping("class") == ("class",)
    assert parse_grouping(["h.*.attn, h.*", "h.*", "lm_head"]) == ("h.*.attn", "h.*", "lm_head")


# ---- a profiled model ----------------------------------------------------------------------------


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(WIDTH, WIDTH)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor, keep: list[torch.Tensor]) -> torch.Tensor:
        keep.append(self.fc(x))
        keep.append(self.act(keep[-1]))
        return keep[-1]


class Stack(nn.Module):
    """Modules run in turn; a Stack inside a Stack is a nested member of the class Stack."""

    def __init__(self, *children: nn.Module) -> None:
        super().__init__()
        self.items = nn.ModuleList(children)

    def forward(self, x: torch.Tensor, keep: list[torch.Tensor]) -> torch.Tensor:
        for child in self.items:
            x = child(x, keep)
        return x


def keep_all(model: Stack, x: torch.Tensor) -> list[torch.Tensor]:
    """Every output stays live to the end: each Linear and each ReLU holds one (64, 256)
    float32 tensor at the peak."""
    keep: list[torch.Tensor] = []
    with torch.no_grad():
        model(x, keep)
    return keep


def stack_inputs() -> tuple[Stack, torch.Tensor]:
    torch.manual_seed(0)
    return Stack(Stack(Block(), Block()), Block()), torch.randn(ROWS, WIDTH)


@pytest.fixture(scope="module")
def stack_report() -> Report:
    return memprof.profile(keep_all, *stack_inputs())


def test_a_profiled_model_grouped_by_class_has_its_exact_bytes(stack_report: Report) -> None:
    run = stack_report.runs["eager"]
    assert run.peak_bytes == 6 * B  # three Linear and three ReLU outputs
    frame = memprof.group_modules(run, "class").set_index("group")
    assert frame.loc["Block", "at_peak_bytes"] == 6 * B and frame.loc["Block", "modules"] == 3
    assert frame.loc["Linear", "at_peak_bytes"] == frame.loc["ReLU", "at_peak_bytes"] == 3 * B
    # The root Stack and the Stack inside it: 6 outputs, not 6 + 4.
    assert (frame.loc["Stack", "at_peak_bytes"], frame.loc["Stack", "modules"]) == (6 * B, 1)
    assert frame.loc["Stack", "calls"] == 1 and frame.loc["Block", "calls"] == 3
    parents = {m.module: m.parent for m in run.module_stats}
    assert parents == {
        "Stack": "",
        "items.0": "Stack",
        "items.0.items.0": "items.0",
        "items.0.items.0.fc": "items.0.items.0",
        "items.0.items.0.act": "items.0.items.0",
        "items.0.items.1": "items.0",
        "items.0.items.1.fc": "items.0.items.1",
        "items.0.items.1.act": "items.0.items.1",
        "items.1": "Stack",
        "items.1.fc": "items.1",
        "items.1.act": "items.1",
    }
    by_pattern = memprof.group_modules(run, "items.*").set_index("group")
    assert by_pattern.loc["items.*", "at_peak_bytes"] == 6 * B and by_pattern.loc["items.*", "modules"] == 2
    assert list(memprof.group_modules(run, ["*.fc", "*.act"]).at_peak_bytes) == [3 * B, 3 * B]


STACK_MODULE = """
import torch
from torch import nn
from test_module_groups import Stack, keep_all, stack_inputs

def step(model, x):
    return keep_all(model, x)

def step_inputs():
    return stack_inputs()

def half(model, x):
    return keep_all(model, x[: len(x) // 2])

def half_inputs():
    return stack_inputs()
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_the_command_line_shows_and_writes_the_groups(runner: CliRunner, make_module, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    module = make_module(STACK_MODULE)
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        ["run", f"{module}:step", "--group-modules", "class", "-q", "--time-budget", "0", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("modules by class"))
    assert lines[head + 2].split() == ["Stack", "1", "384.0", "KiB", "384.0", "KiB", "384.0", "KiB"]
    assert lines[head + 3].split()[:6] == ["Block", "x3", "3", "384.0", "KiB", "128.0"]
    saved = load_report(out / "memprof.json").runs["eager"]
    assert {g.group: g.at_peak_bytes for g in saved.module_groups} == {
        "Stack": 6 * B, "Block": 6 * B, "Linear": 3 * B, "ReLU": 3 * B,
    }  # fmt: skip
    assert (
        json.loads((out / "memprof.json").read_text())["runs"]["eager"]["module_groups"][0]["by"] == "class"
    )
    markdown = (out / "memprof.md").read_text()
    assert "| modules by class | calls | live at peak | peak inside |" in markdown
    assert "| `Block` x3 | 3 | 384.0\xa0KiB | 128.0\xa0KiB |" in markdown
    html = (out / "memprof.html").read_text()
    assert "<h4>Modules by class</h4>" in html and '<table class="at-peak-groups sortable">' in html
    assert '<td data-sort="Block"><code>Block</code></td>' in html


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["run", "MOD:step", "--group-modules", "class,items.*"],
         "memprof: error: --group-modules: group modules by 'class' or by path patterns, not both"),
        (["estimate", "MOD:step", "--device", "cpu", "--group-modules", "class"],
         "memprof: error: --group-modules groups the modules of a run memprof explains; an estimate does "
         "not explain its peak by module: measure it with memprof run (at a size that fits this machine)"),
        (["analyze", "trace.json", "--group-modules", "class"],
         "memprof: error: --group-modules groups the modules of a run memprof explains; a recording "
         "has none"),
    ],
    ids=["class and patterns", "estimate", "analyze"],
)  # fmt: skip
def test_grouping_what_has_no_modules_is_a_usage_error(runner: CliRunner, make_module, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                       command: list[str], message: str) -> None:  # fmt: skip
    module = make_module(STACK_MODULE)
    (tmp_path / "trace.json").write_text('{"traceEvents": []}')
    result = runner.invoke(app, [part.replace("MOD", module) for part in command])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == message


def test_sequential_children_show_their_class_in_the_terminal_and_html() -> None:
    from memprof.outputs.html import render_html
    from memprof.outputs.terminal import render_terminal

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH))
    with torch.no_grad():
        report = memprof.profile(model, torch.randn(ROWS, WIDTH), time_budget=0)
    text = render_terminal(report)
    table = text[text.index("module (submodules included)") :].splitlines()
    assert [line.split()[:2] for line in table[2:6]] == [
        ["Sequential", "1"], ["0", "(Linear)"], ["1", "(ReLU)"], ["2", "(Linear)"],
    ]  # fmt: skip
    html = render_html(report)
    assert '<td data-sort="0"><code>0</code></td><td data-sort="Linear">Linear</td>' in html
    assert '<td data-sort="1"><code>1</code></td><td data-sort="ReLU">ReLU</td>' in html


def test_compare_groups_every_run(runner: CliRunner, make_module, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    module = make_module(STACK_MODULE)
    out = tmp_path / "compare.json"
    result = runner.invoke(
        app,
        ["compare", f"{module}:step", f"{module}:half", "--group-modules", "*.fc", "-q", "--time-budget", "0",
         "--json", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    runs = load_report(out).runs

    # Three Linear outputs at the peak, of 64 rows and of 32.
    def groups(label: str) -> list[tuple[str, int, int]]:
        return [(g.group, g.modules, g.at_peak_bytes) for g in runs[label].module_groups]

    assert (groups("step"), groups("half")) == ([("*.fc", 3, 3 * B)], [("*.fc", 3, 3 * B // 2)])
    assert result.output.count("modules by path pattern") == 2


def test_memprof_compare_groups_every_run_as_the_command_line_does(make_module) -> None:  # type: ignore[no-untyped-def]
    module = make_module(STACK_MODULE)
    report = memprof.compare(f"{module}:step", f"{module}:half", group_modules="*.fc", time_budget=0)
    # Three Linear outputs at the peak, of 64 rows and of 32 (as test_compare_groups_every_run).
    groups = {label: [(g.group, g.modules, g.at_peak_bytes) for g in run.module_groups]
              for label, run in report.runs.items()}  # fmt: skip
    assert groups == {"step": [("*.fc", 3, 3 * B)], "half": [("*.fc", 3, 3 * B // 2)]}
    with pytest.raises(UsageError) as caught:
        memprof.compare(f"{module}:step", group_modules="class,items.*")
    assert caught.value.message == "group_modules: group modules by 'class' or by path patterns, not both"
