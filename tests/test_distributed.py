"""``memprof run`` on every rank of a torch.distributed job: real jobs of two ranks started by
``python -m torch.distributed.run`` (torchrun) or by ``memprof run --nproc-per-node 2``, and
one rank's side of the job run in-process with the launcher's variables set by hand.

Each job starts three Python processes that import torch: 10-25 s on two cores, depending on
what else runs there. The DDP job, the check of the whole feature, runs in the quick suite; the
other jobs are marked slow (CI runs them)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import MIB
from typer.testing import CliRunner

from memprof.frontends.cli import app
from memprof.library.jobs import for_rank
from memprof.model import Report, RunResult
from memprof.pipeline import build_report

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = Path(__file__).parent / "data" / "ranks" / "workload.py"

# The DDP example's peak on a rank with `rows` rows, during aten::threshold_backward: the ReLU
# output kept for backward, the gradient flowing into it and threshold_backward's result (rows x
# 1024 float32 each) and the loss gradient (rows x 256), next to the second layer's weight and
# bias gradients (256 x 1024 and 256 float32) and the 4-byte loss.
HIDDEN, WIDTH, BATCH = 1024, 256, 256


def ddp_peak(rank: int) -> int:
    rows = (rank + 1) * BATCH
    return rows * (3 * HIDDEN + WIDTH) * 4 + WIDTH * HIDDEN * 4 + WIDTH * 4 + 4


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env["OMP_NUM_THREADS"] = "1"
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    return env


def torchrun(cwd: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``python -m torch.distributed.run --standalone --nproc-per-node 2 -m memprof run ARGS``."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    return _job([*command, "-m", "memprof", "run", *args], cwd, timeout)


def launched(cwd: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``python -m memprof run ARGS --nproc-per-node 2``."""
    return _job([sys.executable, "-m", "memprof", "run", *args, "--nproc-per-node", "2"], cwd, timeout)


