"""Chrome traces written by ``torch.profiler`` (``prof.export_chrome_trace``,
``tensorboard_trace_handler``) -> one set of records per device that has memory events.

A trace is JSON, plain or gzip-compressed (detected from the content, not the name), holding
``traceEvents``: ops are ``"ph": "X"`` events (``cat`` ``cpu_op``; ``Operator`` in the 2021
schema; ``user_annotation`` for ``record_function`` ranges), memory records are ``"ph": "i"``
events named ``[memory]`` whose ``args`` carry ``Device Type``, ``Device Id``, ``Bytes`` and
(since 2022) ``Total Allocated``/``Total Reserved``. Times are microseconds; memprof keeps
integer nanoseconds.

The per-event Python work is one pass that copies a few fields into lists; everything else
(time conversion, sorting, per-device numbers) is numpy. Importing this module does not
import torch.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from memprof.core.errors import InputError
from memprof.core.gcpause import gc_paused
from memprof.core.reading import GZIP_MAGIC, gunzip, read_recording_bytes, recording_head
from memprof.core.recording import Provenance, RecordedMemory, Recording
from memprof.core.records import CALL_MARKER, RawProfile, other_thread_bytes, string_codes
from memprof.core.text import NAME_LIMIT, capped_name
from memprof.core.units import format_bytes
from memprof.model.kind import TRACE_SOURCE as TRACE
from memprof.sources.live.kineto import _SKIPPED_NAMES


def _json_loads() -> Callable[[bytes | bytearray], Any]:
    """orjson's ``loads`` where the ``fast`` extra is installed (~1.5x faster), else the stdlib's."""
    try:
        loads: Callable[[bytes | bytearray], Any] = importlib.import_module("orjson").loads
        return loads
    except ImportError:  # pragma: no cover - exercised where orjson is not installed
        return json.loads


_loads = _json_loads()

OP_CATEGORIES = frozenset({"cpu_op", "Operator", "user_annotation"})
"""``cat`` of the ``X`` events memprof reads as op intervals: aten ops (``cpu_op``; ``Operator``
in the 2021 schema) and ``record_function`` ranges (``user_annotation``), as a live run sees them."""

# c10::DeviceType numbers: host allocators, and accelerators by the name torch prints.
_HOST_TYPES = frozenset({0, 2, 5})  # CPU, MKLDNN, IDEEP
_ACCELERATOR_NAMES = {1: "cuda", 6: "cuda", 12: "xpu", 13: "mps", 19: "mtia", 20: "privateuseone"}
HIP_DEVICE_TYPE = 6

_MISSING = -1  # a field absent from an event (Total Allocated/Reserved are never negative)


@dataclass(frozen=True)
class DeviceProperties:
    """A GPU as ``deviceProperties`` describes it."""

    index: int
    name: str
    total_bytes: int | None


@dataclass(frozen=True, kw_only=True)
class TraceDevice(RecordedMemory):
    """One device's memory in one trace, as recorded (the numbers are worked out from it by
    :func:`memprof.analysis.recorded.recorded_peak`).

    ``live`` is the allocator's ``Total Allocated`` after each record (time order), or the
    running sum of ``Bytes`` when the trace has none (2021 schema); ``live_at_start_bytes``
    what was live when the trace began; ``reserved`` the ``Total Reserved`` (None when the
    trace has none). ``raw`` holds every op of the trace and this device's records, ready for
    :func:`memprof.analysis.peaks.analyze` (the per-op table). ``device_name`` and
    ``device_total_bytes``: the GPU's, from ``deviceProperties`` (None when not recorded).
    ``notes``: what the reader noticed of this device.
    """

    device: str
    index: int
    raw: RawProfile
    device_name: str | None = None
    device_total_bytes: int | None = None
    notes: tuple[str, ...] = ()
    device_type: int
    hip: bool
    rank: int | None
    allocations: int
    frees: int

    @property
    def device_index(self) -> int:
        """The device's index (``Device Id``; -1 for the host)."""
        return self.index

    @property
    def label(self) -> str:
        """``rank1/cuda:0`` for a ranked trace, else ``cuda:0``."""
        return self.device if self.rank is None else f"rank{self.rank}/{self.device}"


