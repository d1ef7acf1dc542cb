"""The explaining call's CUDA records addressed from the allocator's history: the similarity
example's call as an H100 recorded it (tests/data/gpu/memprof_h100_similarity.*): five blocks,
the profiler's sizes in blocks, the history's in requests."""

from __future__ import annotations

import numpy as np
from explaining import _profiled

from memprof.core.records import Allocations
from memprof.examples import gpt
from memprof.sources.live.allocator_history import History, with_addresses
from memprof.sources.live.kineto import raw_from_profiler
from memprof.sources.tracking import Tracker, read_calls

A, B, C = 140629342420992, 140629610856448, 140629868806144
D = 140628268679168
# The profile's records of cuda:0 (flat event list): time, block bytes; and their addresses.
TIME = np.arange(10, dtype=np.int64) * 100
BYTES = np.array([256_000_000, 256_000_000, 65_011_712, -256_000_000, 2_000_384, 512_000_000,
                  -512_000_000, -65_011_712, -256_000_000, -2_000_384], dtype=np.int64)  # fmt: skip
ADDR = np.array([A, B, C, B, B, D, D, C, A, B], dtype=np.int64)
# The allocator's history: alloc / free_requested with the requested sizes.
SIZE = np.array([256_000_000, 256_000_000, 64_000_000, 256_000_000, 2_000_000, 512_000_000,
                 512_000_000, 64_000_000, 256_000_000, 2_000_000], dtype=np.int64)  # fmt: skip


def _history(before: int = 0, after: int = 0) -> History:
    history = History()
    history.sign = np.concatenate([np.ones(before, np.int64), np.sign(BYTES), -np.ones(after, np.int64)])
    history.addr = np.concatenate([np.full(before, 7, np.int64), ADDR, np.full(after, 7, np.int64)])
    history.size = np.concatenate([np.full(before, 512, np.int64), SIZE, np.full(after, 512, np.int64)])
    return history


def _tree(frees: bool = False) -> Allocations:
    """The event tree's records: every allocation, and (here) none of the frees."""
    keep = (BYTES > 0) | frees
    return Allocations(time=TIME[keep], bytes=BYTES[keep], ptr=ADDR[keep])


def test_every_record_takes_the_address_at_its_place_in_the_history() -> None:
    done = with_addresses(_tree(), TIME, BYTES, _history())
    assert done is not None
    assert done.ptr.tolist() == ADDR.tolist()
    assert done.bytes.tolist() == BYTES.tolist() and done.time.tolist() == TIME.tolist()


def test_history_from_before_the_profile_and_after_it_is_skipped() -> None:
    done = with_addresses(_tree(), TIME, BYTES, _history(before=40, after=3))
    assert done is not None and done.ptr.tolist() == ADDR.tolist()


def test_records_that_do_not_line_up_are_left_to_the_tree() -> None:
    history = _history()
    assert history.addr is not None and history.size is not None and history.sign is not None
    moved = _history()
    assert moved.addr is not None
    moved.addr[1] = 99  # an allocation the tree puts elsewhere
    assert with_addresses(_tree(), TIME, BYTES, moved) is None
    small = _history()
    assert small.size is not None
    small.size[2] = 70_000_000  # a block smaller than its request
    assert with_addresses(_tree(), TIME, BYTES, small) is None
    assert with_addresses(_tree(), TIME, BYTES, History()) is None  # not recorded
    assert with_addresses(_tree(), TIME[:-1], BYTES[:-1], _history(before=0)) is not None  # a prefix
    swapped = BYTES.copy()
    swapped[[3, 4]] = swapped[[4, 3]]  # a free where the history allocates
    assert with_addresses(_tree(), TIME, swapped, history) is None


def test_the_records_are_put_on_the_event_tree_s_clock_or_refused() -> None:
    tree = _tree()
    later = Allocations(time=tree.time + 5_000, bytes=tree.bytes, ptr=tree.ptr)
    done = with_addresses(later, TIME, BYTES, _history())
    assert done is not None and done.time.tolist() == (TIME + 5_000).tolist()
    jumbled = Allocations(time=tree.time + np.arange(len(tree.time)), bytes=tree.bytes, ptr=tree.ptr)
    assert with_addresses(jumbled, TIME, BYTES, _history()) is None


def test_a_tree_that_lost_allocations_too_still_checks_the_alignment() -> None:
    tree = _tree()
    some = Allocations(time=tree.time[[0, 2]], bytes=tree.bytes[[0, 2]], ptr=tree.ptr[[0, 2]])
    done = with_addresses(some, TIME, BYTES, _history())
    assert done is not None and done.ptr.tolist() == ADDR.tolist()
    invented = Allocations(time=np.array([TIME[1] + 1]), bytes=BYTES[1:2], ptr=ADDR[1:2])
    assert with_addresses(invented, TIME, BYTES, _history()) is None
    empty = Allocations(time=TIME[:0], bytes=BYTES[:0], ptr=ADDR[:0])
    assert with_addresses(empty, TIME, BYTES, _history()) is None  # nothing to check it by


def test_a_real_profile_s_flat_records_line_up_with_its_event_tree() -> None:
    # On the CPU the event tree is complete, so a history made from it must give every flat
    # record back its own address, and the tracker must take what the completion returns.
    inputs = gpt.train_step_inputs()
    gpt.train_step(*inputs)
    tracker = Tracker(inputs, func=gpt.train_step, ops=True)
    _, prof = _profiled(gpt.train_step, inputs, {}, 1, tracker)
    tree, _ = read_calls(prof, "cpu")
    raw = raw_from_profiler(prof)
    order = np.argsort(raw.mem_time, kind="stable")
    time, nbytes = raw.mem_time[order], raw.mem_bytes[order]
    assert time.tolist() == tree.time.tolist() and nbytes.tolist() == tree.bytes.tolist()
    history = History()
    history.sign, history.addr, history.size = np.sign(tree.bytes), tree.ptr, np.abs(tree.bytes)
    done = with_addresses(tree, time, nbytes, history)
    assert done is not None and done.ptr.tolist() == tree.ptr.tolist()

    seen: list[Allocations] = []
    halved = Allocations(time=tree.time[::2], bytes=tree.bytes[::2], ptr=tree.ptr[::2])
    facts = tracker.facts(prof, complete=lambda read: seen.append(read) or halved)
    assert seen[0].ptr.tolist() == tree.ptr.tolist() and facts.allocations is halved
    assert tracker.facts(prof, complete=lambda read: None).allocations.ptr.tolist() == tree.ptr.tolist()
