"""Why the peak moved: the at-peak diff of two explained runs (memprof/analysis/peak_diff.py).

Every table adds up to the byte to the difference of the two footprints; module rows go as deep
as the change is concentrated; the summary names the groups that explain most of it. Checked on
hand-built explanations with known bytes, on a step that keeps one known tensor more (profiled),
and, in the slow tier, on the checkpointed compile regression of issue 24
(tests/data/checkpoint_twice.py: two checkpointed traversals of four blocks in one graph)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.analysis.peak_diff import contributors, diff_at_peak, module_units
from memprof.model import Report, RunResult
from memprof.model.explanation import CATEGORIES, AtPeak, AtPeakEntry, Unattributed
from memprof.model.peak_diff import AtPeakDiff
from memprof.pipeline import build_report, load_report

MiB = 1024 * 1024
DATA = Path(__file__).parent / "data"


def entry(
    nbytes: int,
    category: str = "temporary",
    module: str = "",
    phase: str = "forward",
    source: str = "",
    op: str = "",
    *,
    shape: str = "",
    before_call: bool = False,
) -> AtPeakEntry:
    text = f"statement of {source}" if source else ""
    return AtPeakEntry(nbytes, 1, category, module, phase, source, text, op, shape, "float32", before_call)


def explained(
    label: str,
    entries: list[AtPeakEntry],
    unattributed: tuple[Unattributed, ...] = (),
    *,
    mode: str = "eager",
    footprint: int | None = None,
) -> RunResult:
    """A run whose footprint is its entries and unattributed lines (or ``footprint``)."""
    total = sum(e.bytes for e in entries) + sum(u.bytes for u in unattributed)
    by_category = {c: sum(e.bytes for e in entries if e.category == c) for c in CATEGORIES}
    by_category["other"] += sum(u.bytes for u in unattributed)
    entries = sorted(entries, key=lambda e: -e.bytes)
    at_peak = AtPeak(by_category, tuple(entries), unattributed, footprint_bytes=footprint or total)
    return RunResult(label=label, mode=mode, peak_bytes=total, op_stats=(), at_peak=at_peak)


def change(base: list[AtPeakEntry], other: list[AtPeakEntry], **options: object) -> AtPeakDiff:
    result = diff_at_peak(explained("base", base), explained("other", other, **options))  # type: ignore[arg-type]
    assert result is not None
    return result


def assert_adds_up(diff: AtPeakDiff) -> None:
    """Every table of ``diff`` adds up to the change of the footprint, each row its sides."""
    delta = diff.other_footprint_bytes - diff.base_footprint_bytes
    assert diff.footprint_delta_bytes == delta
    assert sum(diff.by_category.values()) == delta
    for table in (diff.by_module, diff.by_source, diff.by_op):
        assert sum(row.delta_bytes for row in table) == delta
        assert sum(row.base_bytes for row in table) == diff.base_footprint_bytes
        assert sum(row.other_bytes for row in table) == diff.other_footprint_bytes
        assert all(row.delta_bytes == row.other_bytes - row.base_bytes for row in table)


# ---- hand-built explanations -----------------------------------------------------------------

_entries = st.lists(
    st.builds(
        entry,
        st.integers(1, 64 * MiB),
        st.sampled_from(CATEGORIES),
        st.sampled_from(
            ["", "GPT", "lm_head", "blocks.0", "blocks.0.mlp", "blocks.0.mlp.fc", "blocks.1.attn"]
        ),
        st.sampled_from(["", "forward", "backward", "recompute"]),
        st.sampled_from(["", "a.py:1", "a.py:2", "lib.py:9"]),
        st.sampled_from(["", "aten::mm", "cpp_fused_add_0"]),
    ),
    max_size=12,
)
_unattributed = st.lists(st.builds(Unattributed, st.integers(1, MiB), st.just(1), st.just("why")), max_size=2)


@settings(max_examples=examples(150), deadline=None)
@given(_entries, _unattributed, _entries, _unattributed)
def test_every_table_adds_up_to_the_change_of_the_footprint(base, base_lost, other, other_lost) -> None:
    diff = diff_at_peak(explained("a", base, tuple(base_lost)), explained("b", other, tuple(other_lost)))
    assert diff is not None
    assert_adds_up(diff)
    assert diff.summary


def test_a_change_in_one_module_is_shown_as_deep_as_it_goes() -> None:
    same = [
        entry(MiB, module="blocks.1.mlp.fc"),
        entry(2 * MiB, "parameter", "lm_head", "", before_call=True),
    ]
    diff = change(
        [*same, entry(MiB, module="blocks.0.mlp.fc")],
        [*same, entry(5 * MiB, module="blocks.0.mlp.fc"), entry(MiB, module="blocks.0")],
    )
    assert_adds_up(diff)
    rows = {(r.module, r.phase, r.submodules): r.delta_bytes for r in diff.by_module}
    # blocks.0 held all of the change: split into its own bytes and its submodule, then mlp into fc.
    assert rows == {
        ("blocks.0.mlp.fc", "forward", False): 4 * MiB,
        ("blocks.0", "forward", False): MiB,
        ("blocks.1", "forward", True): 0,
        ("lm_head", "", False): 0,
    }
    assert diff.by_module[0].module == "blocks.0.mlp.fc"


def test_a_change_spread_over_the_blocks_stays_one_row_per_block() -> None:
    base = [entry(MiB, module=f"blocks.{i}.mlp.fc") for i in range(4)]
    other = [entry(2 * MiB, module=f"blocks.{i}.mlp.fc") for i in range(4)]
    diff = change(base, other)
    assert [(r.module, r.delta_bytes) for r in diff.by_module] == [(f"blocks.{i}", MiB) for i in range(4)]
    assert diff.summary == (
        "+4.0 MiB at the peak (4.0 MiB -> 8.0 MiB): the forward of blocks.0–3 +4.0 MiB of temporaries"
    )


def test_the_summary_joins_blocks_that_change_alike_and_says_which_run_holds_none() -> None:
    """The shape of the checkpointed compile regression: eager holds the last block's recompute
    buffers at its peak; compiled, every block's."""
    line = "model.py:40"
    base = [entry(8 * MiB, module="blocks.3", phase="recompute", source=line)]
    other = [entry(6 * MiB, module=f"blocks.{i}", phase="recompute", source=line) for i in range(3)]
    other += [entry(16 * MiB, module="blocks.3", phase="recompute", source=line)]
    diff = change(base, other)
    assert_adds_up(diff)
    assert diff.summary == (
        "+26.0 MiB at the peak (8.0 MiB -> 34.0 MiB): the recompute of blocks.0–2 in backward +18.0 MiB of "
        "temporaries, none of it at base's peak; the recompute of blocks.3 in backward +8.0 MiB of "
        "temporaries; by line, model.py:40 (statement of model.py:40) +26.0 MiB"
    )
    assert [(r.module, r.base_bytes) for r in diff.only_in_other] == [
        ("blocks.0", 0),
        ("blocks.1", 0),
        ("blocks.2", 0),
    ]


