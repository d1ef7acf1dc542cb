"""Before a distributed rank's profile ends, memprof waits for the process's other threads to
fall asleep (a gloo worker closes its profiler range after waking the caller)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from memprof.sources.live import settle
from memprof.sources.live.settle import wait_until_quiet

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")


def _task(root: Path, tid: int, comm: str, state: str) -> None:
    (root / str(tid)).mkdir()
    (root / str(tid) / "stat").write_text(f"{tid} ({comm}) {state} 1 2 3 4\n")


def test_threads_that_sleep_let_the_wait_end_at_once(tmp_path: Path) -> None:
    _task(tmp_path, 101, "gloo worker", "S")
    _task(tmp_path, 102, "python", "D")
    start = time.monotonic()
    assert wait_until_quiet(timeout=5.0, task_dir=str(tmp_path))
    assert time.monotonic() - start < 1.0


def test_a_thread_ready_to_run_holds_the_wait_until_the_timeout(tmp_path: Path) -> None:
    _task(tmp_path, 101, "gloo worker", "S")
    # A name with a space, parentheses and " S " in it: the state is read after the last ")".
    _task(tmp_path, 102, "odd) S (name", "R")
    start = time.monotonic()
    assert not wait_until_quiet(timeout=0.05, task_dir=str(tmp_path))
    assert time.monotonic() - start >= 0.05


def test_the_callers_own_thread_does_not_count(tmp_path: Path) -> None:
    _task(tmp_path, threading.get_native_id(), "python", "R")
    assert wait_until_quiet(timeout=5.0, task_dir=str(tmp_path))


def test_unreadable_thread_states_end_the_wait_unsettled(tmp_path: Path) -> None:
    assert not wait_until_quiet(timeout=5.0, task_dir=str(tmp_path / "absent"))


@linux_only
def test_a_busy_thread_of_this_process_is_seen_and_a_sleeping_one_is_not() -> None:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    spinner = threading.Thread(target=spin)
    sleeper = threading.Thread(target=stop.wait)
    spinner.start()
    sleeper.start()
    try:
        # The spinner is running or waiting for the GIL held by this thread: state R either way
        # while this thread sleeps in the wait and releases it.
        assert not wait_until_quiet(timeout=0.1)
    finally:
        stop.set()
        spinner.join()
        sleeper.join()
    assert wait_until_quiet(timeout=5.0)


def test_the_wait_happens_only_while_a_process_group_is_initialised(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.distributed as dist

    waited: list[float] = []

    def wait(timeout: float) -> bool:
        waited.append(timeout)
        return True

    monkeypatch.setattr(settle, "wait_until_quiet", wait)
    assert not dist.is_initialized()
    assert settle.settle_other_threads()
    assert waited == []
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert settle.settle_other_threads()
    finally:
        dist.destroy_process_group()
    assert waited == [settle.SETTLE_TIMEOUT] == [0.5]  # the most docs/guides/distributed.md says it waits
