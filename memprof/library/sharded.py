"""Estimates of a sharded job: the target run as each rank of an N-rank torch.distributed job
(FSDP2, DDP, tensor parallel, pipeline stages), one rank after another in this process, under
torch's fake process group (:mod:`memprof.sources.fake.job`).

A job's report has a run per rank, labelled as a measured job's (``rank0``, ``rank1``, ...),
so that ``memprof diff`` compares an estimate with a measured job rank by rank; ranks whose
numbers are all the same are said once (each run after the first notes which rank it is
alike). A sweep's value is as large as its neediest rank: it fits when it fits on every rank.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memprof.core.errors import UsageError, param
from memprof.model.run import RunResult
from memprof.sources.distributed import rank_label
from memprof.sources.options import StatusFn

MAX_WORLD_SIZE = 65_536  # ranks of one job; each rank estimated is a run of the target

OneRun = Callable[[str, dict[str, Any]], RunResult]


@dataclass(frozen=True)
class Job:
    """The job estimated: its world size and the ranks run."""

    world_size: int
    ranks: tuple[int, ...]
    status: StatusFn | None = None

    @classmethod
    def of(cls, world_size: int, ranks: Sequence[int] | None, status: StatusFn | None = None) -> Job:
        """A job of ``world_size`` ranks, estimating ``ranks`` (default all)."""
        if isinstance(world_size, bool) or not isinstance(world_size, int):
            raise UsageError(f"{param('world_size')} must be a whole number, got {world_size!r}")
        if not 1 <= world_size <= MAX_WORLD_SIZE:
            raise UsageError(f"{param('world_size')} must be 1 to {MAX_WORLD_SIZE:,}, got {world_size}")
        chosen = tuple(range(world_size)) if ranks is None else tuple(dict.fromkeys(ranks))
        if not chosen:
            raise UsageError(f"{param('ranks')} names no rank; give ranks 0 to {world_size - 1}")
        for rank in chosen:
            if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
                job, last = f"a {world_size}-rank job", world_size - 1
                raise UsageError(f"rank {rank!r} is not a rank of {job}; give ranks 0 to {last}")
        return cls(world_size, tuple(sorted(chosen)), status)

    def environment(self) -> dict[str, str]:
        """What the report's environment says of the job."""
        return {"world_size": str(self.world_size), "backend": "fake (estimate)"}

    def _probed(
        self, one: OneRun, label: str, params: dict[str, Any], rank: int, count: int
    ) -> tuple[RunResult, list[str]]:
        """Rank ``rank``'s run, and the lines outside torch that read the rank meanwhile."""
        from memprof.sources.fake.job import FakeJob
        from memprof.sources.fake.rank_reads import RankReads

        if self.status is not None:
            self.status(f"rank {rank} of {self.world_size} ({count} of {len(self.ranks)})")
        with FakeJob(self.world_size, rank), RankReads() as reads:
            run = one(label, params)
        return replace(run, label=label, rank=rank), reads.lines

    def runs(self, one: OneRun, params: dict[str, Any], label: str | None = None) -> dict[str, RunResult]:
        """Each rank's run, ``rank0``, ``rank1``, ... (``rank0/batch=8``, ... with ``label``);
        ranks alike an earlier one say so.

        Every rank of a job of three or more: the first and the last are estimated; when no code
        outside torch read the rank and the two are alike, the ranks between are too (torch
        shards every rank alike, and where its split is uneven the last rank differs from the
        first) and are not estimated again; else each is."""
        started = time.perf_counter()
        last = self.world_size - 1
        every = self.ranks == tuple(range(self.world_size)) and self.world_size > 2
        order = (0, last, *range(1, last)) if every else self.ranks
        runs: dict[int, RunResult] = {}
        read: list[str] = []
        for count, rank in enumerate(order, start=1):
            if every and count == 3 and not read and _signature(runs[0]) == _signature(runs[last]):
                for middle in range(1, last):
                    runs[middle] = _alike(runs[0], rank_label(middle, label), middle, last)
                break
            runs[rank], lines = self._probed(one, rank_label(rank, label), params, rank, count)
            read += [line for line in lines if line not in read]
        if read:
            where = ", ".join(read[:3]) + (f" and {len(read) - 3} more" if len(read) > 3 else "")
            note = f"the code reads its rank (at {where}): each rank estimated"
            runs[order[0]] = replace(runs[order[0]], notes=(note, *runs[order[0]].notes))
        if self.status is not None:
            estimated = sum(1 for run in runs.values() if not _copied(run))
            self.status(f"{estimated} rank(s) estimated in {time.perf_counter() - started:.1f} s")
        return said_once({rank_label(rank, label): runs[rank] for rank in sorted(runs)})

    def neediest(self, one: OneRun, need: Callable[[RunResult], int]) -> OneRun:
        """A run per value of a sweep: the estimated ranks' neediest run, under the value's label,
        noting which rank it is."""

        def run(label: str, params: dict[str, Any]) -> RunResult:
            found = list(self.runs(one, params, label).values())
            worst = max(found, key=lambda r: (need(r), -(r.rank or 0)))
            note = (
                f"rank {worst.rank} of a {self.world_size}-rank job, the neediest of the "
                f"{len(found)} rank(s) at {label}"
            )
            return replace(worst, label=label, notes=(note, *worst.notes))

        return run


_NOT_RUN = "not estimated on its own"


def _alike(first: RunResult, label: str, rank: int, last: int) -> RunResult:
    """Rank ``rank``'s run (``label``), from rank 0's: the job's ranks 0 and ``last`` are alike
    and no code outside torch read the rank."""
    note = (
        f"alike rank 0 ({_NOT_RUN}): no code outside torch reads the rank, and ranks 0 and {last} "
        "are alike, so torch shards this rank as theirs"
    )
    return replace(first, label=label, rank=rank, notes=(note, *first.notes))


def _copied(run: RunResult) -> bool:
    return bool(run.notes) and _NOT_RUN in run.notes[0]


def _signature(run: RunResult) -> tuple[Any, ...]:
    """What makes two ranks' estimates the same: every number a report shows of them."""
    at_peak = run.at_peak
    return (
        run.peak_bytes,
        run.footprint_bytes,
        run.live_at_start_bytes,
        run.reserved_peak_bytes,
        run.allocated_bytes,
        tuple(sorted(at_peak.by_category.items())) if at_peak is not None else (),
        at_peak.entries if at_peak is not None else (),
    )


def said_once(runs: dict[str, RunResult]) -> dict[str, RunResult]:
    """``runs`` (one per rank) with each run that is alike an earlier rank's noting so."""
    first: dict[tuple[Any, ...], RunResult] = {}
    out: dict[str, RunResult] = {}
    for label, run in runs.items():
        key = _signature(run)
        same = first.setdefault(key, run)
        if same is not run and not _copied(run):
            note = f"alike rank {same.rank}: the same peak, footprint, categories and entries at the peak"
            run = replace(run, notes=(note, *run.notes))
        out[label] = run
    return out
