"""``memprof check``: the memory gate on reports already written, without running torch."""

from __future__ import annotations

from pathlib import Path

import typer

from memprof.commands import gate_options


def check(
    report_path: Path = typer.Argument(
        ...,
        metavar="REPORT.json",
        help="A report written by `memprof run --json` (or --save-baseline).",
        dir_okay=False,
    ),
    budget: str | None = gate_options.BUDGET,
    baseline: Path | None = gate_options.BASELINE,
    tolerance: str = gate_options.TOLERANCE,
    per_op: bool = gate_options.PER_OP,
    strict_env: bool = gate_options.STRICT_ENV,
    require_compile_saves: bool = gate_options.REQUIRE_COMPILE_SAVES,
) -> None:
    """Gate a saved report: budgets, a baseline with a tolerance, compiled vs eager.

    Gives the same verdict as the same options on `memprof run`, without importing torch.
    Exit 0 when every check passes, 1 when any fails, 2 for a bad option or report.

    Example: memprof check memprof.json --baseline ci/memprof-baseline.json --tolerance 2%
    """
    from memprof.errors import UsageError
    from memprof.gate import evaluate
    from memprof.model import load_report

    config = gate_options.config_from_options(
        budget, baseline, tolerance, per_op, strict_env, require_compile_saves
    )
    if not config.active:
        raise UsageError(
            "nothing to check: give --budget SIZE, --baseline BASE.json or --require-compile-saves"
        )
    gate_options.report_gate(evaluate(load_report(report_path), config))
