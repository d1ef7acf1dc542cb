"""Renderers: one module per format, each ``render(report, ...) -> str``; no computing here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memprof.model import Report

# --out DIR writes every format under these names.
STANDARD_NAMES = {
    "json": "memprof.json",
    "csv": "memprof-ops.csv",
    "markdown": "memprof.md",
    "html": "memprof.html",
}


def renderer(fmt: str) -> Callable[[Report], str]:
    """The render function of a format: json, csv, markdown, html."""
    if fmt == "json":
        return lambda report: report.to_json()
    if fmt == "csv":
        from memprof.report.csv import render_csv

        return render_csv
    if fmt == "markdown":
        from memprof.report.markdown import render_markdown

        return render_markdown
    if fmt == "html":
        from memprof.report.html import render_html

        return render_html
    raise ValueError(f"unknown format {fmt!r}")
