"""The terminal summary: golden outputs rendered from real captured reports, and the layout's
promises at any width (no line wider than the terminal, --top exact, every column headed, the
verdict last).

Regenerate the goldens after an intended change with ``pytest tests/test_terminal.py --update-golden``.
``tests/data/transformer-step.json`` is a real report of ``tests/data/transformer_step.py`` (a
two-layer transformer's AdamW step, eager vs compiled, on CPU) with its timelines cut to 200
points."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

import pytest

from memprof.outputs.layout import ELLIPSIS, Column, Table, cut_source, plain, shorten, wrap
from memprof.outputs.rows import op_tables
from memprof.outputs.terminal import print_terminal, render_terminal
from memprof.pipeline import compared, load_report

DATA = Path(__file__).parent / "data"
GOLDEN = Path(__file__).parent / "golden"
REPORTS = ["similarity.json", "transformer-step.json"]


def check_golden(name: str, text: str, update: bool) -> None:
    path = GOLDEN / name
    if update:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


@pytest.fixture
def report():
    return load_report(DATA / "similarity.json")


def test_two_runs_side_by_side(report, update_golden):
    check_golden("terminal_similarity.txt", render_terminal(report, sort="peak", top=6), update_golden)


def test_single_run_sorted_by_self(report, update_golden):
    report = compared(dataclasses.replace(report, runs={"eager": report.runs["eager"]}))
    check_golden(
        "terminal_similarity_eager_self.txt", render_terminal(report, sort="self", top=5), update_golden
    )


@pytest.mark.parametrize("width", [80, 120])
def test_training_step_at_the_terminal_widths_of_the_issue(width, update_golden):
    text = render_terminal(load_report(DATA / "transformer-step.json"), width=width)
    check_golden(f"terminal_transformer_step_{width}.txt", text, update_golden)


def table_blocks(text: str) -> list[tuple[str, str]]:
    """(header line, rule line) of every table: a rule is dashes separated by two spaces."""
    lines = text.splitlines()
    return [(lines[i - 1], line) for i, line in enumerate(lines) if re.fullmatch(r"-+(  -+)*", line)]


@pytest.mark.parametrize("name", REPORTS)
@pytest.mark.parametrize("width", [60, 80, 100, 120, 200])
def test_no_line_is_wider_than_the_terminal_and_the_verdict_is_last(name: str, width: int) -> None:
    report = load_report(DATA / name)
    text = render_terminal(report, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    # Every column has a header: text above each run of dashes.
    for header, rule in table_blocks(text):
        for dashes in re.finditer(r"-+", rule):
            assert header[dashes.start() : dashes.end()].strip(), (header, rule)
    # The verdict and the memory-and-time summary are the last lines.
    diff = report.diff
    assert diff is not None
    assert text.rstrip("\n").endswith("\n".join(wrap(diff.verdict, width) + wrap(diff.summary, width)))


@pytest.mark.parametrize("name", REPORTS)
@pytest.mark.parametrize("top", [1, 3, 15])
def test_top_is_exact(name: str, top: int) -> None:
    report = load_report(DATA / name)
    text = render_terminal(report, top=top, width=120)
    table = text.split(f"Top {top} ops by peak bytes, eager vs compile:\n")[1].split("\n\n")[0]
    rows = [line for line in table.splitlines()[2:] if not line.startswith(" ") and "not shown" not in line]
    (expected,) = op_tables(report, "peak", top)
    (every,) = op_tables(report, "peak")
    assert len(rows) == len(expected.rows) == min(top, len(every.rows))
    assert [row.split()[0] for row in rows] == [op.name.split()[0] for op in expected.rows]


def test_narrow_terminals_get_fewer_columns_shortened_names_and_notes_under_their_row():
    report = load_report(DATA / "transformer-step.json")
    wide, narrow = render_terminal(report, width=200), render_terminal(report, width=80)
    op_header = "op                                            peak eager  peak compile     delta"
    assert "self eager" in wide and op_header in narrow.splitlines()
    assert "(left out at 80 columns: self eager, self compile)" in narrow
    # A long op name keeps both ends (autograd's ranges are shown with --op-chains).
    long_name = "autograd::engine::evaluate_function: LogSoftmaxBackward0"
    assert long_name in render_terminal(report, width=200, top=40, chains=True)
    assert long_name not in render_terminal(report, width=200, top=40)
    shortened = next(
        line.split("  ")[0]
        for line in render_terminal(report, width=80, top=40, chains=True).splitlines()
        if line.startswith("autograd::engine:") and line.split("  ")[0].endswith("LogSoftmaxBackward0")
    )
    assert ELLIPSIS in shortened and len(shortened) < len(long_name)
    # The note ("fused into <kernel>") is on its own line, indented under its row, the kernel's
    # name shortened in the middle to end that line.
    lines = narrow.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("aten::_log_softmax_backward_data  "))
    note = lines[row + 1]
    assert note.startswith("    fused into cpp_fused__log_softmax__log_soft") and ELLIPSIS in note
    assert note.endswith("_scalar_tensor_view_0") and len(note) == 80
    assert lines[row + 2].startswith("aten::")


def test_fused_kernels_have_their_own_section_most_memory_first():
    report = load_report(DATA / "similarity.json")
    text = render_terminal(report, top=1, width=100)
    fused = text.split("Fused kernels of compile, and the eager ops each replaced (their peak in eager):\n")[
        1
    ]
    assert fused.splitlines()[:3] == [
        "kernel                                peak",
        "------------------------------------  ----",
        "cpp_fused_abs_lt_sub_sum_unsqueeze_0   0 B",
    ]
    assert (
        fused.splitlines()[3]
        == "    aten::sum 490.2 MiB, aten::abs 244.1 MiB, aten::sub 244.1 MiB and 2 more"
    )
    step = render_terminal(load_report(DATA / "transformer-step.json"), width=100)
    # 18 fused kernels: the summary shows the 5 that replaced the most memory.
    assert "and 13 more fused kernels (the HTML and JSON reports list them all)" in step


def test_three_runs_print_their_verdicts_in_order_with_blank_lines_between(compare_report):
    import dataclasses

    third = dataclasses.replace(compare_report.runs["compile"], label="third")
    report = compared(dataclasses.replace(compare_report, runs={**compare_report.runs, "third": third}))
    text = render_terminal(report, width=120)
    tail = text.rstrip("\n").split("\n")[-5:]
    first, second = report.diffs
    assert tail == [first.verdict, first.summary, "", second.verdict, second.summary]


def test_shorten_keeps_both_ends_and_the_width():
    name = "autograd::engine::evaluate_function: AddmmBackward0"
    for width in range(2, len(name) + 3):
        short = shorten(name, width)
        assert len(short) == min(width, len(name))
        if width < len(name):
            head, tail = short.split(ELLIPSIS)
            assert name.startswith(head) and name.endswith(tail) and len(head) >= len(tail) - 1


def test_a_table_drops_the_least_important_columns_together_and_says_so():
    table = Table(
        [
            Column("name", shrink=True, min_width=10),
            Column("a", "right"),
            Column("b1", "right", drop=1),
            Column("b2", "right", drop=1),
            Column("c", "right", drop=2),
        ]
    )
    table.add("x" * 30, "1", "22", "33", "4444")
    full = plain(table.lines(60)).splitlines()
    assert full[0].split() == ["name", "a", "b1", "b2", "c"]
    narrow = plain(table.lines(18)).splitlines()
    assert narrow[0].split() == ["name", "a"] and max(map(len, narrow)) <= 18
    assert narrow[2] == "xxxxxxx…xxxxxxx  1"  # the name shortened to the room left
    assert narrow[3:] == ["(left out at 18", "  columns: c, b1,", "  b2)"]


def test_on_a_terminal_it_is_coloured_by_rich_and_fits(monkeypatch, capsys):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    monkeypatch.setattr("sys.stdout", stream)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    print_terminal(load_report(DATA / "transformer-step.json"))
    out = stream.getvalue()
    assert "\x1b[" in out  # styled
    visible = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert visible == render_terminal(load_report(DATA / "transformer-step.json"), width=80)


def test_piped_output_is_plain_and_honours_columns(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr("sys.stdout", stream)
    monkeypatch.setenv("COLUMNS", "120")
    report = load_report(DATA / "transformer-step.json")
    print_terminal(report)
    assert stream.getvalue() == render_terminal(report, width=120)
    assert "\x1b[" not in stream.getvalue()


@pytest.mark.slow  # profiles the similarity example (about a second a call here)
@pytest.mark.parametrize("width", [80, 120])
def test_the_command_line_honours_columns(width: int) -> None:
    from typer.testing import CliRunner

    from memprof.frontends.cli import app

    args = ["run", "memprof.examples.similarity:similarity", "-q", "--top", "3", "--time-budget", "0"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= width
    table = result.stdout.split("Top 3 ops of eager by peak bytes:\n")[1].split("\n\n")[0].splitlines()
    # sub and abs tie (244.1 MiB): ops keep the order they first ran in.
    assert [row.split()[0] for row in table[2:5]] == ["aten::sum", "aten::to", "aten::sub"]
    assert table[5].endswith(" more ops not shown.")  # the short report counts them (--full names why)
    # The answer last: the peak, then the line that holds most of it.
    start = lines.index("eager: peak 795.4 MiB above the call's start during aten::sum")
    assert len(lines) - start <= 8
    largest = next(line for line in lines[start:] if line.startswith("largest:"))
    assert largest.startswith("largest: 488.3 MiB workspace (aten::sum) at memprof/examples/similarity.py:19")


@pytest.mark.parametrize(
    ("data", "golden"),
    [
        ("similarity-explained.json", "terminal_similarity_explained.txt"),
        ("gpt-explained.json", "terminal_gpt_explained.txt"),
    ],
)
def test_explained_runs(data: str, golden: str, update_golden: bool) -> None:
    """Real explained reports (``memprof run memprof.examples.<similarity|gpt>:... --compare-compile
    --json tests/data/<name>-explained.json``, from the repository's root)."""
    check_golden(golden, render_terminal(load_report(DATA / data)), update_golden)


@pytest.mark.parametrize("width", [80, 120])
def test_the_last_lines_of_a_training_step_are_its_answer(width: int) -> None:
    """The bottom line comes last: the peak, the footprint and the categories holding most of
    it, the largest entries with the line that made each: on screen when the output stops."""
    report = load_report(DATA / "gpt-explained.json")
    eager = compared(dataclasses.replace(report, runs={"eager": report.runs["eager"]}))
    lines = render_terminal(eager, width=width).splitlines()
    assert max(map(len, lines)) <= width
    start = max(i for i, line in enumerate(lines) if line.startswith("eager: peak"))
    assert len(lines) - start <= 9  # the last lines of the output
    tail = " ".join(line.strip() for line in lines[start:])
    assert tail.startswith("eager: peak 38.0 MiB above the call's start during aten::_log_softmax_backward")
    assert "footprint 52.2 MiB, most of it temporary 24.0 MiB, activation 17.5 MiB" in tail
    assert "largest: 8.0 MiB activation (aten::_log_softmax) at memprof/examples/gpt.py:109" in tail
    # Compared with its compiled run: what changed at the peak, each run's bottom line, then the
    # verdict and its biggest cause, the last lines of all.
    both = render_terminal(report, width=width).splitlines()
    changed = both.index("What changed at the peak, compile vs eager:")
    verdict = next(i for i, line in enumerate(both) if line.startswith("torch.compile lowers peak"))
    assert changed < both.index("compile: peak 15.3 MiB above the call's start during aten::mm") < verdict
    tail = " ".join(line.strip() for line in both[verdict:])
    assert len(both) - verdict <= 4
    assert tail == (
        "torch.compile lowers peak memory by 22.7 MiB (-59.8%): 38.0 MiB -> 15.3 MiB "
        "biggest cause: the backward of GPT -16.0 MiB of temporaries "
        "compile vs eager: peak -59.8%, wall time +14.9% (1665.9 ms -> 1914.3 ms)"
    )


def test_an_at_peak_entry_shows_the_users_line_that_called_a_library(explained_report) -> None:
    entry = explained_report.runs["eager"].at_peak.entries[0]
    called = dataclasses.replace(entry, user_source="train.py:13", user_source_text="out = model(x)")
    run = explained_report.runs["eager"]
    at_peak = dataclasses.replace(run.at_peak, entries=(called, *run.at_peak.entries[1:]))
    report = compared(
        dataclasses.replace(explained_report, runs={"eager": dataclasses.replace(run, at_peak=at_peak)})
    )
    lines = render_terminal(report, width=80).splitlines()
    row = next(i for i, line in enumerate(lines) if line.lstrip().startswith(entry.source))
    assert lines[row + 1] == "      called from train.py:13  out = model(x)"
    assert "called from train.py:13  out = model(x)" in render_terminal(report, width=80).split("largest:")[1]


def test_a_source_line_is_cut_in_its_code_never_in_its_file_and_line() -> None:
    line = "memprof/examples/gpt.py:109  loss = F.cross_entropy(logits)"
    assert cut_source(line, 40) == "memprof/examples/gpt.py:109  loss = F.c…"
    assert cut_source(line, 30) == "memprof/examples/gpt.py:109"
    # No room even for the location: whole directories go first, never the file's name and line.
    assert cut_source(line, 22) == "…/examples/gpt.py:109"
    assert cut_source(line, 12) == "…/gpt.py:109"
    assert cut_source(line, 80) == line


def test_how_runs_were_made_differently_leaves_out_what_their_labels_say() -> None:
    from memprof.model.recipe import Recipe, recipe_changes
    from memprof.outputs.answer import made_differently

    eager = Recipe(target="t.py:step", inputs="t.py:step_inputs", settings={"batch": "8"}, device="cpu")
    compiled = dataclasses.replace(eager, mode="compile", settings={"batch": "16", "seq": "64"})
    # Settings first (one set on one side only is "unset" on the other), then the rest.
    assert recipe_changes(eager, compiled) == ("batch 8 -> 16", "seq unset -> 64", "mode eager -> compile")
    assert recipe_changes(eager, None) == ()
    diff = load_report(DATA / "gpt-explained.json").diffs[0]  # eager vs compile
    said = dataclasses.replace(diff, recipe_changes=recipe_changes(eager, compiled))
    assert made_differently(said) == "made differently: batch 8 -> 16; seq unset -> 64"
    alike = dataclasses.replace(diff, recipe_changes=("mode eager -> compile",))
    assert made_differently(alike) is None
    # memprof compare m:with_autograd m:no_grad: the targets and their own factories are the labels'.
    compared_ = dataclasses.replace(
        diff,
        base="with_autograd",
        other="no_grad",
        recipe_changes=(
            "target m:with_autograd -> m:no_grad",
            "inputs m:with_autograd_inputs -> m:no_grad_inputs",
        ),
    )
    assert made_differently(compared_) is None


@pytest.mark.parametrize(
    ("data", "golden"),
    [
        ("similarity-explained.json", "terminal_similarity_explained_short.txt"),
        ("gpt-explained.json", "terminal_gpt_explained_short.txt"),
    ],
)
def test_the_short_report_the_commands_print_by_default(data: str, golden: str, update_golden: bool) -> None:
    """What ``memprof run ... --compare-compile`` prints without ``--full``: the runs, a few
    entries live at each peak, the top 5 ops, what changed at the peak in a sentence, and the
    verdict with its biggest cause last; about 60 lines at 100 columns."""
    report = load_report(DATA / data)
    text = render_terminal(report, full=False)
    check_golden(golden, text, update_golden)
    lines = text.splitlines()
    assert len(lines) <= 62
    assert len(lines) < len(render_terminal(report).splitlines()) / 1.5
    assert "Top 5 ops by peak bytes, eager vs compile:" in lines
    assert sum(line.startswith("    memprof/examples/") for line in lines) <= 6  # entries' lines
    verdict = next(i for i, line in enumerate(lines) if line.startswith("torch.compile lowers peak memory"))
    assert len(lines) - verdict <= 5 and lines[verdict + 1].startswith("biggest cause: ")
    assert lines[-1].startswith("compile vs eager: peak -")


def test_a_paragraph_never_cuts_a_file_and_line_in_the_middle() -> None:
    path = "/very/long/absolute/path/to/a/project/with/many/folders/memprof/examples/gpt.py:109"
    lines = wrap(f"largest: 8.0 MiB activation at {path}  loss = F.cross_entropy(x)", 40)
    assert lines == [
        "largest: 8.0 MiB activation at",
        "  …/folders/memprof/examples/gpt.py:109",
        "  loss = F.cross_entropy(x)",
    ]
