"""Workloads for distributed runs, each rank's peak known exactly: rank r allocates (r + 1) MiB.

None of them starts a process group, so the ranks' reports travel through files. ``RANK`` is
the variable every launcher sets."""

import os
import time
from pathlib import Path

import torch

MIB = 2**20


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def alloc() -> int:
    """Rank r: one (r + 1) MiB tensor."""
    return torch.empty((rank() + 1) * MIB, dtype=torch.uint8).numel()


def raises_on_rank_1() -> int:
    """1 MiB, then rank 1 raises."""
    x = torch.empty(MIB, dtype=torch.uint8)
    if rank() == 1:
        raise RuntimeError("boom on rank 1")
    return x.numel()


def hangs_on_rank_1() -> int:
    """1 MiB, then rank 1 sleeps for an hour."""
    x = torch.empty(MIB, dtype=torch.uint8)
    if rank() == 1:
        time.sleep(3600)
    return x.numel()


def sleeps() -> None:
    """Every rank says it started (``started<rank>`` holding its pid, in the working directory),
    then sleeps for an hour."""
    Path(f"started{rank()}").write_text(str(os.getpid()))
    time.sleep(3600)
