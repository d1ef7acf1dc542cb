"""A run's memory timeline as a report holds it: live bytes over time, the op running at each
point and (explained runs) live bytes by category. The analysis makes them
(:mod:`memprof.analysis.timeline` shortens long ones)."""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core import fields

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
