"""The peak explained where users see it: ``memprof run`` (terminal, JSON, CSV, Markdown, HTML)
and ``memprof.profile``. The analytic cases of tests/test_explain.py, through the front doors;
every test that profiles asserts the reconciliation (tests/reconcile.py)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import pytest
import torch
from reconcile import assert_explained, assert_json_keeps, assert_reconciled
from test_explain import GPT_TENSORS, gpt_parameter_bytes, line_of
from typer.testing import CliRunner

import memprof
import memprof.examples.gpt as gpt
import memprof.examples.similarity as similarity
from memprof.frontends.cli import app
from memprof.model import Report, RunResult
from memprof.pipeline import load_report

MiB = 1024 * 1024
FLOAT = 4

FREES_BEFORE = """
import torch

MiB = 1024 * 1024


def drop_then_allocate(holder):
    holder.clear()  # frees the 100 MiB made before the call
    big = torch.ones(150 * MiB // 4)  # the peak: 150 MiB live, 50 MiB above the start
    del big
    holder.append(torch.ones(100 * MiB // 4))  # what the next call frees


def drop_then_allocate_inputs():
    return ([torch.ones(100 * MiB // 4)],)


KEPT = []


def leaky(x):
    KEPT.append(x.clone())


def leaky_inputs():
    return (torch.ones(MiB // 4),)
"""


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["run", *args, "-q", "--device", "cpu"])
    return result.exit_code, result.output


# ---- a call that frees a tensor made before it ---------------------------------------------------


def test_a_call_that_frees_a_tensor_made_before_it_has_an_exact_peak_in_json_and_terminal(
    make_module, tmp_path: Path
) -> None:
    module = make_module(FREES_BEFORE)
    path = tmp_path / "r.json"
    code, output = run_cli(f"{module}:drop_then_allocate", "--json", str(path))
    assert code == 0, output
    data = json.loads(path.read_text())
    run = data["runs"]["eager"]
    # The records alone say 150 MiB above the start: the free of the 100 MiB made before the
    # call is not among them. The truth: 50 MiB above the start, 150 MiB in all.
    assert (run["peak_bytes"], run["footprint_bytes"], run["live_at_start_bytes"]) == (
        50 * MiB,
        150 * MiB,
        100 * MiB,
    )
    assert run["inputs_bytes"] == 100 * MiB
    assert run["at_peak"]["by_category"]["temporary"] == 150 * MiB
    assert run["at_peak"]["freed_before_peak_bytes"] == 100 * MiB
    (entry,) = run["at_peak"]["entries"]
    assert (entry["bytes"], entry["op"], entry["before_call"], entry["category"]) == (
        150 * MiB,
        "aten::ones",
        False,
        "temporary",
    )
    line = (
        FREES_BEFORE.splitlines().index(
            "    big = torch.ones(150 * MiB // 4)  # the peak: 150 MiB live, 50 MiB above the start"
        )
        + 1
    )
    assert entry["source"] == f"{module}.py:{line}"
    assert entry["source_text"] == "big = torch.ones(150 * MiB // 4)"  # the statement, without its comment
    assert run["calls"] == [
        {
            "call": 1,
            "live_at_start_bytes": 100 * MiB,
            "footprint_bytes": 150 * MiB,
            "peak_bytes": 50 * MiB,
            "live_at_end_bytes": 100 * MiB,
            "growth_bytes": None,
        }
    ]
    assert_json_keeps(data)
    assert (
        "At the peak of eager: footprint 150.0 MiB = 100.0 MiB live at the start + 50.0 MiB peak above it"
        in output
    )
    assert "by category: temporary 150.0 MiB" in output
    assert f"{module}.py:{line}  big = torch.ones(150 * MiB // 4)" in output
    runs_row = next(line for line in output.splitlines() if line.startswith("eager "))
    assert runs_row.split()[1:5] == ["50.0", "MiB", "150.0", "MiB"]  # peak, then footprint


def test_no_explain_keeps_the_numbers_and_leaves_out_the_explanation(make_module, tmp_path: Path) -> None:
    module = make_module(FREES_BEFORE)
    path = tmp_path / "r.json"
    entries = tmp_path / "entries.csv"
    code, output = run_cli(
        f"{module}:drop_then_allocate", "--no-explain", "--json", str(path), "--at-peak-csv", str(entries)
    )
    assert code == 0, output
    assert entries.read_text().splitlines() == [
        "run,bytes,count,category,module,phase,source,source_text,op,shape,dtype,before_call,"
        "user_source,user_source_text,reason"
    ]
    run = json.loads(path.read_text())["runs"]["eager"]
    assert (run["peak_bytes"], run["footprint_bytes"], run["live_at_start_bytes"]) == (
        50 * MiB,
        150 * MiB,
        100 * MiB,
    )
    assert not {"at_peak", "modules", "kernels"} & set(run)
    assert len(run["calls"]) == 1
    assert "At the peak" not in output


def test_an_explaining_call_that_fails_leaves_the_peak_explained_by_program_state() -> None:
    made: list[int] = []

    def drop_then_allocate(holder: list[torch.Tensor]) -> None:
        made.append(1)
        if len(made) == 3:  # the warm-up call, the measured call, then the explaining call
            raise RuntimeError("only twice")
        holder.clear()
        big = torch.ones(150 * MiB // 4)
        del big
        holder.append(torch.ones(100 * MiB // 4))

    report = memprof.profile(drop_then_allocate, [torch.ones(100 * MiB // 4)], device="cpu", time_budget=0)
    run = report.runs["eager"]
    assert (run.peak_bytes, run.footprint_bytes, run.live_at_start_bytes) == (50 * MiB, 150 * MiB, 100 * MiB)
    assert any(note.startswith("the explaining call raised RuntimeError: only twice") for note in run.notes)
    # The measured call's program state explains it: the input freed before the peak, and
    # the 150 MiB made by ops no tracker watched.
    assert run.at_peak is not None
    assert run.at_peak.by_category["other"] == 150 * MiB
    assert run.at_peak.freed_before_peak_bytes == 100 * MiB
    assert [(u.bytes, u.before_call) for u in run.at_peak.unattributed] == [(150 * MiB, False)]
    assert_explained(run)


def test_live_bytes_growing_from_call_to_call_is_said(make_module, tmp_path: Path) -> None:
    module = make_module(FREES_BEFORE)
    path = tmp_path / "r.json"
    code, output = run_cli(f"{module}:leaky", "--repeat", "3", "--json", str(path))
    assert code == 0, output
    data = json.loads(path.read_text())
    run = data["runs"]["eager"]
    assert [c["growth_bytes"] for c in run["calls"]] == [MiB, MiB, None]
    assert [c["peak_bytes"] for c in run["calls"]] == [MiB] * 3
    assert any("grew from one call to the next (+1,048,576 B, +1,048,576 B)" in n for n in run["notes"])
    assert "each call's peak above live at its start: 1: 1.0 MiB above" in output
    assert "note (eager): live bytes grew from one call to the next" in output
    # The explaining call comes after the measured ones: it holds one more leaked tensor, and
    # the report says its peak is not the measured one.
    assert any(
        "the attribution pass peaked at 6,291,456 B (1,048,576 B above its start)" in n for n in run["notes"]
    )
    assert_json_keeps(data, reproduced=False)


# ---- the similarity example through the command line --------------------------------------------


@pytest.fixture(scope="module")
def similarity_cli(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """``memprof run`` of the similarity example (eager) with every file written."""
    out = tmp_path_factory.mktemp("similarity")
    code, output = run_cli("memprof.examples.similarity:similarity", "--out", str(out))
    assert code == 0, output
    return output, out


def test_similarity_sum_copy_is_a_workspace_entry_on_the_sum_line(similarity_cli: tuple[str, Path]) -> None:
    output, out = similarity_cli
    data = json.loads((out / "memprof.json").read_text())
    run = data["runs"]["eager"]
    assert run["peak_bytes"] == 834_000_000
    assert run["live_at_start_bytes"] == run["inputs_bytes"] == 2 * 256 * 500 * FLOAT
    top = run["at_peak"]["entries"][0]
    sum_line = line_of(similarity, "return xy.abs().lt(1).sum(")
    assert (top["bytes"], top["category"], top["op"], top["source"]) == (
        512_000_000,
        "workspace",
        "aten::sum",
        sum_line,
    )
    assert ".sum(" in top["source_text"]
    assert run["at_peak"]["by_category"]["workspace"] == 512_000_000
    assert_json_keeps(data)
    lines = output.splitlines()
    row = next(i for i, line in enumerate(lines) if line.lstrip().startswith("488.3 MiB"))
    # At 100 columns the entry's line goes under its row.
    assert lines[row].split()[2:4] == ["workspace", "-"]
    assert lines[row + 1].strip().startswith(f"{sum_line}  return xy.abs()")


def test_the_at_peak_csv_has_one_row_per_entry_and_every_byte(similarity_cli: tuple[str, Path]) -> None:
    _, out = similarity_cli
    rows = list(csv.DictReader(io.StringIO((out / "memprof-at-peak.csv").read_text())))
    assert list(rows[0]) == [
        "run",
        "bytes",
        "count",
        "category",
        "module",
        "phase",
        "source",
        "source_text",
        "op",
        "shape",
        "dtype",
        "before_call",
        "user_source",
        "user_source_text",
        "reason",
    ]
    data = json.loads((out / "memprof.json").read_text())
    at_peak = data["runs"]["eager"]["at_peak"]
    assert len(rows) == len(at_peak["entries"]) + len(at_peak["unattributed"])
    assert sum(int(r["bytes"]) for r in rows) == data["runs"]["eager"]["footprint_bytes"] == 835_024_000
    assert (rows[0]["bytes"], rows[0]["category"], rows[0]["before_call"]) == (
        "512000000",
        "workspace",
        "False",
    )
    # The per-op CSV is unchanged.
    ops = (out / "memprof-ops.csv").read_text().splitlines()[0]
    assert ops == "run,name,calls,self_bytes,total_bytes,allocated_bytes,peak_bytes,self_us,total_us"


def test_markdown_and_html_explain_the_similarity_peak(similarity_cli: tuple[str, Path]) -> None:
    _, out = similarity_cli
    markdown = (out / "memprof.md").read_text()
    assert "### At the peak of eager" in markdown
    assert "| 488.3 MiB | workspace | - |" in markdown.replace("\u00a0", " ")
    page = (out / "memprof.html").read_text()
    assert '<section id="at-peak">' in page and 'class="icicle"' in page
    assert page.count('class="category"') == 3  # input, temporary, workspace


# ---- the GPT training step through memprof.profile ----------------------------------------------


@pytest.fixture(scope="module")
def gpt_run() -> RunResult:
    """One explained AdamW step of the example GPT after one warm-up step, from the API."""
    report = memprof.profile(gpt.train_step, *gpt.train_step_inputs(), device="cpu")
    assert_reconciled(report)
    return report.runs["eager"]


def test_gpt_largest_entries_are_the_logits_and_the_loss(gpt_run: RunResult) -> None:
    config = gpt.GPTConfig()
    logits = config.batch * config.context * config.vocab_size * FLOAT
    assert gpt_run.at_peak is not None
    during = [e for e in gpt_run.at_peak.entries if not e.before_call][:4]
    assert [e.bytes for e in during] == [logits] * 4
    lines = {line_of(gpt, "logits = self.lm_head(x)"), line_of(gpt, "loss = F.cross_entropy(")}
    assert {e.source for e in during} == lines
    assert "lm_head" in {e.module for e in during}
    frame = gpt_run.at_peak.frame
    assert frame["bytes"].sum() == gpt_run.footprint_bytes
    assert list(frame.loc[:3, "bytes"]) == [logits] * 4


def test_gpt_inputs_count_the_model_the_gradients_and_the_optimizer_state(gpt_run: RunResult) -> None:
    config = gpt.GPTConfig()
    parameters = gpt_parameter_bytes(config)
    state = 2 * parameters + FLOAT * GPT_TENSORS  # AdamW's two moments and step counters
    ids = 2 * config.batch * config.context * 8
    masks = config.n_layer * config.context**2
    # Live when the measured step started (after the warm-up step): parameters, the warm-up's
    # gradients, AdamW's state, the batch and the attention masks.
    assert gpt_run.inputs_bytes == parameters + parameters + state + ids + masks
    assert gpt_run.live_at_start_bytes == gpt_run.inputs_bytes
    assert gpt_run.at_peak is not None and gpt_run.at_peak.by_category["optimizer_state"] == state


def test_gpt_modules_as_a_frame(gpt_run: RunResult) -> None:
    frame = gpt_run.modules
    assert list(frame.columns) == [
        "module",
        "phase",
        "calls",
        "peak_bytes",
        "allocated_bytes",
        "at_peak_bytes",
        "module_class",
        "parent",
    ]
    lm_head = frame[(frame.module == "lm_head") & (frame.phase == "forward")].iloc[0]
    assert (lm_head.module_class, lm_head.parent) == ("Linear", "GPT")
    config = gpt.GPTConfig()
    logits = config.batch * config.context * config.vocab_size * FLOAT
    assert (lm_head.calls, lm_head.allocated_bytes, lm_head.at_peak_bytes) == (1, logits, logits)
    assert set(frame.phase) == {"forward", "backward"}


# Slow tier (~9 s): test_explain's repeated training steps check the same in the quick tier.
@pytest.mark.slow
def test_repeated_gpt_steps_have_equal_calls_and_no_leak_note() -> None:
    report = memprof.profile(gpt.train_step, *gpt.train_step_inputs(), device="cpu", repeat=3)
    assert_reconciled(report)
    run = report.runs["eager"]
    assert [c.growth_bytes for c in run.call_numbers] == [0, 0, None]
    assert len({c.peak_bytes for c in run.call_numbers}) == 1
    assert not any("grew" in note for note in run.notes)


# Slow tier (two GPT profiles): test_explain's first-call test checks the same state in the quick tier.
@pytest.mark.slow
def test_optimizer_state_made_in_the_warm_up_is_live_at_the_start_and_not_without_it() -> None:
    warm = memprof.profile(gpt.train_step, *gpt.train_step_inputs(), device="cpu", explain=False)
    cold = memprof.profile(gpt.train_step, *gpt.train_step_inputs(), device="cpu", warmup=0, explain=False)
    parameters = gpt_parameter_bytes(gpt.GPTConfig())
    state = 2 * parameters + FLOAT * GPT_TENSORS
    # Without a warm-up step the first step makes AdamW's state (and gradients), which stay.
    assert (
        warm.runs["eager"].live_at_start_bytes - cold.runs["eager"].live_at_start_bytes == state + parameters
    )
    for report in (warm, cold):
        assert_explained(report.runs["eager"])
        assert report.runs["eager"].at_peak is None


# ---- compiled runs (slow: one torch.compile of the GPT step for all) -----------------------------


@pytest.fixture(scope="module")
def gpt_both() -> Report:
    report = memprof.profile(gpt.train_step, *gpt.train_step_inputs(), device="cpu", mode="both")
    assert_reconciled(report)
    return report


@pytest.mark.slow
def test_compiled_gpt_peak_is_the_logits_line_of_lm_head(gpt_both: Report) -> None:
    run = gpt_both.runs["compile"]
    assert run.at_peak is not None
    during = [e for e in run.at_peak.entries if not e.before_call]
    config = gpt.GPTConfig()
    logits = config.batch * config.context * config.vocab_size * FLOAT
    assert (during[0].bytes, during[0].module, during[0].source) == (
        logits,
        "lm_head",
        line_of(gpt, "logits = self.lm_head(x)"),
    )
    made = sum(e.bytes for e in during) + sum(u.bytes for u in run.at_peak.unattributed if not u.before_call)
    in_gpt = sum(e.bytes for e in during if e.source.startswith("memprof/examples/gpt.py:"))
    assert in_gpt >= 0.8 * made
    # The state is the eager run's: the same parameters and AdamW state, the same zero_grad frees.
    eager = gpt_both.runs["eager"]
    assert eager.at_peak is not None
    for category in ("parameter", "optimizer_state", "input"):
        assert run.at_peak.by_category[category] == eager.at_peak.by_category[category]


@pytest.mark.slow
def test_compiled_op_tables_have_one_row_for_the_wrappers_and_kernels_with_their_buffers(
    gpt_both: Report,
) -> None:
    run = gpt_both.runs["compile"]
    names = {op.name for op in run.op_stats}
    assert "[compiled region]" in names
    wrappers = {
        "Torch-Compiled Region",
        "## Call CompiledFxGraph ##",
        "CompiledFunction",
        "inductor_wrapper_call",
    }
    assert not names & wrappers and not any(name.startswith("Torch-Compiled Region") for name in names)
    kernels = {k.name: k for k in run.kernels if k.name.startswith("cpp_fused_")}
    assert kernels and all(k.replaces for k in kernels.values())
    for op in run.op_stats:
        if op.name in kernels and kernels[op.name].phase == "forward":
            # The op table's kernel owns the buffers the attribution gives it.
            assert op.allocated_bytes >= kernels[op.name].allocated_bytes > 0


@pytest.mark.slow
def test_compiled_similarity_allocates_only_the_kernels_result(similarity_report: Report) -> None:
    assert_reconciled(similarity_report)
    run = similarity_report.runs["compile"]
    assert run.at_peak is not None
    (entry,) = [e for e in run.at_peak.entries if not e.before_call]
    assert (entry.bytes, entry.category, entry.shape, entry.dtype) == (
        2_000_000,
        "temporary",
        "(500, 500)",
        "int64",
    )
    assert entry.op == "cpp_fused_abs_lt_sub_sum_unsqueeze_0"
    assert entry.source == line_of(similarity, "return xy.abs().lt(1).sum(")
    kernel = next(op for op in run.op_stats if op.name == entry.op)
    assert (kernel.peak_bytes, kernel.allocated_bytes) == (2_000_000, 2_000_000)  # was 0 B
    assert run.peak_op == entry.op


# ---- the golden reports are what a fresh run says ------------------------------------------------

DATA = Path(__file__).parent / "data"


def test_a_fresh_gpt_step_is_explained_as_the_saved_report_says(gpt_run: RunResult) -> None:
    """tests/data/gpt-explained.json (the golden terminal and Markdown outputs' source) holds
    what a run makes today: the same entries, modules and calls, byte for byte."""
    saved = load_report(DATA / "gpt-explained.json").runs["eager"]
    assert gpt_run.at_peak == saved.at_peak
    assert gpt_run.module_stats == saved.module_stats
    assert gpt_run.call_numbers == saved.call_numbers
    assert (gpt_run.peak_bytes, gpt_run.footprint_bytes, gpt_run.peak_op) == (
        saved.peak_bytes,
        saved.footprint_bytes,
        saved.peak_op,
    )


def test_a_fresh_similarity_run_is_explained_as_the_saved_report_says(
    similarity_cli: tuple[str, Path],
) -> None:
    _, out = similarity_cli
    fresh = load_report(out / "memprof.json").runs["eager"]
    saved = load_report(DATA / "similarity-explained.json").runs["eager"]
    assert (fresh.at_peak, fresh.call_numbers, fresh.peak_op) == (
        saved.at_peak,
        saved.call_numbers,
        saved.peak_op,
    )


@pytest.mark.slow
def test_a_fresh_compiled_gpt_step_is_explained_as_the_saved_report_says(gpt_both: Report) -> None:
    saved = load_report(DATA / "gpt-explained.json").runs["compile"]
    fresh = gpt_both.runs["compile"]
    assert (fresh.peak_bytes, fresh.footprint_bytes) == (saved.peak_bytes, saved.footprint_bytes)
    assert fresh.at_peak is not None and saved.at_peak is not None
    # The saved report was written before entries said which graph made them.
    entries = [dataclasses.replace(entry, graph="") for entry in fresh.at_peak.entries[:10]]
    assert entries == list(saved.at_peak.entries[:10])
    assert all(e.graph for e in fresh.at_peak.entries if not e.before_call)
    assert fresh.at_peak.by_category == saved.at_peak.by_category