def _job(command: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """The job's result; run once more, with a warning, when a rank died of a heap corruption.

    torch's profiler can be stopped while a gloo worker still writes a record into it (the
    worker wakes the caller before it closes its profiler range). memprof waits for such
    workers before each profile ends (memprof.sources.live.settle), which covers a worker that is
    ready to run; one preempted in a way that wait cannot see would still corrupt the heap.
    That is torch's race, not what these tests check, so it costs one more run, not a red CI."""
    done = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    # memprof's launcher says "rank 0 was killed by signal 6"; torchrun, "exitcode: -6".
    if done.returncode != 0 and re.search(r"killed by signal 6\b|exitcode\s*:\s*-6\b", done.stderr):
        warnings.warn(f"a rank was aborted (torch's profiler race), run again: {done.stderr}", stacklevel=2)
        done = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    return done


# Slow tier (two processes, ~11 s): the quick tier hands reports between ranks in one process.
@pytest.mark.slow
def test_a_ddp_step_on_two_ranks_gives_one_report_and_the_budget_names_rank_1(tmp_path: Path) -> None:
    # Rank 1 trains on twice rank 0's batch; the budget lies between their peaks.
    budget = (ddp_peak(0) + ddp_peak(1)) // 2
    assert budget == 6_161_412
    done = launched(
        tmp_path,
        "memprof.examples.ddp:step",
        "--warmup",
        "2",
        "--budget",
        str(budget),
        "--json",
        "r.json",
        "--top",
        "3",
    )
    assert done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert list(report["runs"]) == ["rank0", "rank1"]
    peaks = [report["runs"][f"rank{r}"]["peak_bytes"] for r in (0, 1)]
    assert peaks == [ddp_peak(0), ddp_peak(1)] == [4_457_476, 7_865_348]
    assert [report["runs"][f"rank{r}"]["rank"] for r in (0, 1)] == [0, 1]
    assert report["environment"]["backend"] == "gloo" and report["environment"]["world_size"] == "2"
    lines = done.stdout.splitlines()
    assert "imbalance: rank 1's peak 7.5 MiB is 1.76x rank 0's 4.3 MiB (highest over lowest peak)" in lines
    # The violation, the largest entries at rank 1's peak under it, then the gate's summary.
    # 1,703,936 B over 6,161,412 B:
    violation = lines.index("rank1 peak 7.5 MiB exceeds budget 5.9 MiB by 27.7%")
    assert lines[-1] == "memprof gate: FAILED, 1 violation (budget 1)"
    assert violation < len(lines) - 2 and lines[violation + 1].startswith("  ")
    # The other rank printed one status line, and wrote nothing.
    assert "memprof: rank 1 (cpu): rank1 peak 7.5 MiB during aten::threshold_backward" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.slow
def test_ddps_rebuilt_buckets_are_left_to_the_warm_up_and_counted_live_at_the_start(tmp_path: Path) -> None:
    # Alone (a group of one), the example is rank 0. DDP rebuilds its gradient buckets during
    # its second training call: asked for one warm-up call, memprof makes two, so the measured
    # call starts and ends with nothing new; the buckets (held in C++ by DDP's reducer, the
    # parameters' size) are live at the start, counted from DDP's own figures.
    params = (WIDTH * HIDDEN + HIDDEN) * 4 + (HIDDEN * WIDTH + WIDTH) * 4
    assert params == 2_102_272
    inputs = BATCH * WIDTH * 4 * 2  # x and its target
    for warmup in (1, 2):
        for _ in range(2):
            run = _ddp_alone(tmp_path, warmup)
            found = (run["peak_bytes"], run["net_bytes"], run["live_at_start_bytes"])
            # Once (1 CI run, 2 busy cores) the call measured 8 B more and kept them; not seen
            # again in 14 runs here, at rest and under load, and its source is not known:
            # measured once more, and said.
            if found == (ddp_peak(0), 0, params + params + inputs):
                break
            warnings.warn(f"--warmup {warmup}: {found}, measured again", stacklevel=1)
        assert found == (4_457_476, 0, 4_728_832)
        extra = [note for note in run["notes"] if note.startswith("one more warm-up call than asked")]
        assert len(extra) == (1 if warmup == 1 else 0)
        buckets = [e for e in run["at_peak"]["entries"] if e.get("role") == "ddp_gradient_bucket"]
        assert [(e["bytes"], e["category"], e["before_call"]) for e in buckets] == [(params, "other", True)]


def _ddp_alone(tmp_path: Path, warmup: int) -> dict[str, Any]:
    out = tmp_path / f"w{warmup}.json"
    done = subprocess.run(
        [sys.executable, "-m", "memprof", "run", "memprof.examples.ddp:step", "--device", "cpu"]
        + ["--warmup", str(warmup), "-q", "--json", str(out)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    run: dict[str, Any] = json.loads(out.read_text())["runs"]["eager"]
    return run


@pytest.mark.slow
def test_torchrun_without_a_process_group_gathers_through_files_and_fills_rank_paths(tmp_path: Path) -> None:
    done = torchrun(tmp_path, f"{WORKLOAD}:alloc", "--json", "own{rank}.json", "--markdown", "job.md", "-q")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # rank, run, peak, footprint (explained runs know it), wall/call, peak during.
    assert lines[2].split() == ["rank", "run", "peak", "footprint", "wall/call", "peak", "during"]
    assert lines[4].split() == ["0", "rank0", "1.0", "MiB", *lines[4].split()[4:8], "aten::empty"]
    assert lines[5].split() == ["1", "rank1", "2.0", "MiB", *lines[5].split()[4:8], "aten::empty"]
    assert "imbalance: rank 1's peak 2.0 MiB is 2.00x rank 0's 1.0 MiB (highest over lowest peak)" in lines
    # Each rank wrote its own report; rank 0 the job's.
    for rank in (0, 1):
        own = json.loads((tmp_path / f"own{rank}.json").read_text())
        assert {label: run["peak_bytes"] for label, run in own["runs"].items()} == {
            f"rank{rank}": (rank + 1) * MIB
        }
    job = (tmp_path / "job.md").read_text().replace("\u00a0", " ")  # sizes are kept whole in Markdown
    assert "| 0 | rank0 | 1.0 MiB |" in job and "| 1 | rank1 | 2.0 MiB |" in job
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.md", "own0.json", "own1.json"]


@pytest.mark.slow
def test_a_rank_that_raises_is_a_failed_run_and_the_job_exits_3(tmp_path: Path) -> None:
    done = launched(tmp_path, f"{WORKLOAD}:raises_on_rank_1", "--json", "r.json", "-q")
    assert done.returncode == 3, done.stderr
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert (runs["rank0"]["status"], runs["rank0"]["peak_bytes"]) == ("ok", MIB)
    assert runs["rank1"]["status"] == "failed"
    assert runs["rank1"]["error"].startswith("raises_on_rank_1 raised RuntimeError: boom on rank 1")
    assert 'raise RuntimeError("boom on rank 1")' in done.stderr  # rank 1's own traceback
    assert "memprof: error: 1 of 2 runs failed: rank1: raises_on_rank_1 raised RuntimeError" in done.stderr


@pytest.mark.slow
def test_a_rank_that_hangs_is_named_after_the_timeout(tmp_path: Path) -> None:
    start = time.monotonic()
    done = launched(tmp_path, f"{WORKLOAD}:hangs_on_rank_1", "--rank-timeout", "2", "--json", "r.json", "-q")
    assert done.returncode == 3, done.stderr
    assert time.monotonic() - start < 120  # not the hour rank 1 sleeps
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert runs["rank0"]["peak_bytes"] == MIB
    assert runs["rank1"]["error"] == (
        "rank 1 did not report within 2 s (--rank-timeout): it is still running (hung?) or its process died"
    )
    assert "memprof: error: 1 of 2 runs failed: rank1: rank 1 did not report within 2 s" in done.stderr


@pytest.mark.slow
def test_ctrl_c_stops_every_rank(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "memprof", "run", f"{WORKLOAD}:sleeps", "--nproc-per-node", "2", "-q"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        started = [tmp_path / f"started{rank}" for rank in (0, 1)]
        deadline = time.monotonic() + 180
        while not all(path.exists() and path.read_text() for path in started):
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.2)
        pids = [int(path.read_text()) for path in started]
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, stderr
    assert "memprof: interrupted" in stderr
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# --------------------------------------------------------------- one rank, in this process


def _rank_env(tmp_path: Path, rank: int, world: int = 2) -> dict[str, str]:
    """What torchrun sets for ``rank``; torchelastic's folder of this attempt is under tmp_path."""
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank),
        "TORCHELASTIC_RUN_ID": "test",
        "TORCHELASTIC_ERROR_FILE": str(tmp_path / "run" / "attempt_0" / str(rank) / "error.json"),
    }


def _rank_1_report(peak: int) -> Report:
    run = RunResult(label="eager", peak_bytes=peak, allocated_bytes=peak, wall_ms=5.0, peak_op="aten::empty")
    return for_rank(build_report(target="m:f", device="cpu", runs={"eager": run}), 1)


def _hand_in_rank_1(tmp_path: Path, peak: int) -> None:
    folder = tmp_path / "run" / "attempt_0" / "memprof"
    folder.mkdir(parents=True)
    (folder / "rank1.json").write_text(_rank_1_report(peak).to_json())


def test_rank_0_merges_what_rank_1_handed_in_and_gates_each_rank(tmp_path: Path) -> None:
    _hand_in_rank_1(tmp_path, 3 * MIB)
    args = ["run", f"{WORKLOAD}:alloc", "-q", "--budget", "rank1=2MB", "--json", str(tmp_path / "r.json")]
    result = CliRunner().invoke(app, args, env=_rank_env(tmp_path, 0))
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert "imbalance: rank 1's peak 3.0 MiB is 3.00x rank 0's 1.0 MiB (highest over lowest peak)" in lines
    assert lines[-2:] == [
        "rank1 peak 3.0 MiB exceeds budget 2.0 MiB by 50.0%",
        "memprof gate: FAILED, 1 violation (budget 1)",
    ]
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert {label: (run["rank"], run["peak_bytes"]) for label, run in runs.items()} == {
        "rank0": (0, MIB),
        "rank1": (1, 3 * MIB),
    }
    assert not (tmp_path / "run" / "attempt_0" / "memprof").exists()


def test_rank_k_picks_the_detailed_rank_and_must_be_a_rank_of_the_job(tmp_path: Path) -> None:
    _hand_in_rank_1(tmp_path, 3 * MIB)
    shown = CliRunner().invoke(
        app, ["run", f"{WORKLOAD}:alloc", "-q", "--rank", "0"], env=_rank_env(tmp_path, 0)
    )
    assert shown.exit_code == 0, shown.output
    assert "Details of rank 0 (as asked):" in shown.stdout.splitlines()
    wrong = CliRunner().invoke(app, ["run", f"{WORKLOAD}:alloc", "--rank", "2"], env=_rank_env(tmp_path, 0))
    assert wrong.exit_code == 2
    assert "memprof: error: --rank 2: the job's ranks are 0 to 1" in wrong.stderr


def test_rank_0_groups_its_modules_as_asked(tmp_path: Path, make_module) -> None:  # type: ignore[no-untyped-def]
    from test_module_groups import STACK_MODULE

    module = make_module(STACK_MODULE)
    _hand_in_rank_1(tmp_path, 3 * MIB)
    out = tmp_path / "r.json"
    args = ["run", f"{module}:step", "-q", "--group-modules", "class", "--json", str(out)]
    result = CliRunner().invoke(app, args, env=_rank_env(tmp_path, 0))
    assert result.exit_code == 0, result.output
    runs = json.loads(out.read_text())["runs"]
    # The Stack holds its six (64, 256) float32 outputs at the peak; rank 1 handed in no modules.
    stack = [g for g in runs["rank0"]["module_groups"] if g["group"] == "Stack"]
    assert [g["at_peak_bytes"] for g in stack] == [6 * 64 * 256 * 4]
    assert "module_groups" not in runs["rank1"]


def test_budgets_name_the_jobs_runs_before_anything_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["run", f"{WORKLOAD}:alloc", "--budget", "eager=1MB", "--compare-compile"],
        env=_rank_env(tmp_path, 0),
    )
    assert result.exit_code == 2
    assert "'rank0/eager', 'rank0/compile', 'rank1/eager', 'rank1/compile'" in result.stderr


