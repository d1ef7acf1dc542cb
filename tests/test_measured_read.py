"""One walk of a CPU session's event tree (``memprof.sources.live.measured``) gives the measured
calls' raw profile exactly as the flat event list does (``raw_from_profiler``) and their
allocator records with addresses exactly as the tree reader does (``read_profile``). Where the
tree cannot prove that every op started and ended on one thread, in one piece (another thread,
TorchScript, RPC, an op still open when profiling stopped), the ops come from the flat list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.autograd.profiler import record_function

import memprof
from memprof.core.records import CALL_MARKER, RawProfile
from memprof.sources.live import measured
from memprof.sources.live.kineto import kineto_results, raw_from_profiler
from memprof.sources.live.measured import read_measured
from memprof.sources.live.profiling import memory_profile
from memprof.sources.live.tree import ProfileRead, backward_table, read_profile
from memprof.sources.tracking import tracker


def profiled(fn: Callable[..., Any], *args: Any, calls: int = 1) -> Any:
    fn(*args)  # warm-up: the calls measured allocate what they allocate each time
    with memory_profile("cpu") as prof:
        for _ in range(calls):
            with record_function(CALL_MARKER):
                fn(*args)
    return prof


def read_from_tree_alone(prof: Any) -> bool:
    walk = measured._Walk()
    walk.run(kineto_results(prof).experimental_event_tree())
    return walk.raw() is not None


def assert_same(got: tuple[RawProfile, ProfileRead], prof: Any) -> None:
    raw, read = got
    want, want_read = raw_from_profiler(prof), read_profile(prof, "cpu")
    assert raw.op_code_names == want.op_code_names
    assert list(raw.op_name) == list(want.op_name)
    for column in ("op_code", "op_start", "op_end", "op_thread", "op_async", "mem_time", "mem_bytes"):
        assert np.array_equal(getattr(raw, column), getattr(want, column)), column
    assert raw.calls == want.calls == read.calls == want_read.calls
    assert raw.other_thread_bytes == want.other_thread_bytes
    records, want_records = read.allocations, want_read.allocations
    for column in ("time", "bytes", "ptr"):
        assert np.array_equal(getattr(records, column), getattr(want_records, column)), column


def training_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor) -> None:
    optimizer.zero_grad(set_to_none=True)  # frees gradients made before the call
    with record_function("my forward"):
        loss = model(x).square().mean()
    loss.backward()
    optimizer.step()


def test_a_training_step_is_read_in_one_walk_as_both_readers_read_it() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    optimizer = torch.optim.AdamW(model.parameters())
    prof = profiled(training_step, model, optimizer, torch.randn(16, 32), calls=2)
    assert read_from_tree_alone(prof)
    got = read_measured(prof)
    assert len(got[0].op_start) > 100 and len(got[0].mem_time) > 50 and len(got[0].calls) == 2
    assert_same(got, prof)


@torch.jit.script
def _matmuls(x: torch.Tensor) -> torch.Tensor:
    for _ in range(4):
        x = x @ x
    return x


@torch.jit.script
def _forked(x: torch.Tensor) -> torch.Tensor:
    futures = [torch.jit.fork(_matmuls, x) for _ in range(3)]
    out = torch.zeros_like(x)
    for future in futures:
        out = out + torch.jit.wait(future)
    return out


@torch.jit.script
def _scripted(x: torch.Tensor) -> torch.Tensor:
    return (x @ x).relu()


def _rpc_named(x: torch.Tensor) -> torch.Tensor:
    with record_function("rpc_async#f(worker0 -> worker1)"):  # the name torch's RPC gives a call
        return x @ x


def test_torchscript_forks_are_read_from_the_flat_list() -> None:
    """The forked functions run on worker threads, and the function that waits on them may
    resume on one (only the flat list says so when it does)."""
    prof = profiled(_forked, torch.randn(64, 64) / 8)
    assert not read_from_tree_alone(prof)
    assert_same(read_measured(prof), prof)


@pytest.mark.parametrize("fn", [_scripted, _rpc_named], ids=["a TorchScript function", "an RPC range"])
def test_ranges_that_may_end_elsewhere_are_read_from_the_flat_list(fn: Callable[..., Any]) -> None:
    prof = profiled(fn, torch.randn(32, 32))
    assert not read_from_tree_alone(prof)
    assert_same(read_measured(prof), prof)


def test_an_op_still_open_when_profiling_stopped_is_read_as_the_flat_list_reads_it() -> None:
    torch.ones(4).add(1)
    left_open = record_function("left open")
    with memory_profile("cpu") as prof:
        with record_function(CALL_MARKER):
            torch.ones(64).add(1)
        left_open.__enter__()
        torch.ones(64).add(1)
    left_open.__exit__(None, None, None)
    # the tree gives it the profile's end and does not say it ended on no thread (0), as the
    # flat list does: the analysis takes it for an asynchronous range
    assert not read_from_tree_alone(prof)
    assert_same(read_measured(prof), prof)


def _named_like_records(x: torch.Tensor) -> torch.Tensor:
    with record_function("[memory]"):
        return x * 2


def test_a_range_named_like_the_allocator_records_leaves_the_records_to_the_tree_reader() -> None:
    prof = profiled(_named_like_records, torch.ones(256))
    raw, read = read_measured(prof)
    assert read is None  # the tree reader of before is given the profile (and declines it)
    want = raw_from_profiler(prof)
    assert list(raw.op_name) == list(want.op_name) and np.array_equal(raw.mem_bytes, want.mem_bytes)
    run = memprof.profile(_named_like_records, torch.ones(256), device="cpu", time_budget=0, explain=False)
    assert run.runs["eager"].peak_bytes >= 256 * 4  # the numbers, without an explanation


def step(size: int) -> torch.Tensor:
    a = torch.ones(size, 256)
    b = a * 2
    return b.sum()


def test_an_eager_cpu_run_reads_its_profile_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the flat list nor a second walk of the tree: the measured calls' numbers and
    their explanation come from one walk, and they are those of the two reads."""
    with monkeypatch.context() as patched:  # as before: the flat list, then the tree
        patched.setattr(measured, "read_measured", lambda prof, **_: (raw_from_profiler(prof), None))
        two_reads = memprof.profile(step, 1024, device="cpu", time_budget=0, explain=False).runs["eager"]

    def unused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the profile was read again")

    walks: list[Any] = []
    monkeypatch.setattr(measured, "raw_from_profiler", unused)
    monkeypatch.setattr(tracker, "read_profile", unused)
    monkeypatch.setattr(
        measured, "read_measured", lambda prof, **kw: walks.append(prof) or read_measured(prof, **kw)
    )
    once = memprof.profile(step, 1024, device="cpu", time_budget=0, explain=False).runs["eager"]
    assert len(walks) == 1
    assert once.peak_bytes == two_reads.peak_bytes >= 2 * 1024 * 256 * 4
    assert (once.footprint_bytes, once.net_bytes) == (two_reads.footprint_bytes, two_reads.net_bytes)


