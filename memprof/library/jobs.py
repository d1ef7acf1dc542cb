"""Every rank of a torch.distributed job, from Python: :func:`profile_ranks`.

Under a launcher (``torchrun``, or any that sets ``RANK`` and ``WORLD_SIZE``) each rank calls
:func:`profile_ranks` with the same targets: each profiles them on its own device (a rank's
``LOCAL_RANK`` picks its GPU), hands its report to rank 0, and rank 0 returns the job's report:
every rank's runs, labelled ``rank0``, ``rank1``, ... (``rank0/eager``, ``rank0/compile`` for
several), with each rank's peak side by side (``report.ranks``). ``memprof run`` under
``torchrun`` (or with ``--nproc-per-node``) does the same, then prints, writes and gates.

Wall times come from the profiled calls: calls timed to a time budget would end after a
different number of calls on each rank, and a rank calling a collective once more than the
others would wait forever.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from memprof.core.errors import EXIT_USER_CODE, MemprofError, UsageError, UserCodeError, param
from memprof.sources.options import DEFAULT_RANK_TIMEOUT, StatusFn

if TYPE_CHECKING:
    from memprof.analysis.gate import GateConfig
    from memprof.library.api import Variant
    from memprof.model.report import Report
    from memprof.model.run import RunResult
    from memprof.sources.distributed import Exchange, RankEnv


@dataclass
class RankOutcome:
    """What one rank made of a job: its own report (``local``), the job's report (``job``; rank
    0 only, else None), and the failure of its own code (None when it ran)."""

    env: RankEnv
    local: Report
    job: Report | None
    failure: UserCodeError | None


def profile_ranks(
    *targets: Callable[..., Any] | str | Variant,
    labels: Sequence[str] | None = None,
    rank_timeout: float = DEFAULT_RANK_TIMEOUT,
    status: StatusFn | None = None,
    **settings: Any,
) -> Report:
    """Profile ``targets`` on every rank of the torch.distributed job this process is a rank of
    (call it on every rank, with the same targets). Rank 0 returns the job's report; every
    other rank returns its own, once rank 0 has taken it. ``rank_timeout``: seconds a rank waits for
    the others (rank 0) or for rank 0 to take its report (the others). ``settings`` are those
    of :func:`memprof.compare` (``inputs``, ``mode``, ``device``, ``warmup``, ``repeat``,
    ``explain``, ...; ``device`` "auto" takes the rank's own GPU); wall times are the profiled
    calls'.

    Raises :class:`memprof.core.errors.UsageError` outside a launcher, and
    :class:`memprof.core.errors.UserCodeError` when a run failed (on rank 0: any rank's, with
    ``error.report`` holding the job's report).

    >>> import memprof
    >>> report = memprof.profile_ranks("train.py:step", inputs="train.py:make_batch")  # doctest: +SKIP
    >>> report.ranks.rows  # doctest: +SKIP
    """
    from memprof.library.api import _variants

    variants = _variants(targets, settings.pop("inputs", None), settings.pop("mode", "eager"))
    if labels is not None:
        variants = [replace(v, label=label) for v, label in zip(variants, labels, strict=True)]
    outcome = run_rank(variants, timeout=rank_timeout, status=status, **settings)
    if outcome.job is None:
        if outcome.failure is not None:
            raise outcome.failure
        return outcome.local
    failed = [run for run in outcome.job.runs.values() if run.failed]
    if failed:
        traceback = outcome.failure.user_traceback if outcome.failure is not None else ""
        error = UserCodeError(failed_message(outcome.job), user_traceback=traceback)
        error.report = outcome.job
        raise error
    return outcome.job


def run_rank(
    variants: Sequence[Variant],
    *,
    timeout: float = DEFAULT_RANK_TIMEOUT,
    status: StatusFn | None = None,
    keep_table: bool = False,
    verbose: bool = False,
    before_hand_in: Callable[[Report], None] | None = None,
    handed_in: Callable[[Report, UserCodeError | None], None] | None = None,
    **settings: Any,
) -> RankOutcome:
    """This rank's part of the job: profile, then hand the report to rank 0 (other ranks, who
    wait until rank 0 has it) or gather every rank's (rank 0). ``before_hand_in`` is given this
    rank's report first (the command line writes a rank's own files there); ``handed_in`` this
    rank's report and failure once rank 0 can take it, before the wait (it says so)."""
    from memprof.sources.distributed import Exchange, process_group_store, rank_env

    env = rank_env()
    if env is None:
        raise UsageError(
            "profile_ranks runs on every rank of a torch.distributed job: start it with torchrun "
            "(RANK and WORLD_SIZE are not set here); for one process, use memprof.compare"
        )
    local, failure = profile_rank(env, variants, status, keep_table=keep_table, verbose=verbose, **settings)
    if before_hand_in is not None:
        before_hand_in(local)
    exchange = Exchange(env, timeout, store=process_group_store())
    if env.rank != 0:
        exchange.hand_in(local.to_json())
        if handed_in is not None:
            handed_in(local, failure)
        if not exchange.wait_taken():
            raise MemprofError(
                f"rank 0 did not take rank {env.rank}'s report within {exchange.timeout:g} s "
                f"({param('rank_timeout')}); is rank 0 stuck?",
                exit_code=EXIT_USER_CODE,
            )
        return RankOutcome(env, local, None, failure)
    return RankOutcome(env, local, gather(env, exchange, local, status), failure)


