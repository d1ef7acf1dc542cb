"""Recordings made elsewhere -> a :class:`memprof.model.Report`: chrome traces and CUDA memory
snapshots, as files or folders of them (one per rank), one run per device, rank and file.

What :func:`memprof.analyze` and ``memprof analyze`` run. The kind of each file is read from
its content; folders are read one file at a time, so memory stays bounded by the largest file.
Run labels: the device (``cuda:0``) for one file; ``rank1/cuda:0`` for files that each carry a
distinct rank (a folder of ranks); ``<file stem>/cuda:0`` otherwise. Importing this module does
not import torch.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from memprof.analysis.allocator import AllocatorSettings
from memprof.analysis.peaks import analyze
from memprof.analysis.snapshot import SnapshotDevice, analyze_snapshot, python_frames, site_of
from memprof.analysis.snapshot_replay import ALLOC, empty_trace, what_if
from memprof.core.errors import InputError, UsageError, param, path_error
from memprof.core.fields import copied
from memprof.core.fileio import special_file_kind
from memprof.core.records import SNAPSHOT_ACTIONS, SnapshotRecords
from memprof.core.units import format_bytes
from memprof.model import (
    AllocatorModel,
    Fragmentation,
    OomEvent,
    Report,
    RunResult,
    SnapshotSection,
    SnapshotSite,
    Source,
    SourceFile,
    WhatIf,
)
from memprof.model.kind import SNAPSHOT_SOURCE, TRACE_SOURCE
from memprof.model.timeline import Timeline
from memprof.pipeline import build_report, build_run
from memprof.sources.files.snapshot import read_snapshot, snapshot_files
from memprof.sources.files.trace import (
    Trace,
    TraceDevice,
    input_kind,
    iter_trace_folder,
    read_trace,
    trace_files,
)
from memprof.sources.options import StatusFn

if TYPE_CHECKING:
    import numpy as np


TRACE, SNAPSHOT = TRACE_SOURCE, SNAPSHOT_SOURCE
_RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)
_STEM_SUFFIXES = (".gz", ".json", ".pickle", ".pkl", ".trace", ".pt", ".snapshot")


@dataclass
class _File:
    """One file read: what it says about itself and its runs, labelled by device for now."""

    path: Path
    kind: str
    rank: int | None
    runs: list[RunResult]
    world_size: int | None = None
    backend: str | None = None
    torch_version: str | None = None
    rank_recorded: bool = True
    """The rank is the file's own (its distributed info, or a number in its name), not its
    position in a folder."""


def analyze_recordings(
    paths: Sequence[str | os.PathLike[str]],
    *,
    what_if_settings: AllocatorSettings | None = None,
    status: StatusFn | None = None,
) -> Report:
    """Read every trace and snapshot of ``paths`` (files, or folders of them) into one report.

    ``what_if_settings``: also replay each snapshot's allocations under these settings (and
    under the default ones, to compare). Raises :class:`InputError` (exit 2) for a path that
    is not a readable trace or snapshot, a folder with none, a recording with no memory
    events; :class:`UsageError` for no paths, or what-if settings without a snapshot.
    """
    if not paths:
        raise UsageError("give a chrome trace, a CUDA memory snapshot, or a folder of them")
    given = [Path(p) for p in paths]
    files = list(_read_all(given, what_if_settings, status))
    if what_if_settings is not None and not any(f.kind == SNAPSHOT for f in files):
        raise UsageError(
            f"{param('expandable_segments', True)} and {param('max_split_size_mb')} replay a CUDA memory "
            "snapshot's allocations; these paths hold only chrome traces"
        )
    # One file given: its runs are its devices. A folder's runs carry their rank even when it
    # holds one file, so labels do not change with the number of ranks.
    _unless_one_job(files)
    _label(files, single=len(files) == 1 and not given[0].is_dir())
    runs = {run.label: run for f in files for run in f.runs}
    devices = list(dict.fromkeys(run.device or "?" for run in runs.values()))
    kinds = sorted({f.kind for f in files}, reverse=True)
    source = Source(
        kind="+".join(kinds),
        paths=tuple(str(p) for p in given),
        files=tuple(
            SourceFile(
                path=str(f.path),
                kind=f.kind,
                runs=tuple(run.label for run in f.runs),
                rank=f.rank,
                world_size=f.world_size,
                distributed_backend=f.backend,
                torch_version=f.torch_version,
            )
            for f in files
        ),
    )
    return build_report(
        target=" ".join(p.name or str(p) for p in given),
        device=", ".join(devices),
        environment=_environment(files, runs.values()),
        source=source,
        runs=runs,
    )


def _environment(files: list[_File], runs: Iterable[RunResult]) -> dict[str, str]:
    """What the recordings say about where they were made (only what they say)."""
    env = {}
    versions = list(dict.fromkeys(f.torch_version for f in files if f.torch_version))
    if versions:
        env["torch"] = ", ".join(versions)
    names = list(dict.fromkeys(run.device_name for run in runs if run.device_name))
    if names:
        env["device_name"] = ", ".join(names)
    return env


# --------------------------------------------------------------------------------------------
# Finding and reading the files


def _read_all(
    given: list[Path], settings: AllocatorSettings | None, status: StatusFn | None
) -> Iterator[_File]:
    """Each file of ``given`` read in turn (a folder: its traces, then its snapshots)."""
    for path in given:
        try:
            path.stat()
        except FileNotFoundError:
            pass
        except OSError as error:  # a name too long, a loop of links, a permission
            raise path_error(error, "input") from None
        if path.is_dir():
            yield from _read_folder(path, settings, status)
        elif not path.exists():
            raise InputError(f"{path}: no such file or folder")
        elif not path.is_file():  # a FIFO or a device: refused before anything reads it
            raise InputError(
                f"{path} is {special_file_kind(path)}, not a regular file; save the content to a file "
                "and give that"
            )
        else:
            kind = input_kind(path)
            if kind is None:
                raise InputError(
                    f"{path} is neither a chrome trace (JSON, plain or gzip) nor a CUDA memory snapshot "
                    "(a pickle); give a file written by prof.export_chrome_trace or "
                    "torch.cuda.memory._dump_snapshot"
                )
            match = _RANK_IN_NAME.search(path.name)
            rank = int(match.group(1)) if match else None
            _say(status, path)
            with _memory_for(path):
                if kind == TRACE:
                    read = _from_trace(read_trace(path, rank))
                else:
                    read = _from_snapshot(path, read_snapshot(path), rank, settings)
            yield read


def _read_folder(
    folder: Path, settings: AllocatorSettings | None, status: StatusFn | None
) -> Iterator[_File]:
    """A folder of per-rank recordings: ranks as :func:`iter_trace_folder` gives them for
    traces; for snapshots a number in the name (``rank3``), else the position in name order."""
    traces, snapshots = trace_files(folder), snapshot_files(folder)
    if not traces and not snapshots:
        raise InputError(
            f"{folder}: no chrome trace (.json, .json.gz) or CUDA memory snapshot (pickle) in this "
            "folder (subfolders are not searched); give the folder that holds them, or the files"
        )
    if status is not None:
        status(f"reading {folder}: {len(traces)} chrome trace(s), {len(snapshots)} snapshot(s)")
    ranks = iter_trace_folder(folder)  # one trace per file of `traces`, in that order
    for path in traces:
        # Only the per-rank runs stay: each rank's parsed JSON and records are released before
        # the next file is read.
        with _memory_for(path):
            read = _from_trace(next(ranks))
        read.rank_recorded = bool(_RANK_IN_NAME.search(path.name)) or read.world_size is not None
        yield read
    for position, path in enumerate(snapshots):
        match = _RANK_IN_NAME.search(path.name)
        rank = int(match.group(1)) if match else position
        with _memory_for(path):
            read = _from_snapshot(path, read_snapshot(path), rank, settings)
        read.rank_recorded = match is not None
        yield read


@contextlib.contextmanager
def _memory_for(path: Path) -> Iterator[None]:
    """Running out of memory while reading or analysing ``path`` is an input error naming it
    (exit 2), not a traceback."""
    try:
        yield
    except MemoryError:
        size = path.stat().st_size if path.exists() else 0
        raise InputError(
            f"{path}: not enough memory to read and analyse it ({format_bytes(size)}); give memprof more "
            "memory, or record a shorter trace"
        ) from None


def _say(status: StatusFn | None, path: Path) -> None:
    if status is not None:
        status(f"reading {path} ({format_bytes(path.stat().st_size)})")


# --------------------------------------------------------------------------------------------
# Traces


def _from_trace(trace: Trace) -> _File:
    path = Path(trace.path)
    if not trace.devices:
        raise InputError(
            f"{path}: no [memory] events in this trace; record it with "
            "torch.profiler.profile(profile_memory=True)"
        )
    runs = [_trace_run(trace, device) for device in trace.devices]
    return _File(
        path=path,
        kind=TRACE,
        rank=trace.rank,
        runs=runs,
        world_size=trace.world_size,
        backend=trace.distributed_backend,
        torch_version=trace.torch_version,
    )


def _trace_run(trace: Trace, device: TraceDevice) -> RunResult:
    """One device of a trace: the reader's numbers, the per-op table of the analysis. A trace
    that memprof's own ``memprof.call`` ranges mark (exported from a memprof-style profile) has
    its peak measured as ``memprof run`` does, above each call's start."""
    analysis = analyze(device.raw)
    numbers = analysis.numbers
    peak, peak_op, stack = device.peak_bytes, device.peak_op, device.peak_op_stack
    notes = [*trace.notes, *device.notes]
    if device.raw.calls:
        peak, peak_op, stack = numbers.peak_bytes, numbers.peak_op, numbers.peak_op_stack
        notes.append("peak above the start of each memprof.call range, as memprof run measures it")
    live_at_start = device.live_at_start_bytes
    timeline = _timeline(device.timeline_t_ns, device.timeline_bytes, device.timeline_reserved, live_at_start)
    return build_run(
        label=device.device,
        mode=None,
        source=TRACE,
        rank=trace.rank,
        device=device.device,
        device_name=device.device_name,
        device_total_bytes=device.device_total_bytes,
        peak_bytes=peak,
        footprint_bytes=device.footprint_bytes,
        live_at_start_bytes=live_at_start,
        # The host's allocator reserves nothing: its Total Reserved is always 0.
        reserved_peak_bytes=device.reserved_peak_bytes if device.device != "cpu" else None,
        allocated_bytes=numbers.allocated_bytes,
        net_bytes=numbers.net_bytes,
        peak_op=peak_op,
        peak_op_stack=stack,
        records=device.records,
        op_stats=analysis.ops,
        timeline=timeline,
        notes=(*notes, *analysis.notes),
    )