@st.composite
def calls_and_spans(draw: st.DrawFn) -> tuple[list[tuple[int, int]], np.ndarray]:
    bounds = sorted(draw(st.lists(st.integers(0, 200), max_size=8, unique=True)))
    calls = list(zip(bounds[::2], bounds[1::2], strict=False))  # disjoint, in order
    spans = draw(st.lists(st.tuples(st.integers(-5, 210), st.integers(-5, 210)), max_size=12))
    return calls, np.array(spans, dtype=np.int64).reshape(-1, 2).T


@settings(max_examples=300, deadline=None)
@given(calls_and_spans())
def test_an_op_is_inside_the_calls_when_one_call_holds_its_start_and_its_end(
    case: tuple[list[tuple[int, int]], np.ndarray],
) -> None:
    calls, spans = case
    want = all(
        any(start <= s <= e <= end for start, end in calls) for s, e in zip(spans[0], spans[1], strict=True)
    )
    assert measured._inside_calls(spans, calls) == want


def test_backward_ops_are_read_in_the_same_walk() -> None:
    """Carrying autograd's context, the one walk also gives the ops autograd ran, as the tree
    reader reads them for the op tracker (which does not see backward itself)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    optimizer = torch.optim.AdamW(model.parameters())
    prof = profiled(training_step, model, optimizer, torch.randn(16, 32), calls=2)
    got = read_measured(prof, backward_ops=True)
    assert_same(got, prof)
    read = got[1]
    assert read is not None and read.with_backward
    want = read_profile(prof, "cpu", backward_ops=True)
    assert len(read.backward) == len(want.backward) > 10
    table, nodes = backward_table(read.backward)
    want_table, want_nodes = backward_table(want.backward)
    assert table.names == want_table.names and np.array_equal(nodes, want_nodes)
    for column in ("t0", "t1", "name"):
        assert np.array_equal(getattr(table, column), getattr(want_table, column)), column
    assert not read_measured(prof)[1].with_backward  # type: ignore[union-attr]


def without_timings(report: memprof.Report) -> Any:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: strip(item) for key, item in value.items() if not _timing(key)}
        if isinstance(value, list):
            return [strip(item) for item in value]
        return value

    return strip(report.to_dict())


def _timing(key: str) -> bool:
    return key.endswith(("_us", "_ms", "_seconds")) or key in {"wall_ms_all", "t_ns", "created"}


def test_an_explained_block_on_the_cpu_reads_its_profile_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``memprof.track`` explains its one pass from one walk of the event tree (neither the flat
    list nor the tracker's own walk), with the report of the two reads."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(512, 32)  # a peak in backward, with what backward's ops made live at it
    training_step(model, optimizer, x)

    def tracked() -> memprof.Report:
        with memprof.track(model=model, optimizer=optimizer) as t:
            training_step(model, optimizer, x)
        return t.report

    # The gradients each block frees were made in the block before it, under the profiler (whose
    # reporter records the frees only of blocks it saw allocated): so both blocks compared are.
    tracked()
    with monkeypatch.context() as patched:  # as before: the flat list, then the tracker's walk
        patched.setattr(measured, "read_measured", lambda prof, **_: (raw_from_profiler(prof), None))
        two_reads = tracked()

    def unused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the profile was read again")

    monkeypatch.setattr(measured, "raw_from_profiler", unused)  # the tree proves every op synchronous
    monkeypatch.setattr(tracker, "read_profile", unused)
    once = tracked()
    run = once.runs["block"] if "block" in once.runs else next(iter(once.runs.values()))
    assert run.at_peak is not None
    assert any(entry.phase == "backward" and entry.op for entry in run.at_peak.entries)
    assert without_timings(once) == without_timings(two_reads)
