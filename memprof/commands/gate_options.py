"""The gate's command-line options, shared by ``run``, ``check`` and ``compare``.

Declare them once here and reuse the constants as parameter defaults::

    def check(report: Path = ..., budget: str | None = gate_options.BUDGET, ...) -> None:
        config = gate_options.config_from_options(budget, baseline, tolerance, per_op, ...)
        ...
        gate_options.report_gate(evaluate(report, config))

Parse with :func:`config_from_options` *before* any profiling, so a bad size or baseline
exits 2 at once. Gate lines go to stdout (they belong in CI logs next to the report);
:func:`report_gate` raises ``typer.Exit(1)`` when any check failed.
"""

from __future__ import annotations

from pathlib import Path

import typer

from memprof.gate import BUDGET_EXAMPLE, DEFAULT_TOLERANCE, GateConfig, GateResult, parse_budget
from memprof.units import parse_percent

BUDGET = typer.Option(
    None,
    "--budget",
    metavar="SIZE|LABEL=SIZE,...",
    help=f"Fail (exit 1) when a run's peak exceeds this: {BUDGET_EXAMPLE}. KB/MB/GB are 1024-based.",
)
BASELINE = typer.Option(
    None,
    "--baseline",
    help="A report JSON (from --json or --save-baseline): fail when a run's peak grew beyond --tolerance.",
    dir_okay=False,
)
TOLERANCE = typer.Option(
    f"{DEFAULT_TOLERANCE * 100:g}%",
    "--tolerance",
    help="Growth allowed over the baseline (and compiled over eager with --require-compile-saves).",
)
PER_OP = typer.Option(False, "--per-op", help="Also compare each op's peak with the baseline.")
STRICT_ENV = typer.Option(
    False,
    "--strict-env",
    help="A baseline from another device or torch version is an error (exit 2), not a warning.",
)
REQUIRE_COMPILE_SAVES = typer.Option(
    False,
    "--require-compile-saves",
    help="Fail when the compiled peak is above the eager peak by more than --tolerance.",
)
SAVE_BASELINE = typer.Option(
    None,
    "--save-baseline",
    help="Write the report JSON here, to gate later runs with --baseline (same file as --json).",
    dir_okay=False,
)


def config_from_options(
    budget: str | None,
    baseline: Path | None,
    tolerance: str,
    per_op: bool,
    strict_env: bool,
    require_compile_saves: bool,
) -> GateConfig:
    """The gate's options parsed and the baseline loaded; any problem is exit 2 right here."""
    from memprof.errors import UsageError

    if per_op and baseline is None:
        raise UsageError("--per-op compares each op with a baseline; give --baseline BASE.json too")
    baseline_report = None
    if baseline is not None:
        from memprof.model import load_report

        baseline_report = load_report(baseline)
    try:
        fraction = parse_percent(tolerance)
    except UsageError as error:
        raise UsageError(f"--tolerance: {error.message}") from None
    return GateConfig(
        budgets=parse_budget(budget),
        baseline=baseline_report,
        tolerance=fraction,
        per_op=per_op,
        require_compile_saves=require_compile_saves,
        strict_env=strict_env,
    )


def check_runs(config: GateConfig, labels: list[str]) -> None:
    """The checks that need the run labels, before any profiling: budgets name existing runs;
    --require-compile-saves needs an eager and a compile run."""
    from memprof.errors import UsageError

    config.budgets.check_labels(labels)
    if config.require_compile_saves and not {"eager", "compile"} <= set(labels):
        raise UsageError("--require-compile-saves compares compiled with eager; add --compare-compile")


def report_gate(result: GateResult) -> None:
    """Print the gate's lines on stdout; ``typer.Exit(1)`` when it failed."""
    for line in result.lines():
        typer.echo(line)
    if not result.passed:
        raise typer.Exit(1)