def test_another_rank_hands_its_report_in_and_writes_nothing_else(tmp_path: Path) -> None:
    args = ["run", f"{WORKLOAD}:alloc", "--json", str(tmp_path / "job.json"), "--rank-timeout", "0.5"]
    result = CliRunner().invoke(app, args, env=_rank_env(tmp_path, 1))
    # No rank 0 takes it here: rank 1 gives up after the timeout, saying why.
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "memprof: rank 1 (cpu): rank1 peak 2.0 MiB during aten::empty; report handed to rank 0",
        "memprof: error: rank 0 did not take rank 1's report within 0.5 s (--rank-timeout); is rank 0 stuck?",
    ]
    handed = json.loads((tmp_path / "run" / "attempt_0" / "memprof" / "rank1.json").read_text())
    assert handed["runs"]["rank1"]["peak_bytes"] == 2 * MIB
    assert not (tmp_path / "job.json").exists()


def test_nproc_per_node_under_torchrun_and_rank_without_ranks_are_usage_errors(tmp_path: Path) -> None:
    nested = CliRunner().invoke(
        app, ["run", f"{WORKLOAD}:alloc", "--nproc-per-node", "2"], env=_rank_env(tmp_path, 0)
    )
    assert nested.exit_code == 2
    assert "already is rank 0 of 2" in nested.stderr
    plain = CliRunner().invoke(app, ["run", f"{WORKLOAD}:alloc", "--rank", "1"])
    assert plain.exit_code == 2
    assert "--rank picks a rank of a distributed run" in plain.stderr


