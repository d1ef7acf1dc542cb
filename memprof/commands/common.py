"""Options and the profile-and-report flow shared by ``run`` and ``compare``.

Both commands declare the same options (the constants below) and end in :func:`profile_targets`:
resolve each target and its inputs -> :func:`memprof.api.run_variants` -> terminal summary ->
output files. ``run --compare-compile`` is the comparison of a function with its compiled self.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from memprof.errors import UsageError

if TYPE_CHECKING:
    from memprof.api import Variant
    from memprof.gate import GateConfig
    from memprof.model import Report
    from memprof.sources.options import RunOptions


class Sort(str, Enum):
    peak = "peak"
    self = "self"
    allocated = "allocated"


class Mode(str, Enum):
    eager = "eager"
    compile = "compile"


class CompileMode(str, Enum):
    default = "default"
    reduce_overhead = "reduce-overhead"
    max_autotune = "max-autotune"
    max_autotune_no_cudagraphs = "max-autotune-no-cudagraphs"


# Option declarations shared by the commands, so `run` and `compare` spell and explain them alike.
INPUTS_HELP = (
    "Factory for the arguments (same forms as TARGET). It returns a tuple/list (*args), a dict "
    "(**kwargs) or one argument. Default: <function>_inputs in the target's module."
)
DEVICE_OPTION = typer.Option(
    "auto", "--device", help="auto, cpu, cuda or cuda:N (auto = CUDA when available)."
)
COMPILE_MODE_OPTION = typer.Option(CompileMode.default, "--compile-mode", help="torch.compile mode.")
BACKEND_OPTION = typer.Option("inductor", "--backend", help="torch.compile backend.")
WARMUP_OPTION = typer.Option(1, "--warmup", min=0, help="Unprofiled calls first (compiling happens there).")
REPEAT_OPTION = typer.Option(
    1, "--repeat", min=1, help="Profiled calls; wall time is their median, peak their maximum."
)
FRESH_COMPILE_OPTION = typer.Option(
    False, "--fresh-compile", help="Compile cold, bypassing Inductor's on-disk cache."
)
JSON_OPTION = typer.Option(None, "--json", help="Write the report as JSON (also a baseline).", dir_okay=False)
CSV_OPTION = typer.Option(
    None, "--csv", help="Write per-op numbers as CSV, one row per op and run.", dir_okay=False
)
MARKDOWN_OPTION = typer.Option(
    None, "--markdown", help="Write a Markdown summary (for CI step summaries).", dir_okay=False
)
HTML_OPTION = typer.Option(None, "--html", help="Write a self-contained HTML report.", dir_okay=False)
OUT_OPTION = typer.Option(
    None, "--out", help="Write every format into this folder with standard names.", file_okay=False
)
TABLE_OPTION = typer.Option(
    None, "--table", help="Also save torch's own printed table of each run.", dir_okay=False
)
SORT_OPTION = typer.Option(Sort.peak, "--sort", help="Order ops by peak, self or allocated bytes.")
TOP_OPTION = typer.Option(15, "--top", min=1, help="How many ops to show in the terminal.")
QUIET_OPTION = typer.Option(False, "-q", "--quiet", help="No status lines on stderr.")


def err(message: str) -> None:
    """Print one line to stderr."""
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

    # "baseline" (--save-baseline) is the JSON report under another name.
    rendered = {path: renderer("json" if fmt == "baseline" else fmt)(report) for fmt, path in outputs.items()}
    if table_path is not None:
        parts = [
            f"memprof run {label}: {report.target}\n{run.torch_table}"
            for label, run in report.runs.items()
            if run.torch_table
        ]
        rendered[table_path] = "\n".join(parts)
    for path, text in rendered.items():
        atomic_write_text(path, text)


@dataclass(frozen=True)
class TargetSpec:
    """One variant as the user named it: ``spec`` (``pkg.mod:func``), its inputs factory
    (None: the default), the mode it runs in and the label it is shown under."""

    spec: str
    inputs: str | None
    mode: str
    label: str


@dataclass(frozen=True)
class OutputSettings:
    """Where the report goes: files by format, torch's table, terminal ordering, status lines."""

    files: dict[str, Path] = field(default_factory=dict)
    table_path: Path | None = None
    sort: str = "peak"
    top: int = 15
    quiet: bool = False
    save_baseline: Path | None = None


def output_settings(
    json_path: Path | None,
    csv_path: Path | None,
    markdown_path: Path | None,
    html_path: Path | None,
    out_dir: Path | None,
    table_path: Path | None,
    sort: Sort,
    top: int,
    quiet: bool,
    save_baseline: Path | None = None,
) -> OutputSettings:
    """The output options, checked up front: a bad path fails before anything runs."""
    from memprof.fileio import check_output_paths

    files = output_paths(json_path, csv_path, markdown_path, html_path, out_dir)
    if save_baseline is not None and "json" in files and files["json"].resolve() == save_baseline.resolve():
        save_baseline = None  # --json and --save-baseline name one file: write it once
    check_output_paths(
        [
            *((f"--{fmt}", path) for fmt, path in files.items()),
            ("--table", table_path),
            ("--save-baseline", save_baseline),
        ]
    )
    return OutputSettings(
        files=files, table_path=table_path, sort=sort.value, top=top, quiet=quiet, save_baseline=save_baseline
    )


def resolve_variants(specs: Sequence[TargetSpec], device: str) -> list[Variant]:
    """Resolve each target and build its inputs, in order. A target named twice is imported once
    and, with the same inputs factory, shares one set of inputs (as eager and compiled do)."""
    from memprof.api import Variant
    from memprof.sources.target import Inputs, Target, build_inputs, resolve

    targets: dict[str, Target] = {}
    inputs: dict[tuple[str, str | None], Inputs] = {}
    variants = []
    for spec in specs:
        if spec.spec not in targets:
            targets[spec.spec] = resolve(spec.spec)
        target = targets[spec.spec]
        key = (spec.spec, spec.inputs)
        if key not in inputs:
            inputs[key] = build_inputs(target, spec.inputs, device)
        variants.append(
            Variant(
                label=spec.label, func=target.func, inputs=inputs[key], mode=spec.mode, name=target.attr_path
            )
        )
    return variants


def profile_targets(
    report_target: str,
    specs: Sequence[TargetSpec],
    settings: RunOptions,
    output: OutputSettings,
    gate: GateConfig | None = None,
) -> Report:
    """Resolve, profile, print the terminal summary and write the files; the common end of
    ``run`` and ``compare``. Raises the first variant's failure (exit 3) after writing what
    was measured; then applies the memory gate (exit 1 when it fails)."""
    from memprof.api import run_variants
    from memprof.report.terminal import render_terminal
    from memprof.sources.live import resolve_device

    device = resolve_device(settings.device)
    variants = resolve_variants(specs, device)
    keep_table = output.table_path is not None or "html" in output.files
    report, failure = run_variants(
        report_target,
        variants,
        replace(settings, device=device, keep_table=keep_table),
        status=status_printer(output.quiet),
    )
    typer.echo(render_terminal(report, sort=output.sort, top=output.top), nl=False)
    files = dict(output.files)
    if output.save_baseline is not None:
        files["baseline"] = output.save_baseline
    write_outputs(report, files, output.table_path)
    if failure is not None:
        raise failure
    if gate is not None and gate.active:
        from memprof.commands.gate_options import report_gate
        from memprof.gate import evaluate

        report_gate(evaluate(report, gate))
    return report
