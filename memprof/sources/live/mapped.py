"""Memory-mapped files, labelled as such in a live profile.

``torch.load(path, mmap=True)`` (and ``torch.UntypedStorage.from_file``, ``torch.from_file``)
maps the file instead of reading it; torch's profiler still records the mapping as an
allocation of the file's whole size, although the pages are read from disk only when touched
and almost nothing may be resident. While the profiled calls run, :func:`mapped_files` wraps
those functions in a ``record_function`` range named :data:`MAPPED_RANGE`, so the mapping's
allocation is an op row of its own (not anonymous ``[memory]``), and keeps the files' names
and sizes for the run's note (made by :func:`memprof.pipeline.assemble.run_of`).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

from memprof.core.records import MAPPED_RANGE


def _wrap(original: Callable[..., Any], seen: list[tuple[str, int]]) -> Callable[..., Any]:
    from torch.profiler import record_function

    @functools.wraps(original)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        filename = args[0] if args else kwargs.get("filename", "")
        with record_function(MAPPED_RANGE):
            result = original(*args, **kwargs)
        nbytes = result.nbytes() if callable(getattr(result, "nbytes", None)) else 0
        seen.append((os.path.basename(os.fspath(filename)), int(nbytes or 0)))
        return result

    return mapped


@contextlib.contextmanager
def mapped_files() -> Iterator[list[tuple[str, int]]]:
    """For the block, label the mappings torch makes; yields the (file name, bytes) mapped."""
    import torch

    seen: list[tuple[str, int]] = []
    owners = [(torch.UntypedStorage, "from_file", True), (torch, "from_file", False)]
    saved = []
    for owner, name, static in owners:
        original = getattr(owner, name, None)
        if original is None:
            continue
        had_own = name in vars(owner)
        wrapped = _wrap(original, seen)
        setattr(owner, name, staticmethod(wrapped) if static else wrapped)
        saved.append((owner, name, original, had_own))
    try:
        yield seen
    finally:
        for owner, name, original, had_own in saved:
            if had_own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
