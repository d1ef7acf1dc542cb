"""CUDA memory snapshots (``torch.cuda.memory._dump_snapshot()`` pickles) -> snapshot records.

A snapshot is a pickle of builtin types only: ``segments`` (with their ``blocks``),
``device_traces`` (one list of allocator actions per device, when history was recorded),
``allocator_settings`` and ``external_annotations`` in newer releases. A pickle can name any
Python callable and have it run while loading, so this loader refuses every global: a
snapshot that names one (``os.system``, a class, anything) is rejected before anything in it
runs. Importing this module does not import torch.

A pickle can also ask for memory and time out of proportion to its size, and the reader bounds
both: gzip data expands to at most :func:`memprof.core.reading.decompressed_limit`; memo indices
must come in order, as ``pickle`` writes them (a 23-byte pickle naming memo slot 2**27 would
make the unpickler allocate 2 GiB for its memo table); and the reader visits at most one
event, block or frame per byte of the pickle (:class:`_Visits`): a real snapshot stores each
in many bytes, while a pickle bomb points at one list from thousands of places (10,000 devices
sharing one trace) to make a few hundred kilobytes stand for billions of them.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from memprof.core.errors import InputError, brief
from memprof.core.gcpause import gc_paused
from memprof.core.reading import GZIP_MAGIC, gunzip, read_recording_bytes, recording_head
from memprof.core.recording import Provenance, RecordedSnapshot, Recording
from memprof.core.records import (
    ACTION_CODE,
    OTHER_ACTION,
    AllocatorTrace,
    Frame,
    RawProfile,
    SnapshotBlock,
    SnapshotRecords,
    SnapshotSegment,
)
from memprof.core.text import capped_name
from memprof.model.kind import SNAPSHOT_SOURCE
from memprof.sources.files.pickle_scan import MemoOutOfOrder, check_memo

_ZIP_MAGIC = b"PK\x03\x04"


class _RefusedGlobal(Exception):
    """A pickle named a global: loading stops there."""


class _BuiltinsOnlyUnpickler(pickle.Unpickler):
    """An unpickler that can build dicts, lists, tuples, strings and numbers, and nothing that
    needs a global: every ``find_class`` is refused, so no callable named by the file runs."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102 - refusing is the point
        raise _RefusedGlobal(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise _RefusedGlobal("a persistent id")


def load_snapshot_object(path: str | Path) -> Any:
    """The unpickled content of a snapshot file, builtin types only.

    Raises :class:`InputError` for a missing or unreadable file, a truncated or corrupt pickle,
    and for any pickle that names a global (nothing it names is run) or whose memo indices are
    out of order (see the module's notes).
    """
    return _load(path)[0]


def _load(path: str | Path) -> tuple[Any, int]:
    """The unpickled content of a snapshot file and the size of its pickle, in bytes."""
    name = str(path)
    data: bytes | bytearray = read_recording_bytes(path, "snapshot", folder_hint="give a snapshot file")
    if data[:2] == GZIP_MAGIC:
        data = gunzip(data, name)  # never beyond the documented limit
    if data[:4] == _ZIP_MAGIC:
        raise InputError(
            f"{name} is a torch.save archive, not a memory snapshot; write one with "
            "torch.cuda.memory._dump_snapshot(path)"
        )
    if not data:
        raise InputError(f"{name} is empty; give a snapshot written by torch.cuda.memory._dump_snapshot")
    try:
        check_memo(data)
        with gc_paused():
            return _BuiltinsOnlyUnpickler(io.BytesIO(data)).load(), len(data)
    except MemoOutOfOrder as refused:
        raise InputError(
            f"{name}: the pickle stores memo slot {refused.index} after {refused.stored} memo entries; "
            "pickle writes them in order, so this is no snapshot torch wrote (a memo index this large "
            "would only take memory); memprof refuses it"
        ) from None
    except MemoryError:
        from memprof.sources.files.trace import out_of_memory

        raise out_of_memory(name, len(data), "pickle") from None
    except _RefusedGlobal as refused:
        raise InputError(
            f"{name}: the pickle names {refused} (code a pickle can run); memprof refuses it. "
            "A snapshot from torch.cuda.memory._dump_snapshot holds only plain data"
        ) from None
    except EOFError:
        raise InputError(f"{name}: the pickle ends early; the file is truncated, copy it again") from None
    except pickle.UnpicklingError as error:
        if "truncated" in str(error):
            raise InputError(f"{name}: the pickle ends early; the file is truncated, copy it again") from None
        raise InputError(f"{name}: not a readable pickle ({error}); give a CUDA memory snapshot") from None
    except RecursionError:
        raise InputError(f"{name}: the pickle nests too deeply to be a memory snapshot") from None
    except Exception as error:  # noqa: BLE001 - a corrupt pickle raises almost anything
        reason = brief(str(error).split("\n")[0], 200) if str(error) else type(error).__name__
        raise InputError(f"{name}: not a readable pickle ({reason}); give a CUDA memory snapshot") from None


class SnapshotReader:
    """CUDA memory snapshots, as every file reader is asked
    (:mod:`memprof.sources.files.readers`)."""

    name = SNAPSHOT_SOURCE
    what = "a CUDA memory snapshot (a pickle)"
    in_folder = "CUDA memory snapshot (pickle)"
    counted = "snapshot(s)"
    written_by = "torch.cuda.memory._dump_snapshot"

    def sniff(self, path: Path) -> bool:
        """A pickle from its first bytes (plain or gzip): protocol 2 or later starts with PROTO
        (0x80) and the protocol number."""
        head = recording_head(path)
        return head is not None and len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5

    def read(self, path: Path, rank: int | None = None) -> list[Recording]:
        """One recording per GPU with segments or trace events; ``rank``: the rank the caller
        gives (a snapshot records none)."""
        records = read_snapshot(path)
        devices = records.devices()
        if not devices:
            raise InputError(
                f"{path}: this snapshot has no segments and no trace: nothing was allocated on a GPU"
            )
        file = Provenance(path=str(path), rank=rank)
        # A snapshot holds no profiler records: the numbers are its allocator's.
        none = RawProfile.from_lists([], [])
        return [
            Recording(
                label=f"cuda:{i}",
                mode=None,
                raw=none,
                device=f"cuda:{i}",
                source=self.name,
                file=file,
                snapshot=RecordedSnapshot(records, index=i),
            )
            for i in devices
        ]


def read_snapshot(path: str | Path) -> SnapshotRecords:
    """Read a CUDA memory snapshot into :class:`SnapshotRecords`.

    Raises :class:`InputError` for anything that is not a readable snapshot (see
    :func:`load_snapshot_object`), or whose fields have the wrong types.
    """
    content, size = _load(path)
    try:
        with gc_paused():
            return snapshot_records(content, str(path), visits=size)
    except MemoryError:
        from memprof.sources.files.trace import out_of_memory

        raise out_of_memory(str(path), size, "pickle") from None


def snapshot_records(content: Any, name: str = "snapshot", *, visits: int | None = None) -> SnapshotRecords:
    """Build :class:`SnapshotRecords` from an unpickled snapshot (``torch.cuda.memory._snapshot()``
    output, or the bare segment list of ``torch.cuda.memory_snapshot()``). ``visits``: the most
    events, blocks and frames to visit (the size of the pickle read; None: no limit)."""
    if isinstance(content, list):
        content = {"segments": content}
    if not isinstance(content, dict) or not isinstance(content.get("segments"), list):
        raise InputError(
            f"{name}: not a CUDA memory snapshot (no segments list); write one with "
            "torch.cuda.memory._dump_snapshot(path)"
        )
    budget = _Visits(visits)
    stacks = _Stacks(budget)
    try:
        budget.spend(len(content["segments"]))
        segments = tuple(_segment(item, stacks, budget) for item in content["segments"])
        traces_in = content.get("device_traces") or []
        if not isinstance(traces_in, list):
            raise TypeError("device_traces is not a list")
        traces = {device: _trace(entries, stacks, budget) for device, entries in enumerate(traces_in)}
        _check_total(segments, traces)
    except _TooManyVisits:
        raise InputError(
            f"{name}: the pickle refers to more events, blocks and frames than its {visits:,} bytes can "
            "hold (it points at the same lists again and again: a pickle bomb, not a snapshot torch "
            "wrote); memprof reads at most one per byte"
        ) from None
    except (TypeError, KeyError, ValueError, AttributeError, OverflowError, RecursionError) as error:
        reason = _reason(error)
        raise InputError(f"{name}: malformed snapshot ({reason}); the file is not one torch wrote") from None
    settings = content.get("allocator_settings")
    return SnapshotRecords(
        segments=segments,
        traces=traces,
        stacks=tuple(stacks.stacks),
        allocator_settings=settings if isinstance(settings, dict) else None,
    )


def _reason(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"missing field {brief(error.args[0])}"
    if isinstance(error, RecursionError):
        return "a field nests lists or dicts too deeply"
    return str(error).split("\n")[0] or type(error).__name__


class _TooManyVisits(Exception):
    """The reader was asked to visit more events, blocks and frames than the pickle can hold."""


class _Visits:
    """What the reader may still visit: events, blocks and frames, one per byte of the pickle
    (see the module's notes); no limit for content that did not come from a file."""

    def __init__(self, limit: int | None) -> None:
        self.left = limit

    def spend(self, count: int) -> None:
        if self.left is not None:
            self.left -= count
            if self.left < 0:
                raise _TooManyVisits


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# All sizes of one snapshot together stay below this: 4 EiB, far beyond any device's memory,
# and sums of it fit the 64-bit integers the analysis adds them in.
_MAX_TOTAL = 1 << 62


class _Stacks:
    """Interns frames and whole stacks. A trace repeats a few hundred frames hundreds of
    thousands of times, and the pickle stores each frame once (its memo), so the unpickled
    frame dicts are shared objects: they are looked up by identity first, and so is a list of
    frames that several entries share (its frames are then visited once, not once per entry).
    The content must stay alive while this is used (identities are not reused meanwhile)."""

    def __init__(self, budget: _Visits | None = None) -> None:
        self.stacks: list[tuple[Frame, ...]] = []
        self._budget = budget or _Visits(None)
        self._stack_ids: dict[tuple[Frame, ...], int] = {}
        self._by_list: dict[int, int] = {}
        self._by_identity: dict[tuple[int, ...], int] = {}
        self._frame_by_identity: dict[int, Frame] = {}
        self._frames: dict[tuple[str, int, str], Frame] = {}
        # Each distinct string object once: a pickle can share one 1 MB file name among 100,000
        # frames (its memo), and capping (hashing) it again per frame made that hours of work.
        self._names: dict[int, tuple[str, str]] = {}  # id -> (the string, kept alive; its capped form)

    def add(self, frames: Any) -> int:
        if not frames:
            return -1
        if not isinstance(frames, list):
            raise TypeError("frames is not a list")
        index = self._by_list.get(id(frames))
        if index is not None:
            return index
        self._budget.spend(len(frames))
        identity = tuple(map(id, frames))
        index = self._by_identity.get(identity)
        if index is None:
            whole = tuple(self._frame(item) for item in frames)
            index = self._stack_ids.get(whole)
            if index is None:
                index = self._stack_ids[whole] = len(self.stacks)
                self.stacks.append(whole)
            self._by_identity[identity] = index
        self._by_list[id(frames)] = index
        return index

    def _frame(self, item: Any) -> Frame:
        frame = self._frame_by_identity.get(id(item))
        if frame is None:
            if not isinstance(item, dict):
                raise TypeError("a frame is not a dict")
            key = (self._name(item["filename"]), _int(item["line"]), self._name(item["name"]))
            frame = self._frames.get(key)
            if frame is None:
                frame = self._frames[key] = Frame(*key)
            self._frame_by_identity[id(item)] = frame
        return frame

    def _name(self, value: Any) -> str:
        known = self._names.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        capped = capped_name(_str(value))
        self._names[id(value)] = (value, capped)
        return capped


def _segment(item: Any, stacks: _Stacks, budget: _Visits) -> SnapshotSegment:
    if not isinstance(item, dict):
        raise TypeError("a segment is not a dict")
    address = _int(item["address"])
    blocks = []
    offset = address
    listed = item.get("blocks") or []
    if not isinstance(listed, list):
        raise TypeError("a segment's blocks is not a list")
    budget.spend(len(listed))
    for block in listed:
        if not isinstance(block, dict):
            raise TypeError("a block is not a dict")
        size = _size(block["size"], "a block's size")
        frames = block.get("frames")
        if frames is None and isinstance(block.get("history"), list) and block["history"]:
            # Older snapshots keep each block's allocation history; the last entry is current.
            frames = block["history"][-1].get("frames")
        blocks.append(
            SnapshotBlock(
                # Older snapshots have no block addresses: blocks tile the segment in order.
                address=_int(block["address"]) if "address" in block else offset,
                size=size,
                requested_size=_size(block.get("requested_size", size), "a block's requested size"),
                state=_str(block["state"]),
                stack=stacks.add(frames),
            )
        )
        offset += size
    pool = item.get("segment_pool_id", (0, 0))
    pool_ok = isinstance(pool, tuple | list) and len(pool) == 2
    return SnapshotSegment(
        device=_int(item.get("device", 0)),
        address=address,
        total_size=_size(item["total_size"], "a segment's total size"),
        stream=_int(item.get("stream", 0)),
        segment_type=_str(item.get("segment_type", "large")),
        is_expandable=bool(item.get("is_expandable", False)),
        pool_id=(_int(pool[0]), _int(pool[1])) if pool_ok else (0, 0),
        blocks=tuple(blocks),
    )


def _trace(entries: Any, stacks: _Stacks, budget: _Visits) -> AllocatorTrace:
    if not isinstance(entries, list):
        raise TypeError("a device trace is not a list")
    count = len(entries)
    budget.spend(count)
    action = np.empty(count, dtype=np.int8)
    addr = np.empty(count, dtype=np.int64)
    size = np.empty(count, dtype=np.int64)
    stream = np.empty(count, dtype=np.int64)
    time_us = np.full(count, -1, dtype=np.int64)
    stack = np.empty(count, dtype=np.int32)
    codes = ACTION_CODE
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise TypeError("a trace entry is not a dict")
        action[i] = codes.get(_str(entry["action"]), OTHER_ACTION)
        addr[i] = _int(entry.get("addr", 0))
        size[i] = _int(entry.get("size", 0))
        stream[i] = _int(entry.get("stream", 0))
        if "time_us" in entry:
            time_us[i] = _int(entry["time_us"])
        stack[i] = stacks.add(entry.get("frames"))
    if count and ((size < 0).any() or (addr < 0).any()):
        raise ValueError("a trace entry has a negative size or address")
    return AllocatorTrace(action=action, addr=addr, size=size, stream=stream, time_us=time_us, stack=stack)


def _int(value: Any) -> int:
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{brief(value)} is not an integer")  # brief: the value may be huge or deep
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{brief(value)} is out of a 64-bit integer's range")
    return value


def _size(value: Any, what: str) -> int:
    size = _int(value)
    if size < 0:
        raise ValueError(f"{what} is negative")
    return size


def _check_total(segments: tuple[SnapshotSegment, ...], traces: dict[int, AllocatorTrace]) -> None:
    """Refuse sizes that add up beyond any device (and beyond what 64-bit sums hold)."""
    total = float(sum(s.total_size + sum(b.size + b.requested_size for b in s.blocks) for s in segments))
    # In floating point: an int64 sum of a trace's sizes could wrap around instead.
    total += sum(float(trace.size.sum(dtype=np.float64)) for trace in traces.values())
    if total >= _MAX_TOTAL:
        raise ValueError("its sizes add up to more than 4 EiB, more than any device holds")


def _str(value: Any) -> str:
    if type(value) is not str:
        raise TypeError(f"{brief(value)} is not a string")
    return value
