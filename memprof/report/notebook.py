"""Jupyter: a :class:`memprof.Report` shows itself as the HTML report (``Report._repr_html_``).

A module of its own so that the model imports it lazily, without the model and the renderers
importing each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memprof.model import Report


def notebook_html(report: Report) -> str:
    """The HTML report as a fragment for a notebook cell: its style comes along, with its own
    background and colours, so a dark notebook shows it as readably as a light one."""
    from memprof.report.html import render_html

    return render_html(report, standalone=False)
