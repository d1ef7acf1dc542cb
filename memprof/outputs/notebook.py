"""Jupyter: a :class:`memprof.Report` shows itself as the HTML report (registered with IPython's
display formatter by :mod:`memprof.frontends.display`).

The fragment brings the report's style and colours (light, or dark when the system asks for
it), then the notebook's own (``assets/notebook.css``, a file of this package): inside JupyterLab,
Notebook 7, VS Code and Colab the notebook's theme decides between light and dark, with the
theme's own background, text and border colours where it defines them."""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memprof.model.report import Report


@functools.cache
def notebook_css() -> str:
    """The notebook themes' style (``memprof/outputs/assets/notebook.css``), without its comments."""
    text = (resources.files("memprof.outputs") / "assets" / "notebook.css").read_text(encoding="utf-8")
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def notebook_html(report: Report) -> str:
    """The HTML report as a fragment for a notebook cell: its style comes along, with its own
    background and colours, and those of the notebook's theme, so a dark notebook shows it as
    readably as a light one."""
    from memprof.outputs.html import render_html

    return f"{render_html(report, standalone=False)}<style>{notebook_css()}</style>"