@dataclass(frozen=True)
class Trace:
    """A chrome trace, read: its devices' records and what the trace says about itself."""

    path: str
    rank: int | None
    world_size: int | None
    distributed_backend: str | None
    torch_version: str | None
    schema_version: int | None
    events: int
    ops: int
    """Op intervals read: aten ops and ``record_function`` ranges."""
    cpu_ops: int
    """``X`` events of ``cat`` ``cpu_op`` (``Operator`` in the 2021 schema): the aten ops."""
    devices: tuple[TraceDevice, ...]
    device_properties: tuple[DeviceProperties, ...]
    notes: tuple[str, ...] = field(default=())

    def recordings(self) -> list[Recording]:
        """The trace as every file reader hands it over: one recording per device."""
        file = Provenance(
            path=self.path,
            rank=self.rank,
            world_size=self.world_size,
            distributed_backend=self.distributed_backend,
            torch_version=self.torch_version,
        )
        return [
            Recording(
                label=device.device,
                mode=None,
                raw=device.raw,
                device=device.device,
                source=TRACE,
                device_facts={
                    "device_name": device.device_name,
                    "device_total_bytes": device.device_total_bytes,
                },
                notes=(*self.notes, *device.notes),
                file=file,
                memory=RecordedMemory(
                    live=device.live,
                    live_at_start_bytes=device.live_at_start_bytes,
                    reserved=device.reserved,
                    records=device.records,
                ),
            )
            for device in self.devices
        ]


# --------------------------------------------------------------------------------------------
# Detecting and loading


class TraceReader:
    """Chrome traces, as every file reader is asked (:mod:`memprof.sources.files.readers`)."""

    name = TRACE
    what = "a chrome trace (JSON, plain or gzip)"
    in_folder = "chrome trace (.json, .json.gz)"
    counted = "chrome trace(s)"
    written_by = "prof.export_chrome_trace"

    def sniff(self, path: Path) -> bool:
        """JSON (plain or gzip) from its first bytes: an object or an array."""
        head = recording_head(path)
        return head is not None and head.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] in (b"{", b"[")

    def read(self, path: Path, rank: int | None = None) -> list[Recording]:
        """One recording per device with memory records; ``rank`` when the trace records none."""
        trace = read_trace(path, rank)
        if not trace.devices:
            raise InputError(
                f"{path}: no [memory] events in this trace; record it with "
                "torch.profiler.profile(profile_memory=True)"
            )
        return trace.recordings()


def load_trace_json(path: str | Path) -> Any:
    """The parsed JSON of a trace file (gzip or plain). Missing, unreadable, truncated or
    non-JSON files raise :class:`InputError` saying which."""
    name = str(path)
    hint = "give a trace file, or the folder to read every rank"
    data: bytes | bytearray = read_recording_bytes(path, "trace", folder_hint=hint)
    if data[:2] == GZIP_MAGIC:
        data = gunzip(data, name)  # never beyond the documented limit
    if not data.strip():
        raise InputError(f"{name} is empty; give a trace written by prof.export_chrome_trace")
    try:
        with gc_paused():
            return _loads(data)
    except ValueError as failure:
        raise _json_error(data, name, failure) from None
    except RecursionError:
        raise _too_deep(name) from None
    except MemoryError:
        raise out_of_memory(name, len(data), "JSON") from None


def out_of_memory(name: str, size: int, what: str) -> InputError:
    """The message for a recording too large for the memory memprof has."""
    return InputError(
        f"{name}: not enough memory to read it ({format_bytes(size)} of {what}); give memprof more memory, "
        "or record a shorter trace"
    )


def _too_deep(name: str) -> InputError:
    return InputError(f"{name}: the JSON nests arrays or objects too deeply to be a chrome trace")


def _json_error(data: bytes | bytearray, name: str, failure: ValueError) -> InputError:
    """The message for text that is not JSON, with the standard library's position."""
    detail: ValueError = failure
    if _loads is not json.loads:  # orjson's words differ by version; the standard library's do not
        try:
            json.loads(data)
        except ValueError as again:
            detail = again
        except RecursionError:  # orjson stops at 1024 levels, the standard library at the stack
            return _too_deep(name)
    reason = str(detail).split("\n")[0]
    if isinstance(detail, json.JSONDecodeError) and detail.pos >= len(data.rstrip()) - 1:
        return InputError(f"{name}: the JSON ends early ({reason}); the file is truncated")
    return InputError(f"{name}: not valid JSON ({reason}); give a chrome trace (.json or .json.gz)")


