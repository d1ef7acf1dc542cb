"""The gate as a pure function: budgets, baselines with a tolerance, compiled vs eager.

The reports under tests/data/gate/ carry the similarity example's real peaks (eager
834,000,000 B = 795.4 MiB, compiled 2,000,000 B = 1.9 MiB) and hand-made variations of them;
every percentage below follows from those byte counts.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from memprof.analysis.gate import Budgets, GateConfig, evaluate, grew_beyond, parse_budget
from memprof.core.errors import InputError, UsageError, spelled_as
from memprof.outputs.gate import explanation_lines, gate_lines
from memprof.pipeline import build_report, load_report

DATA = Path(__file__).parent / "data" / "gate"
MiB = 1024 * 1024


def load(name: str):
    return load_report(DATA / name)


# --- --budget syntax ----------------------------------------------------------------------


def test_budget_one_size_applies_to_every_run() -> None:
    budgets = parse_budget("800MB")
    assert budgets == Budgets(default=800 * MiB)
    assert budgets.limit("eager") == budgets.limit("compile") == 800 * MiB


def test_budget_per_label_and_a_default_for_the_rest() -> None:
    budgets = parse_budget("eager=1GB, compile=100 MB,1.5GiB")
    assert budgets.per_label == {"eager": 1024 * MiB, "compile": 100 * MiB}
    assert budgets.limit("channels_last") == int(1.5 * 1024 * MiB)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("800XB", "not a size: '800XB'"),
        ("eager=", "not a size: ''"),
        ("=1GB", "has no run label"),
        ("eager=1GB,eager=2GB", "names 'eager' twice"),
        ("1GB,2GB", "two sizes"),
        ("", "is empty"),
    ],
)
def test_bad_budget_is_a_usage_error_with_an_example(text: str, message: str) -> None:
    with pytest.raises(UsageError) as error:
        parse_budget(text)
    assert message in error.value.message
    # From Python the parameter is named as in Python; `memprof run/check` say --budget.
    assert error.value.message.startswith("budget ")
    assert "1GB" in error.value.message or "800MB" in error.value.message


def test_budget_naming_an_unknown_run_lists_the_runs() -> None:
    with pytest.raises(UsageError, match=r"names 'compiled', but the runs are 'eager', 'compile'"):
        evaluate(load("base.json"), GateConfig(budgets=parse_budget("compiled=1GB")))


# --- budgets ------------------------------------------------------------------------------


def test_budget_exceeded_names_run_peak_limit_and_excess() -> None:
    result = evaluate(load("base.json"), GateConfig(budgets=parse_budget("500MB")))
    # 834,000,000 / (500 * 2**20) = 1.5907
    assert [v.line for v in result.violations] == ["eager peak 795.4 MiB exceeds budget 500.0 MiB by 59.1%"]
    assert result.violations[0].peak_bytes == 834_000_000
    assert result.violations[0].limit_bytes == 500 * MiB
    assert result.checks == 2
    assert result.summary() == "memprof gate: FAILED, 1 violation (budget 1)"


def test_per_run_budgets() -> None:
    result = evaluate(load("base.json"), GateConfig(budgets=parse_budget("eager=800MB,compile=1MB")))
    # 2,000,000 / 2**20 = 1.907
    assert [v.line for v in result.violations] == ["compile peak 1.9 MiB exceeds budget 1.0 MiB by 90.7%"]


def test_peak_equal_to_budget_passes() -> None:
    result = evaluate(load("base.json"), GateConfig(budgets=parse_budget("eager=834000000")))
    assert result.passed
    assert result.summary() == "memprof gate: passed (1 check)"


# --- baselines ----------------------------------------------------------------------------


def test_growth_beyond_tolerance_per_run() -> None:
    result = evaluate(load("grown.json"), GateConfig(baseline=load("base.json"), tolerance=0.02))
    assert [v.line for v in result.violations] == [
        # 874,512,384 / 834,000,000 = 1.04858
        "eager peak 834.0 MiB exceeds baseline 795.4 MiB by 4.9% (tolerance 2%)",
        "compile peak 2.0 MiB exceeds baseline 1.9 MiB by 5.0% (tolerance 2%)",
    ]
    assert result.summary() == "memprof gate: FAILED, 2 violations (baseline 2)"
    assert result.warnings == []


def test_growth_within_tolerance_passes_and_exactly_at_tolerance_passes() -> None:
    # eager +4.86%, compile exactly +5.00%: both within 5%.
    result = evaluate(load("grown.json"), GateConfig(baseline=load("base.json"), tolerance=0.05))
    assert result.passed
    assert result.checks == 2
    assert gate_lines(result) == ["memprof gate: passed (2 checks)"]


def test_per_op_growth_is_checked_with_normalised_names() -> None:
    result = evaluate(load("grown.json"), GateConfig(baseline=load("base.json"), tolerance=0.05, per_op=True))
    # aten::sum 540,000,000 / 514,000,000 = 1.0506; the compiled ops (new graph hash, region 1/0)
    # are matched by their normalised names and grew exactly 5%.
    assert [v.line for v in result.violations] == [
        "eager op aten::sum peak 515.0 MiB exceeds baseline 490.2 MiB by 5.1% (tolerance 5%)"
    ]
    assert result.violations[0].subject == "eager op aten::sum"
    assert result.checks == 2 + 3 + 2


def test_improvements_beyond_tolerance_are_reported() -> None:
    result = evaluate(load("improved.json"), GateConfig(baseline=load("base.json"), per_op=True))
    assert result.passed
    assert result.improvements == [
        "eager peak 476.8 MiB is 40.0% below baseline 795.4 MiB; save a new baseline to keep the gain",
        "eager op aten::sum peak 245.1 MiB is 50.0% below baseline 490.2 MiB; "
        "save a new baseline to keep the gain",
    ]
    assert gate_lines(result)[-1] == "memprof gate: passed (7 checks)"


def test_baseline_from_another_device_and_torch_warns() -> None:
    result = evaluate(load("base.json"), GateConfig(baseline=load("cuda_base.json")))
    assert result.passed
    assert result.warnings == [
        "the baseline was measured on a different setup (device cuda:0 vs cpu; "
        "torch 2.4.0+cu121 vs 2.13.0+cpu); comparing anyway (strict_env=True makes this an error)"
    ]


def test_a_caller_without_strict_env_gets_no_hint_about_it() -> None:
    # The pytest plugin has no such option: its warning must not point to one.
    with spelled_as(lambda name, value: None):
        result = evaluate(load("base.json"), GateConfig(baseline=load("cuda_base.json")))
    assert result.warnings == [
        "the baseline was measured on a different setup (device cuda:0 vs cpu; "
        "torch 2.4.0+cu121 vs 2.13.0+cpu); comparing anyway"
    ]


def test_baseline_from_another_device_with_strict_env_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"different setup \(device cuda:0 vs cpu.*drop strict_env=True$"):
        evaluate(load("base.json"), GateConfig(baseline=load("cuda_base.json"), strict_env=True))


def test_runs_missing_on_either_side_warn() -> None:
    result = evaluate(load("compile_worse.json"), GateConfig(baseline=load("failed.json")))
    # failed.json's compile run failed: no baseline for compile; eager 2.0 MB vs 834 MB improved.
    assert result.warnings == ["run 'compile' has no baseline; not compared"]
    assert result.checks == 1


# --- compiled vs eager --------------------------------------------------------------------


def test_compile_worse_than_eager_fails_with_require_compile_saves() -> None:
    result = evaluate(load("compile_worse.json"), GateConfig(require_compile_saves=True))
    # 2,200,000 / 2,000,000 = 1.10
    assert [v.line for v in result.violations] == [
        "compile peak 2.1 MiB exceeds eager peak 1.9 MiB by 10.0% (tolerance 5%): "
        "torch.compile does not save memory"
    ]
    assert result.summary() == "memprof gate: FAILED, 1 violation (compile 1)"


def test_compile_exactly_at_tolerance_passes() -> None:
    assert evaluate(load("compile_worse.json"), GateConfig(require_compile_saves=True, tolerance=0.10)).passed


def test_compile_that_saves_passes() -> None:
    result = evaluate(load("base.json"), GateConfig(require_compile_saves=True))
    assert result.passed and result.checks == 1


def test_require_compile_saves_without_both_runs_is_a_usage_error() -> None:
    eager_only = build_report(target="t", device="cpu", runs={"eager": load("base.json").runs["eager"]})
    with pytest.raises(
        UsageError, match=r"needs an eager and a compiled run, the report has eager \(eager\)"
    ):
        evaluate(eager_only, GateConfig(require_compile_saves=True))


# --- failed runs, and the arithmetic ------------------------------------------------------


def test_a_failed_run_fails_the_gate() -> None:
    result = evaluate(load("failed.json"), GateConfig(budgets=parse_budget("1GB")))
    assert [v.line for v in result.violations] == [
        "compile run failed, its memory is unknown: compiling failed: InductorError: InvalidCxxCompiler"
    ]
    assert result.summary() == "memprof gate: FAILED, 1 violation (failed 1)"


def test_tolerance_is_exact_at_the_boundary() -> None:
    # 2,000,000 * 1.05 is not exact in floating point; the comparison must be.
    assert not grew_beyond(2_100_000, 2_000_000, 0.05)
    assert grew_beyond(2_100_001, 2_000_000, 0.05)
    assert grew_beyond(1, 0, 0.05)
    assert not grew_beyond(0, 0, 0.05)


def test_sizes_that_round_alike_are_shown_in_bytes() -> None:
    # 2,100,000 B and 2 MiB (2,097,152 B) both print as 2.0 MiB.
    result = evaluate(load("grown.json"), GateConfig(budgets=parse_budget("compile=2MB")))
    assert [v.line for v in result.violations] == [
        "compile peak 2,100,000 B exceeds budget 2,097,152 B by 0.1%"
    ]


def test_growth_that_rounds_onto_the_tolerance_gets_two_decimals() -> None:
    base = load("base.json")
    grown = replace(
        base, runs={**base.runs, "compile": replace(base.runs["compile"], peak_bytes=2_100_800)}
    )  # +5.04%
    result = evaluate(grown, GateConfig(baseline=base, tolerance=0.05))
    assert [v.line for v in result.violations] == [
        "compile peak 2.0 MiB exceeds baseline 1.9 MiB by 5.04% (tolerance 5%)"
    ]


def test_same_inputs_same_verdict() -> None:
    config = GateConfig(baseline=load("base.json"), tolerance=0.02, per_op=True)
    lines = {tuple(gate_lines(evaluate(load("grown.json"), config))) for _ in range(10)}
    assert len(lines) == 1


# --- violations that explain themselves ------------------------------------------------------
# gpt-batch2.json and gpt-batch4.json: the built-in GPT training step at batch 2 and 4, explained
# (tests/test_cli_diff.py says how they were made): the logits and the cross-entropy's tensors
# double with the batch, 2 MiB more each.


def test_growth_over_a_baseline_lists_what_grew_at_the_peak() -> None:
    result = evaluate(load("gpt-batch4.json"), GateConfig(baseline=load("gpt-batch2.json")))
    (violation,) = result.violations
    explanation = violation.explanation
    assert explanation is not None
    assert explanation.heading.startswith(
        "what grew: +10.4 MiB at the peak (21.0 MiB -> 31.4 MiB): the backward of GPT +4.0 MiB of temporaries"
    )
    what = ("category", "module", "phase", "source", "op")
    rows = [(r.bytes, *(getattr(r.what, name) for name in what)) for r in explanation.rows[:4]]
    cross_entropy, logits = "memprof/examples/gpt.py:109", "memprof/examples/gpt.py:108"
    assert rows == [
        (2 * MiB, "activation", "GPT", "forward", cross_entropy, "aten::_log_softmax"),
        (2 * MiB, "temporary", "GPT", "backward", cross_entropy, "aten::_log_softmax_backward_data"),
        (2 * MiB, "temporary", "GPT", "backward", cross_entropy, "aten::nll_loss_backward"),
        (2 * MiB, "temporary", "lm_head", "forward", logits, "aten::mm"),
    ]
    lines = gate_lines(result)
    assert lines[0] == "eager peak 17.2 MiB exceeds baseline 6.8 MiB by 151.7% (tolerance 5%)"
    assert lines[1] == f"  {explanation.heading}"
    assert lines[5] == (
        "    +2.0 MiB  temporary   lm_head         "
        "memprof/examples/gpt.py:108 logits = self.lm_head(x)  aten::mm"
    )
    assert lines[7] == "  ... 20 more rows that grew, +2.1 MiB in all"
    assert lines[-1] == "memprof gate: FAILED, 1 violation (baseline 1)"


def test_a_baseline_without_at_peak_entries_is_gated_on_the_numbers_and_says_so() -> None:
    result = evaluate(load("grown.json"), GateConfig(baseline=load("base.json"), tolerance=0.02))
    assert [explanation_lines(v.explanation) for v in result.violations if v.explanation] == [
        [
            f"  the baseline's run '{label}' has no at-peak entries (profiled without explaining, or saved "
            "by an older memprof): gated on the numbers only; save a new baseline to see what grew"
        ]
        for label in ("eager", "compile")
    ]
    # The same baseline when this run is the one not explained.
    explained = load("gpt-batch4.json")
    bare = replace(explained, runs={"eager": replace(explained.runs["eager"], at_peak=None)})
    (violation,) = evaluate(bare, GateConfig(baseline=load("gpt-batch2.json"))).violations
    assert violation.explanation is not None
    assert violation.explanation.heading == ("run 'eager' was not explained: gated on the numbers only")


CROSS_ENTROPY = "memprof/examples/gpt.py:109 loss = F.cross_entropy(logits.view(-1, l…"


def test_a_budget_lists_the_largest_entries_at_the_peak() -> None:
    result = evaluate(load("gpt-batch4.json"), GateConfig(budgets=parse_budget("16MB")))
    assert gate_lines(result) == [
        "eager peak 17.2 MiB exceeds budget 16.0 MiB by 7.6%",
        "  largest at the peak (footprint 31.4 MiB):",
        "  4.0 MiB  optimizer_state  tok_emb",
        f"  4.0 MiB  activation       GPT             {CROSS_ENTROPY}  aten::_log_softmax",
        f"  4.0 MiB  temporary        GPT (backward)  {CROSS_ENTROPY}  aten::_log_softmax_backward_data",
        f"  4.0 MiB  temporary        GPT (backward)  {CROSS_ENTROPY}  aten::nll_loss_backward",
        "  4.0 MiB  temporary        lm_head         memprof/examples/gpt.py:108 logits = self.lm_head(x)"
        "  aten::mm",
        "  ... 99 more entries, 11.4 MiB in all",
        "memprof gate: FAILED, 1 violation (budget 1)",
    ]


def test_explanation_lines_stay_one_line_whatever_the_names_hold() -> None:
    report = load("gpt-batch4.json")
    run = report.runs["eager"]
    assert run.at_peak is not None
    entries = tuple(
        replace(e, module="evil\nmemprof gate: passed", source_text="x\r\ny") for e in run.at_peak.entries
    )
    hostile = replace(report, runs={"eager": replace(run, at_peak=replace(run.at_peak, entries=entries))})
    result = evaluate(hostile, GateConfig(budgets=parse_budget("1MB"), baseline=load("gpt-batch2.json")))
    for line in gate_lines(result):
        assert "\n" not in line and "\r" not in line
    assert not any(line.startswith("memprof gate: passed") for line in gate_lines(result))


def test_the_markdown_summary_shows_the_gate_first_with_what_grew() -> None:
    from memprof.outputs.markdown import render_markdown

    report = load("gpt-batch4.json")
    result = evaluate(report, GateConfig(baseline=load("gpt-batch2.json")))
    text = render_markdown(report, gate=result)
    assert text.index("### memprof gate: FAILED, 1 violation (baseline 1)") < text.index("| run |")
    assert "**eager peak 17.2\u00a0MiB exceeds baseline 6.8\u00a0MiB by 151.7% (tolerance 5%)**" in text
    assert (
        "| +2.0\u00a0MiB | activation | `GPT` | `memprof/examples/gpt.py:109` "
        "`loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))` | "
        "`aten::_log_softmax` |"
    ) in text
    assert "<sub>... 20 more rows that grew, +2.1\u00a0MiB in all</sub>" in text
