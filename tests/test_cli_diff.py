"""``memprof diff A.json B.json``: why the peak moved between two saved reports, without torch.

tests/data/gate/gpt-batch2.json and gpt-batch4.json are the built-in GPT training step at batch
2 and 4 (``memprof.profile(train_step, *train_step_inputs(batch=B), time_budget=0)`` from the
repository's root, its timelines cut to 50 points): the logits and the cross-entropy's tensors
double with the batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.frontends.cli import app
from memprof.pipeline import load_report

DATA = Path(__file__).parent / "data"
GATE = DATA / "gate"
GOLDEN = Path(__file__).parent / "golden"
SMALL, LARGE = str(GATE / "gpt-batch2.json"), str(GATE / "gpt-batch4.json")
MiB = 1024 * 1024


def diff(*args: str):
    return CliRunner().invoke(app, ["diff", *args])


def test_two_reports_print_their_ops_side_by_side_and_what_changed_at_the_peak(update_golden: bool) -> None:
    result = diff(SMALL, LARGE)
    assert result.exit_code == 0, result.output
    golden = GOLDEN / "diff_gpt_batch.txt"
    if update_golden:
        golden.write_text(result.stdout)
    assert result.stdout == golden.read_text()
    assert result.stderr == ""


def test_the_checkpointed_compile_regression_at_the_terminal(update_golden: bool) -> None:
    """Eager and compiled runs of one report (tests/data/checkpoint-twice.json, see
    tests/test_peak_diff.py): the recompute of blocks.1–3 in backward is what the compiled
    peak holds more."""
    saved = str(DATA / "checkpoint-twice.json")
    result = diff(saved, saved, "--base-run", "eager", "--other-run", "compile", "--full")
    assert result.exit_code == 0, result.output
    golden = GOLDEN / "diff_checkpoint_twice.txt"
    block = result.stdout[result.stdout.index("What changed at the peak, compile vs eager:") :]
    if update_golden:
        golden.write_text(block)
    assert block == golden.read_text()
    # The answer last: the verdict, its biggest cause, the memory-and-time summary.
    assert block.splitlines()[-3:] == [
        "torch.compile raises peak memory by 47.5 MiB (+116.3%): 40.9 MiB -> 88.4 MiB",
        "biggest cause: the backward of blocks.0–3 (Block) +33.9 MiB of temporaries",
        "compile vs eager: peak +116.3%, wall time +11.5% (1140.7 ms -> 1271.3 ms)",
    ]
    # docs/guides/diff.md shows the same block.
    assert f"```\n{block}```" in (DATA.parent.parent / "docs" / "guides" / "diff.md").read_text()


def test_the_diff_adds_up_and_names_the_cross_entropy_line(tmp_path: Path) -> None:
    out = tmp_path / "diff.json"
    result = diff(SMALL, LARGE, "--json", str(out))
    assert result.exit_code == 0
    small, large = load_report(SMALL).runs["eager"], load_report(LARGE).runs["eager"]
    assert small.at_peak is not None and large.at_peak is not None
    change = json.loads(out.read_text())["diff"]["at_peak"]
    delta = large.at_peak.footprint_bytes - small.at_peak.footprint_bytes
    assert change["footprint_delta_bytes"] == delta
    for table in ("by_module", "by_source", "by_op"):
        assert sum(row["delta_bytes"] for row in change[table]) == delta
    # The logits (lm_head's mm, 64 tokens x 4096 floats per sequence) and the three tensors of
    # the cross-entropy line double: 2 MiB more each.
    top = change["by_source"][0]
    assert (top["source"], top["delta_bytes"]) == ("memprof/examples/gpt.py:109", 3 * 2 * MiB)
    logits = next(row for row in change["by_source"] if row["source"] == "memprof/examples/gpt.py:108")
    assert logits["delta_bytes"] == 2 * MiB
    # The written report is a report: it loads, and its diff is the same.
    again = load_report(out)
    assert again.diff is not None and again.diff.at_peak is not None
    assert again.diff.at_peak.summary == change["summary"]


def test_with_a_tolerance_it_gates_and_says_what_grew() -> None:
    result = diff(SMALL, LARGE, "--tolerance", "5%")
    assert result.exit_code == 1
    gate = result.stdout[result.stdout.index("gpt-batch4 peak ") :].splitlines()
    assert gate[0] == "gpt-batch4 peak 17.2 MiB exceeds baseline 6.8 MiB by 151.7% (tolerance 5%)"
    assert gate[1].startswith("  what grew: +10.4 MiB at the peak (21.0 MiB -> 31.4 MiB): the backward of")
    assert gate[2].split() == [
        "+2.0", "MiB", "activation", "GPT", "memprof/examples/gpt.py:109", "loss", "=",
        "F.cross_entropy(logits.view(-1,", "l…", "aten::_log_softmax",
    ]  # fmt: skip
    assert "memprof/examples/gpt.py:108 logits = self.lm_head(x)" in result.stdout
    assert gate[-1] == "memprof gate: FAILED, 1 violation (baseline 1)"
    # The other way round, the peak shrank: an improvement, exit 0.
    smaller = diff(LARGE, SMALL, "--tolerance", "5%")
    assert smaller.exit_code == 0
    assert "improved: gpt-batch2 peak 6.8 MiB is 60.3% below baseline 17.2 MiB" in smaller.stdout


def test_markdown_and_html_show_what_changed_at_the_peak(tmp_path: Path) -> None:
    md, page = tmp_path / "d.md", tmp_path / "d.html"
    result = diff(SMALL, LARGE, "--tolerance", "5%", "--markdown", str(md), "--html", str(page))
    assert result.exit_code == 1
    text = md.read_text()
    assert text.index("### memprof gate: FAILED, 1 violation (baseline 1)") < text.index(
        "### What changed at the peak, gpt-batch4 vs gpt-batch2"
    )
    logits = "`memprof/examples/gpt.py:108` `logits = self.lm_head(x)`"
    assert f"| +2.0\u00a0MiB | temporary | `lm_head` | {logits} |" in text
    html = page.read_text()
    assert '<section id="peak-diff"><h2>What changed at the peak, gpt-batch4 vs gpt-batch2</h2>' in html


def test_a_report_of_several_runs_is_compared_by_label() -> None:
    both = str(DATA / "gpt-explained.json")
    result = diff(both, both, "--base-run", "eager", "--other-run", "compile")
    assert result.exit_code == 0
    assert "torch.compile lowers peak memory by 22.7 MiB (-59.8%): 38.0 MiB -> 15.3 MiB" in result.stdout
    assert "What changed at the peak, compile vs eager:" in result.stdout
    # Without a choice, the label both reports have; one file twice: the runs are told apart.
    same = diff(both, both)
    assert same.exit_code == 0
    assert same.stderr == (
        "memprof: comparing run 'eager' of the first report with run 'eager' of the second; --base-run and "
        "--other-run choose others\n"
    )
    assert "eager (second) leaves peak memory vs eager (first) unchanged" in same.stdout
    assert "nothing changed at the peak (52.2 MiB in both)" in same.stdout
    # A choice on one side is looked for on the other.
    one = diff(both, both, "--other-run", "compile")
    assert one.exit_code == 0 and "compile (second) leaves peak memory" in one.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [str(DATA / "gpt-explained.json"), SMALL, "--base-run", "compiled"],
            "memprof: error: --base-run 'compiled': the first report has no such run; its runs are 'eager', "
            "'compile'",
        ),
        (
            [str(GATE / "failed.json"), SMALL, "--base-run", "compile"],
            "memprof: error: the first report's run 'compile' failed",
        ),
        ([SMALL, LARGE, "--tolerance", "lots"], "memprof: error: --tolerance: "),
        ([SMALL, LARGE, "--json", SMALL], "memprof: error: --json '"),
        ([SMALL, str(GATE / "malformed.json")], "memprof: error: "),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = diff(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1
    assert result.stdout == ""


def test_runs_not_explained_compare_their_ops_only() -> None:
    result = diff(str(GATE / "base.json"), str(GATE / "grown.json"))
    assert result.exit_code == 0
    # Both reports have eager and compile: their eager runs, named after their files.
    assert "Top 5 ops by peak bytes, base vs grown:" in result.stdout
    assert "grown raises peak memory vs base by 38.6 MiB (+4.9%): 795.4 MiB -> 834.0 MiB" in result.stdout
    assert "What changed at the peak" not in result.stdout


def with_recipe(tmp_path: Path, source: str, batch: int) -> Path:
    """The saved report as a memprof that records how runs are made writes it: its run made by
    the GPT step's factory with --set batch=B."""
    data = json.loads(Path(source).read_text())
    data["runs"]["eager"]["recipe"] = {
        "target": "memprof.examples.gpt:train_step",
        "inputs": "memprof.examples.gpt:train_step_inputs",
        "settings": {"batch": str(batch)},
        "mode": "eager",
        "device": "cpu",
    }
    path = tmp_path / f"batch{batch}.json"
    path.write_text(json.dumps(data))
    return path


