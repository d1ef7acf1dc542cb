"""Report kinds, each declared once: what a report is (:class:`Kind`) and its document's sections,
in order (ids of :data:`SECTIONS`). :func:`memprof.outputs.build.build` lays out any report by
its kind; every renderer draws that document, so a kind's sections are written once, for every
format.

A new kind of report is its model (its payload, a report's ``detail``:
:mod:`memprof.model.detail`) and one module of this folder that declares its ``SECTIONS``
(builders by id: a :class:`~memprof.outputs.context.Context` in, a
:class:`~memprof.outputs.document.Section` or None out) and its ``KIND``::

    SECTIONS = {"toy": toy_section}
    KIND = Kind("toy", ("summary", "toy", "notes"), detects=lambda report: isinstance(report.detail, Toy))

Every module of this folder is imported before the kinds are first read (:func:`discover`):
such a module needs no other line anywhere. A kind declared elsewhere registers itself
(:func:`register_section`, :func:`register_kind`). A section with nothing to show returns None;
a kind lists every section it can have.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memprof.model.kind import ReportKind

if TYPE_CHECKING:
    from memprof.model.report import Report
    from memprof.outputs.context import Context
    from memprof.outputs.document import Section

Builder = Callable[["Context"], "Section | None"]
"""A section's builder: what it draws of the report (format-neutral blocks), or None."""

SECTIONS: dict[str, Builder] = {}
"""Every section there is, by id (filled by :func:`register_section`)."""


@dataclass(frozen=True)
class Kind:
    """A kind of report: its ``name`` (a :class:`ReportKind` value, or a new kind's own), its
    ``sections`` in the order every format shows them, and, for a kind that
    :class:`ReportKind` does not know, ``detects``: whether a report is one (its payload is
    there). ``page``: what the page's name says before the target (``memprof advise: ``).
    ``title``: the document's first line, for a kind whose words differ from its
    :class:`ReportKind`'s (advice's: ``memprof: advice for ...``)."""

    name: str
    sections: tuple[str, ...]
    detects: Callable[[Report], bool] | None = None
    page: str = "memprof: "
    title: Callable[[Report], str] | None = None


_FIRST = ("summary", "gate", "verdict", "runs")
_LAST = ("at-peak", "ops", "fused", "notes")
_ESTIMATED = (*_FIRST, "estimate", *_LAST, "legend")

KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        # Live runs (and the two runs of ``memprof diff``, whatever they were).
        Kind(
            ReportKind.RUN.value,
            (
                *_FIRST,
                "compile",
                "timeline",
                "snapshot",
                "sites",
                "peak-diff",
                *_LAST,
                "torch-table",
                "legend",
            ),
        ),
        Kind(ReportKind.RECORDED.value, (*_FIRST, "timeline", "snapshot", "sites", *_LAST, "legend")),
        Kind(ReportKind.ESTIMATE.value, _ESTIMATED, page="memprof estimate: "),
        Kind(ReportKind.SWEEP.value, _ESTIMATED, page="memprof estimate: "),
    )
}
"""Every kind, by name: :class:`ReportKind`'s (a report of several ranks shows every rank, then
the detailed rank's kind's sections: :func:`sections_of`), then those of this folder's modules
(advice's: :data:`memprof.outputs.advice.KIND`, found by :func:`discover`) and those
:func:`register_kind` adds."""


def register_section(section_id: str, builder: Builder) -> None:
    """Make ``builder`` the section ``section_id`` (replacing any of that id)."""
    SECTIONS[section_id] = builder


def register_kind(kind: Kind) -> Kind:
    """Declare ``kind`` (replacing any of its name); its sections must be registered."""
    unknown = [s for s in kind.sections if s not in SECTIONS]
    if unknown:
        raise ValueError(f"report kind {kind.name!r}: no section {', '.join(map(repr, unknown))}")
    KINDS[kind.name] = kind
    return kind


def unregister_kind(name: str) -> None:
    """Forget the kind ``name`` (a test's own kind)."""
    KINDS.pop(name, None)


_discovered: list[bool] = []


def discover() -> dict[str, Kind]:
    """:data:`KINDS`, once every module of this folder is imported and the kinds they declare
    (a module's ``SECTIONS`` and ``KIND``) are registered: the first call does it."""
    if _discovered:
        return KINDS
    _discovered.append(True)
    import importlib
    import pkgutil
    from pathlib import Path

    package = __name__.rpartition(".")[0]
    importlib.import_module(f"{package}.build")  # the sections every kind shares, first
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        module = importlib.import_module(f"{package}.{info.name}")
        kind = getattr(module, "KIND", None)
        if isinstance(kind, Kind) and kind.name not in KINDS:
            for section_id, builder in getattr(module, "SECTIONS", {}).items():
                register_section(section_id, builder)
            register_kind(kind)
    return KINDS


def kind_of(report: Report) -> Kind:
    """The kind of ``report``: a registered kind that detects it, else its :class:`ReportKind`'s
    (of the runs a report of several ranks details, see :func:`sections_of`)."""
    discover()
    for kind in KINDS.values():
        if kind.detects is not None and kind.detects(report):
            return kind
    own = report.kind
    return KINDS[(ReportKind.RUN if own is ReportKind.RANKS else own).value]


RANKS_SECTIONS = ("summary", "gate", "ranks")
"""What a report of several ranks shows before the detailed rank's own sections."""


def sections_of(report: Report, detail: Report | None = None) -> tuple[str, ...]:
    """The sections of ``report``'s document, in order: its kind's; for a report of several
    ranks (``detail``: the rank it details), every rank's first, then the detailed rank's kind's."""
    if detail is None:
        return kind_of(report).sections
    own = kind_of(detail).sections
    return (*RANKS_SECTIONS, *(s for s in own if s not in RANKS_SECTIONS))