def _timeline(t_ns: np.ndarray, live: np.ndarray, reserved: np.ndarray, live_at_start: int) -> Timeline:
    """A recording's timeline, its live bytes counted above those live at its start."""
    return Timeline(
        t_ns=tuple(t_ns.tolist()),
        bytes=tuple((live - live_at_start).tolist()),
        reserved=tuple(reserved.tolist()),
    )


# --------------------------------------------------------------------------------------------
# Snapshots


def _from_snapshot(
    path: Path, records: SnapshotRecords, rank: int | None, settings: AllocatorSettings | None
) -> _File:
    devices = analyze_snapshot(records)
    if not devices:
        raise InputError(
            f"{path}: this snapshot has no segments and no trace: nothing was allocated on a GPU"
        )
    runs = [_snapshot_run(records, device, rank, settings) for device in devices]
    return _File(path=path, kind=SNAPSHOT, rank=rank, runs=runs)


def _snapshot_run(
    records: SnapshotRecords, device: SnapshotDevice, rank: int | None, settings: AllocatorSettings | None
) -> RunResult:
    """One device of a snapshot. Peak, live at start: requested bytes, as the trace records them;
    footprint and reserved peak: block sizes of the allocator model's replay (what
    ``max_memory_allocated``/``max_memory_reserved`` count). The op at the peak is the site of
    the allocation that reached it, with its Python stack (outermost first)."""
    trace = records.traces.get(device.device_index) or empty_trace()
    notes = list(device.notes)
    timeline = Timeline()
    if len(trace) and (trace.time_us >= 0).all():
        timeline = _timeline(
            device.timeline_t_ns, device.timeline_bytes, device.timeline_reserved, device.live_at_start_bytes
        )
    elif len(trace):
        notes.append("this snapshot records no times: no timeline")
    else:
        notes.append("this snapshot has no trace (history was not recorded): the numbers are at dump time")
    peak_op: str | None = None
    stack: tuple[str, ...] = ()
    if device.peak_index is not None:
        stack_id = int(trace.stack[device.peak_index])
        frames = records.stacks[stack_id] if stack_id >= 0 else ()
        peak_op = site_of(frames)
        stack = tuple(f"{f.filename}:{f.line} {f.name}" for f in reversed(python_frames(frames)))
    return build_run(
        label=device.device,
        mode=None,
        source=SNAPSHOT,
        rank=rank,
        device=device.device,
        peak_bytes=device.peak_bytes,
        footprint_bytes=device.footprint_bytes,
        live_at_start_bytes=device.live_at_start_bytes,
        reserved_peak_bytes=device.reserved_peak_bytes,
        allocated_bytes=int(trace.size[trace.action == ALLOC].sum()),
        net_bytes=device.requested_bytes - device.live_at_start_bytes,
        peak_op=peak_op,
        peak_op_stack=stack,
        records=device.trace_events,
        timeline=timeline,
        notes=tuple(notes),
        snapshot=_section(records, device, settings),
        allocator_model=_model_check(device),
    )


