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

from memprof.analysis.allocator import AllocatorSettings
from memprof.core.errors import InputError, UsageError, param, path_error
from memprof.core.reading import special_file_kind
from memprof.core.recording import Provenance
from memprof.core.units import format_bytes
from memprof.model.recorded import Source, SourceFile
from memprof.model.report import Report
from memprof.model.run import RunResult
from memprof.pipeline import build_report
from memprof.pipeline.assemble import run_of
from memprof.sources.files.readers import READERS, Reader, either, files_of, reader_for
from memprof.sources.options import StatusFn

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

    @classmethod
    def of(cls, file: Provenance, kind: str, runs: list[RunResult]) -> _File:
        return cls(
            path=Path(file.path),
            kind=kind,
            rank=file.rank,
            runs=runs,
            world_size=file.world_size,
            backend=file.distributed_backend,
            torch_version=file.torch_version,
        )


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
    if what_if_settings is not None and not any(run.snapshot is not None for f in files for run in f.runs):
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
            reader = reader_for(path)
            if reader is None:
                raise InputError(
                    f"{path} is {_neither([r.what for r in READERS])}; give a file written by "
                    + either([r.written_by for r in READERS])
                )
            match = _RANK_IN_NAME.search(path.name)
            _say(status, path)
            yield _read(reader, path, int(match.group(1)) if match else None, settings)


def _read_folder(
    folder: Path, settings: AllocatorSettings | None, status: StatusFn | None
) -> Iterator[_File]:
    """A folder of per-rank recordings, reader by reader (chrome traces, then snapshots), one
    file at a time: a file's rank is its own when it records one, else a number in its name
    (``rank3``, ``rank_3``), else its position among the files of its format, in name order."""
    found = [(reader, files_of(folder, reader)) for reader in READERS]
    if not any(paths for _, paths in found):
        raise InputError(
            f"{folder}: no {either([reader.in_folder for reader in READERS])} in this folder "
            "(subfolders are not searched); give the folder that holds them, or the files"
        )
    if status is not None:
        counts = ", ".join(f"{len(paths)} {reader.counted}" for reader, paths in found)
        status(f"reading {folder}: {counts}")
    for reader, paths in found:
        seen: dict[int, str] = {}
        for position, path in enumerate(paths):
            match = _RANK_IN_NAME.search(path.name)
            # Only the per-rank runs stay: each file's records are released before the next
            # file is read.
            read = _read(reader, path, int(match.group(1)) if match else position, settings)
            read.rank_recorded = match is not None or read.world_size is not None
            if read.rank is not None:
                if read.rank in seen:
                    note = f"rank {read.rank} is also the rank of {seen[read.rank]}"
                    read.runs[:] = [replace(run, notes=(*run.notes, note)) for run in read.runs]
                seen.setdefault(read.rank, path.name)
            yield read


def _read(reader: Reader, path: Path, rank: int | None, settings: AllocatorSettings | None) -> _File:
    """One file read by ``reader`` and assembled into its runs, one per recording it gives
    (``rank``: when it records none)."""
    with _memory_for(path):
        recordings = reader.read(path, rank)
        if not recordings:
            raise InputError(f"{path}: no memory recorded in this {reader.name} file")
        first = recordings[0]
        return _File.of(
            first.file or Provenance(str(path), rank),
            first.source,
            [run_of(recording, settings) for recording in recordings],
        )


def _neither(names: list[str]) -> str:
    """``neither a nor b``; ``none of a, b or c``; ``not a``."""
    if len(names) == 1:
        return f"not {names[0]}"
    return f"neither {names[0]} nor {names[1]}" if len(names) == 2 else f"none of {either(names)}"


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