# --------------------------------------------------------------------------------------------
# Reading


def read_trace(path: str | Path, rank: int | None = None) -> Trace:
    """Read one chrome trace into per-device records and numbers.

    ``rank`` is used when the trace does not record ``distributedInfo.rank``. Raises
    :class:`InputError` for a file that is not a readable chrome trace.
    """
    document = load_trace_json(path)
    with gc_paused():
        return _read_document(document, str(path), rank)


def _read_document(document: Any, name: str, rank_hint: int | None) -> Trace:
    meta: dict[str, Any] = document if isinstance(document, dict) else {}
    events = meta.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        if "schema_version" in meta and "runs" in meta:
            raise InputError(
                f"{name} is a memprof report, not a chrome trace; gate it with `memprof check`, or give "
                "the trace it was made from"
            )
        raise InputError(
            f"{name}: not a chrome trace (no traceEvents list); give a file written by "
            "prof.export_chrome_trace or tensorboard_trace_handler"
        )
    columns = _extract(events, name)
    info = meta.get("distributedInfo")
    distributed: dict[str, Any] = info if isinstance(info, dict) else {}
    backend = distributed.get("backend")
    rank = _int_or_none(distributed.get("rank"))
    if rank is None:
        rank = rank_hint
    properties = _device_properties(meta.get("deviceProperties"))
    hip = "hip_runtime_version" in meta or "roctracer_version" in meta
    raw_ops, thread_of_mem = _ops(columns, name)
    devices = tuple(
        _device(columns, raw_ops, thread_of_mem, key, rank, properties, hip, name)
        for key in _device_keys(columns, name)
    )
    schema = meta.get("schemaVersion")
    return Trace(
        path=name,
        rank=rank,
        world_size=_int_or_none(distributed.get("world_size")),
        distributed_backend=capped_name(backend) if isinstance(backend, str) else None,
        torch_version=_torch_version(meta),
        schema_version=schema if isinstance(schema, int) and not isinstance(schema, bool) else None,
        events=len(events),
        ops=len(raw_ops.op_name),
        cpu_ops=len(columns.op_name) - columns.ranges,
        devices=devices,
        device_properties=properties,
        notes=() if devices else ("no [memory] events: record the trace with profile_memory=True",),
    )


@dataclass
class _Columns:
    """The fields memprof needs, copied out of the events in file order."""

    op_name: list[Any] = field(default_factory=list)
    op_ts: list[Any] = field(default_factory=list)
    op_dur: list[Any] = field(default_factory=list)
    op_tid: list[Any] = field(default_factory=list)
    mem_ts: list[Any] = field(default_factory=list)
    mem_tid: list[Any] = field(default_factory=list)
    mem_type: list[Any] = field(default_factory=list)
    mem_id: list[Any] = field(default_factory=list)
    mem_bytes: list[Any] = field(default_factory=list)
    mem_total: list[Any] = field(default_factory=list)
    mem_reserved: list[Any] = field(default_factory=list)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    ranges: int = 0  # record_function ranges (user_annotation) among the ops


def _extract(events: list[Any], name: str) -> _Columns:
    """One pass over the events: the only per-event Python work."""
    columns = _Columns()
    try:
        _scan(events, columns)
    except (AttributeError, TypeError):
        for index, event in enumerate(events):  # find the culprit, for the message
            try:
                _scan([event], _Columns())
            except (AttributeError, TypeError):
                raise InputError(
                    f"{name}: traceEvents[{index}] is not an event object (a dict with a string name "
                    "and cat, and args); not a chrome trace"
                ) from None
        raise
    return columns


