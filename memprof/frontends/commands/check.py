"""``memprof check``: the memory gate on reports already written, without running torch."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memprof.frontends.commands import Command
from memprof.frontends.commands.options import GateOptions


def check(
    report_path: Annotated[
        Path,
        typer.Argument(
            metavar="REPORT.json",
            help="A report written by memprof run --json (or --save-baseline).",
            dir_okay=False,
        ),
    ],
    *,
    gate: GateOptions,
) -> None:
    """Gate a saved report: budgets, a baseline with a tolerance, compiled vs eager.

    Gives the same verdict as the same options on `memprof run`, without importing torch.
    Exit 0 when every check passes, 1 when any fails, 2 for a bad option or report.

    Example: memprof check memprof.json --baseline ci/memprof-baseline.json --tolerance 2%
    """
    from memprof.frontends.commands.common import report_gate
    from memprof.library.checking import check_report

    report_gate(check_report(report_path, gate.config()))


COMMAND = Command(check, place=60)
