"""The pipeline: where a run's result and a report are put together, for every source alike.

A source (a live profile, fake execution, a trace, a snapshot, a block of code) hands over its
records and what it observed; the analysis works out numbers and explanations; this module
builds the :class:`~memprof.model.RunResult` from them (:func:`build_run`, :func:`failed_run`)
and the :class:`~memprof.model.Report` with its comparisons (:func:`build_report`). A saved
report is read back the same way (:func:`load_report`): its comparisons made again, so a loaded
report is what a fresh one would be.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof.core.units import format_bytes
from memprof.model import FAILED, Report, RunResult
from memprof.model.kind import LIVE_SOURCE
from memprof.model.timeline import CategoryTimeline, Timeline

if TYPE_CHECKING:
    from memprof.analysis.attribution import Attribution
    from memprof.analysis.peaks import Analysis
    from memprof.core.records import RawProfile

_RUN_FIELDS = frozenset(field.name for field in dataclass_fields(RunResult))


def build_run(analysis: Analysis | None = None, **run: Any) -> RunResult:
    """A run's result: every number of ``analysis.numbers`` that is a field of a run (peak,
    allocated, net, peak op, records, ...), its ops, its timeline and its notes (after
    ``run["notes"]``), then what ``run`` gives (label, mode, times, what the source observed;
    a value given there wins over the analysis'). Without ``analysis``, ``run`` is all."""
    if analysis is None:
        return RunResult(**run)
    numbers = analysis.numbers
    values = {f.name: getattr(numbers, f.name) for f in dataclass_fields(numbers) if f.name in _RUN_FIELDS}
    values.update(op_stats=analysis.ops, timeline=analysis.timeline)
    notes = (*run.pop("notes", ()), *analysis.notes)
    return RunResult(**{**values, **run, "notes": notes})


def failed_run(label: str, mode: str | None, message: str, source: str = LIVE_SOURCE) -> RunResult:
    """A run whose code failed: no numbers, the failure's message in ``error``."""
    return RunResult(label=label, mode=mode, source=source, status=FAILED, peak_bytes=0, error=message)


def compared(report: Report) -> Report:
    """``report`` with its comparisons: each successful run after the first compared with the
    first (none when the runs are on different devices or ranks: a GPU is not compared with
    the host, nor one rank with another), and the ranks side by side when runs carry a rank."""
    from memprof.analysis.diff import diff_runs
    from memprof.analysis.ranks import summarize

    runs = report.ok_runs()
    diffs: tuple[Any, ...] = ()
    # Only runs of one device and one rank are comparable (a per-rank view of a job is).
    if len({(run.device, run.rank) for run in runs}) <= 1:
        diffs = tuple(diff_runs(runs[0], other) for other in runs[1:])
    return replace(report, diffs=diffs, ranks=summarize(report.runs.values()))


def build_report(**fields: Any) -> Report:
    """A report of ``fields`` (target, device, runs, environment, source, ...) with its
    comparisons."""
    return compared(Report(**fields))


def report_from_dict(data: Any, where: str = "report") -> Report:
    """The report of a JSON document (:meth:`Report.from_dict`) with its comparisons."""
    return compared(Report.from_dict(data, where))


def load_report(path: str | Path) -> Report:
    """Read a report JSON written by memprof (data only: no pickle, no eval), with its
    comparisons."""
    from memprof.core.fileio import read_json

    where = "standard input" if str(path) == "-" else str(path)
    return report_from_dict(read_json(path, "report"), where=where)


# ---- a run from a recording ---------------------------------------------------------------------


@dataclass
class Recording:
    """What a source hands the pipeline for one run it profiled or estimated: the profiler's
    records (``raw``), the tracked calls' numbers and explanation (``explained``; None when
    program state could not be tracked), and what the source measured and noticed.

    ``counters``: the device's own counters (CUDA: ``memory_allocated_start_bytes``,
    ``max_memory_allocated_bytes``, ``max_memory_reserved_bytes``); ``device_facts``: the
    device's name and total memory; ``walls_ms``: each timed call (``wall_timing`` says how
    they were timed); ``inputs_bytes``: what the arguments hold, for a run whose state was not
    tracked; ``mapped_files``: the files memory-mapped during the calls (name, size);
    ``vocabulary``: the aten op names fused kernel names are split with; ``explain``:
    whether what is live at the peak is reported (else only the numbers); ``timed_ops``: false
    when the ops' times are not real (fake execution: left unknown); ``fields``: what else
    the run holds as the source gives it (``estimate``, ``compile_seconds``, ``torch_table``,
    ...); ``source``: the run's source (``RunResult.source``)."""

    label: str
    mode: str | None
    raw: RawProfile
    device: str
    explained: Attribution | None = None
    counters: dict[str, int] = field(default_factory=dict)
    device_facts: dict[str, Any] = field(default_factory=dict)
    walls_ms: tuple[float, ...] = ()
    wall_timing: str = "profiled"
    repeat: int = 1
    inputs_bytes: int = 0
    vocabulary: frozenset[str] = frozenset()
    explain: bool = True
    timed_ops: bool = True
    notes: tuple[str, ...] = ()
    mapped_files: tuple[tuple[str, int], ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)
    source: str = LIVE_SOURCE


def run_of(recording: Recording) -> RunResult:
    """The run of a recording: the analysis of its records, with what the source measured and
    noticed, and the numbers and explanation of the tracked calls (exact: frees of tensors made
    before the call included), cross-checked with the device's own counters."""
    from memprof.analysis.attribution import counters_differ
    from memprof.analysis.peaks import analyze
    from memprof.core.names import aten_names, fused_kernels
    from memprof.core.records import MAPPED_RANGE

    analysis = analyze(recording.raw)
    if not recording.timed_ops:
        unknown = float("nan")
        untimed = tuple(replace(op, self_us=unknown, total_us=unknown) for op in analysis.ops)
        analysis = replace(analysis, ops=untimed)
    notes = list(recording.notes)
    mapped = sum(op.allocated_bytes for op in analysis.ops if op.name == MAPPED_RANGE)
    if mapped > 0:
        notes.append(_mapped_note(recording.mapped_files, mapped))
    counters = recording.counters
    # CUDA's counters give the footprint and live at start; an explained run's own numbers
    # (cross-checked with those counters) take their place.
    numbers: dict[str, Any] = {
        "footprint_bytes": counters.get("max_memory_allocated_bytes"),
        "live_at_start_bytes": counters.get("memory_allocated_start_bytes"),
        "reserved_peak_bytes": counters.get("max_memory_reserved_bytes"),
        "inputs_bytes": recording.inputs_bytes,
    }
    if recording.explained is not None:
        explained_numbers, explained_notes = _explained_numbers(recording)
        numbers.update(explained_numbers)
        notes += [note for note in explained_notes if note not in notes]
    if "max_memory_allocated_bytes" in counters:
        # The peak the report gives: the tracked calls' (exact) or the records' own.
        counted = counters["max_memory_allocated_bytes"] - counters["memory_allocated_start_bytes"]
        counters["allocator_peak_above_start_bytes"] = counted
        reported = numbers.get("peak_bytes", analysis.numbers.region_peak_bytes)
        if counters_differ(counted, reported):
            notes.append(
                f"torch.cuda.max_memory_allocated() rose {format_bytes(counted)} above the start, the "
                f"reported peak {format_bytes(reported)}: memory was allocated where the profiler does "
                "not record (another thread?)"
            )
    op_names = [op.name for op in analysis.ops]
    walls = recording.walls_ms
    return build_run(
        analysis,
        label=recording.label,
        mode=recording.mode,
        source=recording.source,
        device=recording.device,
        wall_ms=statistics.median(walls) if walls else float("nan"),
        wall_ms_all=walls,
        wall_timing=recording.wall_timing,
        repeat=recording.repeat,
        fused_kernels=fused_kernels(op_names, recording.vocabulary | aten_names(op_names)),
        device_counters=counters,
        notes=notes,
        **recording.device_facts,
        **{**numbers, **recording.fields},
    )


def _mapped_note(files: tuple[tuple[str, int], ...], mapped_bytes: int) -> str:
    """The run's note when its records hold memory-mapped files."""
    from memprof.core.records import MAPPED_RANGE

    names = ", ".join(sorted({name for name, _ in files if name})) or "a file"
    return (
        f"{format_bytes(mapped_bytes)} of the allocations are memory-mapped files ({names}; the "
        f"'{MAPPED_RANGE}' row): the profiler counts a mapping as an allocation of the file's size, "
        "although pages are read from disk only when touched, so far less may be resident"
    )


def _explained_numbers(recording: Recording) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The run's numbers from the tracked calls: peak, footprint, live at start, net, inputs,
    the op at the exact peak, the exact timeline; and, with ``explain``, what is live at the
    peak, the modules, each call and the kernels. With the explanation's notes."""
    from memprof.analysis.attribution import with_device_counters
    from memprof.analysis.peaks import responsible_op, stack_at

    explained, raw, counters = recording.explained, recording.raw, recording.counters
    assert explained is not None
    first, last = explained.calls[0], explained.calls[-1]
    numbers: dict[str, Any] = {
        # What memprof found live when the first measured call started (before CUDA's counters
        # add what it did not find): the arguments, model, optimizer state, module globals.
        "inputs_bytes": first.live_at_start_bytes,
        "net_bytes": last.live_at_end_bytes - last.live_at_start_bytes,
    }
    if "memory_allocated_start_bytes" in counters and "max_memory_allocated_bytes" in counters:
        explained = with_device_counters(
            explained, counters["memory_allocated_start_bytes"], counters["max_memory_allocated_bytes"]
        )
    stack = stack_at(raw, explained.peak_at_ns) if explained.peak_bytes > 0 else ()
    numbers.update(
        peak_bytes=explained.peak_bytes,
        footprint_bytes=explained.footprint_bytes,
        live_at_start_bytes=explained.live_at_start_bytes,
        peak_op=responsible_op(stack) if explained.peak_bytes > 0 else None,
        peak_op_stack=stack,
        call_numbers=explained.calls,
        peak_call=explained.peak_call,
        timeline=_exact_timeline(explained, raw, recording.explain),
    )
    if recording.explain:
        numbers.update(at_peak=explained.at_peak, module_stats=explained.modules, kernels=explained.kernels)
    return numbers, explained.notes


def _exact_timeline(explained: Attribution, raw: RawProfile, explain: bool) -> Timeline:
    """The tracked calls' live bytes over time (exact), the op running at each point on the
    profiler's clock (the timeline starts with the first measured call, as the records' own
    does), and with ``explain`` the peak call's live bytes by category."""
    import numpy as np

    from memprof.analysis.running import ops_at

    by_category = None
    if explain:
        by_category = CategoryTimeline(
            t_ns=explained.timeline_t_ns,
            # Categories that hold nothing during the call are left out.
            bytes={k: tuple(v) for k, v in explained.timeline_by_category.items() if any(v)},
        )
    op_names: tuple[str, ...] = ()
    op_at: tuple[int, ...] = ()
    if raw.calls:
        start = min(call[0] for call in raw.calls)
        op_names, at = ops_at(raw, np.asarray(explained.live_t_ns, dtype=np.int64) + start)
        op_at = tuple(at.tolist())
    return Timeline(
        t_ns=explained.live_t_ns,
        bytes=explained.live_bytes,
        op_names=op_names,
        op_at=op_at,
        by_category=by_category,
    )
