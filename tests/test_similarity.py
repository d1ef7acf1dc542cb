"""The built-in similarity example: eager vs torch.compile on the CPU (one shared compile)."""

from __future__ import annotations

import pytest
from reconcile import assert_reconciled

pytestmark = pytest.mark.slow


def test_eager_peak_is_exact(similarity_report):
    assert_reconciled(similarity_report)
    eager = similarity_report.runs["eager"]
    # Live during aten::sum: xy = x[:, :, None] - y[:, None, :] (256*500*500 float32 = 256,000,000 B,
    # held by the local), the 64,000,000 B bool mask, sum's 512,000,000 B int64 copy of it and its
    # 2,000,000 B result; abs's 256,000,000 B temporary is already freed.
    assert eager.peak_bytes == 834_000_000
    assert eager.peak_op == "aten::sum"
    assert eager.inputs_bytes == 2 * 256 * 500 * 4
    assert eager.net_bytes == 500 * 500 * 8
    sub = eager.ops[eager.ops["name"] == "aten::sub"].iloc[0]
    assert sub.self_bytes == 256_000_000 and sub.peak_bytes == 256_000_000


def test_compiled_peak_is_under_one_percent_of_eager(similarity_report):
    eager, compiled = similarity_report.runs["eager"], similarity_report.runs["compile"]
    assert compiled.peak_bytes == 2_000_000
    assert compiled.peak_bytes < 0.01 * eager.peak_bytes
    assert compiled.compile_seconds is not None and compiled.compile_seconds > 0


def test_verdict_and_fused_kernel_attribution(similarity_report):
    diff = similarity_report.diff
    assert diff.verdict == "torch.compile lowers peak memory by 793.5 MiB (-99.8%): 795.4 MiB -> 1.9 MiB"
    ops = diff.ops.set_index("name")
    kernel = "cpp_fused_abs_lt_sub_sum_unsqueeze_0"
    assert ops.loc[kernel, "fused_ops"] == [
        "aten::abs",
        "aten::lt",
        "aten::sub",
        "aten::sum",
        "aten::unsqueeze",
    ]
    assert ops.loc["aten::sub", "fused_into"] == [kernel]
    assert ops.loc["aten::sub", "presence"] == "base only"
    assert diff.label(ops.loc["aten::sub", "presence"]) == "eager only"
    assert ops.loc["aten::sub", "peak_bytes_delta"] == -256_000_000


def test_the_compiled_run_stores_what_its_kernels_replaced(similarity_report):
    # Split with torch's whole op vocabulary when the run was made, and kept in the JSON.
    kernels = {
        "cpp_fused_abs_lt_sub_sum_unsqueeze_0": (
            "aten::abs",
            "aten::lt",
            "aten::sub",
            "aten::sum",
            "aten::unsqueeze",
        )
    }
    assert similarity_report.runs["compile"].fused_kernels == kernels
    assert similarity_report.runs["eager"].fused_kernels == {}
    data = similarity_report.to_dict()
    assert data["schema_version"] == 2
    assert data["runs"]["compile"]["fused_kernels"] == {k: list(v) for k, v in kernels.items()}


def test_json_diff_contract(similarity_report):
    data = similarity_report.to_dict()
    assert set(data["runs"]) == {"eager", "compile"}
    assert data["runs"]["compile"]["compile_seconds"] > 0
    diff = data["diff"]
    assert diff["peak_bytes_delta"] == 2_000_000 - 834_000_000
    assert diff["peak_ratio"] == pytest.approx(2_000_000 / 834_000_000, rel=1e-6)
    sub = next(op for op in diff["ops"] if op["name"] == "aten::sub")
    assert sub["other"] is None and sub["base"]["peak_bytes"] == 256_000_000


def test_compiled_names_are_normalised(similarity_report):
    names = set(similarity_report.runs["compile"].ops["name"])
    # torch.compile's nested wrapper ranges are one row; the kernel keeps its name, unprefixed.
    assert names == {"[compiled region]", "cpp_fused_abs_lt_sub_sum_unsqueeze_0"}
    assert not any(name.startswith("graph_") for name in names)
