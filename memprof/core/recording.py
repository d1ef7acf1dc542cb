"""What a source hands over: what it observed, never a number worked out from it. The
assembler (:func:`memprof.pipeline.assemble.run_of`) does the analysis, the same for every
source.

Every source hands over :class:`Recording` objects, one per run: a run profiled or estimated
here (the profiler's records, the program state tracked during the calls, the device's
counters, the times, the notes), and each device of a file read. What a file adds rides on
the recording as typed optional parts: where it was read from (:class:`Provenance`), a
device's memory as the file's allocator counted it (:class:`RecordedMemory`), a CUDA memory
snapshot's allocator state (:class:`RecordedSnapshot`). A file reader is registered in
:data:`memprof.sources.files.readers.READERS`; a new format is one reader and one line there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memprof.core.records import Allocations, RawProfile, SnapshotRecords, TrackedFacts


@dataclass(frozen=True)
class Provenance:
    """Where a recording read from a file comes from, as the file says it (the format is the
    recording's ``source``).

    ``path``: the file; ``rank``: the rank recorded in it, else the one the reader was given;
    ``world_size``, ``distributed_backend``, ``torch_version``: None when it does not say.
    Every device of one file shares one provenance."""

    path: str
    rank: int | None = None
    world_size: int | None = None
    distributed_backend: str | None = None
    torch_version: str | None = None


@dataclass(frozen=True, kw_only=True)
class RecordedMemory:
    """One device's memory as a file recorded it, beside its records (the recording's ``raw``:
    the ops and the device's memory records, in time order).

    ``live``: the allocator's own count of live bytes after each memory record (what was live
    at the start included), with ``live_at_start_bytes``; None when the file has no count: live
    bytes are then the records' running sum above ``live_at_start_bytes``. ``reserved``: the
    allocator's reserved bytes after each record (None when not recorded). ``records``: how
    many memory records the numbers come from (None: as many as ``raw`` holds)."""

    live: np.ndarray | None = None
    live_at_start_bytes: int = 0
    reserved: np.ndarray | None = None
    records: int | None = None


@dataclass(frozen=True)
class RecordedSnapshot:
    """A CUDA memory snapshot's allocator state and trace (``records``, shared by every device
    of the file), and the device a recording is of (``index``), replayed by the assembler."""

    records: SnapshotRecords
    index: int = 0


@dataclass
class Recording:
    """What a source observed of one run: the profiler's records (``raw``), the program state
    tracked during the measured calls (``facts``: the assembler explains the peak with it; None
    when it could not be tracked), and what the source measured and noticed.

    ``source``: the run's source (``live``, ``block``, ``estimate``; for a file, its format:
    ``trace``, ``snapshot``); ``warm``: calls ran before the measured ones (their growth is not
    a leak); ``explain``: what is live at the peak is worked out (else only the numbers).

    ``explaining``: the program state tracked during one more call, made to explain the
    measured calls' peak, with ``explaining_counters`` (CUDA's counters around it);
    ``explained_by_call``: the run is explained so (an explained eager run: the measured calls
    give the numbers, that call what is live at the peak; the measured calls' own state
    explains it when that call tracked nothing usable, ``explaining`` None). ``op_tracked``:
    the ops were tracked during the measured pass (a block): what the tracker adds to the
    records is taken out before the analysis.

    ``counters``: the device's own counters (CUDA: ``memory_allocated_start_bytes``,
    ``max_memory_allocated_bytes``, ``max_memory_reserved_bytes``); ``device_facts``: the
    device's name and total memory; ``walls_ms``: each timed call (``wall_timing`` says how
    they were timed); ``inputs_bytes``: what the arguments hold, for a run whose state was not
    tracked; ``mapped_files``: the files memory-mapped during the calls (name, size);
    ``vocabulary``: the aten op names fused kernel names are split with; ``profiled``: false
    when nothing ran under the profiler (fake execution: the ops' times are unknown, the
    records are the tracked ones); ``allocations``: every allocation and free to replay
    through the CUDA caching-allocator model (an estimate of a CUDA device), within
    ``capacity_bytes`` too when given; ``fields``: what else the run holds as the source gives
    it (``estimate``, ``compile_seconds``, ``torch_table``, ...).

    Read from a file: ``file`` says where from; ``memory``, the device's memory as the file's
    allocator counted it (the numbers are read off the records, as a file gives them);
    ``snapshot``, a CUDA memory snapshot's device (the numbers are its allocator's replay;
    ``raw`` is empty). The assembler works a recording out by what it holds: a snapshot, a
    file's memory records, else a run profiled or estimated here."""

    label: str
    mode: str | None
    raw: RawProfile
    device: str
    source: str = "live"
    facts: TrackedFacts | None = None
    warm: bool = True
    explain: bool = True
    explaining: TrackedFacts | None = None
    explaining_counters: dict[str, int] = field(default_factory=dict)
    explained_by_call: bool = False
    op_tracked: bool = False
    counters: dict[str, int] = field(default_factory=dict)
    device_facts: dict[str, Any] = field(default_factory=dict)
    walls_ms: tuple[float, ...] = ()
    wall_timing: str = "profiled"
    repeat: int = 1
    inputs_bytes: int = 0
    vocabulary: frozenset[str] = frozenset()
    profiled: bool = True
    notes: tuple[str, ...] = ()
    mapped_files: tuple[tuple[str, int], ...] = ()
    allocations: Allocations | None = None
    capacity_bytes: int | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    file: Provenance | None = None
    memory: RecordedMemory | None = None
    snapshot: RecordedSnapshot | None = None
