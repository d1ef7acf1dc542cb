"""Compiled code in the op tables, on hand-made records: torch.compile's wrapper ranges are one
row, and each kernel owns the buffers Inductor's wrapper allocates for it just before calling
it. And a baseline saved before that change is not compared op by op."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from memprof.analysis.compiled import compiled_view
from memprof.analysis.gate import GateConfig, evaluate
from memprof.analysis.peaks import analyze
from memprof.core.names import COMPILED_REGION
from memprof.core.records import RawProfile
from memprof.pipeline import load_report

MiB = 1024 * 1024


def compiled_step() -> RawProfile:
    """One compiled call, as torch 2.13 profiles it (times in ns):

    Torch-Compiled Region 0..1000 > Pregraph bytecode, ## Call CompiledFxGraph ## 100..900 >
    graph_0_inductor_wrapper_call 110..890 > graph_0_cpp_fused_abs_sub_0 (300..400) and
    extern aten::mm (600..700). Before the wrapper call, 1 MiB is allocated (at 105); the
    wrapper allocates the fused kernel's 4 MiB output at 200, then mm's 2 MiB output at 450
    after freeing that dead 1 MiB buffer at 420; the kernel itself allocates a 64 B scratch
    and frees it; the fused kernel's output is freed at 950."""
    ops = [
        ("TorchDynamo Cache Lookup", 0, 5, 1),
        ("Torch-Compiled Region: 0/0", 10, 1000, 1),
        ("Pregraph bytecode", 20, 30, 1),
        ("## Call CompiledFxGraph fabc123 ##", 100, 900, 1),
        ("graph_0_inductor_wrapper_call", 110, 890, 1),
        ("graph_0_cpp_fused_abs_sub_0", 300, 400, 1),
        ("aten::mm", 600, 700, 1),
    ]
    mem = [(105, MiB), (200, 4 * MiB), (350, 64), (360, -64), (420, -MiB), (450, 2 * MiB), (950, -4 * MiB)]
    return RawProfile.from_lists(ops, mem, calls=[(0, 1000)])


def test_the_wrapper_ranges_are_one_row_and_bookkeeping_is_folded() -> None:
    view = compiled_view(compiled_step())
    assert list(view.op_name) == [COMPILED_REGION, "graph_0_cpp_fused_abs_sub_0", "aten::mm"]
    ops = {op.name: op for op in analyze(compiled_step()).ops}
    region = ops[COMPILED_REGION]
    assert region.calls == 1
    # Everything in the call but what the kernels own: the 1 MiB before the wrapper call, the
    # free of that dead buffer, and the free of the fused kernel's output.
    assert region.total_bytes == MiB + 4 * MiB - MiB + 2 * MiB - 4 * MiB
    assert region.self_bytes == MiB - MiB - 4 * MiB


def test_each_kernel_owns_the_buffers_allocated_for_it() -> None:
    ops = {op.name: op for op in analyze(compiled_step()).ops}
    fused = ops["cpp_fused_abs_sub_0"]
    # It starts at its buffer's allocation (200), not at 300: its output and its own scratch.
    assert (fused.peak_bytes, fused.allocated_bytes, fused.self_bytes) == (
        4 * MiB + 64,
        4 * MiB + 64,
        4 * MiB,
    )
    mm = ops["aten::mm"]
    # The free of the dead buffer at 420 comes before mm's first allocation: not mm's.
    assert (mm.peak_bytes, mm.allocated_bytes, mm.self_bytes) == (2 * MiB, 2 * MiB, 2 * MiB)
    starts = dict(
        zip(compiled_view(compiled_step()).op_name, compiled_view(compiled_step()).op_start, strict=True)
    )
    assert (starts["graph_0_cpp_fused_abs_sub_0"], starts["aten::mm"]) == (200, 450)


def test_the_peak_is_said_to_be_during_the_kernel_that_owns_it() -> None:
    numbers = analyze(compiled_step()).numbers
    # Live: 1 MiB, 5 MiB (+64 B inside the kernel), 4 MiB, 6 MiB when mm's output is allocated.
    assert numbers.peak_bytes == 6 * MiB
    assert numbers.peak_op == "aten::mm"  # the extern kernel whose output it is
    assert numbers.peak_op_stack == (COMPILED_REGION, "aten::mm")


def test_profiles_without_compiled_code_are_left_as_they_are() -> None:
    raw = RawProfile.from_lists([("aten::add", 0, 10, 1)], [(5, 8)])
    assert compiled_view(raw) is raw


def test_a_baseline_saved_before_kernels_owned_their_buffers_is_not_compared_op_by_op(tmp_path: Path) -> None:
    data = Path(__file__).parent / "data" / "gate"
    old = json.loads((data / "base.json").read_text())  # its compile run has the wrapper rows
    new = json.loads(json.dumps(old))
    new["runs"]["compile"]["ops"] = [
        {"name": COMPILED_REGION, "calls": 1, "peak_bytes": 2_000_000},
        {"name": "cpp_fused_abs_lt_sub_sum_unsqueeze_0", "calls": 1, "peak_bytes": 2_000_000},
    ]
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    baseline, report = load_report(tmp_path / "old.json"), load_report(tmp_path / "new.json")
    result = evaluate(report, GateConfig(baseline=baseline, per_op=True))
    assert result.passed
    assert result.warnings == [
        "the baseline's run 'compile' was saved before memprof gave compiled kernels the buffers they "
        "produce: its ops are not compared one by one; save a new baseline to compare them"
    ]
    assert result.checks == 2 + 3  # both runs' peaks; the eager run's three ops
    # Both saved the same way (new against new, old against old): compared op by op.
    assert evaluate(report, GateConfig(baseline=report, per_op=True)).checks == 2 + 3 + 2
    assert evaluate(baseline, GateConfig(baseline=baseline, per_op=True)).checks == 2 + 3 + 2


def test_the_view_of_a_profile_read_with_name_codes_is_analysed_like_one_without() -> None:
    """The reader keeps each op's name as a code into its interned names; the view renames and
    drops ops, so its codes go (codes that no longer match the names are refused outright)."""
    plain = compiled_step()
    names = sorted(set(plain.op_name))
    coded = dataclasses.replace(
        plain,
        op_code=np.array([names.index(n) for n in plain.op_name], dtype=np.int32),
        op_code_names=tuple(names),
    )
    assert compiled_view(coded).op_code is None
    assert analyze(coded).ops == analyze(plain).ops
    with pytest.raises(ValueError, match="7 op codes for 3 ops"):
        dataclasses.replace(compiled_view(plain), op_code=coded.op_code)
