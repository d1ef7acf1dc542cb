"""The advice kind of report (``memprof advise``), declared once (:data:`KIND`, its sections in
order) and drawn by every format: the techniques tried, ranked by what they save (a bar each),
those refused with why, the plan for the budget with its verification, and its answer (the line
the terminal ends with)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memprof.core.units import format_bytes
from memprof.model.advice import Advice
from memprof.model.kind import ReportKind
from memprof.outputs import document as doc
from memprof.outputs import estimate
from memprof.outputs.answer import conclusions
from memprof.outputs.kinds import Builder, Kind

if TYPE_CHECKING:
    from memprof.model.advice import AdvisedTechnique
    from memprof.model.report import Report
    from memprof.outputs.context import Context

BAR_CHARS = 20
"""The widest Markdown bar, in characters (the largest saving)."""

HELP = (
    "Each technique applied alone to the step's own objects and estimated on fake tensors: footprint "
    "(CPU) or reserve (CUDA) with it, what it saves of the step as it is, and the floating-point "
    "operations it adds (torch.utils.flop_counter's formulas: matmuls, convolutions, attention; "
    "recomputing them in backward counts again). Savings of several techniques are measured together, "
    "never added up."
)


def flops_text(extra: float | None, base: int | None) -> str:
    """``+10%`` of the baseline's FLOPs, ``0%``, or ``-`` when not counted."""
    if extra is None or not base:
        return "-"
    percent = 100 * extra / base
    return "0%" if abs(percent) < 0.5 else f"{percent:+.0f}%"


def _bar(saving: int, largest: int) -> str:
    if saving <= 0 or largest <= 0:
        return ""
    return "█" * max(1, round(BAR_CHARS * saving / largest))


def _table(advice: Advice) -> doc.Table:
    base = advice.baseline
    reserved = advice.needed == "reserved_peak_bytes"
    columns = (
        doc.Column("technique", doc.NAME, width=32),
        doc.Column("footprint", doc.SIZE, drop=2 if reserved else 0),
        *([doc.Column("reserved", doc.SIZE)] if reserved else []),
        doc.Column("saving", doc.SIZE, strong=True),
        doc.Column("saving %", doc.NUMBER),
        doc.Column("extra FLOPs", doc.NUMBER),
        doc.Column("", doc.TEXT, only=frozenset({doc.MARKDOWN})),
        doc.Column("apply / cost", doc.NOTE),
    )
    applied = [t for t in advice.techniques if t.applies]
    largest = max((t.saving_bytes or 0 for t in applied), default=0)
    rows = []
    for t in applied:
        saving = t.saving_bytes or 0
        ratio = doc.Value(f"{100 * (t.saving_ratio or 0):.1f}%", t.saving_ratio)
        extra = doc.Value(flops_text(t.extra_flops, base.flops), t.extra_flops)
        needed = (t.needed_bytes,) if reserved else ()
        note = t.apply + (f"; {t.cost}" if t.cost else "")
        rows.append(
            doc.Row((t.name, t.footprint_bytes, *needed, saving, ratio, extra, _bar(saving, largest), note))
        )
    return doc.Table(columns, tuple(rows), name="advice", sortable=True)


def _bars(advice: Advice) -> doc.Bars | None:
    applied = [t for t in advice.techniques if t.applies and (t.saving_bytes or 0) > 0]
    if not applied:
        return None
    chosen = set(advice.plan.keys) if advice.plan is not None else set()
    bars = tuple(doc.Bar(t.name, t.saving_bytes or 0, t.key in chosen) for t in applied)
    return doc.Bars(
        "advice-chart",
        bars,
        x_label="bytes saved, each technique alone",
        caption="What each technique saves alone; those in the plan in red.",
    )


def _refused(techniques: tuple[AdvisedTechnique, ...]) -> doc.Items | None:
    lines = tuple(doc.words(f"{t.name}: {t.reason}") for t in techniques if not t.applies)
    return doc.Items(lines) if lines else None


