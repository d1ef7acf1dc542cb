"""Every file format memprof reads, in one table: :data:`READERS`. A reader tells its files by
content (:meth:`Reader.sniff`) and reads one into :class:`~memprof.core.recording.Recording`
objects, one per device it recorded (:meth:`Reader.read`); ``memprof analyze`` and
:func:`memprof.analyze` ask this table which reader reads a file, and assemble what it gives
as they do any recording. A new format is one reader module and one line in the table."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from memprof.core.recording import Recording
from memprof.sources.files.snapshot import SnapshotReader
from memprof.sources.files.trace import TraceReader


class Reader(Protocol):
    """One file format. ``name``: the runs' ``source`` (``trace``); ``what``: the format as a
    message names it (``a chrome trace (JSON, plain or gzip)``); ``in_folder``: as a folder's
    message names it; ``counted``: as a count names it (``chrome trace(s)``); ``written_by``:
    what writes it (``prof.export_chrome_trace``)."""

    name: str
    what: str
    in_folder: str
    counted: str
    written_by: str

    def sniff(self, path: Path) -> bool:
        """Whether ``path`` holds this format, from its content (never raises for a readable
        file)."""
        ...

    def read(self, path: Path, rank: int | None = None) -> list[Recording]:
        """The file's recordings, one per device it recorded memory of (at least one), each
        with the file's :class:`~memprof.core.recording.Provenance` (``file``; its ``rank``:
        the file's own, else ``rank``) and the format's name as ``source``; a device's memory
        records as ``raw`` with the file's own counts (``memory``), or a CUDA memory snapshot
        (``snapshot``). Raises :class:`~memprof.core.errors.InputError` for a file it cannot
        read."""
        ...


READERS: list[Reader] = [TraceReader(), SnapshotReader()]
"""The readers, asked in this order (the first that sniffs a file reads it; a folder's files
are read reader by reader)."""


def reader_for(path: Path) -> Reader | None:
    """The reader of ``path``'s format, or None when no reader knows it."""
    return next((reader for reader in READERS if reader.sniff(path)), None)


def input_kind(path: str | Path) -> str | None:
    """The name of ``path``'s format (``trace``, ``snapshot``), or None. Never raises for a
    readable file."""
    reader = reader_for(Path(path))
    return reader.name if reader is not None else None


def files_of(folder: Path, reader: Reader) -> list[Path]:
    """The files of ``folder`` (not its subfolders) in ``reader``'s format, by name."""
    return sorted(p for p in folder.iterdir() if p.is_file() and reader.sniff(p))


def either(names: list[str], joined: str = "or") -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {joined} {names[-1]}"
