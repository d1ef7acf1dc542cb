"""The CUDA caching allocator's own history of one profiled call: the addresses of the frees
that torch's event tree leaves out.

memprof reads allocation addresses from the profile's event tree. On CUDA, while a
``TorchDispatchMode`` tracks ops (memprof's explaining call), that tree lacks free records that
the profile's flat event list holds (seen with torch 2.11 on an H100: all 16 frees of a
no_grad forward, 103 of the GPT step's 187; the tree of a call without the mode is complete;
``scripts/cuda_check.py tree``).
The flat list has each record's time and size but no address, and without the address a free
cannot end the right allocation. The allocator's history (``_record_memory_history``, no stack
context) holds every ``alloc`` and ``free_requested`` in the order the allocator made them, with
addresses: the profile's records of the device are that same sequence, so each takes the
address at its position. The alignment is checked, never guessed: the signs must agree record
for record, every allocation's address and time must be the ones the event tree gives it (up to
one fixed distance between the two lists' clocks), and each size the profiler reports (the
block's) must hold the size the history gives (the request's).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from memprof.core.records import Allocations

# How many entries past the profile's records the history may hold at its end (the allocator's
# work between the profile's stop and the history's read: none seen), and the most it keeps.
_TRAILING = 256
_MAX_ENTRIES = 1 << 24
# A block is the request rounded up (512 B; 2 MiB steps for large requests), or a whole cached
# block when what would be left is too small to split: never more than this above the request.
_MAX_ROUNDING = 20 << 20


class History:
    """The device's ``alloc`` and ``free_requested`` entries recorded while entered, as
    (sign, address, requested size) columns; ``None`` when not recorded (the user's own
    recording was on, which memprof leaves alone, or this torch cannot record)."""

    def __init__(self) -> None:
        self.sign: np.ndarray | None = None
        self.addr: np.ndarray | None = None
        self.size: np.ndarray | None = None


@contextmanager
def recorded(device: str) -> Iterator[History]:
    """Record ``device``'s allocator history while entered (CUDA only)."""
    import torch

    history = History()
    try:
        # The user's own recording is not ours to stop or to fill.
        ours = not torch._C._cuda_isHistoryEnabled()
        if ours:
            torch.cuda.memory._record_memory_history(context=None, stacks="python", max_entries=_MAX_ENTRIES)
    except (AttributeError, RuntimeError, TypeError):  # a torch without this private API
        ours = False
    if not ours:
        yield history
        return
    try:
        yield history
        index = torch.device(device).index or 0
        traces = torch.cuda.memory._snapshot(device=index)["device_traces"]
        _columns(history, traces[index] if index < len(traces) else [])
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)


def _columns(history: History, entries: list[dict[str, Any]]) -> None:
    kept = [e for e in entries if e.get("action") in ("alloc", "free_requested")]
    history.sign = np.array([1 if e["action"] == "alloc" else -1 for e in kept], dtype=np.int64)
    history.addr = np.array([int(e["addr"]) for e in kept], dtype=np.int64)
    history.size = np.array([int(e["size"]) for e in kept], dtype=np.int64)


def with_addresses(
    tree: Allocations, time: np.ndarray, nbytes: np.ndarray, history: History
) -> Allocations | None:
    """The profile's records of the device (``time``, ``nbytes``: the flat event list's, in
    time order), each with its address from ``history``; ``tree`` is what the event tree gave
    (its allocations, or those of them it kept, check the alignment). None when they cannot be
    aligned."""
    if history.sign is None or history.addr is None or history.size is None:
        return None
    count = len(nbytes)
    sign = np.sign(nbytes)
    made = nbytes > 0
    if np.any(sign == 0) or not np.any(tree.bytes > 0):
        return None
    last = len(history.sign) - count
    for start in range(last, max(last - _TRAILING, -1), -1):
        window = slice(start, start + count)
        if not np.array_equal(history.sign[window], sign):
            continue
        addr, size = history.addr[window], history.size[window]
        blocks = np.abs(nbytes)
        if np.any(blocks < size) or np.any(blocks - size > _MAX_ROUNDING):
            continue
        shift = _clock_shift(tree, time[made], addr[made], nbytes[made])
        if shift is None:
            continue
        return Allocations(time=time + shift, bytes=nbytes.copy(), ptr=addr.copy())
    return None


def _clock_shift(tree: Allocations, time: np.ndarray, addr: np.ndarray, nbytes: np.ndarray) -> int | None:
    """The distance from the flat list's clock to the event tree's (0 when they are one clock,
    as they are but in a process that compiled) at which every allocation the tree kept is one
    of the aligned allocations, at the same address with the same size (a distance other than 0
    only when the tree kept two allocations or more); None if there is none.
    The tree can lose records (frees, and sometimes allocations), never invent them."""
    kept = tree.bytes > 0
    tree_time, tree_addr, tree_bytes = tree.time[kept], tree.ptr[kept], tree.bytes[kept]
    same = np.flatnonzero((addr == tree_addr[0]) & (nbytes == tree_bytes[0]))
    aligned = set(zip(time.tolist(), addr.tolist(), nbytes.tolist(), strict=True))
    for index in same.tolist():
        shift = int(tree_time[0]) - int(time[index])
        if shift and len(tree_time) < 2:
            continue  # one record cannot show that two clocks differ by a fixed distance
        moved = zip((tree_time - shift).tolist(), tree_addr.tolist(), tree_bytes.tolist(), strict=True)
        if all(record in aligned for record in moved):
            return shift
    return None