def profile_rank(
    env: RankEnv,
    variants: Sequence[Variant],
    status: StatusFn | None,
    *,
    keep_table: bool = False,
    verbose: bool = False,
    **settings: Any,
) -> tuple[Report, UserCodeError | None]:
    """This rank's runs, labelled ``rank<r>...``: profiled on the rank's device; when its code
    fails, the failed runs (and what did run) with the failure."""
    from memprof.core.interpreter import kept_from_user_code
    from memprof.library.api import compare
    from memprof.pipeline import build_report, failed_run
    from memprof.sources.distributed import rank_device

    device = rank_device(settings.pop("device", None) or "auto", env)
    arguments = {**settings, "device": device, "time_budget": 0.0}
    try:
        with kept_from_user_code():
            report = compare(*variants, keep_table=keep_table, status=status, verbose=verbose, **arguments)
        return for_rank(report, env.rank), None
    except UserCodeError as error:
        report = error.report
        if report is None:
            from memprof.sources.live.run import environment

            runs = {
                v.label or "": failed_run(v.label or "", v.mode or "eager", error.message) for v in variants
            }
            target = " vs ".join(dict.fromkeys(str(v.target) for v in variants))
            report = build_report(target=target, device=device, runs=runs, environment=environment(device))
        return for_rank(report, env.rank), error


def gather(env: RankEnv, exchange: Exchange, local: Report, status: StatusFn | None) -> Report:
    """Rank 0: the job's report, from its own runs and every other rank's report. A rank that
    did not report within the timeout, or whose report cannot be read, has failed runs that say
    so."""
    from memprof.core.errors import InputError
    from memprof.sources.distributed import process_group_backend

    texts, missing = exchange.collect(status)
    reports = {0: local}
    for rank, text in texts.items():
        try:
            reports[rank] = decode_report(text, rank)
        except InputError as error:
            reports[rank] = replace(local, device="", runs=failed_rank(rank, local.runs, error.message))
    for rank in missing:
        message = (
            f"rank {rank} did not report within {exchange.timeout:g} s ({param('rank_timeout')}): it is "
            "still running (hung?) or its process died"
        )
        reports[rank] = replace(local, device="", runs=failed_rank(rank, local.runs, message))
    backend = process_group_backend()
    return merge(reports, env.world_size, {"backend": backend} if backend else {})


def failed_message(report: Report) -> str:
    """``2 of 4 runs failed: rank1: ...; rank3: ...``."""
    failed = [run for run in report.runs.values() if run.failed]
    details = "; ".join(f"{run.label}: {run.failed}" for run in failed[:3])
    more = f" (and {len(failed) - 3} more)" if len(failed) > 3 else ""
    return f"{len(failed)} of {len(report.runs)} runs failed: {details}{more}"


def check_gate(
    gate: GateConfig, labels: Sequence[str], world_size: int | None = None, rank: int | None = None
) -> None:
    """Before any profiling, what the gate asks of the runs ``labels`` names (of each rank, in
    a job of ``world_size`` ranks: ``rank1``, ``rank1/eager``): budgets name runs that will be
    made, the compile gate has an eager and a compiled run; and ``rank``, the rank shown, is one
    of the job's."""
    from memprof.sources.distributed import rank_labels

    runs = (
        list(labels) if world_size is None else [x for r in range(world_size) for x in rank_labels(r, labels)]
    )
    gate.budgets.check_labels(runs)
    if gate.require_compile_saves and not {"eager", "compile"} <= set(labels):
        raise UsageError(
            f"{param('require_compile_saves')} compares compiled with eager; add {param('mode', 'both')}"
        )
    if rank is not None and world_size is not None and rank >= world_size:
        raise UsageError(f"{param('rank', rank)}: the job's ranks are 0 to {world_size - 1}")


# ---- a job's report from its ranks' ----------------------------------------------------------


def for_rank(report: Report, rank: int) -> Report:
    """``report`` (one rank's runs) with each run labelled and marked as ``rank``'s."""
    from memprof.pipeline import compared
    from memprof.sources.distributed import rank_labels

    labels = rank_labels(rank, list(report.runs))
    runs = {
        new: replace(run, label=new, rank=rank) for new, run in zip(labels, report.runs.values(), strict=True)
    }
    return compared(replace(report, runs=runs))


def failed_rank(rank: int, runs: Mapping[str, RunResult], message: str) -> dict[str, RunResult]:
    """The runs of a rank that did not report, shaped like another rank's ``runs`` (labels
    ``rank0...``), each failed with ``message``."""
    from memprof.pipeline import failed_run
    from memprof.sources.distributed import rank_labels

    labels = rank_labels(rank, [label.partition("/")[2] or label for label in runs])
    return {
        label: replace(failed_run(label, run.mode, message, run.source), rank=rank)
        for label, run in zip(labels, runs.values(), strict=True)
    }


def merge(
    reports: Mapping[int, Report], world_size: int, extra_env: Mapping[str, str] | None = None
) -> Report:
    """One report of the job: every rank's runs in rank order, rank 0's target, date and
    environment (with ``world_size``); the device is every rank's, when they differ (a report
    with no device, standing for a rank that did not report, adds none)."""
    from memprof.pipeline import compared

    ordered = [reports[rank] for rank in sorted(reports)]
    base = ordered[0]
    devices = list(dict.fromkeys(report.device for report in ordered if report.device))
    environment = {**base.environment, **(extra_env or {}), "world_size": str(world_size)}
    runs = {label: run for report in ordered for label, run in report.runs.items()}
    return compared(replace(base, device=", ".join(devices), environment=environment, runs=runs))


def decode_report(text: str, rank: int) -> Report:
    """A rank's report as handed in (its JSON), read as data."""
    import json

    from memprof.core.errors import InputError
    from memprof.pipeline import report_from_dict

    where = f"the report of rank {rank}"
    try:
        data = json.loads(text)
    except ValueError as error:
        raise InputError(f"{where} is not JSON: {error}") from None
    return report_from_dict(data, where=where)