def test_a_diff_says_first_how_the_runs_were_made_differently_and_what_it_wrote(tmp_path: Path) -> None:
    base, other = with_recipe(tmp_path, SMALL, 2), with_recipe(tmp_path, LARGE, 4)
    out, page = tmp_path / "diff.json", tmp_path / "diff.html"
    result = diff(str(base), str(other), "--json", str(out), "--html", str(page))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # The title says it is a diff, of which files; then how the runs were made differently.
    assert lines[0] == "memprof diff: batch2.json vs batch4.json (memprof.examples.gpt:train_step on cpu)"
    assert lines[2] == "made differently: batch 2 -> 4"
    # ... and again in the answer, under the verdict.
    assert lines[-4:-2] == [
        "batch4 raises peak memory vs batch2 by 10.4 MiB (+151.7%): 6.8 MiB -> 17.2 MiB",
        "made differently: batch 2 -> 4",
    ]
    # What it wrote, on stderr, wrapped to the width (100 columns here; a path is never broken).
    said = result.stderr.splitlines()
    assert " ".join(line.strip() for line in said) == f"memprof: wrote {out}, {page}"
    assert max(map(len, said)) <= max(100, len(str(page)) + 2)
    saved = json.loads(out.read_text())
    assert saved["diff"]["recipe_changes"] == ["batch 2 -> 4"]
    assert saved["diff_of"] == ["batch2.json", "batch4.json"]
    assert "<title>memprof diff: batch2.json vs batch4.json</title>" in page.read_text()


