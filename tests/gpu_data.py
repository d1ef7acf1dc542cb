"""Where the real GPU recordings are, and their reference figures.

Small recordings are in ``tests/data/gpu`` (see its SOURCES.md); the larger ones are read from
``$MEMPROF_GPU_DATA`` (default ``<repo>/../shared/gpu_data``, with ``traces/`` and
``snapshots/``), and a test that needs one is skipped, saying so, when it is absent.

The figures below were computed independently of memprof (plain Python over the files) and are
published with the collection as ``truth.json``; ``test_reference_figures_are_the_published_ones``
checks that they are copied here exactly.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUNDLED = REPO / "tests" / "data" / "gpu"


def shared_dir() -> Path:
    """The folder of the full collection (it may not exist)."""
    return Path(os.environ.get("MEMPROF_GPU_DATA") or REPO.parent / "shared" / "gpu_data")


def gpu_file(name: str) -> Path:
    """The path of a recording: bundled, else in the shared collection, else skip the test."""
    bundled = BUNDLED / name
    if bundled.exists():
        return bundled
    kind = "snapshots" if name.endswith(".pickle") else "traces"
    shared = shared_dir() / kind / name
    if shared.exists():
        return shared
    pytest.skip(f"{name} is not bundled and {shared_dir()} has no {kind}/{name} (set MEMPROF_GPU_DATA)")


# Per trace, per GPU device: (device type, device id) -> figures. "stack" is the op stack at
# the peak record on the allocating thread (innermost last: truth's op_at_peak).
TRACES: dict[str, dict] = {
    "hta_df_index_resolver_V100_2rank.json.gz": {
        "device_properties": ["Tesla V100-SXM2-32GB", "Tesla V100-SXM2-32GB"],
        "memory_events_by_device": {(0, -1): 1240, (1, 1): 26770},
        "num_cpu_ops": 56680,
        "gpu": {
            (1, 1): {
                "num_events": 26770,
                "num_alloc": 13385,
                "num_free": 13385,
                "live_at_start": 4096614400,
                "max_total_allocated": 6629508096,
                "peak_above_start": 2532893696,
                "final_total_allocated": 4096614400,
                "max_total_reserved": 12782141440,
                "peak_ts": 1669783687579130,
                "peak_tid": 785244,
                "stack": [
                    "autograd::engine::evaluate_function: CompiledFunctionBackward",
                    "CompiledFunctionBackward",
                    "aten::clone",
                    "aten::empty_like",
                    "aten::empty",
                ],
            }
        },
    },
    "switchtransformers_A100_80GB_trace_small.json": {
        "device_properties": ["NVIDIA A100 80GB PCIe"],
        "memory_events_by_device": {(0, -1): 40, (1, 0): 870},
        "num_cpu_ops": 2154,
        "gpu": {
            (1, 0): {
                "num_events": 870,
                "num_alloc": 558,
                "num_free": 312,
                "live_at_start": 9297930240,
                "max_total_allocated": 9361328640,
                "peak_above_start": 63398400,
                "final_total_allocated": 9360239104,
                "max_total_reserved": 9386852352,
                "peak_ts": 1716980583798524,
                "peak_tid": 3066193,
                "stack": ["aten::linear", "aten::addmm"],
            }
        },
    },
    "tracelens_h100_bert_small.json.gz": {
        "device_properties": ["NVIDIA H100 80GB HBM3"],
        "memory_events_by_device": {(0, -1): 18, (1, 0): 218},
        "num_cpu_ops": 479,
        "gpu": {
            (1, 0): {
                "num_events": 218,
                "num_alloc": 109,
                "num_free": 109,
                "live_at_start": 91360768,
                "max_total_allocated": 101305344,
                "peak_above_start": 9944576,
                "final_total_allocated": 91360768,
                "max_total_reserved": 121634816,
                "peak_ts": 1419247337276.476,
                "peak_tid": 19392,
                "stack": ["aten::linear", "aten::addmm", "aten::empty"],
            }
        },
    },
    "tracelens_mi300x_bert_small.json.gz": {
        "device_properties": ["AMD Instinct MI300X VF"],
        "memory_events_by_device": {(0, -1): 2, (6, 0): 234},
        "num_cpu_ops": 519,
        "gpu": {
            (6, 0): {
                "num_events": 234,
                "num_alloc": 117,
                "num_free": 117,
                "live_at_start": 57806336,
                "max_total_allocated": 146394112,
                "peak_above_start": 88587776,
                "final_total_allocated": 57806336,
                "max_total_reserved": 224395264,
                "peak_ts": 2204338333678.828,
                "peak_tid": 6240,
                "stack": ["aten::linear", "aten::addmm", "aten::empty"],
            }
        },
    },
    "leimao_rtx5080_without_make_graphed_callables.json": {
        "device_properties": ["NVIDIA GeForce RTX 5080"],
        "memory_events_by_device": {(1, 0): 504},
        "num_cpu_ops": 1428,
        "gpu": {
            (1, 0): {
                "num_events": 504,
                "num_alloc": 252,
                "num_free": 252,
                "live_at_start": 231110656,
                "max_total_allocated": 236354048,
                "peak_above_start": 5243392,
                "final_total_allocated": 231110656,
                "max_total_reserved": 281018368,
                "peak_ts": 919761104567.085,
                "peak_tid": 282,
                "stack": ["autograd::engine::evaluate_function: AddmmBackward0", "aten::sum"],
            }
        },
    },
    "kineto_tbplugin_resnet50_nw0_V100_2021.pt.trace.json.gz": {
        "device_properties": ["Tesla V100-DGXS-32GB"] * 4,
        "memory_events_by_device": {(0, -1): 4618, (1, 0): 8220},
        "num_cpu_ops": 23646,
        "gpu": {
            (1, 0): {
                "num_events": 8220,
                "num_alloc": 4110,
                "num_free": 4110,
                "live_at_start": 0,
                "max_total_allocated": 2791636480,
                "peak_above_start": 2791636480,
                "final_total_allocated": 0,
                "max_total_reserved": None,
                "peak_ts": 1623142623582083,
                "peak_tid": 25772,
                "stack": [
                    "CudnnConvolutionBackward",
                    "aten::cudnn_convolution_backward",
                    "aten::cudnn_convolution_backward_weight",
                    "aten::empty",
                ],
            }
        },
    },
}

# Per snapshot, device 0.
SNAPSHOTS: dict[str, dict] = {
    "silmont2000_cs336_tiny.snapshot.pickle": {
        "segments": 9,
        "segment_types": {"large": 8, "small": 1},
        "expandable_segments": 0,
        "reserved_bytes": 3781165056,
        "blocks": 20,
        "block_states": {"inactive": 10, "active_allocated": 10},
        "allocated_bytes_at_dump": 31719936,
        "requested_bytes_at_dump": 31719428,
        "trace_events": 97,
        "trace_actions": {"segment_alloc": 9, "alloc": 36, "free_requested": 26, "free_completed": 26},
        "net_trace_bytes": 31719428,
        "frees_without_alloc_in_trace": 0,
        "live_at_trace_start": 0,
        "peak_above_start": 3249143816,
        "peak_allocated": 3249143816,
        "live_at_trace_end": 31719428,
        "peak_index": 52,
        "peak_time_us": 1772688692983308,
        "max_single_alloc": 536870912,
    },
    "wedsonlin_cs336_medium_512_inference.snapshot.pickle": {
        "segments": 101,
        "segment_types": {"large": 100, "small": 1},
        "expandable_segments": 0,
        "reserved_bytes": 1981808640,
        "blocks": 233,
        "block_states": {"inactive": 10, "active_allocated": 223},
        "allocated_bytes_at_dump": 1703448576,
        "requested_bytes_at_dump": 1701482496,
        "trace_events": 4998,
        "trace_actions": {"alloc": 1666, "free_requested": 1666, "free_completed": 1666},
        "net_trace_bytes": 0,
        "frees_without_alloc_in_trace": 0,
        "live_at_trace_start": 1701482496,
        "peak_above_start": 247861248,
        "peak_allocated": 1949343744,
        "live_at_trace_end": 1701482496,
        "peak_index": 315,
        "peak_time_us": 1783874651349429,
        "max_single_alloc": 67108864,
    },
    "magma27_cs336.snapshot.pickle": {
        "segments": 216,
        "segment_types": {"large": 208, "small": 8},
        "expandable_segments": 0,
        "reserved_bytes": 14180941824,
        "blocks": 455,
        "block_states": {"inactive": 226, "active_allocated": 229},
        "allocated_bytes_at_dump": 1377753600,
        "requested_bytes_at_dump": 1373919236,
        "trace_events": 5163,
        "trace_actions": {"alloc": 1721, "free_requested": 1721, "free_completed": 1721},
        "net_trace_bytes": 0,
        "frees_without_alloc_in_trace": 2,
        "live_at_trace_start": 1373919236,
        "peak_above_start": 12550078464,
        "peak_allocated": 13923997700,
        "live_at_trace_end": 1373919236,
        "peak_index": 1402,
        "peak_time_us": 1776479641223438,
        "max_single_alloc": 327680000,
    },
    "yiyi_flexgen_opt1.3b.snapshot.pickle": {
        "segments": 257,
        "segment_types": {"large": 254, "small": 3},
        "expandable_segments": 0,
        "reserved_bytes": 7608467456,
        "blocks": 948,
        "block_states": {"inactive": 163, "active_allocated": 785},
        "allocated_bytes_at_dump": 5683450880,
        "requested_bytes_at_dump": 5683449864,
        "trace_events": 1,
        "trace_actions": {"free_completed": 1},
        "net_trace_bytes": -8896512,
        "frees_without_alloc_in_trace": 1,
        "live_at_trace_start": 5692346376,
        "peak_above_start": 0,
        "peak_allocated": 5692346376,
        "live_at_trace_end": 5683449864,
        "peak_index": None,
        "peak_time_us": None,
        "max_single_alloc": 0,
    },
}