def _section(
    records: SnapshotRecords, device: SnapshotDevice, settings: AllocatorSettings | None
) -> SnapshotSection:
    return copied(
        SnapshotSection,
        device,
        # In the order torch's trace names its actions (alloc, free_requested, free_completed, ...).
        trace_actions={
            a: device.trace_actions[a] for a in (*SNAPSHOT_ACTIONS, "other") if a in device.trace_actions
        },
        sites_at_peak=tuple(copied(SnapshotSite, s) for s in device.sites_at_peak),
        fragmentation=copied(Fragmentation, device.fragmentation),
        ooms=tuple(copied(OomEvent, o) for o in device.ooms),
        what_if=_what_if(records, device, settings) if settings is not None else (),
    )


def _what_if(
    records: SnapshotRecords, device: SnapshotDevice, settings: AllocatorSettings
) -> tuple[WhatIf, ...]:
    """The allocations replayed from an empty allocator with default settings and with
    ``settings``, each within the device's capacity when an out-of-memory recorded it."""
    out = []
    for chosen in (AllocatorSettings(), settings):
        chosen = replace(chosen, capacity_bytes=device.capacity_bytes)
        result = what_if(records, device.device_index, chosen)
        out.append(copied(WhatIf, result, capacity_bytes=device.capacity_bytes, ooms=len(result.ooms)))
    return tuple(out)