def _scan(events: list[Any], c: _Columns) -> None:
    op_cats, skipped = OP_CATEGORIES, _SKIPPED_NAMES
    op_name, op_ts, op_dur, op_tid = c.op_name.append, c.op_ts.append, c.op_dur.append, c.op_tid.append
    mem_ts, mem_tid, mem_type, mem_id = c.mem_ts.append, c.mem_tid.append, c.mem_type.append, c.mem_id.append
    mem_bytes, mem_total, mem_reserved = c.mem_bytes.append, c.mem_total.append, c.mem_reserved.append
    for event in events:
        ph = event.get("ph")
        if ph == "X":
            cat = event.get("cat")
            if cat in op_cats and event.get("name") not in skipped:
                c.ranges += cat == "user_annotation"
                op_name(event.get("name"))
                op_ts(event.get("ts"))
                op_dur(event.get("dur"))
                op_tid(event.get("tid"))
        elif ph == "i" and event.get("name") == "[memory]":
            args = event.get("args")
            mem_ts(event.get("ts"))
            mem_tid(event.get("tid"))
            mem_type(args.get("Device Type"))
            mem_id(args.get("Device Id", 0))
            mem_bytes(args.get("Bytes"))
            mem_total(args.get("Total Allocated", _MISSING))
            mem_reserved(args.get("Total Reserved", _MISSING))


def _ops(c: _Columns, name: str) -> tuple[RawProfile, np.ndarray]:
    """Op intervals and ``memprof.call`` ranges as a RawProfile without memory records, and the
    thread number of every memory record (tids compared as strings: the 2021 schema writes op
    tids as strings and memory tids as numbers)."""
    if not all(type(n) is str for n in c.op_name):
        raise InputError(f"{name}: an op event has a name that is not a string; the trace is malformed")
    if max(map(len, c.op_name), default=0) > NAME_LIMIT:
        c.op_name[:] = map(capped_name, c.op_name)  # a 50-million-character name is kept short
    start = _to_ns(c.op_ts, name, "ts of an op event")
    end = start + _to_ns(c.op_dur, name, "dur of an op event")
    if (end < start).any():
        raise InputError(f"{name}: an op event has a negative dur; the trace is malformed")
    threads = _thread_codes(c.op_tid, c.mem_tid, name)
    op_thread, mem_thread = threads[: len(c.op_tid)], threads[len(c.op_tid) :]
    names = np.empty(len(c.op_name), dtype=object)
    names[:] = c.op_name
    is_call = names == CALL_MARKER
    calls = sorted(zip(start[is_call].tolist(), end[is_call].tolist(), strict=True))
    keep = ~is_call
    raw = RawProfile(
        op_name=names[keep],
        op_start=start[keep],
        op_end=end[keep],
        op_thread=op_thread[keep],
        op_async=np.zeros(int(keep.sum()), dtype=bool),
        mem_time=np.zeros(0, dtype=np.int64),
        mem_bytes=np.zeros(0, dtype=np.int64),
        calls=calls,
    )
    c.arrays["call_threads"] = np.unique(op_thread[is_call])
    return raw, mem_thread


def _device_keys(c: _Columns, name: str) -> list[tuple[int, int]]:
    """(device type, device index) of every device with memory records, host first."""
    types = _ints(c.mem_type, name, "Device Type of a [memory] event")
    ids = _ints(c.mem_id, name, "Device Id of a [memory] event")
    host = np.isin(types, list(_HOST_TYPES))
    # Host allocators (CPU, MKLDNN, IDEEP) are one device, as torch's "CPU Mem" counts them.
    types = np.where(host, 0, types)
    ids = np.where(host, -1, ids)
    c.arrays["type"], c.arrays["id"] = types, ids
    pairs = np.unique(np.stack([types, ids], axis=1), axis=0) if len(types) else np.zeros((0, 2), np.int64)
    return [(int(t), int(i)) for t, i in pairs]


