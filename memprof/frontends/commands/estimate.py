"""``memprof estimate``: how much memory a function needs, and whether it fits a device,
answered on fake tensors (no real memory, no compute, no GPU) in seconds."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from memprof.core.errors import GateFailed, InputError, UsageError
from memprof.frontends.commands.options import (
    FactoryOptions,
    GateOptions,
    Inputs,
    Mode,
    OutputOptions,
    SaveBaseline,
    Target,
    Timeout,
    parse_assignment,
)

# Why --mode compile is refused, said where it is asked for.
COMPILE_REFUSED = (
    "--mode compile cannot be estimated: torch.compile's kernels run on real data (fake tensors have "
    "none), and what Inductor's generated code allocates is decided inside its compiler, not visible "
    "to memprof without running it; estimate eager, or measure compile with memprof run --mode "
    "compile on a machine that has the memory"
)


class EstimateDevice(str, Enum):
    cuda = "cuda"
    cpu = "cpu"


def _gpu_help() -> str:
    from memprof.core.gpus import GPUS

    return "A card to fit (exit 1 if not): " + ", ".join(gpu.key for gpu in GPUS) + "; list: their figures."


DeviceOption = Annotated[
    EstimateDevice,
    typer.Option(
        "--device",
        help="Allocator modelled: cuda (no GPU needed) or cpu.",
        show_default=False,
    ),
]
CapacityOption = Annotated[
    str | None,
    typer.Option(
        "--capacity",
        metavar="SIZE",
        help="Does it fit in this, e.g. 24GB (exit 1 if not).",
    ),
]
GpuOption = Annotated[str | None, typer.Option("--gpu", metavar="NAME", help=_gpu_help())]
ReserveOption = Annotated[
    str | None,
    typer.Option(
        "--reserve",
        metavar="SIZE",
        help="Kept free of it (CUDA context, NCCL): a --gpu's 1GB.",
    ),
]
ModeOption = Annotated[
    Mode, typer.Option("--mode", help="eager (compile cannot be estimated).", show_default=False)
]
WarmupOption = Annotated[
    int,
    typer.Option("--warmup", min=0, help="Calls before the estimated one (1).", show_default=False),
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
    device: DeviceOption = EstimateDevice.cuda,
    capacity: CapacityOption = None,
    gpu: GpuOption = None,
    reserve: ReserveOption = None,
    mode: ModeOption = Mode.eager,
    warmup: WarmupOption = 1,
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
    from memprof.core.gpus import gpu_table
    from memprof.frontends.commands.common import print_report, read_inputs, status_printer, write_outputs

    if gpu is not None and gpu.strip().lower() == "list":
        typer.echo(gpu_table(), nl=False)
        return
    _refuse(mode, output, world_size)
    ranks = [output.rank] if output.rank is not None else None
    swept = parse_sweep(sweep) if sweep is not None else None
    reads = read_inputs([target, inputs], gate.baseline)
    files = _files(output, save_baseline, sweep_csv, swept is not None, reads)
    config = gate.config()
    if config.require_compile_saves:
        raise UsageError("--require-compile-saves compares compiled with eager; an estimate is eager only")
    if swept is None:
        labels = [f"rank{r}" for r in (ranks or range(world_size))] if world_size else ["estimate"]
        config.budgets.check_labels(labels)
    with start_up_imports():
        import memprof.sources.fake.run  # noqa: F401 - torch and fake tensors, with the rest of memprof
        from memprof.library.api import estimate
    report = estimate(
        target,
        device=device.value,
        capacity=capacity,
        gpu=gpu,
        reserve=reserve,
        inputs=inputs,
        inputs_kwargs=factory.params(),
        sweep=swept,
        warmup=warmup,
        status=status_printer(output.quiet),
        world_size=world_size,
        ranks=ranks,
        timeout=timeout,
    )
    show = lambda: print_report(report, output)  # noqa: E731 - the terminal report, after the files
    write_outputs(report, files, **output.writing, show=show)
    _gate(report, config)


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


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """``batch=8,16,32`` -> ``("batch", [8, 16, 32])`` (values as --set parses them)."""
    from memprof.sources.targets.target import parse_value

    name, _ = parse_assignment(text, "--sweep")
    values = text.partition("=")[2].split(",")
    if any(not part.strip() for part in values):
        raise UsageError(f"--sweep {text!r} has an empty value; write it like --sweep {name}=8,16,32")
    parsed = [parse_value(part) for part in values]
    if len(set(map(repr, parsed))) != len(parsed):
        raise UsageError(f"--sweep {text!r} repeats a value; list each once")
    return name, parsed


def _files(
    output: OutputOptions,
    save_baseline: Path | None,
    sweep_csv: Path | None,
    swept: bool,
    reads: Sequence[tuple[str, Path | None]],
) -> dict[str, Path]:
    from memprof.core.fileio import absolute, check_output_paths
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


def _gate(report: Any, config: Any) -> None:
    """The budget and baseline checks, then whether the estimate fits: its line on stdout and
    exit 1 when it does not."""
    from memprof.frontends.commands.common import print_gate_lines
    from memprof.outputs.estimate import failed, unreliable_fit

    refused = unreliable_fit(report)
    if refused is not None:
        raise InputError(refused)
    if config.active:
        config.budgets.check_labels(list(report.runs))
        from memprof.analysis.gate import evaluate
        from memprof.outputs.gate import gate_lines

        result = evaluate(report, config)
        print_gate_lines(gate_lines(result))
        if not result.passed:
            raise GateFailed(result.summary())
    line = failed(report)
    if line is not None:
        print_gate_lines([line])
        raise GateFailed(line)
