"""The CUDA caching allocator model: its rules stated one by one with sizes worked out by hand,
then checked against real snapshots, where it must place every allocation where the real
allocator did and ask for every segment the real one asked for."""

from __future__ import annotations

import pytest
from gpu_data import gpu_file

from memprof.analysis.allocator import (
    AllocatorSettings,
    CachingAllocator,
    allocation_size,
    round_size,
    simulate,
)
from memprof.analysis.snapshot_replay import replay_snapshot, trace_start, what_if
from memprof.sources.files.snapshot import read_snapshot

KiB, MiB = 1 << 10, 1 << 20


def test_sizes_round_to_512_bytes():
    assert [round_size(n) for n in (1, 511, 512, 513, 1000, MiB + 1)] == [
        512,
        512,
        512,
        1024,
        1024,
        MiB + 512,
    ]


def test_segment_sizes_by_request():
    assert allocation_size(512) == 2 * MiB  # small pool: 2 MiB segments
    assert allocation_size(MiB) == 2 * MiB
    assert allocation_size(MiB + 512) == 20 * MiB  # 1-10 MiB: a 20 MiB segment to split
    assert allocation_size(10 * MiB - 512) == 20 * MiB
    assert allocation_size(10 * MiB) == 10 * MiB  # larger: rounded up to 2 MiB
    assert allocation_size(11 * MiB) == 12 * MiB


def test_small_requests_pack_into_2_mib_segments():
    model = CachingAllocator()
    placed = [model.malloc(512 * KiB) for _ in range(5)]
    assert model.segments == 2 and model.reserved_bytes == 4 * MiB
    first = placed[0][0]
    assert [p[0] - first for p in placed[:4]] == [0, 512 * KiB, MiB, 3 * 512 * KiB]
    assert model.allocated_bytes == 5 * 512 * KiB


def test_a_medium_request_splits_a_20_mib_segment_and_the_rest_is_reused():
    model = CachingAllocator()
    a = model.malloc(6 * MiB)
    b = model.malloc(6 * MiB)
    assert model.segments == 1 and model.reserved_bytes == 20 * MiB
    assert b == (a[0] + 6 * MiB, 6 * MiB)
    assert model.largest_free_block() == 8 * MiB


def test_best_fit_takes_the_smallest_block_that_fits_lowest_address_first():
    model = CachingAllocator()
    blocks = [model.malloc(n * MiB)[0] for n in (12, 14, 12, 16)]  # each its own segment
    for addr in blocks[:3]:
        model.free(addr)
    # Free: 12 MiB (lowest), 14 MiB, 12 MiB. A 13 MiB request takes the 14 MiB block.
    assert model.malloc(13 * MiB)[0] == blocks[1]
    # Two 12 MiB blocks: the lower address wins.
    assert model.malloc(11 * MiB)[0] == blocks[0]


def test_large_blocks_split_only_when_more_than_1_mib_remains():
    model = CachingAllocator()
    whole = model.malloc(19 * MiB + 512 * KiB)  # 20 MiB segment, 512 KiB left: not split
    assert whole[1] == 20 * MiB and model.allocated_bytes == 20 * MiB
    model.free(whole[0])
    part = model.malloc(18 * MiB + 512 * KiB)  # 1.5 MiB left: split
    assert part[1] == 18 * MiB + 512 * KiB
    assert model.largest_free_block() == MiB + 512 * KiB


def test_small_blocks_split_when_512_bytes_remain():
    model = CachingAllocator()
    model.malloc(MiB)
    last = model.malloc(MiB - 512)  # the 2 MiB segment's last 1 MiB: 512 B remain
    assert last[1] == MiB - 512 and model.largest_free_block(small=True) == 512


def test_freed_neighbours_merge():
    model = CachingAllocator()
    a, b, c = (model.malloc(5 * MiB)[0] for _ in range(3))
    model.free(a)
    model.free(c)
    assert sorted(size for _, size, _ in model.free_blocks()) == [5 * MiB, 10 * MiB]
    model.free(b)
    assert [size for _, size, _ in model.free_blocks()] == [20 * MiB]
    assert model.release_segment(a) and model.reserved_bytes == 0


def test_max_split_size_keeps_oversize_blocks_whole():
    settings = AllocatorSettings(max_split_size_bytes=64 * MiB)
    model = CachingAllocator(settings)
    big = model.malloc(100 * MiB)
    model.free(big[0])
    # A smaller request may not use (or split) the oversize block: a new segment.
    small = model.malloc(30 * MiB)
    assert small[0] != big[0] and model.segments == 2
    # A request of at least max_split_size takes an oversize block less than 20 MiB bigger, whole.
    again = model.malloc(90 * MiB)
    assert again == (big[0], 100 * MiB)
    model.free(again[0])
    assert model.malloc(70 * MiB)[0] != big[0]  # 100 >= 70 + 20: not rounded up that far


def test_before_running_out_the_cache_is_given_back():
    model = CachingAllocator(AllocatorSettings(capacity_bytes=40 * MiB))
    first, second = model.malloc(12 * MiB), model.malloc(12 * MiB)
    model.free(first[0])
    model.free(second[0])
    assert model.malloc(30 * MiB) is not None
    assert model.reserved_bytes == 30 * MiB
    assert [kind for kind, _, _ in model.segment_log] == ["segment_alloc"] * 2 + ["segment_free"] * 2 + [
        "segment_alloc"
    ]
    assert model.malloc(12 * MiB) is None
    (oom,) = model.ooms
    assert (oom.rounded_bytes, oom.reserved_bytes, oom.free_on_device_bytes) == (12 * MiB, 30 * MiB, 10 * MiB)