def test_without_modules_the_summary_names_lines_then_ops() -> None:
    diff = change(
        [entry(MiB, source="a.py:1", op="aten::mm")], [entry(3 * MiB, source="a.py:1", op="aten::mm")]
    )
    assert (
        diff.summary
        == "+2.0 MiB at the peak (1.0 MiB -> 3.0 MiB): a.py:1 (statement of a.py:1) +2.0 MiB of temporaries"
    )
    ops = change([entry(MiB, op="aten::mm")], [entry(MiB // 2, op="aten::mm")])
    assert ops.summary == "-512.0 KiB at the peak (1.0 MiB -> 512.0 KiB): aten::mm -512.0 KiB of temporaries"
    same = change([entry(MiB, op="aten::mm")], [entry(MiB, op="aten::mm")])
    assert same.summary == "nothing changed at the peak (1.0 MiB in both)"


def test_the_summary_names_the_op_that_changed_most_when_modules_and_lines_cancel_out() -> None:
    # Autocast's shape: each layer's activations halve while its bf16 weight copies, kept for
    # backward, add as much; by module and by line the change nearly cancels.
    base, other = [], []
    for layer in range(2):
        module, line = f"layers.{layer}.mlp", f"model.py:{10 + layer}"
        base.append(entry(4 * MiB, "activation", module, source=line, op="aten::mm"))
        other.append(entry(2 * MiB, "activation", module, source=line, op="aten::mm"))
        other.append(entry(2 * MiB + 64, "activation", module, source=line, op="aten::_to_copy"))
    diff = change(base, other)
    assert_adds_up(diff)
    casts = sum(e.bytes for e in other if e.op == "aten::_to_copy")
    assert diff.summary.endswith(
        f"; by op, casts kept for backward (aten::_to_copy) +{casts / MiB:.1f} MiB of activations, "
        "none of it at base's peak"
    )
    assert diff.summary.startswith("+128 B at the peak (8.0 MiB -> 8.0 MiB): the forward of layers.0–1")
    # An op that changed less than what the summary names already is not added.
    less = entry(MiB, "activation", "layers.0.mlp", source="model.py:10", op="aten::mm")
    smaller = change(base[:1], [less])
    assert "by op" not in smaller.summary


def test_what_has_no_module_line_or_op_keeps_a_row() -> None:
    lost = (Unattributed(3 * MiB, 1, "freed outside any op"),)
    diff = diff_at_peak(
        explained("a", [entry(MiB, module="fc")]), explained("b", [entry(MiB, module="fc")], lost)
    )
    assert diff is not None
    assert_adds_up(diff)
    assert [(r.module, r.phase, r.delta_bytes) for r in diff.by_module][0] == ("", "", 3 * MiB)
    assert (diff.by_source[0].source, diff.by_op[0].op, diff.by_category["other"]) == ("", "", 3 * MiB)


def test_entries_short_of_the_footprint_get_a_row_and_a_note() -> None:
    diff = change([entry(MiB)], [entry(MiB)], footprint=3 * MiB)
    assert_adds_up(diff)
    assert (diff.footprint_delta_bytes, diff.by_category["other"]) == (2 * MiB, 2 * MiB)
    assert diff.notes == ("other: 2.0 MiB of the footprint are in no entry",)


def test_tensors_kept_for_backward_by_one_run_only_are_listed() -> None:
    kept = entry(4 * MiB, "activation", "fc", source="m.py:3", shape="(1024, 1024)")
    recomputed = entry(4 * MiB, "temporary", "fc", "recompute", "m.py:3")
    diff = change([kept], [recomputed])
    assert [(a.module, a.shape, a.base_bytes, a.other_bytes) for a in diff.activations] == [
        ("fc", "(1024, 1024)", 4 * MiB, 0)
    ]
    assert [(r.module, r.phase) for r in diff.only_in_other] == [("fc", "recompute")]
    assert [(r.module, r.phase) for r in diff.only_in_base] == [("fc", "forward")]


def test_a_compiled_run_says_where_its_explanation_comes_from() -> None:
    eager = explained("eager", [entry(MiB, "activation", "fc", source="m.py:3")])
    untraced = entry(MiB, "temporary", op="cpp_fused_mul_0")
    compiled = explained("compile", [untraced], mode="compile")
    diff = diff_at_peak(eager, compiled)
    assert diff is not None and "no Inductor provenance" in diff.notes[0]
    with_kernels = dataclasses.replace(compiled, kernels=(object(),))  # type: ignore[arg-type]
    diff = diff_at_peak(eager, with_kernels)
    assert diff is not None
    assert diff.notes[0].startswith("compile: lines, modules and recompute come from Inductor's graph nodes")
    assert "1.0 MiB made during the call have no graph node" in diff.notes[0]
    assert diff.notes[1].startswith("eager counts as activations the tensors autograd saves")


def test_the_finest_rows_name_category_module_line_and_op() -> None:
    base = explained("a", [entry(MiB, "temporary", "lm_head", source="g.py:108", op="aten::mm")])
    other = explained("b", [entry(3 * MiB, "temporary", "lm_head", source="g.py:108", op="aten::mm")])
    assert base.at_peak is not None and other.at_peak is not None
    (row,) = contributors(base.at_peak, other.at_peak)
    assert (row.category, row.module, row.source, row.op, row.delta_bytes) == (
        "temporary",
        "lm_head",
        "g.py:108",
        "aten::mm",
        2 * MiB,
    )


def test_module_paths_are_read_in_units_an_index_with_its_container() -> None:
    assert module_units("blocks.0.attn.proj") == ("blocks.0", "attn", "proj")
    assert module_units("layers.3.mlp.0") == ("layers.3", "mlp.0")
    assert module_units("GPT") == ("GPT",) and module_units("") == ()


def test_the_json_holds_the_diff_and_a_loaded_report_gives_it_again(tmp_path: Path) -> None:
    report = build_report(
        target="t",
        runs={
            "base": explained("base", [entry(MiB, module="fc", source="m.py:1")]),
            "other": explained("other", [entry(3 * MiB, module="fc", source="m.py:1")]),
        },
    )
    data = report.to_dict()["diff"]["at_peak"]
    assert list(data)[:6] == [
        "base_footprint_bytes",
        "other_footprint_bytes",
        "footprint_delta_bytes",
        "by_category",
        "by_module",
        "by_source",
    ]
    assert data["by_category"] == {"temporary": 2 * MiB}  # the categories either run holds
    assert data["by_module"] == [
        {"module": "fc", "phase": "forward", "submodules": False, "base_bytes": MiB, "other_bytes": 3 * MiB,
         "delta_bytes": 2 * MiB}
    ]  # fmt: skip
    assert data["by_op"] == [{"op": "", "base_bytes": MiB, "other_bytes": 3 * MiB, "delta_bytes": 2 * MiB}]
    path = tmp_path / "r.json"
    path.write_text(report.to_json())
    loaded = load_report(path)
    assert loaded.diff is not None and loaded.diff.at_peak == report.diff.at_peak  # type: ignore[union-attr]


def test_runs_not_explained_have_no_at_peak_diff() -> None:
    report = load_report(DATA / "similarity.json")  # written before peaks were explained
    assert report.diff is not None and report.diff.at_peak is None
    assert "at_peak" not in json.loads(report.to_json())["diff"]


# ---- profiled: one tensor more, kept alive to the peak ---------------------------------------

KEPT_ELEMENTS = 256 * 1024  # float32: exactly 1 MiB


def _steps() -> tuple[object, object, object]:
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, keep: bool) -> None:
            super().__init__()
            self.fc = nn.Linear(256, 256)
            self.keep = keep

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
            kept = torch.ones(KEPT_ELEMENTS) if self.keep else None  # the tensor kept
            return self.fc(x).relu(), kept

    class Net(nn.Module):
        def __init__(self, keep: bool) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.block = Block(keep)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
            return self.block(x)

    def step(net: Net, x: torch.Tensor) -> float:
        y, kept = net(x)
        loss = y.square().mean()
        loss.backward()
        net.zero_grad(set_to_none=True)
        return float(loss.detach()) + (0.0 if kept is None else 0.0)

    x = torch.randn(512, 256)
    return step, Net(False), Net(True), x  # type: ignore[return-value]


def test_one_tensor_more_at_the_peak_is_named_with_its_line_module_category_and_bytes() -> None:
    import memprof
    from memprof.library.api import Variant
    from memprof.sources.targets.target import Inputs

    step, plain, keeping, x = _steps()  # type: ignore[misc]
    report = memprof.compare(
        Variant(step, Inputs((plain, x)), label="plain"),
        Variant(step, Inputs((keeping, x)), label="keeping"),
        time_budget=0,
    )
    diff = report.diff
    assert diff is not None and diff.at_peak is not None
    change = diff.at_peak
    assert_adds_up(change)
    assert change.footprint_delta_bytes == MiB
    line = f"{Path(__file__).relative_to(Path.cwd())}:{_line('kept = torch.ones(KEPT_ELEMENTS)')}"
    assert [(r.source, r.delta_bytes) for r in change.by_source if r.delta_bytes] == [(line, MiB)]
    assert [(r.module, r.phase, r.delta_bytes) for r in change.by_module if r.delta_bytes] == [
        ("block", "forward", MiB)
    ]
    assert {c: d for c, d in change.by_category.items() if d} == {"temporary": MiB}
    assert [(r.op, r.delta_bytes) for r in change.by_op if r.delta_bytes] == [("aten::ones", MiB)]
    said = f"+1.0 MiB at the peak ({_span(change)}): the forward of block +1.0 MiB of temporaries"
    assert change.summary.startswith(f"{said}; by line, {line} (kept = torch.ones(")


def _line(statement: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    (number,) = [n for n, text in enumerate(lines, 1) if text.strip().startswith(statement)]
    return number


def _span(change: AtPeakDiff) -> str:
    from memprof.core.units import format_bytes

    return f"{format_bytes(change.base_footprint_bytes)} -> {format_bytes(change.other_footprint_bytes)}"


# ---- the checkpointed compile regression (slow: torch.compile) -------------------------------


@pytest.fixture(scope="module")
def checkpoint_twice() -> Report:
    """One eager and one compiled run of tests/data/checkpoint_twice.py:step (shared)."""
    import memprof

    return memprof.compare(str(DATA / "checkpoint_twice.py") + ":step", mode="both", time_budget=0)


def assert_the_blocks_backward_explains_it(report: Report) -> None:
    """The checkpointed compile regression, explained: the diff adds up to the byte, and its
    largest module rows and its summary are blocks' backward (recomputed), none of which eager's
    peak holds."""
    eager, compiled = report.runs["eager"], report.runs["compile"]
    assert compiled.peak_bytes > 1.5 * eager.peak_bytes  # the regression reproduces
    diff = report.diff
    assert diff is not None and diff.at_peak is not None
    change = diff.at_peak
    assert_adds_up(change)
    assert eager.footprint_bytes is not None and compiled.footprint_bytes is not None
    assert change.footprint_delta_bytes == compiled.footprint_bytes - eager.footprint_bytes
    largest = change.by_module[:3]
    assert all(r.module.startswith("blocks.") and r.phase in ("backward", "recompute") for r in largest)
    assert {r.module for r in largest} & {"blocks.0", "blocks.1", "blocks.2"}
    assert sum(r.delta_bytes for r in largest) > 0.8 * change.footprint_delta_bytes
    # Eager's peak is inside the backward of blocks.0, the last block backward reaches: it holds
    # no recompute of blocks.1-3, which the compiled peak holds together.
    # (What ran outside any module, a 4 B scalar made eagerly between the compiled graphs, is
    # no block's recompute.)
    recomputed = [r for r in change.by_module if r.phase == "recompute" and r.module not in ("", "blocks.0")]
    assert recomputed and all(r.base_bytes == 0 and r.other_bytes > 0 for r in recomputed)
    assert {(r.module, r.phase) for r in recomputed} <= {(r.module, r.phase) for r in change.only_in_other}
    # The summary names them, in backward, and that eager's peak holds none of them.
    assert "blocks." in change.summary and "in backward" in change.summary
    assert "none of it at eager's peak" in change.summary
    # The op table shows the ops that hold the bytes, not the compiled region's wrapper.
    from memprof.outputs.terminal import render_terminal

    text = render_terminal(report)
    table = text.split("Top 15 ops by peak bytes, eager vs compile:")[1].split("ops not shown:")[0]
    rows = [line for line in table.splitlines()[3:] if line and not line.startswith((" ", "("))]
    names = [line.split("  ")[0] for line in rows if not line.strip().isdigit()]
    assert len(names) == 15 and "[compiled region]" not in names
    assert not any(name.startswith(("autograd::", "aten::linear")) for name in names), names
    assert "What changed at the peak, compile vs eager:" in text


def test_the_saved_checkpointed_compile_regression_is_the_blocks_backward() -> None:
    """tests/data/checkpoint-twice.json, written by scripts/make_checkpoint_twice.py:
    ``memprof.compare("tests/data/checkpoint_twice.py:step", mode="both", time_budget=0)`` from
    the repository's root, its timelines cut to 50 points."""
    report = load_report(DATA / "checkpoint-twice.json")
    assert_the_blocks_backward_explains_it(report)
    change = report.diff.at_peak  # type: ignore[union-attr]
    assert change is not None
    assert [(r.module, r.phase, r.delta_bytes) for r in change.by_module[:3]] == [
        ("blocks.3", "recompute", 22_024_196),
        ("blocks.1", "backward", 13_631_488),
        ("blocks.0", "backward", 12_173_440),
    ]
    assert change.summary.startswith(
        "+47.5 MiB at the peak (57.2 MiB -> 104.7 MiB): the backward of blocks.0–3 +33.9 MiB of "
        "temporaries; the recompute of blocks.1–3 in backward +30.0 MiB of temporaries, none of it "
        "at eager's peak"
    )


@pytest.mark.slow
def test_the_checkpointed_compile_regression_is_the_blocks_backward(checkpoint_twice: Report) -> None:
    assert_the_blocks_backward_explains_it(checkpoint_twice)


@pytest.mark.slow  # two profiled GPT steps and a gate (~8 s)
def test_a_training_step_gated_against_a_smaller_batch_names_the_logits_and_cross_entropy_lines() -> None:
    """The built-in GPT step at batch 4 against a baseline at batch 2: what grew is the logits
    (lm_head's mm) and the cross-entropy's three tensors of their size, 2 MiB each: (2 x 64)
    more tokens x 4096 float32 logits."""
    from test_explain import line_of

    import memprof
    import memprof.examples.gpt as gpt
    from memprof.analysis.gate import GateConfig, evaluate

    small = memprof.profile(gpt.train_step, *gpt.train_step_inputs(batch=2), time_budget=0)
    large = memprof.profile(gpt.train_step, *gpt.train_step_inputs(batch=4), time_budget=0)
    (violation,) = evaluate(large, GateConfig(baseline=small)).violations
    assert violation.explanation is not None
    grown = [(r.bytes, r.what.source, r.what.op) for r in violation.explanation.rows[:4]]
    logits, cross_entropy = line_of(gpt, "logits = self.lm_head(x)"), line_of(gpt, "loss = F.cross_entropy(")
    assert sorted(grown) == sorted(
        [
            (2 * MiB, cross_entropy, "aten::_log_softmax"),
            (2 * MiB, cross_entropy, "aten::_log_softmax_backward_data"),
            (2 * MiB, cross_entropy, "aten::nll_loss_backward"),
            (2 * MiB, logits, "aten::mm"),
        ]
    )
    change = diff_at_peak(small.runs["eager"], large.runs["eager"])
    assert change is not None and change.by_source[0].source == cross_entropy
    assert f"by line, {cross_entropy}" in change.summary


def test_children_named_by_index_alone_are_grouped_like_a_containers() -> None:
    """The layers of a Sequential model are ``0``, ``1``, ``2``: consecutive ones that change
    the same way are one group (``0–2``), as ``blocks.0–2`` are."""
    from memprof.analysis.peak_diff import module_groups
    from memprof.model.peak_diff import ModuleDelta

    rows = [
        ModuleDelta(module=str(i), phase="forward", base_bytes=2 * MiB, other_bytes=0) for i in range(3)
    ] + [ModuleDelta(module="blocks.4", phase="forward", base_bytes=MiB, other_bytes=0)]
    groups = module_groups(rows)
    assert [(g.label, g.delta_bytes) for g in groups] == [("0–2", -6 * MiB), ("blocks.4", -MiB)]


def test_a_line_edited_between_runs_is_one_row_with_the_larger_side_text() -> None:
    # A row is identified by the entry's key without the line's texts (LINE_TEXTS): the same
    # line whose statement was edited is one row, its text that of its largest entry.
    base = explained(
        "base", [AtPeakEntry(2 * MiB, 1, "temporary", "fc", "forward", "m.py:3", "y = f(x)", "aten::mm")]
    )
    other = explained(
        "other", [AtPeakEntry(3 * MiB, 1, "temporary", "fc", "forward", "m.py:3", "y = g(x)", "aten::mm")]
    )
    diff = diff_at_peak(base, other)
    assert diff is not None
    assert [(r.source, r.source_text, r.base_bytes, r.other_bytes) for r in diff.by_source] == [
        ("m.py:3", "y = g(x)", 2 * MiB, 3 * MiB)
    ]
    (row,) = contributors(base.at_peak, other.at_peak)  # type: ignore[arg-type]
    assert (row.category, row.module, row.phase, row.source, row.source_text, row.op, row.delta_bytes) == (
        "temporary",
        "fc",
        "forward",
        "m.py:3",
        "y = g(x)",
        "aten::mm",
        MiB,
    )
