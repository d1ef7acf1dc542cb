"""Per-op statistics: one :class:`OpStats` per op name, how they are ordered, and their
DataFrame view for Python users. Pure: pandas is imported only to build a frame."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING

from memprof.core import fields

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class OpStats:
    """One op name's numbers in a run, summed over its calls like torch's ``key_averages``.

    ``calls``; ``self_bytes`` (torch's "Self Mem": net bytes the op itself left allocated,
    children excluded; negative when it freed); ``total_bytes`` (torch's "Mem": net bytes inside
    its calls, children included); ``allocated_bytes`` (all bytes allocated inside its calls);
    ``peak_bytes`` (the largest rise of live bytes during one call above live at its start);
    ``self_us``/``total_us`` (CPU time, microseconds, profiler on; NaN when unknown).
    ``wraps``: the ops (outermost first) its peak is wholly inside, when its call of highest
    peak only wrapped another that started where it did and rose as high (``aten::linear`` ->
    ``aten::matmul``, ``aten::mm``); empty when its peak is its own (or in reports written
    before memprof stored it).
    """

    name: str = fields.text(required=True)
    calls: int = fields.count()
    self_bytes: int = fields.signed_size()
    total_bytes: int = fields.signed_size()
    allocated_bytes: int = fields.size()
    peak_bytes: int = fields.size()
    self_us: float = fields.number()
    total_us: float = fields.number()
    wraps: tuple[str, ...] = fields.items(fields.TEXT, omit=lambda op: not op.wraps)


OP_COLUMNS = (
    "name",
    "calls",
    "self_bytes",
    "total_bytes",
    "allocated_bytes",
    "peak_bytes",
    "self_us",
    "total_us",
)
"""The per-op frame's columns (the fields of :class:`OpStats`): integer calls and bytes, then
CPU microseconds."""

SORT_FIELDS = {
    "peak": "peak_bytes",
    "self": "self_bytes",
    "allocated": "allocated_bytes",
    "total": "total_bytes",
}
"""What ``sort`` names: peak, self, allocated or total bytes."""


def sort_key(by: str) -> Callable[[OpStats], int]:
    """The size an op is ordered by: ``self`` by its magnitude (a large free matters as much
    as a large allocation), the others as they are."""
    column = SORT_FIELDS[by]
    if by == "self":
        return lambda op: abs(getattr(op, column))
    return lambda op: getattr(op, column)


def sort_ops(ops: Iterable[OpStats], by: str = "peak") -> tuple[OpStats, ...]:
    """Ops largest first by ``by`` (see :data:`SORT_FIELDS`); ties keep their order."""
    key = sort_key(by)
    return tuple(sorted(ops, key=lambda op: -key(op)))


def ops_frame(ops: Sequence[OpStats]) -> pd.DataFrame:
    """The ops as a DataFrame with :data:`OP_COLUMNS` (int64 calls and bytes, float times)."""
    import pandas as pd

    frame = pd.DataFrame([astuple(op)[: len(OP_COLUMNS)] for op in ops], columns=list(OP_COLUMNS))
    for column in OP_COLUMNS:
        if column == "name":
            frame[column] = frame[column].astype(object)
        elif column.endswith("_us"):
            frame[column] = frame[column].astype(float)
        else:
            frame[column] = frame[column].astype("int64")
    return frame
