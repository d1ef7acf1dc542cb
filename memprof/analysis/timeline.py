"""Timelines: reducing a long series to a drawable one without losing its highest points."""

from __future__ import annotations

import numpy as np

MAX_POINTS = 4000


def downsample_max(
    t: np.ndarray, values: np.ndarray, other: np.ndarray | None = None, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(t, values, other)`` reduced to at most ``max_points`` points: each bucket of
    consecutive points keeps the one where ``values`` is highest (its first occurrence), so the
    peak survives; ``other`` (e.g. reserved bytes) is taken at the same points."""
    t = np.asarray(t, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    if len(t) > max_points:
        edges = np.unique(np.linspace(0, len(t), max_points + 1).astype(np.int64)[:-1])
        highest = np.maximum.reduceat(values, edges)
        bucket = np.repeat(np.arange(len(edges)), np.diff(np.append(edges, len(t))))
        hits = np.flatnonzero(values == highest[bucket])
        _, first_hit = np.unique(bucket[hits], return_index=True)
        keep = hits[first_hit]
        t, values = t[keep], values[keep]
        if other is not None:
            other = np.asarray(other, dtype=np.int64)[keep]
    elif other is not None:
        other = np.asarray(other, dtype=np.int64)
    return t, values, other
