"""CUDA memory snapshots (``torch.cuda.memory._dump_snapshot()`` pickles) -> snapshot records.

A snapshot is a pickle of builtin types only: ``segments`` (with their ``blocks``),
``device_traces`` (one list of allocator actions per device, when history was recorded),
``allocator_settings`` and ``external_annotations`` in newer releases. A pickle can name any
Python callable and have it run while loading, so this loader refuses every global: a
snapshot that names one (``os.system``, a class, anything) is rejected before anything in it
runs. Importing this module does not import torch.
"""

from __future__ import annotations

import gzip
import io
import pickle
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from memprof.errors import InputError
from memprof.fileio import read_recording_bytes
from memprof.gcpause import gc_paused
from memprof.records import (
    ACTION_CODE,
    OTHER_ACTION,
    AllocatorTrace,
    Frame,
    SnapshotBlock,
    SnapshotRecords,
    SnapshotSegment,
)

_GZIP_MAGIC = b"\x1f\x8b"
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
    and for any pickle that names a global (nothing it names is run).
    """
    name = str(path)
    data = read_recording_bytes(path, "snapshot", folder_hint="give a snapshot file")
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error):
            raise InputError(f"{name}: the gzip data is truncated or corrupt; copy the file again") from None
    if data[:4] == _ZIP_MAGIC:
        raise InputError(
            f"{name} is a torch.save archive, not a memory snapshot; write one with "
            "torch.cuda.memory._dump_snapshot(path)"
        )
    if not data:
        raise InputError(f"{name} is empty; give a snapshot written by torch.cuda.memory._dump_snapshot")
    try:
        with gc_paused():
            return _BuiltinsOnlyUnpickler(io.BytesIO(data)).load()
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
        reason = str(error).split("\n")[0] or type(error).__name__
        raise InputError(f"{name}: not a readable pickle ({reason}); give a CUDA memory snapshot") from None


def snapshot_files(folder: str | Path) -> list[Path]:
    """The snapshot pickles in ``folder`` (not its subfolders), detected by content, by name."""
    from memprof.sources.trace import input_kind

    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"{root} is not a folder")
    return sorted(p for p in root.iterdir() if p.is_file() and input_kind(p) == "snapshot")


def read_snapshot(path: str | Path) -> SnapshotRecords:
    """Read a CUDA memory snapshot into :class:`SnapshotRecords`.

    Raises :class:`InputError` for anything that is not a readable snapshot (see
    :func:`load_snapshot_object`), or whose fields have the wrong types.
    """
    content = load_snapshot_object(path)
    with gc_paused():
        return snapshot_records(content, str(path))


def snapshot_records(content: Any, name: str = "snapshot") -> SnapshotRecords:
    """Build :class:`SnapshotRecords` from an unpickled snapshot (``torch.cuda.memory._snapshot()``
    output, or the bare segment list of ``torch.cuda.memory_snapshot()``)."""
    if isinstance(content, list):
        content = {"segments": content}
    if not isinstance(content, dict) or not isinstance(content.get("segments"), list):
        raise InputError(
            f"{name}: not a CUDA memory snapshot (no segments list); write one with "
            "torch.cuda.memory._dump_snapshot(path)"
        )
    stacks = _Stacks()
    try:
        segments = tuple(_segment(item, stacks) for item in content["segments"])
        traces_in = content.get("device_traces") or []
        if not isinstance(traces_in, list):
            raise TypeError("device_traces is not a list")
        traces = {device: _trace(entries, stacks) for device, entries in enumerate(traces_in)}
        _check_total(segments, traces)
    except (TypeError, KeyError, ValueError, AttributeError, OverflowError) as error:
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
        return f"missing field {error.args[0]!r}"
    return str(error).split("\n")[0] or type(error).__name__


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# All sizes of one snapshot together stay below this: 4 EiB, far beyond any device's memory,
# and sums of it fit the 64-bit integers the analysis adds them in.
_MAX_TOTAL = 1 << 62


class _Stacks:
    """Interns frames and whole stacks. A trace repeats a few hundred frames hundreds of
    thousands of times, and the pickle stores each frame once (its memo), so the unpickled
    frame dicts are shared objects: they are looked up by identity first. The content must
    stay alive while this is used (identities are not reused meanwhile)."""

    def __init__(self) -> None:
        self.stacks: list[tuple[Frame, ...]] = []
        self._stack_ids: dict[tuple[Frame, ...], int] = {}
        self._by_identity: dict[tuple[int, ...], int] = {}
        self._frame_by_identity: dict[int, Frame] = {}
        self._frames: dict[tuple[str, int, str], Frame] = {}

    def add(self, frames: Any) -> int:
        if not frames:
            return -1
        if not isinstance(frames, list):
            raise TypeError("frames is not a list")
        identity = tuple(map(id, frames))
        index = self._by_identity.get(identity)
        if index is not None:
            return index
        whole = tuple(self._frame(item) for item in frames)
        index = self._stack_ids.get(whole)
        if index is None:
            index = self._stack_ids[whole] = len(self.stacks)
            self.stacks.append(whole)
        self._by_identity[identity] = index
        return index

    def _frame(self, item: Any) -> Frame:
        frame = self._frame_by_identity.get(id(item))
        if frame is None:
            key = (_str(item["filename"]), _int(item["line"]), _str(item["name"]))
            frame = self._frames.get(key)
            if frame is None:
                frame = self._frames[key] = Frame(*key)
            self._frame_by_identity[id(item)] = frame
        return frame


def _segment(item: Any, stacks: _Stacks) -> SnapshotSegment:
    if not isinstance(item, dict):
        raise TypeError("a segment is not a dict")
    address = _int(item["address"])
    blocks = []
    offset = address
    for block in item.get("blocks") or []:
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


def _trace(entries: Any, stacks: _Stacks) -> AllocatorTrace:
    if not isinstance(entries, list):
        raise TypeError("a device trace is not a list")
    count = len(entries)
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
            raise TypeError(f"{value!r} is not an integer")
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} is out of a 64-bit integer's range")
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
        raise TypeError(f"{value!r} is not a string")
    return value