def test_expandable_segments_grow_one_segment_by_pages():
    model = CachingAllocator(AllocatorSettings(expandable_segments=True))
    addrs = [model.malloc(6 * MiB)[0] for _ in range(4)]
    assert model.segments == 1
    assert model.reserved_bytes == 40 * MiB  # two 20 MiB pages
    assert [a - addrs[0] for a in addrs] == [0, 6 * MiB, 12 * MiB, 18 * MiB]
    model.malloc(100 * KiB)
    assert model.segments == 2 and model.reserved_bytes == 42 * MiB  # the small pool: 2 MiB pages


def test_expandable_segments_give_free_pages_back():
    model = CachingAllocator(AllocatorSettings(expandable_segments=True))
    keep = model.malloc(6 * MiB)
    other = model.malloc(30 * MiB)
    assert model.reserved_bytes == 40 * MiB
    model.free(other[0])
    model.empty_cache()
    assert model.reserved_bytes == 20 * MiB and model.segments == 1
    model.free(keep[0])
    model.empty_cache()
    assert model.reserved_bytes == 0 and model.segments == 0


def test_simulate_a_plain_sequence_of_sizes():
    result = simulate([("a", 6 * MiB), ("b", 6 * MiB), ("a", -1), ("c", 3 * MiB), ("e", 0), ("c", -1)])
    assert result.allocated_peak_bytes == 12 * MiB
    assert result.requested_peak_bytes == 12 * MiB
    assert result.reserved_peak_bytes == 20 * MiB
    assert result.reserve_overhead_bytes == 8 * MiB
    assert (result.allocated_bytes, result.segments, result.segment_allocations) == (6 * MiB, 1, 1)
    # [c 3 | free 3 | b 6 | free 8] after c's free merges into [free 6 | b 6 | free 8].
    assert result.largest_free_block_bytes == 8 * MiB
    assert result.settings == "default"
    with pytest.raises(ValueError, match="allocated twice"):
        simulate([("a", 1), ("a", 1)])


def test_simulate_what_expandable_segments_save():
    # A buffer growing by 1 MiB a step, freed each time: by default the 14 MiB segment serves
    # 13 and 14 MiB, a new 16 MiB one 15 and 16, a new 18 MiB one 17; one expandable segment
    # grows its free tail instead, one 20 MiB page.
    actions = []
    for step in range(5):
        actions += [(step, (13 + step) * MiB), (step, -1)]
    default = simulate(actions)
    expandable = simulate(actions, AllocatorSettings(expandable_segments=True))
    assert default.reserved_peak_bytes == (14 + 16 + 18) * MiB
    assert default.segments == 3
    assert expandable.reserved_peak_bytes == 20 * MiB
    assert expandable.segments == 1


# --------------------------------------------------------------------------------------------
# Real snapshots: every placement and every segment


@pytest.mark.parametrize(
    ("name", "placements", "segments"),
    [
        ("silmont2000_cs336_tiny.snapshot.pickle", 36, 9),
        ("wedsonlin_cs336_medium_512_inference.snapshot.pickle", 1666, 0),
        ("magma27_cs336.snapshot.pickle", 1721, 0),
        ("yiyi_flexgen_opt1.3b.snapshot.pickle", 0, 0),
    ],
)
def test_the_model_reproduces_every_recorded_placement(name, placements, segments):
    records = read_snapshot(gpu_file(name))
    check = replay_snapshot(records, 0).check
    assert check is not None
    assert (check.placements_matched, check.placements) == (placements, placements)
    assert (check.segments_matched, check.segments, check.segments_unexpected) == (segments, segments, 0)
    assert check.reserved_matched and check.allocated_matched
    assert check.blocks_matched == check.blocks == sum(len(s.blocks) for s in records.segments)
    assert check.exact and check.settings == "default" and check.settings_differ == ()


def test_the_state_before_a_wrapped_trace_is_rebuilt():
    records = read_snapshot(gpu_file("magma27_cs336.snapshot.pickle"))
    start = trace_start(records, 0)
    assert start.frees_without_alloc == 2
    assert len(start.segments) == 216  # no segment was allocated during the trace
    assert start.live_requested_bytes == 1373919236


def test_a_trace_recorded_from_an_empty_device_replays_from_empty_exactly():
    # silmont's trace begins with the first segment: replaying it from an empty allocator
    # gives the recorded reserve and the replay's footprint.
    records = read_snapshot(gpu_file("silmont2000_cs336_tiny.snapshot.pickle"))
    default = what_if(records, 0, AllocatorSettings())
    assert default.reserved_peak_bytes == 3781165056
    assert default.reserved_bytes == 3781165056
    assert default.allocated_peak_bytes == 3249144832
    assert default.segment_allocations == 9


def test_a_snapshot_with_other_settings_says_so():
    records = read_snapshot(gpu_file("silmont2000_cs336_tiny.snapshot.pickle"))
    settings = dict(records.allocator_settings or {})
    settings["roundup_power2_divisions"] = {"1": 4}
    settings["garbage_collection_threshold"] = 0.6
    changed = type(records)(records.segments, records.traces, records.stacks, settings)
    check = replay_snapshot(changed, 0).check
    assert check is not None and len(check.settings_differ) == 2
