"""A sweep of one inputs-factory parameter as a report holds it: each estimated value, the line
through the bytes they need and the largest value that fits (:class:`Sweep`).
:mod:`memprof.analysis.sweep` fits the line and decides what to estimate next."""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core import fields
from memprof.model.detail import detail


@dataclass(frozen=True, kw_only=True)
class SweepPoint:
    """One estimated value of the swept parameter: its ``label`` (``batch=8``), its footprint
    (everything live at its peak), the line's footprint at it, the bytes it needs of the device
    (the footprint on the CPU, the reserve on CUDA), whether it fits the capacity (None without
    one), and whether the search added it (``searched``; else it was listed)."""

    value: str = fields.text(required=True)
    label: str = fields.text(required=True)
    footprint_bytes: int = fields.size()
    fitted_bytes: int | None = fields.maybe_size()
    needed_bytes: int = fields.size()
    fits: bool | None = fields.flag(default=None, nullable=True, omit_none=True)
    searched: bool = fields.flag()


@detail("sweep")
@dataclass(frozen=True, kw_only=True)
class Sweep:
    """The sweep of ``parameter``: each point (in order of value when the values are numbers,
    else as listed); the line through the
    listed values' footprints (``footprint = intercept_bytes + slope_bytes x value``; None when
    the values are not numbers or fewer than two), the largest relative distance of a listed
    point from it, whether that is within 1% (None with fewer than three values); what a value
    needs of the device (``needed``: ``reserved_peak_bytes`` on CUDA, ``footprint_bytes`` on the
    CPU) and with a capacity the largest value that fits (its label and bytes needed;
    ``verified``: the next whole value was estimated too and does not fit) and the verdict in
    words. The line guides the search for the largest value; each value reported as fitting
    or not was estimated. A value fits when it needs at most the capacity less ``reserve_bytes``
    (kept for what lies outside the caching allocator). ``reliable`` is false when an estimate
    guessed values that steer the program: then no value is said to fit."""

    parameter: str = fields.text(required=True)
    needed: str = fields.text(default="footprint_bytes", choices=("footprint_bytes", "reserved_peak_bytes"))
    points: tuple[SweepPoint, ...] = fields.items(SweepPoint)
    slope_bytes: float | None = fields.ratio(omit=lambda sweep: sweep.slope_bytes is None)
    intercept_bytes: float | None = fields.ratio(omit=lambda sweep: sweep.intercept_bytes is None)
    max_residual: float | None = fields.ratio(omit=lambda sweep: sweep.max_residual is None)
    linear: bool | None = fields.flag(default=None, nullable=True, omit_none=True)
    capacity_bytes: int | None = fields.maybe_size()
    largest_fitting: str | None = fields.optional_text()
    largest_fitting_label: str | None = fields.optional_text()
    largest_fitting_bytes: int | None = fields.maybe_size()
    verified: bool = fields.flag()
    verdict: str = fields.text(default="")
    reserve_bytes: int = fields.size()
    reliable: bool = fields.flag(default=True)
