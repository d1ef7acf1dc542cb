"""``memprof run``: profile one target in eager mode, compiled mode, or both."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from memprof.commands import gate_options
from memprof.commands.common import Sort, output_paths, status_printer, write_outputs


class Mode(str, Enum):
    eager = "eager"
    compile = "compile"


class CompileMode(str, Enum):
    default = "default"
    reduce_overhead = "reduce-overhead"
    max_autotune = "max-autotune"
    max_autotune_no_cudagraphs = "max-autotune-no-cudagraphs"


def run(
    target: str = typer.Argument(
        ..., help="What to profile: pkg.module:function, pkg.module:obj.attr or path/to/file.py:function."
    ),
    inputs: str | None = typer.Option(
        None,
        "--inputs",
        help="Factory for the arguments (same forms as TARGET). It returns a tuple/list (*args), a dict "
        "(**kwargs) or one argument. Default: <function>_inputs in the target's module.",
    ),
    device: str = typer.Option(
        "auto", "--device", help="auto, cpu, cuda or cuda:N (auto = CUDA when available)."
    ),
    mode: Mode = typer.Option(
        Mode.eager, "--mode", help="eager, or compile (torch.compile, compiled before profiling)."
    ),
    compare_compile: bool = typer.Option(
        False, "--compare-compile", help="Profile eager and compiled, side by side."
    ),
    compile_mode: CompileMode = typer.Option(
        CompileMode.default, "--compile-mode", help="torch.compile mode."
    ),
    backend: str = typer.Option("inductor", "--backend", help="torch.compile backend."),
    warmup: int = typer.Option(
        1, "--warmup", min=0, help="Unprofiled calls first (compiling happens there)."
    ),
    repeat: int = typer.Option(
        1, "--repeat", min=1, help="Profiled calls; wall time is their median, peak their maximum."
    ),
    fresh_compile: bool = typer.Option(
        False, "--fresh-compile", help="Compile cold, bypassing Inductor's on-disk cache."
    ),
    json_path: Path | None = typer.Option(
        None, "--json", help="Write the report as JSON (also a baseline).", dir_okay=False
    ),
    csv_path: Path | None = typer.Option(
        None, "--csv", help="Write per-op numbers as CSV, one row per op and run.", dir_okay=False
    ),
    markdown_path: Path | None = typer.Option(
        None, "--markdown", help="Write a Markdown summary (for CI step summaries).", dir_okay=False
    ),
    html_path: Path | None = typer.Option(
        None, "--html", help="Write a self-contained HTML report.", dir_okay=False
    ),
    out_dir: Path | None = typer.Option(
        None, "--out", help="Write every format into this folder with standard names.", file_okay=False
    ),
    table_path: Path | None = typer.Option(
        None, "--table", help="Also save torch's own printed table of each run.", dir_okay=False
    ),
    sort: Sort = typer.Option(Sort.peak, "--sort", help="Order ops by peak, self or allocated bytes."),
    top: int = typer.Option(15, "--top", min=1, help="How many ops to show in the terminal."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No status lines on stderr."),
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
    from memprof.errors import UsageError
    from memprof.fileio import check_output_paths

    outputs = output_paths(json_path, csv_path, markdown_path, html_path, out_dir)
    if save_baseline is not None and outputs.get("json") is not None:
        # --json and --save-baseline write the same report: one file when they name the same path.
        if outputs["json"].resolve() == save_baseline.resolve():
            save_baseline = None
    check_output_paths(
        [
            *((f"--{fmt}", path) for fmt, path in outputs.items()),
            ("--table", table_path),
            ("--save-baseline", save_baseline),
        ]
    )
    # The gate's options are checked before any torch work: a typo costs no profiling.
    gate = gate_options.config_from_options(
        budget, baseline, tolerance, per_op, strict_env, require_compile_saves
    )
    labels = ["eager", "compile"] if compare_compile else [mode.value]
    gate.budgets.check_labels(labels)
    if require_compile_saves and not compare_compile:
        raise UsageError("--require-compile-saves compares compiled with eager; add --compare-compile")

    from memprof.api import mode_variants, run_variants
    from memprof.report.terminal import render_terminal
    from memprof.runner import resolve_device
    from memprof.target import build_inputs, resolve

    resolved = resolve(target)
    resolved_device = resolve_device(device)
    arguments = build_inputs(resolved, inputs, resolved_device)
    report, failure = run_variants(
        target,
        mode_variants(
            resolved.func, arguments, "both" if compare_compile else mode.value, resolved.attr_path
        ),
        device=resolved_device,
        warmup=warmup,
        repeat=repeat,
        compile_mode=compile_mode.value,
        backend=backend,
        fresh_compile=fresh_compile,
        keep_table=table_path is not None or "html" in outputs,
        status=status_printer(quiet),
    )
    typer.echo(render_terminal(report, sort=sort.value, top=top), nl=False)
    write_outputs(report, outputs, table_path)
    if save_baseline is not None:
        from memprof.fileio import atomic_write_text

        atomic_write_text(save_baseline, report.to_json())
    if failure is not None:
        raise failure
    if gate.active:
        from memprof.gate import evaluate

        gate_options.report_gate(evaluate(report, gate))