def test_compare_on_every_rank_labels_each_target_by_rank(tmp_path: Path) -> None:
    # A job of one rank: nothing to wait for; the runs are named after the rank all the same.
    args = ["compare", f"{WORKLOAD}:alloc", f"{WORKLOAD}:raises_on_rank_1", "--labels", "a,b", "-q"]
    result = CliRunner().invoke(
        app, [*args, "--json", str(tmp_path / "r.json")], env=_rank_env(tmp_path, 0, world=1)
    )
    assert result.exit_code == 0, result.output
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert {label: (run["rank"], run["peak_bytes"]) for label, run in runs.items()} == {
        "rank0/a": (0, MIB),
        "rank0/b": (0, MIB),
    }
    assert "Top 5 ops by peak bytes, rank0/a vs rank0/b:" in result.stdout.splitlines()


_PYTHON_JOB = """
import json, os, sys
import memprof

report = memprof.profile_ranks(sys.argv[1] + ":alloc", device="cpu", explain=False)
if os.environ["RANK"] == "0":  # the job's report; the other ranks get their own
    print(json.dumps({row.label: row.peak_bytes for row in report.ranks.rows}))
"""


@pytest.mark.slow
def test_profile_ranks_gives_rank_0_the_jobs_report_from_python(tmp_path: Path) -> None:
    """The Python API the command line uses: under torchrun, every rank calls profile_ranks and
    rank 0 gets every rank's runs."""
    script = tmp_path / "job.py"
    script.write_text(_PYTHON_JOB)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    done = _job([*command, str(script), str(WORKLOAD)], tmp_path, 240)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"rank0": MIB, "rank1": 2 * MIB}


def test_profile_ranks_outside_a_job_says_how_to_start_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import memprof
    from memprof.core.errors import UsageError

    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UsageError, match="start it with torchrun"):
        memprof.profile_ranks(f"{WORKLOAD}:alloc")
