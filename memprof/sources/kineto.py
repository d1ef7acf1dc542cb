"""Read a finished ``torch.profiler`` session's events into :class:`memprof.records.RawProfile`.

Duck-typed over kineto's event objects: importing this module does not import torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from memprof.gcpause import gc_paused
from memprof.records import CALL_MARKER, RawProfile

# The same utility names torch's own table leaves out (torch/autograd/profiler_util.py _filter_name).
_SKIPPED_NAMES = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)

# Device types whose allocations count as "CPU Mem" / device ("CUDA Mem") in torch's table.
HOST_DEVICE_TYPES = frozenset({"CPU", "MKLDNN", "IDEEP"})
ACCELERATOR_DEVICE_TYPES = frozenset({"CUDA", "PrivateUse1", "HIP", "XPU", "MTIA"})


def raw_from_profiler(prof: Any, device_type: str = "CPU", device_index: int | None = None) -> RawProfile:
    """:func:`raw_from_kineto` of a finished ``torch.profiler.profile``'s events."""
    with gc_paused():
        return raw_from_kineto(prof.profiler.kineto_results.events(), device_type, device_index)


def raw_from_kineto(
    events: Iterable[Any], device_type: str = "CPU", device_index: int | None = None
) -> RawProfile:
    """Read ``prof.profiler.kineto_results.events()`` into a :class:`RawProfile`.

    Memory records are kept for one device: ``device_type`` "CPU" keeps host allocations
    (CPU/MKLDNN/IDEEP, as torch's "CPU Mem"); "CUDA" keeps that accelerator's, optionally
    only ``device_index``'s.
    """
    # This loop is the one per-event cost memprof cannot vectorise: every accessor is a C++
    # call (~0.2 us). Compare device types as enum members (``.name`` costs ~1 us per event),
    # call the unbound accessors (no bound-method objects) and fill flat lists, not tuples.
    events = events if isinstance(events, list) else list(events)
    wanted_names = HOST_DEVICE_TYPES if device_type == "CPU" else ACCELERATOR_DEVICE_TYPES
    op_names: list[str] = []
    op_start: list[int] = []
    op_end: list[int] = []
    op_thread: list[int] = []
    op_async: list[bool] = []
    mem_time: list[int] = []
    mem_bytes: list[int] = []
    mem_threads: list[int] = []
    calls: list[tuple[int, int]] = []
    call_threads: set[int] = set()
    if events:
        kind = type(events[0])
        name_of, device_of, index_of = kind.name, kind.device_type, kind.device_index
        start_of, end_of, nbytes_of = kind.start_ns, kind.end_ns, kind.nbytes
        thread_of, end_thread_of = kind.start_thread_id, kind.end_thread_id
        async_of, hidden_of = kind.is_async, kind.is_hidden_event
        device_types = type(device_of(events[0]))
        cpu = device_types.CPU
        kinds = {member for member in device_types.__members__.values() if member.name in wanted_names}
        check_index = device_index is not None and device_type != "CPU"
        skipped = _SKIPPED_NAMES
        for event in events:
            name = name_of(event)
            if name == "[memory]":
                if device_of(event) not in kinds:
                    continue
                if check_index and index_of(event) != device_index:
                    continue
                mem_time.append(start_of(event))
                mem_bytes.append(nbytes_of(event))
                mem_threads.append(thread_of(event))
                continue
            if name in skipped or device_of(event) != cpu or hidden_of(event):
                continue
            thread = thread_of(event)
            if name == CALL_MARKER:
                calls.append((start_of(event), end_of(event)))
                call_threads.add(thread)
                continue
            op_names.append(name)
            op_start.append(start_of(event))
            op_end.append(end_of(event))
            op_thread.append(thread)
            op_async.append(async_of(event) or thread != end_thread_of(event))
    names = np.empty(len(op_names), dtype=object)
    names[:] = op_names
    other_thread_bytes = 0
    if call_threads and mem_threads:
        threads = np.array(mem_threads, dtype=np.int64)
        sizes = np.array(mem_bytes, dtype=np.int64)
        other = ~np.isin(threads, np.array(sorted(call_threads), dtype=np.int64))
        other_thread_bytes = int(sizes[other & (sizes > 0)].sum())
    return RawProfile(
        op_name=names,
        op_start=np.array(op_start, dtype=np.int64),
        op_end=np.array(op_end, dtype=np.int64),
        op_thread=np.array(op_thread, dtype=np.int64),
        op_async=np.array(op_async, dtype=bool),
        mem_time=np.array(mem_time, dtype=np.int64),
        mem_bytes=np.array(mem_bytes, dtype=np.int64),
        calls=sorted(calls),
        other_thread_bytes=other_thread_bytes,
    )
