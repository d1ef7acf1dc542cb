"""Options and output handling shared by the commands that produce reports."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from memprof.errors import UsageError

if TYPE_CHECKING:
    from memprof.model import Report


class Sort(str, Enum):
    peak = "peak"
    self = "self"
    allocated = "allocated"


def err(message: str) -> None:
    typer.echo(message, err=True)


def status_printer(quiet: bool) -> Callable[[str], None] | None:
    """Status lines on stderr (``memprof: compiling … 5 s``), or None with ``-q``."""
    if quiet:
        return None
    return lambda message: err(f"memprof: {message}")


def output_paths(
    json_path: Path | None,
    csv_path: Path | None,
    markdown_path: Path | None,
    html_path: Path | None,
    out_dir: Path | None,
) -> dict[str, Path]:
    """Which formats go where; ``--out DIR`` fills in every format not named on its own."""
    from memprof.report import STANDARD_NAMES

    chosen = {"json": json_path, "csv": csv_path, "markdown": markdown_path, "html": html_path}
    if out_dir is not None:
        if not out_dir.is_dir():
            raise UsageError(f"--out {str(out_dir)!r} is not an existing folder; create it first")
        for fmt, name in STANDARD_NAMES.items():
            if chosen[fmt] is None:
                chosen[fmt] = out_dir / name
    outputs = {fmt: path for fmt, path in chosen.items() if path is not None}
    if "html" in outputs:
        # Before any profiling: a missing extra should not cost a whole run.
        from memprof.report.html import check_available

        check_available()
    return outputs


def write_outputs(report: Report, outputs: dict[str, Path], table_path: Path | None = None) -> None:
    """Render every requested format first, then write each atomically: a rendering error
    leaves no file behind."""
    from memprof.fileio import atomic_write_text
    from memprof.report import renderer

    rendered = {path: renderer(fmt)(report) for fmt, path in outputs.items()}
    if table_path is not None:
        parts = [
            f"memprof run {label}: {report.target}\n{run.torch_table}"
            for label, run in report.runs.items()
            if run.torch_table
        ]
        rendered[table_path] = "\n".join(parts)
    for path, text in rendered.items():
        atomic_write_text(path, text)
