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
class CategoryTimeline:
    """Live bytes by category over the call whose peak is explained: ``t_ns`` nanoseconds since
    that call started (in eager runs, the explaining call profiled after the measured ones),
    ``bytes[category]`` everything of that category live at each point (absolute: what was live
    before the call included). At most 2,000 points: each bucket keeps its highest total, and
    the peak itself is kept."""

    t_ns: tuple[int, ...] = fields.items(fields.INTEGER)
    bytes: dict[str, tuple[int, ...]] = fields.mapping(fields.list_of(fields.SIZE))


@dataclass(frozen=True)
class Timeline:
    """Live bytes over time: ``t_ns`` nanoseconds since the first measured call started (for a
    recording: since its first memory event), ``bytes`` live bytes above live at that start
    (negative when memory held before was freed), ``reserved`` (a CUDA recording's, when known;
    else empty) what the caching allocator held at each point, absolute, and the op running at
    each point: ``op_names[op_at[i]]`` (-1: none; both empty when unknown, as in recordings and
    in reports written before memprof kept them); ``by_category`` (explained runs) the peak
    call's live bytes by category."""

    t_ns: tuple[int, ...] = fields.items(fields.INTEGER)
    bytes: tuple[int, ...] = fields.items(fields.SIGNED_SIZE, same_length_as="t_ns")
    reserved: tuple[int, ...] = fields.items(
        fields.SIZE, same_length_as="t_ns", omit=lambda timeline: not timeline.reserved
    )
    op_names: tuple[str, ...] = fields.items(fields.TEXT, omit=lambda t: not t.op_names)
    op_at: tuple[int, ...] = fields.items(fields.INTEGER, same_length_as="t_ns", omit=lambda t: not t.op_at)
    by_category: CategoryTimeline | None = fields.optional(CategoryTimeline)

    def op(self, index: int) -> str | None:
        """The op running at point ``index``, when known (None also for an index a hand-edited
        report points past its ``op_names`` with)."""
        if index >= len(self.op_at) or not 0 <= self.op_at[index] < len(self.op_names):
            return None
        return self.op_names[self.op_at[index]]

    def __len__(self) -> int:
        return len(self.t_ns)


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
