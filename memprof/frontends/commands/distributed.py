"""``memprof run`` in a torch.distributed job: every rank profiles, rank 0 reports.

Under ``torchrun`` (any launcher that sets ``RANK`` and ``WORLD_SIZE``) each rank profiles the
target on its own device, writes its own files only where a path holds ``{rank}``, and hands
its report to rank 0, which prints and writes the merged report and applies the gate. With
``--nproc-per-node N`` and no launcher around it, :func:`launch` starts the N ranks through
``torch.distributed.run``'s own API, with this command line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memprof.core.errors import EXIT_INTERRUPTED, EXIT_USER_CODE, MemprofError, UsageError, UserCodeError
from memprof.frontends.commands.common import err, err_lines, report_gate, status_printer, write_outputs

if TYPE_CHECKING:
    from memprof.analysis.gate import GateConfig
    from memprof.frontends.commands.options import DistributedOptions, OutputOptions, ProfileOptions
    from memprof.library.api import Variant
    from memprof.model.report import Report
    from memprof.sources.distributed import RankEnv

# Set by launch() for the ranks it starts: there --nproc-per-node is the launcher's, not theirs.
LAUNCHED = "MEMPROF_LAUNCHED_RANKS"
RANK_PLACEHOLDER = "{rank}"


_INVOCATION: list[str] = []


def remember_invocation(argv: Sequence[str]) -> None:
    """The command line's arguments (after ``memprof``), which :func:`launch` gives every rank."""
    _INVOCATION[:] = list(argv)


def refuse_rank(rank: int | None) -> None:
    """``--rank`` outside a distributed run is a usage error (there is one rank to show)."""
    if rank is not None:
        raise UsageError(
            "--rank picks a rank of a distributed run; run under torchrun or with --nproc-per-node"
        )


def invocation() -> list[str]:
    """This command line's arguments after ``memprof``: as :func:`remember_invocation` got them,
    else from ``sys.argv`` when it is memprof's."""
    if _INVOCATION:
        return list(_INVOCATION)
    if Path(sys.argv[0]).name in ("memprof", "memprof.exe", "__main__.py"):
        return sys.argv[1:]
    raise UsageError(
        "--nproc-per-node relaunches this command line, which is unknown here; run it from a shell"
    )


def wanted(options: DistributedOptions) -> bool:
    """Whether this run is distributed: started by a launcher, or asked to start ranks."""
    from memprof.sources.distributed import rank_env

    return options.nproc_per_node is not None or rank_env() is not None


def run_distributed(
    variants: Sequence[Variant],
    files: dict[str, Path],
    gate: GateConfig,
    profile: ProfileOptions,
    output: OutputOptions,
    options: DistributedOptions,
) -> None:
    """Start the ranks (``--nproc-per-node`` outside a launcher), or be one of them."""
    from memprof.library.jobs import check_gate
    from memprof.sources.distributed import rank_env

    env = rank_env()
    if env is None:
        assert options.nproc_per_node is not None
        check_gate(gate, [v.label or "" for v in variants], options.nproc_per_node, output.rank)
        outputs = [
            Path(str(path).replace(RANK_PLACEHOLDER, str(rank)))
            for path in files.values()
            for rank in range(options.nproc_per_node)
        ]
        with noting_outputs(outputs):
            launch(options.nproc_per_node, quiet=output.quiet)
        return
    if options.nproc_per_node is not None and os.environ.get(LAUNCHED) != "1":
        raise UsageError(
            f"--nproc-per-node starts the ranks itself, but this process already is rank {env.rank} of "
            f"{env.world_size} (RANK and WORLD_SIZE are set, by torchrun?); drop --nproc-per-node"
        )
    check_gate(gate, [v.label or "" for v in variants], env.world_size, output.rank)
    run_rank(env, variants, files, gate, profile, output, options.rank_timeout)


@contextlib.contextmanager
def noting_outputs(paths: Sequence[Path]) -> Iterator[None]:
    """Ctrl-C while the ranks run: the outputs a rank replaced before it came are listed as
    written (:data:`memprof.core.writing.WRITTEN`), so that the message does not say that none was."""
    from memprof.core.writing import WRITTEN

    def state(path: Path) -> tuple[int, int, int] | None:
        try:
            info = os.lstat(path)
        except OSError:
            return None
        return (info.st_dev, info.st_ino, info.st_mtime_ns)

    before = {path: state(path) for path in dict.fromkeys(paths)}
    try:
        yield
    except KeyboardInterrupt:
        WRITTEN.extend(path for path, was in before.items() if state(path) not in (None, was))
        raise


def split_files(files: dict[str, Path], rank: int) -> tuple[dict[str, Path], dict[str, Path]]:
    """This rank's own files (paths holding ``{rank}``, filled in) and the merged report's."""
    own = {fmt: Path(str(path).replace(RANK_PLACEHOLDER, str(rank))) for fmt, path in files.items()}
    mine = {fmt: own[fmt] for fmt, path in files.items() if RANK_PLACEHOLDER in str(path)}
    merged = {fmt: path for fmt, path in files.items() if RANK_PLACEHOLDER not in str(path)}
    return mine, merged


