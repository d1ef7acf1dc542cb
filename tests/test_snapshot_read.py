"""CUDA memory snapshots recorded on real GPUs read back exactly, safely.

Every figure of the published reference (tests/gpu_data.py) is reproduced for every snapshot;
out-of-memory events, sites and fragmentation are stated with synthetic snapshots whose
numbers are known by hand; a pickle that names any global is refused before it can run.
"""

from __future__ import annotations

import io
import json
import os
import pickle
from pathlib import Path

import pytest
from gpu_data import SNAPSHOTS, gpu_file, shared_dir

from memprof.analysis.allocator import AllocatorSettings
from memprof.analysis.snapshot import BEFORE_TRACE, analyze_snapshot, site_of
from memprof.analysis.snapshot_replay import what_if
from memprof.core.errors import InputError
from memprof.core.records import Frame
from memprof.sources.files.readers import input_kind
from memprof.sources.files.snapshot import read_snapshot, snapshot_records

MiB = 1 << 20

# The highest allocated bytes of the replay in block sizes (as max_memory_allocated counts
# them): the model reproduces every placement and block of these snapshots (see
# test_allocator_model.py), so its block sizes are the allocator's.
FOOTPRINT = {
    "silmont2000_cs336_tiny.snapshot.pickle": 3249144832,
    "wedsonlin_cs336_medium_512_inference.snapshot.pickle": 1951309824,
    "magma27_cs336.snapshot.pickle": 13927832064,
    "yiyi_flexgen_opt1.3b.snapshot.pickle": 5692347392,
}


@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
def test_every_reference_figure_of_every_snapshot(name):
    ref = SNAPSHOTS[name]
    records = read_snapshot(gpu_file(name))
    (device,) = analyze_snapshot(records)
    assert device.device == "cuda:0"
    assert device.segments == ref["segments"]
    assert {"large": device.large_segments, "small": device.small_segments} == ref["segment_types"]
    assert device.expandable_segments == ref["expandable_segments"]
    assert device.reserved_bytes == ref["reserved_bytes"]
    assert device.allocated_bytes == ref["allocated_bytes_at_dump"]
    assert device.requested_bytes == ref["requested_bytes_at_dump"]
    assert device.trace_events == ref["trace_events"]
    assert device.trace_actions == ref["trace_actions"]
    assert device.frees_without_alloc == ref["frees_without_alloc_in_trace"]
    assert device.live_at_start_bytes == ref["live_at_trace_start"]
    assert device.peak_bytes == ref["peak_above_start"]
    assert device.peak_requested_bytes == ref["peak_allocated"]
    assert device.peak_index == ref["peak_index"]
    assert device.peak_time_us == ref["peak_time_us"]
    assert device.footprint_bytes == FOOTPRINT[name]
    assert device.reserved_peak_bytes == ref["reserved_bytes"]  # no segment was freed in these traces
    assert device.fragmentation.largest_request_bytes == (ref["max_single_alloc"] or None)
    blocks = [b for s in records.segments for b in s.blocks]
    assert len(blocks) == ref["blocks"]
    states: dict[str, int] = {}
    for block in blocks:
        states[block.state] = states.get(block.state, 0) + 1
    assert states == ref["block_states"]
    assert device.notes == ()


def test_a_wrapped_history_is_reconstructed_from_frees_never_allocated():
    (device,) = analyze_snapshot(read_snapshot(gpu_file("magma27_cs336.snapshot.pickle")))
    # Two blocks allocated before the ring buffer's first event are freed in it: 327,680,000 B
    # and 4 B; the rest of what was live at the start is still allocated at dump time.
    assert device.frees_without_alloc == 2
    assert device.live_at_start_bytes == 1373919236
    top = device.sites_at_peak[0]
    assert top.site.endswith("torch\\functional.py:373 einsum")
    assert (top.bytes, top.count) == (3045588992, 37)
    assert sum(site.bytes for site in device.sites_at_peak) == device.peak_requested_bytes