def _device(
    c: _Columns,
    ops: RawProfile,
    mem_thread: np.ndarray,
    key: tuple[int, int],
    rank: int | None,
    properties: tuple[DeviceProperties, ...],
    hip_runtime: bool,
    name: str,
) -> TraceDevice:
    device_type, device_index = key
    if "ts" not in c.arrays:
        c.arrays["ts"] = _to_ns(c.mem_ts, name, "ts of a [memory] event")
        c.arrays["bytes"] = _ints(c.mem_bytes, name, "Bytes of a [memory] event")
        c.arrays["total"] = _ints(c.mem_total, name, "Total Allocated of a [memory] event")
        c.arrays["reserved"] = _ints(c.mem_reserved, name, "Total Reserved of a [memory] event")
        _check_sums(c.arrays["bytes"], c.arrays["total"], c.arrays["reserved"], name)
    mine = np.flatnonzero((c.arrays["type"] == device_type) & (c.arrays["id"] == device_index))
    # Time order (file order among equal times): with an autograd thread the file order
    # breaks Total Allocated[i] = Total Allocated[i-1] + Bytes[i]; time order restores it.
    mine = mine[np.argsort(c.arrays["ts"][mine], kind="stable")]
    times, deltas, threads = c.arrays["ts"][mine], c.arrays["bytes"][mine], mem_thread[mine]
    total, reserved = c.arrays["total"][mine], c.arrays["reserved"][mine]
    notes: list[str] = []
    live, live_at_start = _live_bytes(deltas, total, notes)
    if device_type in _HOST_TYPES:
        device, hip = "cpu", False
    else:
        device = f"{_ACCELERATOR_NAMES.get(device_type, f'device_type{device_type}')}:{device_index}"
        hip = device_type == HIP_DEVICE_TYPE or (device_type == 1 and hip_runtime)
    if hip:
        notes.append(f"{device} is an AMD GPU (HIP, ROCm build of torch)")
    gpu = next((p for p in properties if p.index == device_index), None) if device != "cpu" else None
    return TraceDevice(
        device=device,
        index=device_index,
        device_type=device_type,
        hip=hip,
        rank=rank,
        device_name=gpu.name if gpu else None,
        device_total_bytes=gpu.total_bytes if gpu else None,
        raw=_with_memory(ops, times, deltas, threads, c.arrays["call_threads"]),
        live=live,
        live_at_start_bytes=live_at_start,
        reserved=reserved if bool((reserved >= 0).all()) else None,
        records=len(mine),
        allocations=int((deltas > 0).sum()),
        frees=int((deltas < 0).sum()),
        notes=tuple(notes),
    )


def _live_bytes(deltas: np.ndarray, total: np.ndarray, notes: list[str]) -> tuple[np.ndarray, int]:
    """Live bytes after each record (time order) and live at the start.

    With ``Total Allocated`` (the allocator's own counter) both are read off it; without it
    (2021 schema) live is the running sum of ``Bytes`` from the least start that keeps it from
    going negative (0 unless the trace frees memory allocated before it began).
    """
    if len(total) and (total >= 0).all():
        live = total
        breaks = int((total[1:] != total[:-1] + deltas[1:]).sum())
        if breaks:
            notes.append(
                f"Total Allocated does not follow Bytes at {breaks} record(s) even in time order; "
                "the numbers are the allocator's Total Allocated"
            )
        return live, int(total[0] - deltas[0])
    running = np.cumsum(deltas, dtype=np.int64)
    start = max(0, -int(running.min())) if len(running) else 0
    if (total < 0).all():
        notes.append(
            "this trace has no Total Allocated (2021 schema): live bytes are the running sum of Bytes"
        )
    else:
        notes.append("some records have no Total Allocated: live bytes are the running sum of Bytes")
    if start:
        notes.append(
            f"it frees {start} bytes more than it allocates first: memory allocated before the trace began"
        )
    return running + start, start


def _with_memory(
    ops: RawProfile, times: np.ndarray, deltas: np.ndarray, threads: np.ndarray, call_threads: np.ndarray
) -> RawProfile:
    other = other_thread_bytes(threads, deltas, call_threads, ops.op_thread, ops.op_name)
    return replace(ops, mem_time=times, mem_bytes=deltas, other_thread_bytes=other, mem_thread=threads)


# --------------------------------------------------------------------------------------------
# Conversions (vectorised; a wrong type anywhere is an InputError, never a traceback)


def _to_ns(values: list[Any], name: str, what: str) -> np.ndarray:
    """Microseconds (int or float) -> integer nanoseconds, exactly for every value a double
    holds to the nanosecond (integers of any size torch writes; fractions below 2**43 us)."""
    if not values:
        return np.zeros(0, dtype=np.int64)
    try:
        array = np.asarray(values)
    except (ValueError, TypeError):
        raise InputError(f"{name}: {what} is not a number; the trace is malformed") from None
    if array.dtype.kind in "iu":
        if len(array) and (np.abs(array) >= 9_000_000_000_000_000).any():
            raise InputError(f"{name}: {what} is out of range; the trace is malformed")
        return array.astype(np.int64) * 1000
    if array.dtype.kind != "f" or array.ndim != 1 or not np.isfinite(array).all():
        raise InputError(f"{name}: {what} is not a number; the trace is malformed")
    if (np.abs(array) >= 9.0e15).any():
        raise InputError(f"{name}: {what} is out of range; the trace is malformed")
    whole = np.floor(array)
    return whole.astype(np.int64) * 1000 + np.rint((array - whole) * 1000).astype(np.int64)


