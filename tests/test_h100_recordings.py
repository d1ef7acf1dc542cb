"""memprof analyze of recordings made on a real H100 by scripts/cuda_check.py, against torch's
own counters taken over the same call (tests/data/gpu/memprof_h100.truth.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpu_data import BUNDLED
from typer.testing import CliRunner

from memprof.frontends.cli import app
from memprof.sources.files.trace import read_trace

TRUTH = json.loads((BUNDLED / "memprof_h100.truth.json").read_text())


def _analyzed(tmp_path: Path, *names: str) -> dict:
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        app, ["analyze", *(str(BUNDLED / n) for n in names), "-q", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())["runs"]


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_a_trace_recorded_on_an_h100_gives_torch_s_own_counters(tmp_path: Path, name: str) -> None:
    counters = TRUTH[name]["trace"]
    run = _analyzed(tmp_path, f"{name}.json.gz")["cuda:0"]
    assert run["peak_bytes"] == counters["peak_above_start_bytes"]
    assert run["live_at_start_bytes"] == counters["memory_allocated_start_bytes"]
    assert run["footprint_bytes"] == counters["max_memory_allocated_bytes"]
    assert run["reserved_peak_bytes"] == counters["max_memory_reserved_bytes"]
    assert run["device_name"] == TRUTH[name]["device"]
    assert run["device_total_bytes"] == TRUTH[name]["device_total_bytes"]
    # The call's memprof.call range is in the trace twice, on the host and as the span of its
    # kernels on the GPU (gpu_user_annotation): one call, on the host.
    (device,) = [d for d in read_trace(BUNDLED / f"{name}.json.gz").devices if d.label == "cuda:0"]
    ((start, end),) = device.raw.calls
    assert (
        start <= device.raw.op_start.min() and device.raw.op_end.max() <= end
    )  # the host span holds its ops


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_a_snapshot_recorded_on_an_h100_gives_torch_s_own_counters(tmp_path: Path, name: str) -> None:
    counters = TRUTH[name]["snapshot"]
    (run,) = _analyzed(tmp_path, f"{name}.snapshot.pickle").values()
    assert run["footprint_bytes"] == counters["max_memory_allocated_bytes"]
    assert run["live_at_start_bytes"] == counters["memory_allocated_start_bytes"]
    assert run["reserved_peak_bytes"] == counters["max_memory_reserved_bytes"]
    # A snapshot's peak is in requested bytes, the counters' in the allocator's blocks.
    assert run["peak_bytes"] <= counters["peak_above_start_bytes"]
    assert counters["peak_above_start_bytes"] - run["peak_bytes"] < 0.002 * counters["peak_above_start_bytes"]