def test_sites_at_the_peak_skip_torch_cpp_frames():
    (device,) = analyze_snapshot(read_snapshot(gpu_file("silmont2000_cs336_tiny.snapshot.pickle")))
    sites = {site.site: (site.bytes, site.count) for site in device.sites_at_peak}
    assert sum(b for b, _ in sites.values()) == 3249143816
    # Allocated by the autograd engine's thread: no Python frame, the backward node says who.
    assert sites["(C++) DivBackward0"] == (2147483648, 4)
    assert sites[
        "/root/autodl-tmp/assignment2-systems/cs336_systems/trace_peak_memory.py:7 custom_softmax"
    ] == (
        536870912,
        1,
    )
    assert not any("torch::unwind" in site or "CapturedTraceback" in site for site in sites)


def test_blocks_live_before_the_trace_without_frames_are_one_site():
    (device,) = analyze_snapshot(
        read_snapshot(gpu_file("wedsonlin_cs336_medium_512_inference.snapshot.pickle"))
    )
    assert device.sites_at_peak[0].site == BEFORE_TRACE
    assert device.sites_at_peak[0].bytes == 1701482496
    assert sum(site.bytes for site in device.sites_at_peak) == 1949343744


def test_fragmentation_at_dump_time():
    (device,) = analyze_snapshot(read_snapshot(gpu_file("silmont2000_cs336_tiny.snapshot.pickle")))
    frag = device.fragmentation
    assert frag.cached_bytes == 3781165056 - 31719936
    assert frag.largest_free_block_bytes == 536870912
    assert frag.largest_request_bytes == 536870912
    # Of the cached bytes only the 512 MiB blocks can hold a 512 MiB request.
    free_blocks = sorted(
        b.size
        for s in read_snapshot(gpu_file("silmont2000_cs336_tiny.snapshot.pickle")).segments
        for b in s.blocks
        if b.state == "inactive"
    )
    assert frag.unusable_bytes == sum(size for size in free_blocks if size < 536870912)


def test_a_snapshot_without_history_has_no_peak_in_time():
    (device,) = analyze_snapshot(read_snapshot(gpu_file("yiyi_flexgen_opt1.3b.snapshot.pickle")))
    assert device.peak_index is None and device.sites_at_peak == ()
    assert device.fragmentation.unusable_bytes is None


def test_site_of_names_the_innermost_python_frame():
    stack = (
        Frame("??", 0, "torch::unwind::unwind()"),
        Frame("memory_snapshot.cpp", 0, "gather_with_cpp()"),
        Frame("/x/model.py", 12, "forward"),
        Frame("/x/train.py", 3, "<module>"),
    )
    assert site_of(stack) == "/x/model.py:12 forward"
    assert site_of(stack[:2]) == "(no Python frame recorded)"


# --------------------------------------------------------------------------------------------
# Synthetic snapshots: out of memory, explained; what-if settings

BASE = 0x7F0000000000


def _event(action, addr, size, stream=0, t=None):
    event = {"action": action, "addr": addr, "size": size, "stream": stream, "frames": []}
    if t is not None:
        event["time_us"] = t
    return event


def _fragmented_oom_snapshot():
    """Four 6 MiB tensors in two 20 MiB segments, the 1st and 3rd freed, then a 16 MiB request
    fails on a 45 MiB device: 28 MiB are cached but the largest free block is 14 MiB."""
    a, b, c = BASE, BASE + 6 * MiB, BASE + 12 * MiB
    seg2 = BASE + 64 * MiB
    trace = [
        _event("segment_alloc", BASE, 20 * MiB, t=1),
        _event("alloc", a, 6 * MiB, t=2),
        _event("alloc", b, 6 * MiB, t=3),
        _event("alloc", c, 6 * MiB, t=4),
        _event("segment_alloc", seg2, 20 * MiB, t=5),
        _event("alloc", seg2, 6 * MiB, t=6),
        _event("free_requested", a, 6 * MiB, t=7),
        _event("free_completed", a, 6 * MiB, t=7),
        _event("free_requested", c, 6 * MiB, t=8),
        _event("free_completed", c, 6 * MiB, t=8),
        _event("oom", 5 * MiB, 16 * MiB, t=9),  # addr: free bytes on the device
    ]

    def block(addr, size, state):
        return {"address": addr, "size": size, "requested_size": size, "state": state, "frames": []}

    segments = [
        {
            "device": 0,
            "address": BASE,
            "total_size": 20 * MiB,
            "stream": 0,
            "segment_type": "large",
            "blocks": [
                block(a, 6 * MiB, "inactive"),
                block(b, 6 * MiB, "active_allocated"),
                block(c, 8 * MiB, "inactive"),
            ],
        },
        {
            "device": 0,
            "address": seg2,
            "total_size": 20 * MiB,
            "stream": 0,
            "segment_type": "large",
            "blocks": [block(seg2, 6 * MiB, "active_allocated"), block(seg2 + 6 * MiB, 14 * MiB, "inactive")],
        },
    ]
    return {
        "segments": segments,
        "device_traces": [trace],
        "allocator_settings": {"expandable_segments": False},
    }