def _ints(values: list[Any], name: str, what: str) -> np.ndarray:
    if not values:
        return np.zeros(0, dtype=np.int64)
    try:
        array = np.asarray(values)
    except (ValueError, TypeError):
        array = np.zeros(0, dtype=object)
    if array.dtype.kind not in "iub" or array.ndim != 1:
        if all(type(value) is int for value in values):  # numpy's object array: past 64 bits
            raise InputError(f"{name}: {what} is past a 64-bit integer's range; the trace is malformed")
        raise InputError(f"{name}: {what} is not an integer; the trace is malformed")
    if array.dtype.kind == "u" and len(array) and int(array.max()) > np.iinfo(np.int64).max:
        # 2**63 to 2**64 - 1 read as unsigned: as int64 they would wrap round to negatives
        raise InputError(f"{name}: {what} is past a 64-bit integer's range; the trace is malformed")
    return array.astype(np.int64)


_MAX_SUM = float(1 << 62)
"""The most bytes a trace's records may add up to (4 EiB, more than any device holds): below it
no running sum of 64-bit integers can wrap round."""


def _check_sums(deltas: np.ndarray, total: np.ndarray, reserved: np.ndarray, name: str) -> None:
    """Refuse byte counts whose sums would pass 64 bits (``"Bytes": -9223372036854775808``
    twice): summed in floating point, where they cannot wrap round as int64 sums would."""
    if len(deltas) and float(np.abs(deltas.astype(np.float64)).sum()) >= _MAX_SUM:
        raise InputError(
            f"{name}: the Bytes of its [memory] events add up to more than 4 EiB, more than any device "
            "holds; the trace is malformed"
        )
    for levels, what in ((total, "Total Allocated"), (reserved, "Total Reserved")):
        if len(levels) and float(np.abs(levels.astype(np.float64)).max()) >= _MAX_SUM:
            raise InputError(
                f"{name}: a {what} of its [memory] events is more than 4 EiB, more than any device "
                "holds; the trace is malformed"
            )


def _thread_codes(op_tids: list[Any], mem_tids: list[Any], name: str) -> np.ndarray:
    """One integer per distinct tid, tids compared as strings (``"25738"`` == ``25738``)."""
    tids = op_tids + mem_tids
    if not tids:
        return np.zeros(0, dtype=np.int64)
    if all(type(t) is int for t in tids):
        array = np.asarray(tids)
        if array.dtype.kind in "iu":
            _, codes = np.unique(array, return_inverse=True)
            return codes.astype(np.int64).reshape(-1)
    if not all(isinstance(t, int | str) for t in tids):
        raise InputError(f"{name}: an event's tid is neither a number nor a string; malformed trace")
    return string_codes(tids)[1]


def _device_properties(value: Any) -> tuple[DeviceProperties, ...]:
    if not isinstance(value, list):
        return ()
    found = []
    for position, item in enumerate(value):
        if not isinstance(item, dict):
            continue
        index = _int_or_none(item.get("id"))
        name = item.get("name")
        found.append(
            DeviceProperties(
                index=position if index is None else index,
                name=capped_name(name) if isinstance(name, str) else f"device {position}",
                total_bytes=_int_or_none(item.get("totalGlobalMem")),
            )
        )
    return tuple(found)


def _torch_version(meta: dict[str, Any]) -> str | None:
    """The torch version, where a trace records it: a ``torch_version``/``pytorch_version``
    metadata entry (``prof.add_metadata_json``), or ``torch==X`` in a recorded package list."""
    places = [meta]
    extra = meta.get("metadata")
    if isinstance(extra, dict):
        places.append(extra)
        system = extra.get("system")
        if isinstance(system, dict):
            places.append(system)
    for place in places:
        for key in ("torch_version", "pytorch_version"):
            value = place.get(key)
            if isinstance(value, str) and value:
                return capped_name(value)
        packages = place.get("pip_packages")
        if isinstance(packages, list):
            for entry in packages:
                if isinstance(entry, str) and entry.startswith("torch=="):
                    return capped_name(entry[len("torch==") :])
    return None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
