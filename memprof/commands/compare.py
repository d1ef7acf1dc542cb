"""``memprof compare``: two or more callables side by side, the first one the base."""

from __future__ import annotations

import re
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
from memprof.errors import UsageError
from memprof.sources.options import RunOptions

# TARGET@INPUTS: the target ends at the first "@" that follows ":name" (its attribute path is
# made of identifiers, so that "@" cannot belong to it); file paths before it may contain "@".
_WITH_INPUTS = re.compile(r"^(?P<target>.+?:[A-Za-z_][\w.]*)@(?P<inputs>.+)$")


def split_target(text: str, default_inputs: str | None) -> tuple[str, str | None]:
    """``"mod:f@mod:make_f"`` -> ``("mod:f", "mod:make_f")``; without ``@INPUTS`` the inputs are
    ``default_inputs`` (``--inputs``, else None: the target's own ``<func>_inputs``)."""
    match = _WITH_INPUTS.match(text)
    if match is None:
        if "@" in text.rpartition(":")[2]:
            raise UsageError(
                f"target {text!r}: write TARGET@INPUTS with both parts as module:function, "
                "e.g. mypkg.mod:f@mypkg.mod:make_inputs"
            )
        return text, default_inputs
    return match["target"], match["inputs"]


def default_labels(specs: list[str]) -> list[str]:
    """The targets' function names; a name seen before gets ``#2``, ``#3``, ..."""
    labels: list[str] = []
    for spec in specs:
        name = spec.rpartition(":")[2] or spec
        label, n = name, 1
        while label in labels:
            n += 1
            label = f"{name}#{n}"
        labels.append(label)
    return labels


def parse_labels(text: str | None, specs: list[str]) -> list[str]:
    """``--labels a,b,c``: one non-empty, distinct label per target (exit 2 otherwise)."""
    if text is None:
        return default_labels(specs)
    labels = [label.strip() for label in text.split(",")]
    if len(labels) != len(specs):
        raise UsageError(
            f"--labels gives {len(labels)} label(s) for {len(specs)} targets; give one per target, "
            f"in order, e.g. --labels {','.join(default_labels(specs))}"
        )
    if any(not label for label in labels):
        raise UsageError(f"--labels {text!r} has an empty label; name every target")
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise UsageError(f"--labels {text!r} repeats {', '.join(duplicates)}; each label must be unique")
    return labels


def compare(
    targets: list[str] = typer.Argument(
        ...,
        metavar="TARGET[@INPUTS]",
        help="Two or more callables (pkg.module:function or path/to/file.py:function); the first is "
        "the base. TARGET@INPUTS gives that target its own inputs factory.",
    ),
    labels: str | None = typer.Option(
        None,
        "--labels",
        help="Comma-separated names for the runs, one per target (default: the function names).",
    ),
    inputs: str | None = typer.Option(
        None,
        "--inputs",
        help="Inputs factory for every target without its own @INPUTS. Default: <function>_inputs "
        "in each target's module.",
    ),
    device: str = DEVICE_OPTION,
    mode: Mode = typer.Option(
        Mode.eager, "--mode", help="eager, or compile: torch.compile every target before profiling."
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
    """Profile two or more callables and compare each with the first: peak memory and wall time.

    Each target's arguments: TARGET@INPUTS, else --inputs, else <function>_inputs in its module.

    JSON: one entry per label under "runs"; "diff" = second vs first; "diffs" = each later run vs first.

    With --budget (per label: --budget with_autograd=40MB) or --baseline it is a memory gate.

    Example: memprof compare memprof.examples.no_grad:with_autograd memprof.examples.no_grad:no_grad
    """
    if len(targets) < 2:
        raise UsageError(
            f"compare needs two or more targets, got {len(targets)}; to profile one, use `memprof run`"
        )
    output = output_settings(
        json_path, csv_path, markdown_path, html_path, out_dir, table_path, sort, top, quiet, save_baseline
    )
    split = [split_target(text, inputs) for text in targets]
    names = parse_labels(labels, [spec for spec, _ in split])
    gate = gate_options.config_from_options(
        budget, baseline, tolerance, per_op, strict_env, require_compile_saves
    )
    gate_options.check_runs(gate, names)
    profile_targets(
        " vs ".join(spec for spec, _ in split),
        [
            TargetSpec(spec=spec, inputs=factory, mode=mode.value, label=label)
            for (spec, factory), label in zip(split, names, strict=True)
        ],
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
