"""The memory timeline of a run, and the one way memprof shortens a long one.

:func:`downsample` is used by the analysis (a run keeps at most :data:`MAX_POINTS` points) and
by the HTML chart (for timelines that come from elsewhere), so a chart never shows a different
reduction than the report holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memprof.model.timeline import MAX_POINTS, Timeline

if TYPE_CHECKING:
    import numpy as np


def downsample(t: np.ndarray, b: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points: the points are cut into ``max_points`` buckets of equal
    count, and each bucket keeps its highest point (the first, when tied), so the peak survives.
    Shorter timelines are returned as they are."""

    if len(t) <= max_points:
        return t, b
    keep = highest_per_bucket(b, max_points)
    return t[keep], b[keep]


def downsample_max(
    t: np.ndarray, values: np.ndarray, other: np.ndarray | None = None, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`downsample` of ``(t, values)`` that also takes ``other`` (e.g. reserved bytes) at
    the points kept."""
    import numpy as np

    t = np.asarray(t, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    other = None if other is None else np.asarray(other, dtype=np.int64)
    if len(t) <= max_points:
        return t, values, other
    keep = highest_per_bucket(values, max_points)
    return t[keep], values[keep], None if other is None else other[keep]


def highest_per_bucket(values: np.ndarray, max_points: int) -> np.ndarray:
    """Indices of each bucket's highest point (the first, when tied); ``max_points`` buckets of
    equal count."""
    import numpy as np

    count = len(values)
    edges = np.unique(np.linspace(0, count, max_points + 1).astype(np.int64)[:-1])
    highest = np.maximum.reduceat(values, edges)
    bucket = np.repeat(np.arange(len(edges)), np.diff(np.append(edges, count)))
    hits = np.flatnonzero(values == highest[bucket])
    _, first_hit = np.unique(bucket[hits], return_index=True)
    return hits[first_hit]


def downsample_timeline(timeline: Timeline, max_points: int = MAX_POINTS) -> Timeline:
    """:func:`downsample` of a :class:`Timeline`."""
    import numpy as np

    if len(timeline) <= max_points:
        return timeline
    # Every series is taken at the same points: the highest live bytes of each bucket.
    keep = highest_per_bucket(np.asarray(timeline.bytes, dtype=np.int64), max_points)

    def at(values: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(np.asarray(values, dtype=np.int64)[keep].tolist()) if values else ()

    return Timeline(
        t_ns=at(timeline.t_ns),
        bytes=at(timeline.bytes),
        reserved=at(timeline.reserved),
        op_names=timeline.op_names,
        op_at=at(timeline.op_at),
        by_category=timeline.by_category,
    )
