"""``memprof advise``: what to change so that a step fits: memory-saving techniques tried on the
step's own objects on fake tensors, ranked by what they save and cost, and with a budget the
plan that fits with the least added compute, verified by a real run on request."""

from __future__ import annotations

from typing import Annotated

import typer

from memprof.core.errors import GateFailed, UsageError
from memprof.frontends.commands import Command
from memprof.frontends.commands.options import (
    FactoryOptions,
    FitOptions,
    Inputs,
    OutputOptions,
    Target,
    Timeout,
    Warmup,
)

BudgetOption = Annotated[
    str | None,
    typer.Option(
        "--budget",
        metavar="SIZE",
        help="The memory the step may need, e.g. 24GB (1024-based; no reserve kept): plan for it "
        "(exit 1 when nothing fits).",
    ),
]
BatchParamOption = Annotated[
    str | None,
    typer.Option(
        "--batch-param",
        metavar="NAME",
        help="The inputs factory's batch parameter: try a smaller micro-batch (NAME halved and "
        "quartered) with gradient accumulation. Its value: --set NAME=V, else the factory's default.",
    ),
]
WorldSizeOption = Annotated[
    int | None,
    typer.Option(
        "--world-size",
        min=2,
        metavar="N",
        help="Also try FSDP2 over N GPUs: fully_shard on every instance of the outermost repeated module "
        "class and on the model, the optimizer rebuilt on the shards; rank 0 of the job estimated on "
        "torch's fake process group.",
    ),
]
VerifyOption = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="Apply the plan for real on this machine's device and measure it as memprof run does: "
        "predicted against measured (use --device cpu on a machine without a GPU).",
    ),
]


def advise(
    target: Target,
    *,
    inputs: Inputs = None,
    fit: FitOptions,
    budget: BudgetOption = None,
    batch_param: BatchParamOption = None,
    world_size: WorldSizeOption = None,
    verify: VerifyOption = False,
    warmup: Warmup = 1,
    timeout: Timeout = None,
    factory: FactoryOptions,
    output: OutputOptions,
) -> None:
    """Say what to change so that a step fits: activation checkpointing of each repeated module
    class, selective checkpointing, autocast, optimizer variants, optimizer state on the CPU (a
    CUDA estimate), a smaller micro-batch, ...
    each applied by memprof to the objects the inputs factory returns and estimated on fake
    tensors, ranked by what it saves, with the FLOPs it adds and the line of code that applies
    it (or why it does not apply).

    With --gpu, --capacity or --budget: the combination of techniques that fits with the least
    extra FLOPs, estimated as a whole (savings that interact are measured together, never added
    up), or the closest when nothing fits (exit 1). --verify applies that plan for real and
    measures it.

    Example: memprof advise memprof.examples.gpt:train_step --device cpu --set batch=8
    --batch-param batch --budget 40MB --verify
    """
    from memprof.core.gcpause import start_up_imports
    from memprof.frontends.commands.common import (
        fake_run_arguments,
        gpus_listed,
        print_report,
        read_inputs,
        write_outputs,
    )

    if gpus_listed(fit):  # --gpu list, as estimate says it
        return
    _refuse(output)
    files = output.files(None, read_inputs([target, inputs], None))
    with start_up_imports():
        import memprof.sources.fake.run  # noqa: F401 - torch and fake tensors, with the rest of memprof
        from memprof.library.advice import advise as advise_step
    report = advise_step(
        target,
        **fake_run_arguments(fit, factory, output),
        budget=budget,
        inputs=inputs,
        batch_param=batch_param,
        world_size=world_size,
        verify=verify,
        warmup=warmup,
        timeout=timeout,
    )
    show = lambda: print_report(report, output)  # noqa: E731 - the terminal report, after the files
    write_outputs(report, files, **output.writing, show=show)
    from memprof.outputs.advice import failed

    line = failed(report)
    if line is not None:
        typer.echo(line)
        raise GateFailed(line)


def _refuse(output: OutputOptions) -> None:
    """What advice cannot do with its output options, refused before anything runs."""
    if output.table_path is not None:
        raise UsageError("--table saves torch's own table of a profile; advice makes none")
    if output.group_modules:
        raise UsageError("--group-modules groups the modules of a measured run; advice measures none")
    if output.rank is not None:
        raise UsageError("--rank picks a rank of a sharded job; advice estimates one device")


COMMAND = Command(advise, place=40)