def test_memprof_diff_is_the_report_the_command_prints_and_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memprof
    from memprof.outputs.layout import plain
    from memprof.outputs.terminal import diff_lines

    monkeypatch.setenv("COLUMNS", "100")
    saved = tmp_path / "diff.json"
    result = diff(SMALL, LARGE, "--json", str(saved))
    assert result.exit_code == 0, result.output
    report = memprof.diff(SMALL, LARGE)
    # The same report: the JSON the command wrote, and the text it printed at this width.
    assert report.to_dict() == json.loads(saved.read_text())
    assert plain(diff_lines(report, width=100, full=False)) == result.stdout
    assert report.diff.verdict.startswith("gpt-batch4 raises peak memory vs gpt-batch2 by 10.4 MiB (+151.7%)")


def test_memprof_diff_names_its_parameters_and_warns_of_different_devices(tmp_path: Path) -> None:
    import memprof
    from memprof.core.errors import UsageError

    both = DATA / "gpt-explained.json"
    with pytest.raises(UsageError) as caught:
        memprof.diff(both, SMALL, base_run="compiled")
    assert caught.value.message.startswith("base_run 'compiled': the first report has no such run")
    report = memprof.diff(both, both, other_run="compile")  # the base's run of that label: eager has none
    assert list(report.runs) == ["compile (first)", "compile (second)"]
    data = json.loads(Path(LARGE).read_text())
    data["device"] = "cuda:0"
    for run in data["runs"].values():
        run["device"] = "cuda:0"
    on_gpu = tmp_path / "on-gpu.json"
    on_gpu.write_text(json.dumps(data))
    with pytest.warns(UserWarning, match=r"^the runs ran on different devices \('cpu' and 'cuda:0'\)"):
        report = memprof.diff(SMALL, on_gpu)
    assert report.device == "cpu and cuda:0"
    # The command says the same on stderr, after "memprof: warning: ".
    result = diff(SMALL, str(on_gpu))
    assert result.exit_code == 0, result.output
    said = "memprof: warning: the runs ran on different devices ('cpu' and 'cuda:0'); compared anyway\n"
    assert result.stderr == said
