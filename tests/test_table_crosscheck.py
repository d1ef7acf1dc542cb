"""torch's own table, saved by `memprof run --table` and parsed back by `memprof parse`, agrees with
memprof's structured numbers: Mem = total_bytes, Self Mem = self_bytes, # of Calls = calls.

Compiled code is shown otherwise on purpose (:mod:`memprof.analysis.compiled`): torch.compile's
nested wrapper ranges are one ``[compiled region]`` row (each range has its calls and total), its
bookkeeping ranges are dropped, and a kernel owns the buffers it produces (torch gives them to
the wrapper), so for a kernel only the calls agree."""

from __future__ import annotations

from dataclasses import replace

import pytest
from typer.testing import CliRunner

from memprof.core.names import BOOKKEEPING_RANGES, COMPILED_REGION, WRAPPER_RANGES, normalize_name
from memprof.core.records import CALL_MARKER
from memprof.frontends.cli import app
from memprof.sources.files.table import read_table

# torch prints two decimals of KB/MB/GB: half a unit of the last digit at most.
GB = 1024**3


def rounding(nbytes: int) -> float:
    size = abs(nbytes)
    unit = 1 if size < 1024 else 1024 if size < 1024**2 else 1024**2 if size < GB else GB
    return 0.005 * unit + 1


def assert_table_matches(run) -> int:
    table = read_table(run.torch_table)
    ops = run.ops.set_index("name")
    compared = 0
    for row in table.to_dict("records"):
        name = normalize_name(row["name"])
        # The call marker is memprof's own range; [memory] differs by what the marker absorbs;
        # a name cut by torch's 55-character column cannot be matched exactly.
        if row["name"] == CALL_MARKER or name == "[memory]" or row["name_truncated"]:
            continue
        if name in BOOKKEEPING_RANGES:
            continue
        op = ops.loc[COMPILED_REGION if name in WRAPPER_RANGES else name]
        assert row["calls"] == op.calls, name
        compared += 1
        if name in run.fused_kernels:
            continue  # its buffers are its own here, the wrapper's in torch's table
        assert abs(row["cpu_mem_bytes"] - op.total_bytes) <= rounding(op.total_bytes), name
        if name not in WRAPPER_RANGES:
            assert abs(row["self_cpu_mem_bytes"] - op.self_bytes) <= rounding(op.self_bytes), name
    return compared


@pytest.mark.slow
@pytest.mark.parametrize("label", ["eager", "compile"])
def test_saved_torch_table_agrees_with_memprof(similarity_report, label):
    compared = assert_table_matches(similarity_report.runs[label])
    # compile: two wrapper ranges (Torch-Compiled Region, inductor_wrapper_call) and the fused
    # kernel; the third, ``## Call CompiledFxGraph <cache key> ##``, names the graph's key in
    # Inductor's cache (which compiled runs use) and is cut by torch's 55-character column.
    assert compared >= (10 if label == "eager" else 3)


def test_run_table_round_trip_through_the_cli(make_module, tmp_path):
    module = make_module(
        """
        import torch

        def work():
            a = torch.ones(1000, 1000)
            b = (a * 2).sum(dim=0)
            return b.relu()
        """
    )
    table = tmp_path / "t.txt"
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        app, ["run", f"{module}:work", "-q", "--device", "cpu", "--table", str(table), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    from memprof.pipeline import load_report

    run = replace(load_report(out).runs["eager"], torch_table=table.read_text())
    assert assert_table_matches(run) >= 4
    parsed = CliRunner().invoke(app, ["parse", str(table), "--csv", str(tmp_path / "t.csv")])
    assert parsed.exit_code == 0, parsed.output
    assert "aten::ones" in (tmp_path / "t.csv").read_text()
