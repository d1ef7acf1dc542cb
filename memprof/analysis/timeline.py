"""The memory timeline of a run, and the one way memprof shortens a long one.

:func:`downsample` is used by the analysis (a run keeps at most :data:`MAX_POINTS` points) and
by the HTML chart (for timelines that come from elsewhere), so a chart never shows a different
reduction than the report holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memprof import fields

if TYPE_CHECKING:
    import numpy as np

MAX_POINTS = 4000
"""A run's timeline keeps at most this many points."""


@dataclass(frozen=True)
class Timeline:
    """Live bytes over time: ``t_ns`` nanoseconds since the first measured call started,
    ``bytes`` live bytes above live at that start (negative when memory held before was freed)."""

    t_ns: tuple[int, ...] = fields.items(fields.INTEGER)
    bytes: tuple[int, ...] = fields.items(fields.SIGNED_SIZE)

    def __len__(self) -> int:
        return len(self.t_ns)


def downsample(t: np.ndarray, b: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points: the points are cut into ``max_points`` buckets of equal
    count, and each bucket keeps its highest point (the first, when tied), so the peak survives.
    Shorter timelines are returned as they are."""
    import numpy as np

    if len(t) <= max_points:
        return t, b
    edges = np.unique(np.linspace(0, len(t), max_points + 1).astype(np.int64)[:-1])
    highest = np.maximum.reduceat(b, edges)
    bucket = np.repeat(np.arange(len(edges)), np.diff(np.append(edges, len(t))))
    hits = np.flatnonzero(b == highest[bucket])
    _, first_hit = np.unique(bucket[hits], return_index=True)
    keep = hits[first_hit]
    return t[keep], b[keep]


def downsample_timeline(timeline: Timeline, max_points: int = MAX_POINTS) -> Timeline:
    """:func:`downsample` of a :class:`Timeline`."""
    import numpy as np

    if len(timeline) <= max_points:
        return timeline
    t, b = downsample(
        np.asarray(timeline.t_ns, dtype=np.int64), np.asarray(timeline.bytes, dtype=np.int64), max_points
    )
    return Timeline(t_ns=tuple(t.tolist()), bytes=tuple(b.tolist()))