def _plan_blocks(advice: Advice) -> list:
    plan = advice.plan
    if plan is None:
        return []
    blocks: list = [doc.Heading(doc.words("Plan for the budget"))]
    lines = [
        f"budget: {format_bytes(plan.budget_bytes)}; the step as it is needs "
        f"{format_bytes(advice.baseline.needed_bytes)}",
        f"{'fits' if plan.fits else 'does not fit'}: {', '.join(plan.techniques) or 'as it is'}: "
        f"{format_bytes(plan.needed_bytes)} estimated ({plan.estimated} combination(s) of two or more "
        "techniques estimated as a whole)",
    ]
    if plan.measured_footprint_bytes is not None:
        predicted = plan.footprint_bytes
        off = (plan.measured_footprint_bytes - predicted) / predicted if predicted else 0.0
        lines.append(
            f"verified: measured footprint {format_bytes(plan.measured_footprint_bytes)} against "
            f"{format_bytes(predicted)} predicted ({100 * off:+.2f}%)"
        )
        lines += [f"measured run: {line}" for line in plan.measured]
    blocks.append(doc.Items(tuple(doc.words(line) for line in lines)))
    return blocks


def section(report: Report) -> doc.Section | None:
    """Advice's own section: the techniques ranked (a table, a bar each), those refused, the
    plan."""
    advice = report.detail_of(Advice)
    if advice is None:
        return None
    base = advice.baseline
    lead = f"the step as it is needs {format_bytes(base.needed_bytes)}"
    if base.flops:
        lead += f" and {base.flops:,} FLOPs a call"
    blocks: list = [doc.Paragraph(doc.words(lead), "strong"), _bars(advice), _table(advice)]
    blocks.append(doc.Paragraph(doc.words(HELP), "help"))
    refused = _refused(advice.techniques)
    if refused is not None:
        blocks += [doc.Heading(doc.words("Not applied")), refused]
    blocks += _plan_blocks(advice)
    return doc.Section("advice", "Advice", tuple(b for b in blocks if b is not None))


def answer(report: Report) -> str | None:
    """The line the terminal ends with: the plan (``to fit 24.0 GiB: ...``), or without a
    budget the technique that saves most."""
    advice = report.detail_of(Advice)
    if advice is None:
        return None
    if advice.plan is not None:
        return advice.plan.answer
    applied = [t for t in advice.techniques if t.applies and (t.saving_bytes or 0) > 0]
    if not applied:
        return "no technique tried here saves memory on this step"
    top = applied[0]
    return (
        f"saves most: {top.name} (-{format_bytes(top.saving_bytes or 0)}, "
        f"{flops_text(top.extra_flops, advice.baseline.flops)} FLOPs): {top.apply}"
    )


def failed(report: Report) -> str | None:
    """The gate line when a budget was given and nothing fits it (exit 1); else None."""
    advice = report.detail_of(Advice)
    if advice is not None and advice.plan is not None and not advice.plan.fits:
        return f"memprof advise: {advice.plan.answer}"
    return None


def verdict_section(context: Context) -> doc.Section:
    """Advice concludes with its plan (or its largest saving), not with a run's answer."""
    advised = answer(context.detail)
    groups = (
        (doc.Conclusion((advised,)),)
        if advised is not None
        else conclusions(context.detail, short=context.limits.short)
    )
    return doc.Section("verdict", "", (doc.Answer(groups),))


SECTIONS: dict[str, Builder] = {
    "advice-verdict": verdict_section,
    "advice": lambda context: section(context.detail),
}
"""Advice's own sections, by id."""

KIND = Kind(
    ReportKind.ADVICE.value,
    (
        "summary",
        "gate",
        "advice-verdict",
        "runs",
        "estimate",
        "advice",
        "at-peak",
        "ops",
        "fused",
        "notes",
        "legend",
    ),
    page="memprof advise: ",
    title=lambda report: f"memprof: {estimate.title(report).replace('estimate of', 'advice for', 1)}",
)
"""The advice kind: its sections in order (a run's and an estimate's, with its own verdict and
section)."""
