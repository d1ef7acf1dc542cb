"""``memprof analyze``: chrome traces and CUDA memory snapshots recorded elsewhere, read here
(no GPU, no torch), reported and gated like ``memprof run``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memprof.core.errors import UsageError
from memprof.frontends.commands import Command
from memprof.frontends.commands.options import GateOptions, OutputOptions, SaveBaseline


def analyze(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH...",
            help="Chrome traces (.json, .json.gz: prof.export_chrome_trace, tensorboard_trace_handler), "
            "CUDA memory snapshots (torch.cuda.memory._dump_snapshot pickles), or folders of them (one "
            "file per rank). The kind is read from the content.",
        ),
    ],
    *,
    expandable_segments: Annotated[
        bool,
        typer.Option(
            "--expandable-segments",
            help="What if: replay each snapshot's allocations with expandable_segments:True "
            "(reserve, fragmentation, whether its out-of-memory would still happen).",
        ),
    ] = False,
    max_split_size_mb: Annotated[
        int | None,
        typer.Option(
            "--max-split-size-mb",
            min=1,
            help="What if: replay each snapshot's allocations with this max_split_size_mb.",
        ),
    ] = None,
    output: OutputOptions,
    gate: GateOptions,
    save_baseline: SaveBaseline = None,
) -> None:
    """Read GPU memory recorded anywhere: per device, the peak above the recording's start, the
    whole footprint, live at start, reserved, the op at the peak and per-op numbers.

    A folder of per-rank traces gives one run per rank and device (rank0/cuda:0, ...). Snapshots
    also show segments, fragmentation, the allocation sites live at the peak, each out-of-memory
    explained, and the caching-allocator model's check of every placement.

    With --budget or --baseline it is a memory gate on each run's peak (above the start), so a CPU
    runner can gate on a trace a GPU job saved: exit 1 when a check fails.

    Example: memprof analyze rank0.pt.trace.json.gz --budget 20GB

    Example: memprof analyze traces/ --markdown summary.md

    Example: memprof analyze oom.pickle --expandable-segments
    """
    from memprof.frontends.commands.common import print_report, status_printer, write_and_gate
    from memprof.library.api import analyze

    if output.table_path is not None:
        raise UsageError("--table saves torch's own table of a profile memprof runs; a recording has none")
    if output.group_modules:
        raise UsageError("--group-modules groups the modules of a run memprof explains; a recording has none")
    files = output.files(save_baseline, _recordings(paths, gate.baseline))
    config = gate.config()
    report = analyze(
        *paths,
        expandable_segments=expandable_segments,
        max_split_size_mb=max_split_size_mb,
        status=status_printer(output.quiet),
    )
    if config.active:
        config.budgets.check_labels(list(report.runs))
    write_and_gate(
        report,
        files,
        config,
        rank=output.rank,
        **output.writing,
        show=lambda: print_report(report, output, rank=output.rank),
    )


def _recordings(paths: list[Path], baseline: Path | None) -> list[tuple[str, Path | None]]:
    """The files this run reads, which no output may replace: each recording given, the files
    directly in each folder given, the baseline."""
    files: list[Path] = []
    for path in paths:
        try:
            files += [p for p in path.iterdir() if p.is_file()] if path.is_dir() else [path]
        except OSError:
            files.append(path)  # unreadable: reading it says why
    return [*(("a recording read", p) for p in files), ("the baseline", baseline)]


COMMAND = Command(analyze, place=50)
