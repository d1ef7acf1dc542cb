"""Let a process group's worker threads finish before the profiler stops.

A gloo collective is completed in two steps on its worker thread: its future is marked done
(which wakes the caller: DDP's backward, ``work.wait()``), and then the work's profiler range
is closed (``RecordFunction::end``, run with the caller's profiler state). When the profiled
call returns right after its last collective and the profiler stops at once, the second step
can still be pending on a worker thread that the scheduler has not run yet; torch's profiler
then frees that thread's record buffers while the thread is about to write its closing record
into them, and the process dies later with a corrupted heap (glibc: "malloc(): unsorted double
linked list corrupted"). Measured here on a two-rank DDP step on two busy cores: 2 of 130
fresh jobs died so before this wait, 0 of 100 after (``scripts/ddp_jobs.py jobs``).

So before a profile of a distributed rank ends, memprof waits until no other thread of the
process is running or ready to run (their states in ``/proc/self/task``), for at most
:data:`SETTLE_TIMEOUT` seconds. A worker thread between the two steps is ready to run, so the
wait covers it; threads that sleep (a process group's idle workers and its I/O loop, torch's
own) do not delay it. Without Linux's ``/proc``, or without an initialised process group, it
returns at once.
"""

from __future__ import annotations

import os
import sys
import threading
import time

# The longest wait: a busy thread of the user's that never sleeps costs this much per profile.
SETTLE_TIMEOUT = 0.5
# Consecutive checks that find every other thread asleep before the wait ends.
_QUIET_CHECKS = 2
_POLL = 0.001


def settle_other_threads(timeout: float = SETTLE_TIMEOUT) -> bool:
    """Wait until the process's other threads are all asleep, when a ``torch.distributed``
    process group is initialised (else return at once). True when they settled, False when
    ``timeout`` passed or their states cannot be read."""
    if not _process_group_initialised():
        return True
    return wait_until_quiet(timeout)


def wait_until_quiet(timeout: float = SETTLE_TIMEOUT, task_dir: str = "/proc/self/task") -> bool:
    """Wait until no thread but the caller is running or ready to run (state ``R``), seen on
    :data:`_QUIET_CHECKS` consecutive checks; True then, False after ``timeout`` seconds or
    where ``task_dir`` cannot be read."""
    me = threading.get_native_id()
    deadline = time.monotonic() + timeout
    quiet = 0
    while True:
        busy = _busy_threads(task_dir, me)
        if busy is None:
            return False
        quiet = 0 if busy else quiet + 1
        if quiet >= _QUIET_CHECKS:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL)


def _busy_threads(task_dir: str, me: int) -> int | None:
    """How many threads other than ``me`` are running or runnable; None when unreadable."""
    try:
        tasks = os.listdir(task_dir)
    except OSError:
        return None
    busy = 0
    for task in tasks:
        if task == str(me):
            continue
        try:
            with open(os.path.join(task_dir, task, "stat"), "rb") as stat:
                fields = stat.read()
        except OSError:  # the thread ended meanwhile
            continue
        # "tid (comm) S ...": the name may hold spaces and parentheses; the state follows the last ")".
        state = fields.rfind(b")") + 2
        busy += fields[state : state + 1] == b"R"
    return busy


def _process_group_initialised() -> bool:
    # Only where torch.distributed is already imported: the profiled code started a group.
    dist = sys.modules.get("torch.distributed")
    try:
        return bool(dist is not None and dist.is_available() and dist.is_initialized())
    except Exception:  # a torch build without distributed support
        return False
