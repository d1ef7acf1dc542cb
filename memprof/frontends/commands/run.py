"""``memprof run``: profile one target in eager mode, compiled mode, or both."""

from __future__ import annotations

from typing import Annotated

import typer

from memprof.frontends.commands import Command
from memprof.frontends.commands.common import profile_and_report
from memprof.frontends.commands.options import RUNS_PANEL as RUNS
from memprof.frontends.commands.options import (
    DistributedOptions,
    FactoryOptions,
    GateOptions,
    Inputs,
    Mode,
    ModeOption,
    OutputOptions,
    ProfileOptions,
    SaveBaseline,
    Target,
)


def run(
    target: Target,
    *,
    inputs: Inputs = None,
    mode: ModeOption = Mode.eager,
    compare_compile: Annotated[
        bool,
        typer.Option(
            "--compare-compile", help="Profile eager and compiled, side by side.", rich_help_panel=RUNS
        ),
    ] = False,
    factory: FactoryOptions,
    profile: ProfileOptions,
    output: OutputOptions,
    gate: GateOptions,
    distributed: DistributedOptions,
    save_baseline: SaveBaseline = None,
) -> None:
    """Profile a function's memory in eager mode, compiled mode, or both.

    With --budget, --baseline or --require-compile-saves it is also a memory gate: the report
    is printed and written first, then the gate's lines; exit 1 when a check fails.

    Example: memprof run memprof.examples.similarity:similarity --compare-compile

    Example: memprof run mypkg.model:step --baseline ci/memprof.json --tolerance 2%

    Under torchrun (torchrun --nproc-per-node 2 -m memprof run ...), or with --nproc-per-node N,
    every rank is profiled and rank 0 writes one report: runs rank0, rank1, ...
    """
    from memprof.frontends.commands.common import read_inputs
    from memprof.frontends.commands.distributed import refuse_rank, run_distributed, wanted
    from memprof.library.api import Variant
    from memprof.library.jobs import check_gate
    from memprof.sources.targets.check import check_before_running

    files = output.files(save_baseline, read_inputs([target, inputs], gate.baseline))
    # --compare-compile is `memprof compare f torch.compile(f)`: the same target twice, in two modes.
    modes = ["eager", "compile"] if compare_compile else [mode.value]
    # The gate's options are checked before any torch work: a typo costs no profiling.
    config = gate.config()
    params = factory.params()
    # So are mistakes in the target and its inputs that the source files settle, before torch loads.
    check_before_running(target, inputs, params)
    variants = [Variant(target=target, inputs=inputs, mode=m, label=m, inputs_kwargs=params) for m in modes]
    if wanted(distributed):
        run_distributed(variants, files, config, profile, output, distributed)
        return
    check_gate(config, modes)
    refuse_rank(output.rank)
    profile_and_report(variants, None, files, config, profile, output)


COMMAND = Command(run, place=10)