def run_rank(
    env: RankEnv,
    variants: Sequence[Variant],
    files: dict[str, Path],
    gate: GateConfig,
    profile: ProfileOptions,
    output: OutputOptions,
    timeout: float,
) -> None:
    """One rank (:func:`memprof.library.jobs.run_rank`): profile, write the files asked of this rank,
    hand the report to rank 0 (the others) or gather, print, write and gate the job's report
    (rank 0)."""
    from memprof.library.jobs import failed_message
    from memprof.library.jobs import run_rank as rank_part

    status = status_printer(output.quiet) if env.rank == 0 else None
    mine, merged = split_files(files, env.rank)
    from memprof.sources.deadline import time_limit

    arguments = profile.api_arguments()
    with time_limit(arguments.pop("timeout")):  # the rank's whole part, its waits included
        outcome = rank_part(
            variants,
            timeout=timeout,
            status=status,
            keep_table="table" in files,  # torch's key_averages() table: only when --table asks
            verbose=output.verbose,
            before_hand_in=lambda local: write_outputs(local, mine, rank=output.rank, **output.writing),
            handed_in=lambda local, failure: _handed_in(env, local, failure, output.quiet),
            group_modules=output.group_modules,
            **arguments,
        )
    report, local, failure = outcome.job, outcome.local, outcome.failure
    if report is None:
        return
    from memprof.frontends.commands.common import print_report, report_hidden

    if not output.quiet:
        report_hidden(local)  # torch's messages this rank kept out (the others' are theirs to say)
    write_outputs(
        report,
        merged,
        rank=output.rank,
        **output.writing,
        show=lambda: print_report(report, output, rank=output.rank),
    )
    if any(run.failed for run in report.runs.values()):
        raise UserCodeError(
            failed_message(report), user_traceback=failure.user_traceback if failure is not None else ""
        )
    if gate.active:
        from memprof.analysis.gate import evaluate

        report_gate(evaluate(report, gate))


def _handed_in(env: RankEnv, local: Report, failure: UserCodeError | None, quiet: bool) -> None:
    """A rank other than 0, its report handed in: the user's traceback when its code failed,
    and its one status line."""
    if failure is not None and failure.user_traceback:
        err_lines(failure.user_traceback.rstrip("\n"))
    if not quiet or failure is not None:
        err(f"memprof: rank {env.rank} ({local.device}): {_outcome(local)}; report handed to rank 0")


def _outcome(report: Report) -> str:
    from memprof.core.units import format_bytes

    parts = []
    for run in report.runs.values():
        if run.failed:
            parts.append(f"{run.label} failed: {run.failed}")
        else:
            during = f" during {run.peak_op}" if run.peak_op else ""
            parts.append(f"{run.label} peak {format_bytes(run.peak_bytes)}{during}")
    return "; ".join(parts)


def launch(nproc: int, *, quiet: bool = False) -> None:
    """Start ``nproc`` ranks of this command on this machine through ``torch.distributed.run``
    (its standalone rendezvous, as ``torchrun --standalone --nproc-per-node N``) and return
    when they are done. Rank 0's exit code becomes this command's; Ctrl-C stops every rank."""
    import torch.distributed.run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    argv = invocation()
    if nproc > 1:
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # what torchrun does, without its banner
    os.environ[LAUNCHED] = "1"
    args = torchrun.parse_args(["--standalone", f"--nproc-per-node={nproc}", "-m", "memprof", *argv])
    if not quiet:
        err(f"memprof: starting {nproc} rank(s) with torch.distributed.run")
    try:
        with _quiet_elastic_logs():
            torchrun.run(args)
    except ChildFailedError as error:
        raise _launch_failure(error.failures) from None
    except SignalException:
        raise KeyboardInterrupt from None  # the agent has stopped every rank
    except Exception as error:  # the rendezvous or the agent failed before any rank ran
        raise UsageError(
            f"torch.distributed.run could not start the ranks: {type(error).__name__}: {error}"
        ) from None


def _launch_failure(failures: Mapping[int, object]) -> MemprofError:
    """The launcher's exit code: rank 0's when it exited with one of memprof's codes (it printed
    the report and its errors), else another rank's that did (it printed why); a rank that
    died without saying anything (a signal, a crash) is named."""
    codes = {rank: getattr(failure, "exitcode", None) for rank, failure in failures.items()}
    said = [rank for rank in sorted(codes) if codes[rank] in (1, 2, 3, EXIT_INTERRUPTED)]
    if said:
        error = MemprofError(f"rank {said[0]} failed", exit_code=int(codes[said[0]] or EXIT_USER_CODE))
        error.shown = True
        return error
    rank, code = min(codes.items())
    killed = isinstance(code, int) and code < 0
    how = f"was killed by signal {-(code or 0)}" if killed else f"exited with code {code}"
    return MemprofError(f"rank {rank} {how} before the job's report was written", exit_code=EXIT_USER_CODE)


@contextlib.contextmanager
def _quiet_elastic_logs() -> Iterator[None]:
    """torch.distributed.elastic logs every worker's failure and each signal it forwards; rank 0
    and this command say what matters themselves. (Each of its modules sets its own level, so
    its loggers are switched off one by one.)"""
    loggers = [
        logger
        for name, logger in logging.root.manager.loggerDict.items()
        if name.startswith("torch.distributed.elastic") and isinstance(logger, logging.Logger)
    ]
    states = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, state in zip(loggers, states, strict=True):
            logger.disabled = state
