"""Read a finished ``torch.profiler`` session's events into :class:`memprof.core.records.RawProfile`.

Duck-typed over kineto's event objects: importing this module does not import torch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from typing import Any

import numpy as np

from memprof.core.gcpause import gc_paused
from memprof.core.records import CALL_MARKER, RawProfile, other_thread_bytes

MEMORY_NAME = "[memory]"

# The same utility names torch's own table leaves out (torch/autograd/profiler_util.py _filter_name).
_SKIPPED_NAMES = frozenset(
    {
        MEMORY_NAME,
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

# Events are read this many at a time, one accessor over the whole block, then released. Small
# enough that a block's event objects stay in the CPU caches between the accessors' passes
# (65,536 read 1.5x slower than 4,096 when the objects lie scattered in memory).
_BLOCK = 4096

# Interned names with fixed codes: the memory records, the call marker, then the skipped names.
_MEMORY_CODE, CALL_CODE = 0, 1
_FIXED_NAMES = (MEMORY_NAME, CALL_MARKER, *sorted(_SKIPPED_NAMES - {MEMORY_NAME}))
FIRST_OP_CODE = len(_FIXED_NAMES)

_device_value = attrgetter("value")


def kineto_results(prof: Any) -> Any:
    """A finished profile's results: those of a ``torch.autograd.profiler.profile`` session (what
    memprof starts: :func:`memprof.sources.live.profiling.memory_profile`), or of the one a
    ``torch.profiler.profile`` wraps."""
    return getattr(prof, "profiler", prof).kineto_results


def raw_from_profiler(prof: Any, device_type: str = "CPU", device_index: int | None = None) -> RawProfile:
    """:func:`raw_from_kineto` of a finished profile's events: a ``torch.profiler.profile``, or
    the ``torch.autograd.profiler.profile`` session it wraps.

    The event list is read and released block by block; when the session traced the CPU only
    (``prof.activities``; ``use_device`` None for the autograd profiler), the per-op device
    check is skipped: every non-memory event of such a session is a CPU event (kineto records
    device-side activities only for device activities).
    """
    activities = getattr(prof, "activities", None)
    if activities is not None:
        device_events = any(getattr(activity, "name", str(activity)) != "CPU" for activity in activities)
    else:  # an autograd profiler session: ``use_device`` names the device traced besides the CPU
        device_events = getattr(prof, "use_device", "unknown") is not None  # unknown: check each op
    # The flat list, not ``experimental_event_tree()`` (which memprof.sources.tracking walks for
    # addresses anyway): the tree's nodes carry neither an op's end thread nor its async flag, so
    # an op that ended on another thread (a TorchScript function resuming after
    # ``torch.jit.wait`` on a worker thread) could not be told from one that nests its children.
    with gc_paused():
        events = kineto_results(prof).events()
        raw = _read(events, device_type, device_index, device_events=device_events, owned=True)
        del events
    return_freed_memory()
    return raw


def raw_from_kineto(
    events: Iterable[Any],
    device_type: str = "CPU",
    device_index: int | None = None,
    *,
    device_events: bool = True,
) -> RawProfile:
    """Read ``prof.profiler.kineto_results.events()`` into a :class:`RawProfile`.

    Memory records are kept for one device: ``device_type`` "CPU" keeps host allocations
    (CPU/MKLDNN/IDEEP, as torch's "CPU Mem"); "CUDA" keeps that accelerator's, optionally
    only ``device_index``'s. Ops are the CPU events other than the utility names torch's table
    leaves out and hidden events; ``device_events=False`` says that the events hold no
    device-side activity (the session traced the CPU only), which spares the per-op device check.
    """
    if isinstance(events, list):
        return _read(events, device_type, device_index, device_events, owned=False)
    return _read(list(events), device_type, device_index, device_events, owned=True)


@dataclass
class Columns:
    """What the blocks read, as lists of typed arrays (one array per block and column)."""

    mem_time: list[np.ndarray] = field(default_factory=list)
    mem_bytes: list[np.ndarray] = field(default_factory=list)
    mem_thread: list[np.ndarray] = field(default_factory=list)
    op_code: list[np.ndarray] = field(default_factory=list)
    op_start: list[np.ndarray] = field(default_factory=list)
    op_end: list[np.ndarray] = field(default_factory=list)
    op_thread: list[np.ndarray] = field(default_factory=list)
    op_async: list[np.ndarray] = field(default_factory=list)
    calls: list[tuple[int, int]] = field(default_factory=list)
    call_threads: set[int] = field(default_factory=set)


class NameCodes(dict[str, int]):
    """Name -> code, a new code for each new name (the lookup runs in C but for new names)."""

    @classmethod
    def fresh(cls) -> NameCodes:
        """The fixed names with their fixed codes, and no other."""
        return cls((name, code) for code, name in enumerate(_FIXED_NAMES))

    def __missing__(self, name: str) -> int:
        code = self[name] = len(self)
        return code


@dataclass(frozen=True)
class _Reader:
    """The accessors of one event class, called unbound over whole blocks (``map`` in C):
    every accessor is a C++ call (~0.2 us), the cost that remains per event."""

    name: Callable[[Any], str]
    device: Callable[[Any], Any]
    index: Callable[[Any], int]
    start: Callable[[Any], int]
    end: Callable[[Any], int]
    nbytes: Callable[[Any], int]
    thread: Callable[[Any], int]
    end_thread: Callable[[Any], int]
    is_async: Callable[[Any], bool]
    hidden: Callable[[Any], bool]

    @staticmethod
    def of(event: Any) -> _Reader:
        kind = type(event)
        return _Reader(
            kind.name,
            kind.device_type,
            kind.device_index,
            kind.start_ns,
            kind.end_ns,
            kind.nbytes,
            kind.start_thread_id,
            kind.end_thread_id,
            kind.is_async,
            kind.is_hidden_event,
        )

    def ints(self, accessor: Callable[[Any], Any], events: list[Any]) -> np.ndarray:
        return np.fromiter(map(accessor, events), dtype=np.int64, count=len(events))

    def flags(self, accessor: Callable[[Any], Any], events: list[Any]) -> np.ndarray:
        return np.fromiter(map(accessor, events), dtype=bool, count=len(events))

    def devices(self, events: list[Any]) -> np.ndarray:
        # Enum members to their integer values (``.value``: torch's pybind enums and Python
        # enums alike); comparing the members themselves costs ~4x more per event.
        return np.fromiter(map(_device_value, map(self.device, events)), dtype=np.int64, count=len(events))


def _read(
    events: list[Any], device_type: str, device_index: int | None, device_events: bool, owned: bool
) -> RawProfile:
    """Read ``events`` block by block into typed arrays; names are interned to int codes.

    When ``owned``, each block's slots in ``events`` are cleared once read, so the event objects
    (a C++ copy each) are freed while the next blocks are read.
    """
    interner = NameCodes.fresh()
    columns = Columns()
    if events:
        reader = _Reader.of(events[0])
        members = type(reader.device(events[0])).__members__
        wanted_names = HOST_DEVICE_TYPES if device_type == "CPU" else ACCELERATOR_DEVICE_TYPES
        wanted = np.array(sorted({m.value for n, m in members.items() if n in wanted_names}), dtype=np.int64)
        cpu = int(members["CPU"].value) if device_events else None
        index = device_index if device_index is not None and device_type != "CPU" else None
        for lo in range(0, len(events), _BLOCK):
            block = events[lo : lo + _BLOCK]
            names = map(reader.name, block)
            codes = np.fromiter(map(interner.__getitem__, names), dtype=np.int32, count=len(block))
            _read_memory(reader, block, codes == _MEMORY_CODE, wanted, index, columns)
            _read_ops(reader, block, codes, cpu, columns)
            del block
            if owned:
                events[lo : lo + _BLOCK] = [None] * min(_BLOCK, len(events) - lo)
    return assemble_raw(columns, list(interner))


def _read_memory(
    reader: _Reader,
    block: list[Any],
    is_memory: np.ndarray,
    wanted: np.ndarray,
    index: int | None,
    columns: Columns,
) -> None:
    records = list(compress(block, is_memory.tolist()))
    if not records:
        return
    keep = np.isin(reader.devices(records), wanted)
    if index is not None:
        keep &= reader.ints(reader.index, records) == index
    if not keep.all():
        records = list(compress(records, keep.tolist()))
    columns.mem_time.append(reader.ints(reader.start, records))
    columns.mem_bytes.append(reader.ints(reader.nbytes, records))
    columns.mem_thread.append(reader.ints(reader.thread, records))


def _read_ops(
    reader: _Reader, block: list[Any], codes: np.ndarray, cpu: int | None, columns: Columns
) -> None:
    """The block's CPU ops (and call markers), but hidden events and the skipped names;
    ``cpu`` None: every event is known to be a CPU event."""
    oplike = (codes >= FIRST_OP_CODE) | (codes == CALL_CODE)
    ops = list(compress(block, oplike.tolist()))
    if not ops:
        return
    op_codes = codes[oplike]
    keep = ~reader.flags(reader.hidden, ops)
    if cpu is not None:
        keep &= reader.devices(ops) == cpu
    if not keep.all():
        ops = list(compress(ops, keep.tolist()))
        op_codes = op_codes[keep]
    start, end = reader.ints(reader.start, ops), reader.ints(reader.end, ops)
    thread = reader.ints(reader.thread, ops)
    is_call = op_codes == CALL_CODE
    if is_call.any():
        columns.calls.extend(zip(start[is_call].tolist(), end[is_call].tolist(), strict=True))
        columns.call_threads.update(thread[is_call].tolist())
        keep = ~is_call
        ops = list(compress(ops, keep.tolist()))
        op_codes, start, end, thread = op_codes[keep], start[keep], end[keep], thread[keep]
    moved = thread != reader.ints(reader.end_thread, ops)  # ended on another thread: async
    columns.op_code.append(op_codes)
    columns.op_start.append(start)
    columns.op_end.append(end)
    columns.op_thread.append(thread)
    columns.op_async.append(reader.flags(reader.is_async, ops) | moved)


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def assemble_raw(columns: Columns, names: list[str]) -> RawProfile:
    codes = _joined(columns.op_code, np.int32)
    table = np.empty(len(names), dtype=object)
    table[:] = names
    mem_bytes = _joined(columns.mem_bytes, np.int64)
    op_thread = _joined(columns.op_thread, np.int64)
    calling = np.array(sorted(columns.call_threads), dtype=np.int64)
    other = other_thread_bytes(
        _joined(columns.mem_thread, np.int64), mem_bytes, calling, op_thread, names, codes
    )
    return RawProfile(
        op_name=table[codes],
        op_start=_joined(columns.op_start, np.int64),
        op_end=_joined(columns.op_end, np.int64),
        op_thread=op_thread,
        op_async=_joined(columns.op_async, bool),
        mem_time=_joined(columns.mem_time, np.int64),
        mem_bytes=mem_bytes,
        calls=sorted(columns.calls),
        other_thread_bytes=other,
        op_code=codes,
        op_code_names=tuple(names),
    )


def return_freed_memory() -> None:
    """Hand the heap pages freed by the released event objects back to the system (glibc's
    ``malloc_trim``), so that the analysis's arrays do not add to the resident peak on top of
    memory the process no longer uses. A no-op where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim  # absent from musl
    except (OSError, AttributeError):
        return
    trim(0)
