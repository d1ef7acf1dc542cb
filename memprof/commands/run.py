"""``memprof run``: profile one target in eager mode, compiled mode, or both."""

from __future__ import annotations

from pathlib import Path

import typer

from memprof.commands import gate_options
from memprof.commands.common import (
    BACKEND_OPTION,
    COMPILE_MODE_OPTION,
    CSV_OPTION,
    DEVICE_OPTION,
    FRESH_COMPILE_OPTION,
    HTML_OPTION,
    INPUTS_HELP,
    JSON_OPTION,
    MARKDOWN_OPTION,
    OUT_OPTION,
    QUIET_OPTION,
    REPEAT_OPTION,
    SORT_OPTION,
    TABLE_OPTION,
    TOP_OPTION,
    WARMUP_OPTION,
    CompileMode,
    Mode,
    Sort,
    TargetSpec,
    output_settings,
    profile_targets,
)
from memprof.sources.options import RunOptions

__all__ = ["CompileMode", "Mode", "run"]


def run(
    target: str = typer.Argument(
        ...,
        metavar="TARGET",
        help="What to profile: pkg.module:function, pkg.module:obj.attr or path/to/file.py:function.",
    ),
    inputs: str | None = typer.Option(None, "--inputs", help=INPUTS_HELP),
    device: str = DEVICE_OPTION,
    mode: Mode = typer.Option(
        Mode.eager, "--mode", help="eager, or compile (torch.compile, compiled before profiling)."
    ),
    compare_compile: bool = typer.Option(
        False, "--compare-compile", help="Profile eager and compiled, side by side."
    ),
    compile_mode: CompileMode = COMPILE_MODE_OPTION,
    backend: str = BACKEND_OPTION,
    warmup: int = WARMUP_OPTION,
    repeat: int = REPEAT_OPTION,
    fresh_compile: bool = FRESH_COMPILE_OPTION,
    json_path: Path | None = JSON_OPTION,
    csv_path: Path | None = CSV_OPTION,
    markdown_path: Path | None = MARKDOWN_OPTION,
    html_path: Path | None = HTML_OPTION,
    out_dir: Path | None = OUT_OPTION,
    table_path: Path | None = TABLE_OPTION,
    sort: Sort = SORT_OPTION,
    top: int = TOP_OPTION,
    quiet: bool = QUIET_OPTION,
    budget: str | None = gate_options.BUDGET,
    baseline: Path | None = gate_options.BASELINE,
    tolerance: str = gate_options.TOLERANCE,
    per_op: bool = gate_options.PER_OP,
    strict_env: bool = gate_options.STRICT_ENV,
    require_compile_saves: bool = gate_options.REQUIRE_COMPILE_SAVES,
    save_baseline: Path | None = gate_options.SAVE_BASELINE,
) -> None:
    """Profile a function's memory in eager mode, compiled mode, or both.

    With --budget, --baseline or --require-compile-saves it is also a memory gate: the report
    is printed and written first, then the gate's lines; exit 1 when a check fails.

    Example: memprof run memprof.examples.similarity:similarity --compare-compile

    Example: memprof run mypkg.model:step --baseline ci/memprof.json --tolerance 2%
    """
    output = output_settings(
        json_path, csv_path, markdown_path, html_path, out_dir, table_path, sort, top, quiet, save_baseline
    )
    # --compare-compile is `memprof compare f torch.compile(f)`: the same target twice, in two modes.
    modes = ["eager", "compile"] if compare_compile else [mode.value]
    # The gate's options are checked before any torch work: a typo costs no profiling.
    gate = gate_options.config_from_options(
        budget, baseline, tolerance, per_op, strict_env, require_compile_saves
    )
    gate_options.check_runs(gate, modes)
    profile_targets(
        target,
        [TargetSpec(spec=target, inputs=inputs, mode=m, label=m) for m in modes],
        RunOptions(
            device=device,
            warmup=warmup,
            repeat=repeat,
            compile_mode=compile_mode.value,
            backend=backend,
            fresh_compile=fresh_compile,
        ),
        output,
        gate,
    )
