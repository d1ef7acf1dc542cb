"""``memprof.track``: a block of code profiled where it runs, in one pass that both measures and
explains it. Its numbers are checked against analytic sizes, and against untracked profiles of
the same code (the op tracker's own allocations and ranges are taken out of the records); every
explained report also reconciles (tests/reconcile.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from reconcile import assert_reconciled

import memprof
from memprof.analysis.untracked import untracked
from memprof.core.errors import UsageError
from memprof.core.records import DISPATCH_RANGE, RawProfile
from memprof.pipeline import load_report

MiB = 1024 * 1024


def floats(mib: int) -> torch.Tensor:
    return torch.ones(mib * MiB // 4)


def test_a_block_peaks_exactly_above_its_start() -> None:
    before = floats(10)  # live at the start, reachable from the caller's locals
    with memprof.track() as t:
        first = torch.ones(100 * MiB // 4)
        second = torch.ones(50 * MiB // 4)
        del first
        third = torch.ones(30 * MiB // 4)
        del before  # freed during the block: its free counts
    run = t.run
    assert run.peak_bytes == 150 * MiB == 157_286_400
    assert run.live_at_start_bytes == 10 * MiB
    assert run.footprint_bytes == 160 * MiB
    assert run.net_bytes == (50 + 30 - 10) * MiB
    assert run.at_peak is not None
    by_line = {entry.source_text: entry.bytes for entry in run.at_peak.entries}
    assert by_line == {
        "first = torch.ones(100 * MiB // 4)": 100 * MiB,
        "second = torch.ones(50 * MiB // 4)": 50 * MiB,
        "": 10 * MiB,  # made before the block
    }
    assert run.at_peak.by_category["temporary"] == 150 * MiB
    assert run.at_peak.by_category["input"] == 10 * MiB
    assert t.report.target.startswith("block at test_track.py:")
    assert list(t.report.runs) == ["block"]
    assert (run.source, run.mode, t.report.kind) == ("block", "eager", memprof.ReportKind.RUN)
    assert_reconciled(t.report)
    del second, third


class TinyNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(256, 512)
        self.fc2 = torch.nn.Linear(512, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Python numbers for Tensor arguments: each is a "rewrapped number" under the tracker.
        return self.fc2(torch.relu(self.fc1(x * 0.5) + 1.0))


def make_step() -> tuple[torch.nn.Module, torch.optim.Optimizer, object]:
    torch.manual_seed(0)
    model = TinyNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256)

    def step() -> None:
        loss = model(x).pow(2).mean() * 2.0
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return model, optimizer, step


def op_rows(run: memprof.RunResult) -> list[tuple[str, int, int, int]]:
    return sorted((op.name, op.calls, op.allocated_bytes, op.self_bytes) for op in run.op_stats)


def test_one_pass_gives_the_numbers_of_an_untracked_pass() -> None:
    model, optimizer, step = make_step()
    step()  # the optimizer's state is made: every later step allocates the same
    with memprof.track(model=model, optimizer=optimizer) as explained:
        step()
    with memprof.track(model=model, optimizer=optimizer, explain=False) as numbers_only:
        step()
    untracked_run = memprof.profile(step, device="cpu", warmup=0, explain=False, time_budget=0).base
    one_pass = explained.run
    for run in (numbers_only.run, untracked_run):
        assert one_pass.peak_bytes == run.peak_bytes
        assert one_pass.allocated_bytes == run.allocated_bytes
        assert one_pass.net_bytes == run.net_bytes == 0
        assert op_rows(one_pass) == op_rows(run)  # every op's calls and bytes
    assert DISPATCH_RANGE not in {op.name for op in one_pass.op_stats}
    assert numbers_only.run.at_peak is None
    assert not any("attribution pass" in note for note in one_pass.notes)
    assert_reconciled(explained.report)


def test_parameters_and_optimizer_state_are_recognised_from_named_roots() -> None:
    model, optimizer, step = make_step()
    step()
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    state_bytes = sum(
        value.untyped_storage().nbytes()
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    )
    assert state_bytes == 2 * parameter_bytes + 4 * len(list(model.parameters()))  # AdamW
    x = torch.randn(64, 256)
    # Forward and backward only: the optimizer is not stepped, so only the roots say it is there.
    holder = {"run": lambda: model(x).sum().backward()}  # no local of the block reaches the model

    def named() -> memprof.RunResult:
        with memprof.track(model=model, optimizer=optimizer) as t:
            holder["run"]()
        return t.run

    def unnamed() -> memprof.RunResult:
        with memprof.track() as t:
            holder["run"]()
        return t.run

    with_roots = named()
    model.zero_grad()
    without = unnamed()
    model.zero_grad()
    assert with_roots.at_peak is not None and without.at_peak is not None
    assert with_roots.at_peak.by_category["parameter"] == parameter_bytes
    assert with_roots.at_peak.by_category["optimizer_state"] == state_bytes
    assert with_roots.live_at_start_bytes == parameter_bytes + state_bytes
    assert without.at_peak.by_category["parameter"] == without.at_peak.by_category["optimizer_state"] == 0
    assert without.live_at_start_bytes == 0
    assert with_roots.peak_bytes == without.peak_bytes


def test_skip_profiles_a_later_entry_of_a_loop() -> None:
    model, optimizer, step = make_step()
    t = memprof.track(skip=1, model=model, optimizer=optimizer)
    for _ in range(3):
        with t:
            step()
    assert t.entries == 3
    # The second step's: the optimizer's state was made by the first, before the block.
    assert t.run.at_peak is not None
    state = [e for e in t.run.at_peak.entries if e.category == "optimizer_state"]
    assert state and all(e.before_call for e in state)
    model2, optimizer2, step2 = make_step()
    with memprof.track(model=model2, optimizer=optimizer2) as first:
        step2()
    # The first pass pays for making the state (two buffers the size of the parameters).
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert first.run.peak_bytes >= t.run.peak_bytes + 2 * parameter_bytes


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_a_decorated_function_is_profiled_at_the_chosen_call() -> None:
    tracked = memprof.track(skip=1, label="double")(double)
    x = floats(4)
    results = [tracked(x) for _ in range(3)]
    assert all(torch.equal(result, x * 2) for result in results)
    tracking = tracked.track  # type: ignore[attr-defined]
    assert tracking.entries == 3
    assert tracking.report.target == "test_track:double"
    run = tracking.run
    assert run.label == "double"
    assert run.inputs_bytes == run.live_at_start_bytes == 4 * MiB  # the argument x
    profiled = memprof.profile(double, x, device="cpu", explain=False, time_budget=0).base
    assert run.peak_bytes == profiled.peak_bytes >= 4 * MiB  # the result (and the number 2 wrapped)
    assert op_rows(run) == op_rows(profiled)


def test_the_report_is_written_as_json_html_and_markdown(tmp_path: Path) -> None:
    paths = {fmt: tmp_path / f"block.{fmt}" for fmt in ("json", "html", "markdown")}
    with memprof.track(**paths) as t:
        kept = floats(3)
    assert load_report(paths["json"]).base.peak_bytes == 3 * MiB
    assert json.loads(t.report.to_json())["runs"]["block"]["peak_bytes"] == 3 * MiB
    assert "memprof-report" in paths["html"].read_text(encoding="utf-8")
    assert "**block: peak 3.0\xa0MiB above the call's start" in paths["markdown"].read_text(encoding="utf-8")
    later = t.write(json=tmp_path / "again.json")
    assert later == [tmp_path / "again.json"] and load_report(later[0]).base.peak_bytes == 3 * MiB
    del kept


def test_bad_options_are_refused_before_the_block_runs(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^json '.*missing/r.json': folder '.*missing' does not exist"):
        memprof.track(json=tmp_path / "missing" / "r.json")
    with pytest.raises(UsageError, match=r"^skip must be 0 or more entries to let through, got -1$"):
        memprof.track(skip=-1)
    with pytest.raises(UsageError, match=r"^device 'tpu' is not a device"):
        memprof.track(device="tpu")
    t = memprof.track(skip=1)
    with pytest.raises(UsageError, match=r"^nothing was profiled yet: the block was entered 0 time\(s\)"):
        t.report  # noqa: B018


def test_blocks_do_not_nest() -> None:
    with memprof.track(label="outer") as outer:
        with pytest.raises(UsageError, match=r"^memprof is already profiling 'outer': blocks do not nest"):
            with memprof.track():
                pass
        inner = floats(1)
    assert outer.run.peak_bytes == MiB
    del inner


def test_a_block_that_raises_keeps_its_report_up_to_the_failure() -> None:
    t = memprof.track()
    with pytest.raises(ValueError, match="^boom$"), t:
        kept = floats(2)
        raise ValueError("boom")
    assert t.run.peak_bytes == 2 * MiB
    assert "the block raised ValueError: boom: the numbers cover it up to the failure" in t.run.notes
    del kept


def test_untracked_drops_the_dispatch_modes_ranges_and_the_outer_copy_of_each_op() -> None:
    ops = [
        (memprof_call := "memprof.call", 0, 100, 1),
        ("aten::mul", 10, 40, 1),  # as called: around the mode's range
        (DISPATCH_RANGE, 11, 39, 1),
        ("aten::mul", 12, 38, 1),  # as the mode calls it
        ("aten::empty", 13, 20, 1),
        (DISPATCH_RANGE, 50, 60, 1),  # a range with no op around it (record_function's)
        ("Optimizer.step#AdamW.step", 51, 59, 1),
    ]
    raw = RawProfile.from_lists(ops, [(14, 64), (30, -64)], calls=[(0, 100)])
    clean = untracked(raw, None)
    assert clean.op_name.tolist() == [memprof_call, "aten::mul", "aten::empty", "Optimizer.step#AdamW.step"]
    assert clean.op_start.tolist() == [0, 12, 13, 51]
    assert np.array_equal(clean.mem_bytes, raw.mem_bytes)
    assert untracked(clean, None) is clean  # nothing of the tracker's left
