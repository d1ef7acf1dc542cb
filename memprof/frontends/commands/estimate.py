"""``memprof estimate``: how much memory a function needs, and whether it fits a device,
answered on fake tensors (no real memory, no compute, no GPU) in seconds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memprof.core.errors import GateFailed, InputError, UsageError
from memprof.frontends.commands import Command
from memprof.frontends.commands.options import (
    FactoryOptions,
    FitOptions,
    GateOptions,
    Inputs,
    Mode,
    OutputOptions,
    SaveBaseline,
    Target,
    Timeout,
    Warmup,
)

if TYPE_CHECKING:
    from memprof.library.estimating import CheckedEstimate

# Why --mode compile is refused, said where it is asked for.
COMPILE_REFUSED = (
    "--mode compile cannot be estimated: torch.compile's kernels run on real data (fake tensors have "
    "none), and what Inductor's generated code allocates is decided inside its compiler, not visible "
    "to memprof without running it; estimate eager, or measure compile with memprof run --mode "
    "compile on a machine that has the memory"
)


# Only eager: said here, where --mode compile is refused.
EstimateModeOption = Annotated[
    Mode, typer.Option("--mode", help="eager (compile cannot be estimated).", show_default=False)
]
SweepOption = Annotated[
    str | None,
    typer.Option(
        "--sweep",
        metavar="NAME=V1,V2,...",
        help="Estimate each value; with --gpu, the largest that fits.",
    ),
]
WorldSizeOption = Annotated[
    int | None,
    typer.Option(
        "--world-size",
        min=1,
        metavar="N",
        help="Each rank of an N-rank job (FSDP2, DDP, TP); --rank R.",
    ),
]
SweepCsvOption = Annotated[
    Path | None,
    typer.Option("--sweep-csv", dir_okay=False, help="The sweep as CSV."),
]


def estimate(
    target: Target,
    *,
    inputs: Inputs = None,
    fit: FitOptions,
    mode: EstimateModeOption = Mode.eager,
    warmup: Warmup = 1,
    sweep: SweepOption = None,
    sweep_csv: SweepCsvOption = None,
    world_size: WorldSizeOption = None,
    timeout: Timeout = None,
    factory: FactoryOptions,
    output: OutputOptions,
    gate: GateOptions,
    save_baseline: SaveBaseline = None,
) -> None:
    """Estimate the memory a function needs, and whether it fits a GPU, without the GPU: the
    function runs on fake tensors (shapes, no data), so nothing of the real size is allocated
    or computed.

    The same numbers as memprof run (peak, footprint, live at start, per-op), and on CUDA the
    caching allocator's reserve; what ops allocate inside their kernels is measured on real
    tensors. Not modelled on CUDA: cuBLAS/cuDNN workspaces, attention kernels' choices, the CUDA
    context, NCCL (the notes say so).

    Exit 1 when a --capacity or --gpu is given and the estimate does not fit (a sweep: when no
    value fits), or a --budget or --baseline check fails; exit 2 when asked whether it fits and
    the estimate is not reliable (the code branched on values fake tensors cannot know).

    Example: memprof estimate memprof.examples.gpt:train_step --gpu H100

    Example: memprof estimate memprof.examples.gpt:train_step --sweep batch=8,16,32 --gpu L4
    """
    from memprof.core.gcpause import start_up_imports
    from memprof.frontends.commands.common import (
        fake_run_arguments,
        gpus_listed,
        print_report,
        read_inputs,
        write_outputs,
    )

    if gpus_listed(fit):
        return
    from memprof.library.estimating import parse_sweep

    _refuse(mode, output, world_size)
    swept = parse_sweep(sweep) if sweep is not None else None  # a typo costs no torch import
    reads = read_inputs([target, inputs], gate.baseline)
    files = _files(output, save_baseline, sweep_csv, swept is not None, reads)
    config = gate.config()
    with start_up_imports():
        import memprof.sources.fake.run  # noqa: F401 - torch and fake tensors, with the rest of memprof
        from memprof.library.estimating import checked_estimate
    checked = checked_estimate(
        target,
        gate=config,
        **fake_run_arguments(fit, factory, output),
        inputs=inputs,
        sweep=swept,
        warmup=warmup,
        world_size=world_size,
        ranks=[output.rank] if output.rank is not None else None,
        timeout=timeout,
    )
    report = checked.report
    show = lambda: print_report(report, output)  # noqa: E731 - the terminal report, after the files
    write_outputs(report, files, **output.writing, show=show)
    _exit(checked)


def _refuse(mode: Mode, output: OutputOptions, world_size: int | None) -> None:
    """What an estimate cannot do, refused before anything runs."""
    from memprof.frontends.commands.distributed import refuse_rank

    if mode is Mode.compile:
        raise UsageError(COMPILE_REFUSED)
    if output.table_path is not None:
        raise UsageError("--table saves torch's own table of a profile; an estimate makes none")
    if output.group_modules:
        raise UsageError(
            "--group-modules groups the modules of a run memprof explains; an estimate does not explain "
            "its peak by module: measure it with memprof run (at a size that fits this machine)"
        )
    if world_size is None:
        refuse_rank(output.rank)


def _files(
    output: OutputOptions,
    save_baseline: Path | None,
    sweep_csv: Path | None,
    swept: bool,
    reads: Sequence[tuple[str, Path | None]],
) -> dict[str, Path]:
    from memprof.core.writing import absolute, check_output_paths
    from memprof.outputs import SWEEP_CSV_NAME

    files = output.files(save_baseline, reads)
    if sweep_csv is not None and not swept:
        raise UsageError("--sweep-csv writes a sweep; add --sweep NAME=V1,V2,...")
    if sweep_csv is None and swept and output.out_dir is not None:
        sweep_csv = output.out_dir / SWEEP_CSV_NAME
    if sweep_csv is not None:
        # Against the other outputs too: no two options may name one file.
        chosen = [
            (f"--{fmt}", path)
            for fmt, path in files.items()
            if not (fmt == "baseline" and path == files.get("json"))  # one file, written once
        ]
        check_output_paths([*chosen, ("--sweep-csv", sweep_csv)], reads)
        files["sweep_csv"] = absolute(sweep_csv)
    return files


def _exit(checked: CheckedEstimate) -> None:
    """After the report: exit 2 when asked whether it fits and the estimate cannot say, or
    when the gate cannot be applied; the gate's lines and exit 1 when it failed; else the line
    saying it does not fit, and exit 1."""
    from memprof.frontends.commands.common import print_gate_lines

    if checked.unreliable is not None:
        raise InputError(checked.unreliable)
    if checked.problem is not None:
        raise checked.problem
    if checked.gate is not None:
        from memprof.outputs.gate import gate_lines

        print_gate_lines(gate_lines(checked.gate))
        if not checked.gate.passed:
            raise GateFailed(checked.gate.summary())
    if checked.unfit is not None:
        print_gate_lines([checked.unfit])
        raise GateFailed(checked.unfit)


COMMAND = Command(estimate, place=30)
