"""``memprof compare``: two or more callables side by side, the first one the base."""

from __future__ import annotations

import re
from typing import Annotated

import typer

from memprof.core.errors import UsageError
from memprof.frontends.commands import Command
from memprof.frontends.commands.common import profile_and_report, read_inputs
from memprof.frontends.commands.options import (
    DistributedOptions,
    FactoryOptions,
    GateOptions,
    Mode,
    ModeOption,
    OutputOptions,
    ProfileOptions,
    SaveBaseline,
)

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


def parse_labels(text: str | None, specs: list[str]) -> list[str]:
    """``--labels a,b,c``: one non-empty, distinct label per target (exit 2 otherwise)."""
    from memprof.library.api import default_labels

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
    targets: Annotated[
        list[str],
        typer.Argument(
            metavar="TARGET[@INPUTS]",
            help="Two or more callables (pkg.module:function or path/to/file.py:function); the first is "
            "the base. TARGET@INPUTS gives that target its own inputs factory.",
        ),
    ],
    *,
    labels: Annotated[
        str | None,
        typer.Option(
            "--labels",
            help="Comma-separated names for the runs, one per target (default: the function names).",
        ),
    ] = None,
    inputs: Annotated[
        str | None,
        typer.Option(
            "--inputs",
            help="Inputs factory for every target without its own @INPUTS. Default: <function>_inputs "
            "in each target's module.",
        ),
    ] = None,
    factory: FactoryOptions,
    mode: ModeOption = Mode.eager,
    profile: ProfileOptions,
    output: OutputOptions,
    gate: GateOptions,
    distributed: DistributedOptions,
    save_baseline: SaveBaseline = None,
) -> None:
    """Profile two or more callables and compare each with the first: peak memory and wall time.

    Each target's arguments: TARGET@INPUTS, else --inputs, else <function>_inputs in its module.

    JSON: one entry per label under "runs"; "diff" = second vs first; "diffs" = each later run vs first.

    With --budget (per label: --budget with_autograd=40MB) or --baseline it is a memory gate.

    Example: memprof compare memprof.examples.no_grad:with_autograd memprof.examples.no_grad:no_grad

    Under torchrun, or with --nproc-per-node N, every rank compares them: runs rank0/LABEL, ...
    """
    from memprof.frontends.commands.distributed import refuse_rank, run_distributed, wanted
    from memprof.library.api import Variant
    from memprof.library.jobs import check_gate

    if len(targets) < 2:
        raise UsageError(
            f"compare needs two or more targets, got {len(targets)}; to profile one, use `memprof run`"
        )
    split = [split_target(text, inputs) for text in targets]
    files = output.files(save_baseline, read_inputs([s for pair in split for s in pair], gate.baseline))
    names = parse_labels(labels, [spec for spec, _ in split])
    config = gate.config()
    params = factory.params()
    if wanted(distributed):
        variants = [
            Variant(target=spec, inputs=make, mode=mode.value, label=name, inputs_kwargs=params)
            for (spec, make), name in zip(split, names, strict=True)
        ]
        run_distributed(variants, files, config, profile, output, distributed)
        return
    check_gate(config, names)
    refuse_rank(output.rank)
    variants = [
        Variant(target=spec, inputs=make, mode=mode.value, inputs_kwargs=params) for spec, make in split
    ]
    profile_and_report(variants, names, files, config, profile, output)


COMMAND = Command(compare, place=20)
