"""What ``memprof advise`` found, as a report holds it (:class:`Advice`): the step as it is
(the baseline), each memory-saving technique tried alone on fake tensors with what it saved
and cost (or why it does not apply), and with a budget the plan: the combination that fits
with the least added compute, estimated as a whole (savings that interact are measured
together, never added up), and with ``--verify`` measured for real."""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core import fields
from memprof.model.detail import detail


@dataclass(frozen=True, kw_only=True)
class AdviceBaseline:
    """The step as it is: its footprint (everything live at its peak), the bytes it needs of
    the device (``needed_bytes``: the footprint on the CPU, the caching allocator's reserve on
    CUDA) and the floating-point operations of one call (``FlopCounterMode``)."""

    footprint_bytes: int = fields.size()
    needed_bytes: int = fields.size()
    flops: int | None = fields.maybe_count()


@dataclass(frozen=True, kw_only=True)
class AdvisedTechnique:
    """One technique tried alone: its ``name`` (``checkpoint every Block``), ``key`` (an id:
    ``checkpoint:Block``, ``autocast:bf16``, ``optimizer:foreach=False``, ``micro_batch:2``),
    ``apply`` (the line of code that applies it), whether it applies (``applies``; else
    ``reason`` says why not, and no figures), the footprint and bytes needed with it, the
    bytes it saves of what the baseline needs (negative: it costs memory) and the ratio to the
    baseline's, the FLOPs of a step with it and the FLOPs it adds (a step of k micro-batches:
    k calls), and ``cost`` in words (a numerics change, smaller calls)."""

    name: str = fields.text(required=True)
    key: str = fields.text(default="")
    apply: str = fields.text(default="")
    applies: bool = fields.flag(default=True)
    reason: str = fields.text(default="")
    footprint_bytes: int | None = fields.maybe_size()
    needed_bytes: int | None = fields.maybe_size()
    saving_bytes: int | None = fields.signed_size(default=None, nullable=True, omit_none=True)
    saving_ratio: float | None = fields.ratio(omit=lambda t: t.saving_ratio is None)
    flops: int | None = fields.maybe_count()
    extra_flops: float | None = fields.maybe_number(omit=lambda t: t.extra_flops is None)
    cost: str = fields.text(default="")


@dataclass(frozen=True, kw_only=True)
class AdvicePlan:
    """The combination of techniques chosen for a budget (``budget_bytes``, of what the step
    needs of the device): the techniques' names and keys, its footprint and bytes needed
    (estimated as a whole), its extra FLOPs, whether it fits (``fits``; when nothing fits,
    the plan is the closest estimated), how many combinations of two or more techniques the
    search estimated as a whole (``estimated``; each technique alone always is),
    and with a verification the footprint measured by a real run of it on this machine
    (``measured_footprint_bytes``) and that run's bottom line (``measured``). ``answer``: the
    plan in one line."""

    techniques: tuple[str, ...] = fields.items(fields.TEXT)
    keys: tuple[str, ...] = fields.items(fields.TEXT)
    footprint_bytes: int = fields.size()
    needed_bytes: int = fields.size()
    extra_flops: float | None = fields.maybe_number(omit=lambda p: p.extra_flops is None)
    budget_bytes: int = fields.size()
    fits: bool = fields.flag()
    estimated: int = fields.count()
    measured_footprint_bytes: int | None = fields.maybe_size()
    measured: tuple[str, ...] = fields.items(fields.TEXT)
    answer: str = fields.text(default="")


@detail("advice")
@dataclass(frozen=True, kw_only=True)
class Advice:
    """What to change so that the step fits: ``needed`` names what a step needs of the device
    (``footprint_bytes`` on the CPU, ``reserved_peak_bytes`` on CUDA), the ``baseline``, each
    technique tried (those that apply first, the largest saving first; then those refused
    with their reason), and with a budget the ``plan``."""

    needed: str = fields.text(default="footprint_bytes", choices=("footprint_bytes", "reserved_peak_bytes"))
    baseline: AdviceBaseline = fields.nested(AdviceBaseline)
    techniques: tuple[AdvisedTechnique, ...] = fields.items(AdvisedTechnique)
    plan: AdvicePlan | None = fields.optional(AdvicePlan)
