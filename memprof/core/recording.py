"""What a file reader hands over: one :class:`RecordedFile` per file read, holding one
:class:`RecordedDevice` per device it recorded memory of. Only what the file says (records,
the allocator's own counters, what it says about itself): the numbers are worked out by the
assembler (:mod:`memprof.pipeline.assemble`), the same for every format.

A reader is registered in :data:`memprof.sources.files.readers.READERS`; a new format is one
reader and one line there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memprof.core.records import RawProfile, SnapshotRecords


@dataclass(frozen=True)
class RecordedDevice:
    """One device's memory in one file, as recorded.

    ``raw``: the ops and the device's memory records (time order), for the per-op table and
    the op running at the peak. ``live``: the allocator's own count of live bytes after each
    memory record (what was live at the start included), with ``live_at_start_bytes``; None
    when the file has no count: live bytes are then the records' running sum above
    ``live_at_start_bytes``. ``reserved``: the allocator's reserved bytes after each record
    (None when not recorded). ``snapshot``: a CUDA memory snapshot's allocator state and trace
    (this device is ``snapshot``'s device ``index``), replayed by the assembler.
    ``records``: how many memory records the numbers come from (None: as many as ``raw``
    holds). ``notes``: what the reader noticed."""

    device: str
    index: int = 0
    device_name: str | None = None
    device_total_bytes: int | None = None
    raw: RawProfile | None = None
    live: np.ndarray | None = None
    live_at_start_bytes: int = 0
    reserved: np.ndarray | None = None
    snapshot: SnapshotRecords | None = None
    records: int | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class RecordedFile:
    """One recording file, read: its devices and what it says about where it was made.

    ``source``: the name of its format (a run's ``source``: ``trace``, ``snapshot``);
    ``rank``: the rank recorded in it, else the one the caller gave; ``world_size``,
    ``distributed_backend``, ``torch_version``: None when it does not say. ``notes``: the
    reader's notes about the whole file, said on every run."""

    path: str
    source: str
    devices: tuple[RecordedDevice, ...]
    rank: int | None = None
    world_size: int | None = None
    distributed_backend: str | None = None
    torch_version: str | None = None
    notes: tuple[str, ...] = ()
