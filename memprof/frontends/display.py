"""A :class:`memprof.Report` in a notebook (or an IPython console that shows HTML) displays as
its HTML report (the ``notebook`` format of :data:`memprof.outputs.RENDERERS`).

The front end registers it with IPython's display formatter, so that the report model imports no
renderer: when memprof is imported inside IPython, and when ``%load_ext memprof`` runs. IPython
is never imported here: it is already running, or there is nothing to register."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memprof.model.report import Report

REPORT_MODULE, REPORT_CLASS = "memprof.model.report", "Report"
"""Where :class:`memprof.Report` is defined: IPython matches the type by name, so registering
it loads neither the model nor the renderers."""


def report_html(report: Report) -> str:
    """The HTML report as a fragment for a notebook cell."""
    from memprof.outputs import renderer

    return renderer("notebook")(report)


def register(shell: Any = None) -> bool:
    """Show reports as HTML in ``shell`` (default: the running IPython, if any); whether there
    was a shell to register with."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters or "text/html" not in formatters:
        return False
    formatters["text/html"].for_type_by_name(REPORT_MODULE, REPORT_CLASS, report_html)
    return True