def test_an_oom_event_is_explained():
    records = snapshot_records(_fragmented_oom_snapshot())
    (device,) = analyze_snapshot(records)
    (oom,) = device.ooms
    assert (oom.index, oom.time_us) == (10, 9)
    assert oom.requested_bytes == 16 * MiB
    assert oom.free_on_device_bytes == 5 * MiB
    assert oom.reserved_bytes == 40 * MiB
    assert oom.allocated_bytes == 12 * MiB
    assert oom.largest_free_block_bytes == 14 * MiB
    assert oom.cause == "fragmentation"
    assert device.capacity_bytes == 45 * MiB
    assert device.allocator_model is not None and device.allocator_model.exact
    assert device.peak_bytes == 24 * MiB and device.live_at_start_bytes == 0


def test_what_if_expandable_segments_would_have_saved_the_oom():
    records = snapshot_records(_fragmented_oom_snapshot())
    default = what_if(records, 0, AllocatorSettings(capacity_bytes=45 * MiB))
    assert len(default.ooms) == 1 and default.ooms[0].largest_free_block_bytes == 14 * MiB
    assert default.reserved_peak_bytes == 40 * MiB
    expandable = what_if(records, 0, AllocatorSettings(expandable_segments=True, capacity_bytes=45 * MiB))
    # One growing segment of 20 MiB pages: the request lands in the free tail, no new page.
    assert expandable.ooms == ()
    assert expandable.reserved_peak_bytes == 40 * MiB
    assert expandable.allocated_peak_bytes == 28 * MiB  # b, d and the 16 MiB request


# --------------------------------------------------------------------------------------------
# Refusing anything but plain data


class _Payload:
    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


def test_a_pickle_naming_os_system_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [_Payload(marker)]}))
    assert input_kind(path) == "snapshot"
    with pytest.raises(InputError, match="system.*refuses"):
        read_snapshot(path)
    assert not marker.exists()
    # The same pickle through the standard unpickler does run the command: the test is real.
    pickle.loads(path.read_bytes())
    assert marker.exists()


@pytest.mark.parametrize("obj", [io.BytesIO(b"x"), Path("/"), complex(1, 2), range(3)])
def test_any_global_at_all_is_refused(tmp_path, obj):
    path = tmp_path / "x.pickle"
    path.write_bytes(pickle.dumps({"segments": [obj]}))
    with pytest.raises(InputError, match="refuses"):
        read_snapshot(path)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "is empty"),
        (pickle.dumps({"segments": []})[:-5], "ends early"),
        (pickle.dumps([1, 2]), "malformed snapshot"),
        (pickle.dumps({"no": "segments"}), "not a CUDA memory snapshot"),
        (pickle.dumps({"segments": [{"address": "0x1", "total_size": 1}]}), "malformed snapshot"),
        (b"PK\x03\x04rest", "torch.save archive"),
        (b"\x80\x04\xff\xff", "not a readable pickle"),
    ],
)
def test_unreadable_snapshots_are_input_errors(tmp_path, data, reason):
    path = tmp_path / "s.pickle"
    path.write_bytes(data)
    with pytest.raises(InputError, match=reason):
        read_snapshot(path)


def test_reference_figures_are_the_published_ones():
    truth_path = shared_dir() / "truth.json"
    if not truth_path.exists():
        pytest.skip(f"{truth_path} is absent (set MEMPROF_GPU_DATA)")
    truth = json.loads(truth_path.read_text())
    for name, ref in SNAPSHOTS.items():
        published = truth[name]["devices"]["0"]
        for key, value in ref.items():
            if key == "peak_index":
                assert published.get("peak_alloc_event", {}).get("index") == value
            elif key == "peak_time_us":
                assert published.get("peak_alloc_event", {}).get("time_us") == value
            else:
                assert published[key] == value, (name, key)
