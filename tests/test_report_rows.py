"""Every format shows the same op rows (report/rows.py decides them) and the same fused kernels."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import PIPE_NAME

from memprof.model import Report
from memprof.outputs.html import render_html
from memprof.outputs.markdown import render_markdown
from memprof.outputs.rows import fused_rows, op_tables
from memprof.outputs.terminal import render_terminal
from memprof.pipeline import build_report, compared, load_report


def terminal_ops(text: str) -> list[str]:
    table = re.search(r"^Top \d+ ops[^\n]*:\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
    assert table
    # Rows start at the margin; notes (indented) and the "not shown" line are not rows.
    lines = table.group(1).splitlines()[2:]
    return [line.split("  ")[0] for line in lines if not line.startswith(" ") and " not shown: " not in line]


def markdown_ops(text: str) -> list[str]:
    table = re.search(r"^### Top \d+ ops[^\n]*\n\n(.*?)\n\n", text, re.S | re.M)
    assert table
    return [
        re.match(r"\| (`+) ?(.*?) ?\1 \|", row).group(2).replace("\\|", "|")
        for row in table.group(1).splitlines()[2:]
    ]


def html_ops(page: str) -> list[str]:
    """The op rows a reader sees (the quiet ones are behind a toggle)."""
    import html

    ops = re.search(r'<section id="ops">(.*?)</section>', page, re.S)
    assert ops
    return [
        html.unescape(name) for name in re.findall(r'<tr><td class="name" data-sort="([^"]*)">', ops.group(1))
    ]


def html_quiet_ops(page: str) -> list[str]:
    import html

    return [
        html.unescape(n)
        for n in re.findall(r'<tr class="quiet"[^>]*><td class="name" data-sort="([^"]*)">', page)
    ]


@pytest.mark.parametrize("fixture", ["compare_report", "single_report"])
@pytest.mark.parametrize("top", [1, 2, 4, 50])
def test_terminal_markdown_and_html_show_the_same_top_rows(fixture: str, top: int, request) -> None:
    report: Report = request.getfixturevalue(fixture)
    (table,) = op_tables(report, "peak", top)
    expected = [op.name for op in table.rows]
    # The comparison has 6 ops, one of them (PIPE_NAME) without memory activity: 5 are shown.
    assert len(expected) == min(top, len(report.ok_runs()[0].op_stats) if fixture == "single_report" else 5)
    assert terminal_ops(render_terminal(report, sort="peak", top=top)) == expected
    assert markdown_ops(render_markdown(report, top=top)) == expected
    page = render_html(report, top=top)
    assert html_ops(page) == expected
    # HTML keeps the quiet rows among them, hidden behind a toggle.
    quiet = [PIPE_NAME] if fixture == "compare_report" and top >= 5 else []
    assert html_quiet_ops(page) == quiet


def test_fused_kernels_are_the_same_section_everywhere(compare_report: Report) -> None:
    (row,) = fused_rows(compare_report)
    assert (row.run, row.kernel, row.peak_bytes) == ("compile", "cpp_fused_abs_sub_0", 1024 * 1024)
    assert [(r.op, r.base_peak_bytes) for r in row.replaced] == [
        ("aten::abs", 64 << 20),
        ("aten::sub", 256 << 20),
    ]
    # The same kernel, the same replaced ops with the same peaks, in each format's own syntax.
    terminal = render_terminal(compare_report, top=1).split("Fused kernels of compile")[1]
    assert "\ncpp_fused_abs_sub_0  1.0 MiB  aten::sub 256.0 MiB, aten::abs 64.0 MiB\n" in terminal
    markdown = render_markdown(compare_report, top=1).split("### Fused kernels\n")[1].replace("\u00a0", " ")
    assert (
        "| compile | `cpp_fused_abs_sub_0` | 1.0 MiB | "
        "`aten::abs` (64.0 MiB peak in eager), `aten::sub` (256.0 MiB peak in eager) |"
    ) in markdown
    page = render_html(compare_report, top=1)
    fused = re.search(r'<section id="fused">(.*?)</section>', page, re.S)
    assert fused is not None
    assert (
        "<code>aten::abs</code> (64.0 MiB peak in eager), <code>aten::sub</code> (256.0 MiB peak in eager)"
    ) in fused.group(1)


def test_each_comparison_is_computed_once_per_report(compare_report: Report, monkeypatch) -> None:
    from memprof.analysis import diff

    calls = []
    real = diff.diff_runs
    monkeypatch.setattr(diff, "diff_runs", lambda base, other: calls.append(other.label) or real(base, other))
    report = compared(replace(compare_report, diffs=()))  # as the pipeline builds a report
    render_terminal(report)
    render_markdown(report)
    render_html(report)
    report.to_json()
    assert calls == ["compile"]


def stats(name: str, calls: int, self_b: int, total: int, alloc: int, peak: int, total_us: float):
    from memprof.model.ops import OpStats

    return OpStats(name, calls, self_b, total, alloc, peak, self_us=1.0, total_us=total_us)


def test_a_chain_of_ops_with_the_same_figures_keeps_the_call_the_code_made() -> None:
    from memprof.outputs.rows import NO_ACTIVITY, hidden_reasons

    mib = 1 << 20
    to = stats("aten::to", 1, 0, 488 * mib, 488 * mib, 488 * mib, 30.0)
    copy = stats("aten::_to_copy", 1, 0, 488 * mib, 488 * mib, 488 * mib, 20.0)
    empty = stats("aten::empty_strided", 1, 488 * mib, 488 * mib, 488 * mib, 488 * mib, 5.0)
    view = stats("aten::view", 4, 0, 0, 0, 0, 1.0)
    ops = [(op.name, (op,)) for op in (to, copy, empty, view)]
    assert hidden_reasons(ops) == {
        "aten::view": NO_ACTIVITY,
        "aten::_to_copy": "same figures as aten::to",
        "aten::empty_strided": "same figures as aten::to",
    }
    # Sorted by self bytes, the row that holds them stays.
    assert hidden_reasons(ops, sort="self")["aten::to"] == "same figures as aten::empty_strided"
    # Without an aten op in the chain, the innermost range stays (as "peak during" names it).
    region = stats("Torch-Compiled Region", 1, 0, mib, mib, mib, 9.0)
    wrapper = stats("inductor_wrapper_call", 1, mib, mib, mib, mib, 8.0)
    assert hidden_reasons([(op.name, (op,)) for op in (region, wrapper)]) == {
        "Torch-Compiled Region": "same figures as inductor_wrapper_call"
    }


def test_equal_figures_that_are_not_a_caller_and_its_child_are_both_shown() -> None:
    from memprof.outputs.rows import hidden_reasons

    a = stats("aten::add", 2, 0, 512, 512, 512, 4.0)
    b = stats("aten::mul", 2, 0, 512, 512, 512, 4.0)  # same time: neither runs inside the other
    c = stats("aten::div", 2, 512, 512, 512, 512, 9.0)  # the longer one allocates itself
    d = stats("aten::sub", 2, 0, 512, 512, 512, 2.0)
    assert hidden_reasons([(op.name, (op,)) for op in (a, b)]) == {}
    assert hidden_reasons([(op.name, (op,)) for op in (c, d)]) == {}
    # In a comparison, the chain must hold in every run, and present in the same runs.
    base, other = stats("aten::to", 1, 0, 8, 8, 8, 9.0), stats("aten::to", 1, 0, 8, 8, 8, 9.0)
    child = stats("aten::_to_copy", 1, 8, 8, 8, 8, 3.0)
    assert hidden_reasons([("aten::to", (base, other)), ("aten::_to_copy", (child, child))]) == {
        "aten::_to_copy": "same figures as aten::to"
    }
    assert hidden_reasons([("aten::to", (base, other)), ("aten::_to_copy", (child, None))]) == {}


def test_fused_kernels_are_listed_most_memory_first_and_cut_to_top() -> None:
    report = load_report(Path(__file__).parent / "data" / "transformer-step.json")
    rows = fused_rows(report)
    assert len(rows) == 18
    largest = [row.replaced_peak_bytes for row in rows]
    # The largest: the log-softmax of the logits, 8 x 64 tokens x 1000 classes of float32.
    assert largest == sorted(largest, reverse=True) and largest[0] == 8 * 64 * 1000 * 4
    assert fused_rows(report, 3) == rows[:3]


# ---- a comparison's wrappers, folded into the op inside them ---------------------------------


def wrapping(name: str, peak: int, wraps: tuple[str, ...] = (), self_bytes: int = 0):
    from memprof.model.ops import OpStats

    return OpStats(name, 1, self_bytes, peak, peak, peak, self_us=1.0, total_us=2.0, wraps=wraps)


def test_wrappers_fold_into_the_op_inside_them_and_ranges_are_left_out() -> None:
    from memprof.outputs.rows import FOLDED, WRAPPER, wrapper_reasons

    mib = 1 << 20
    linear = wrapping("aten::linear", 8 * mib, ("aten::matmul", "aten::mm"))
    matmul = wrapping("aten::matmul", 8 * mib, ("aten::mm",))
    mm = wrapping("aten::mm", 8 * mib, self_bytes=8 * mib)
    clone = wrapping("aten::clone", mib, ("aten::empty_like", "aten::empty"), self_bytes=0)
    empty = wrapping("aten::empty", mib, self_bytes=mib)
    node = wrapping("LogSoftmaxBackward0", 4 * mib, ("aten::_log_softmax_backward_data",))
    evaluate = wrapping("autograd::engine::evaluate_function: MmBackward0", 2 * mib)  # no chain recorded
    mm_node = wrapping("MmBackward0", 2 * mib)  # two mm calls: no single op holds its peak
    inner = wrapping("aten::_log_softmax_backward_data", 4 * mib, self_bytes=4 * mib)
    step = wrapping("ProfilerStep#7", 9 * mib)
    region = wrapping("[compiled region]", 5 * mib)
    optimizer = wrapping("Optimizer.step#AdamW.step", 4 * mib)
    old_region = wrapping("Torch-Compiled Region", 5 * mib)  # an older report's: it holds the bytes
    ops = [
        linear,
        matmul,
        mm,
        clone,
        empty,
        node,
        evaluate,
        mm_node,
        inner,
        step,
        region,
        optimizer,
        old_region,
    ]
    # linear ran in eager only (compiled code calls mm): folded all the same.
    reasons = wrapper_reasons([(op.name, (op, None) if op is linear else (op, op)) for op in ops])
    assert reasons == {
        "aten::linear": FOLDED + "aten::mm",
        "aten::matmul": FOLDED + "aten::mm",
        "LogSoftmaxBackward0": FOLDED + "aten::_log_softmax_backward_data",
        # The chain skips allocators: clone is the op, empty_like and empty its allocation.
        "autograd::engine::evaluate_function: MmBackward0": WRAPPER,
        "MmBackward0": WRAPPER,
        "ProfilerStep#7": WRAPPER,
        "[compiled region]": WRAPPER,
        "Optimizer.step#AdamW.step": WRAPPER,
    }
    # Folded only where every run agrees on the op inside.
    other = wrapping("aten::matmul", 8 * mib, ("aten::bmm",))
    bmm = wrapping("aten::bmm", 8 * mib, self_bytes=8 * mib)
    split = [("aten::matmul", (matmul, other)), ("aten::mm", (mm, None)), ("aten::bmm", (None, bmm))]
    assert wrapper_reasons(split) == {}


def test_a_comparison_table_leaves_wrappers_out_and_shows_them_with_their_chain_on_demand() -> None:
    report = load_report(Path(__file__).parent / "data" / "gate" / "gpt-batch4.json")
    small = load_report(Path(__file__).parent / "data" / "gate" / "gpt-batch2.json")
    from memprof.analysis.diff import diff_runs

    pair = build_report(target="t", runs={"b2": replace_label(small.runs["eager"], "b2"),
                                          "b4": replace_label(report.runs["eager"], "b4")})  # fmt: skip
    assert pair.diff is not None
    (table,) = op_tables(pair, "peak", 15)
    names = [op.name for op in table.rows]
    assert "aten::linear" not in names and "aten::mm" in names
    assert not any(name.startswith(("autograd::", "Optimizer.")) for name in names)
    assert ("aten::linear", "aten::mm") in table.left_out.folded
    assert "aten::linear, aten::matmul (folded into aten::mm)" in table.left_out.sentence()
    (shown,) = op_tables(pair, "peak", 40, chains=True)
    assert shown.chains["aten::linear"] == "-> aten::matmul -> aten::mm"
    assert shown.chains["Optimizer.step#AdamW.step"] == "wrapper range"
    assert "aten::linear" in [op.name for op in shown.rows]
    text = render_terminal(pair, top=40, chains=True)
    assert "    -> aten::matmul -> aten::mm" in text.splitlines()
    assert (
        diff_runs(pair.runs["b2"], pair.runs["b4"]).op_diffs == pair.diff.op_diffs
    )  # the JSON keeps every op


def replace_label(run, label: str):
    import dataclasses

    return dataclasses.replace(run, label=label)


def test_an_op_records_the_ops_its_peak_was_wholly_inside() -> None:
    import torch

    import memprof

    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, w)  # no bias: linear -> matmul -> mm

    report = memprof.profile(
        project, torch.randn(256, 128), torch.randn(512, 128), time_budget=0, explain=False
    )
    ops = {op.name: op for op in report.runs["eager"].op_stats}
    assert ops["aten::linear"].wraps == ("aten::matmul", "aten::mm")
    assert ops["aten::matmul"].wraps == ("aten::mm",)
    assert ops["aten::mm"].wraps == () and ops["aten::mm"].peak_bytes == 256 * 512 * 4
    assert "wraps" not in [
        key for op in report.to_dict()["runs"]["eager"]["ops"] if not op.get("wraps") for key in op
    ]