def _model_check(device: SnapshotDevice) -> AllocatorModel | None:
    check = device.allocator_model
    if check is None:
        return None
    return copied(AllocatorModel, check)


# --------------------------------------------------------------------------------------------
# Labels


def stem(path: Path) -> str:
    """A file's name without the suffixes recordings carry: ``worker0.pt.trace.json.gz`` ->
    ``worker0``, ``run.snapshot.pickle`` -> ``run``."""
    name = path.name
    while True:
        for suffix in _STEM_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        else:
            return name


def not_one_job(files: Sequence[_File]) -> list[str]:
    """Why several files do not look like the ranks of one job (empty when they do): a rank not
    recorded (only a position in the folder), a rank twice, world sizes that disagree, a rank
    or a number of files beyond the world size, GPUs in some files and not in others."""
    if len(files) < 2 or any(f.rank is None for f in files):
        return []
    why = []
    guessed = [f.path.name for f in files if not f.rank_recorded]
    if guessed:
        why.append(f"no rank recorded in {_names(guessed)}")
    by_rank: dict[int, list[str]] = {}
    for f in files:
        by_rank.setdefault(f.rank or 0, []).append(f.path.name)
    why += [f"rank {rank} in {_names(names)}" for rank, names in by_rank.items() if len(names) > 1]
    sizes = sorted({f.world_size for f in files if f.world_size is not None})
    if len(sizes) > 1:
        why.append("world sizes " + ", ".join(map(str, sizes)))
    elif sizes and (len(files) > sizes[0] or max(by_rank) >= sizes[0]):
        why.append(f"{len(files)} files, ranks up to {max(by_rank)}, for a world size of {sizes[0]}")
    gpus = [any((run.device or "cpu") != "cpu" for run in f.runs) for f in files]
    if any(gpus) and not all(gpus):
        why.append(
            "GPUs in " + _names([f.path.name for f, gpu in zip(files, gpus, strict=True) if gpu]) + " only"
        )
    return why


def _names(names: Sequence[str], shown: int = 3) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _unless_one_job(files: list[_File]) -> None:
    """Files that do not look like one job's ranks lose their ranks, with a note saying why:
    they are labelled by their file names and never set side by side as ranks."""
    why = not_one_job(files)
    if not why:
        return
    note = (
        f"these {len(files)} files do not look like the ranks of one job ({'; '.join(why)}): each run is "
        "labelled by its file, and no run is compared with another as a rank"
    )
    for f in files:
        f.rank = None
        f.runs[:] = [replace(run, rank=None, notes=(*run.notes, note)) for run in f.runs]


def _label(files: list[_File], single: bool) -> None:
    """Give every run its label: the device for one file; ``rank<N>/<device>`` when every file
    has a rank and no two runs share one with a device; else ``<file stem>/<device>`` (``#2``,
    ``#3`` added to a stem seen before)."""
    if single:
        return
    ranked = [(f.rank, run.label) for f in files for run in f.runs]
    if all(f.rank is not None for f in files) and len(set(ranked)) == len(ranked):
        for f in files:
            f.runs[:] = [replace(run, label=f"rank{f.rank}/{run.label}") for run in f.runs]
        return
    seen: dict[str, int] = {}
    for f in files:
        name = stem(f.path)
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}#{seen[name]}"
        f.runs[:] = [replace(run, label=f"{name}/{run.label}") for run in f.runs]
