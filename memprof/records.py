"""The records stage: what every source (a live profile, a trace file, fake execution)
produces and the analysis consumes. Plain arrays, no torch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

CALL_MARKER = "memprof.call"
"""Name of the ``record_function`` range that memprof puts around each measured call."""

@dataclass(frozen=True)
class RawProfile:
    """The profiler's records, as arrays. Times are nanoseconds on the profiler's clock.

    ``op_*`` describe op intervals (CPU-side ops and ``record_function`` ranges);
    ``mem_*`` the allocator records of the measured device (``mem_bytes`` > 0 allocates,
    < 0 frees); ``calls`` the (start, end) of each measured call.
    """

    op_name: np.ndarray
    op_start: np.ndarray
    op_end: np.ndarray
    op_thread: np.ndarray
    op_async: np.ndarray
    mem_time: np.ndarray
    mem_bytes: np.ndarray
    calls: list[tuple[int, int]] = field(default_factory=list)
    other_thread_bytes: int = 0
    op_code: np.ndarray | None = None
    """Optional: each op's name as an int code into ``op_code_names`` (names interned while
    reading); lets the analysis group ops without hashing every name again."""
    op_code_names: tuple[str, ...] = ()

    @staticmethod
    def from_lists(
        ops: Sequence[tuple[str, int, int, int]] | Sequence[tuple[str, int, int, int, bool]],
        mem: Sequence[tuple[int, int]],
        calls: Sequence[tuple[int, int]] = (),
    ) -> RawProfile:
        """Build from plain lists: ``ops`` of (name, start, end, thread[, is_async]) and
        ``mem`` of (time, bytes). Used by tests and benchmarks to state exact cases."""
        names = np.array([o[0] for o in ops], dtype=object)
        return RawProfile(
            op_name=names,
            op_start=np.array([o[1] for o in ops], dtype=np.int64),
            op_end=np.array([o[2] for o in ops], dtype=np.int64),
            op_thread=np.array([o[3] for o in ops], dtype=np.int64),
            op_async=np.array([bool(o[4]) if len(o) > 4 else False for o in ops], dtype=bool),
            mem_time=np.array([m[0] for m in mem], dtype=np.int64),
            mem_bytes=np.array([m[1] for m in mem], dtype=np.int64),
            calls=list(calls),
        )
