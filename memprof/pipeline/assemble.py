"""The assembler: what a source observed -> a :class:`~memprof.model.RunResult`, the numbers
worked out here, the same for every source. Every source hands over a
:class:`~memprof.core.recording.Recording`, and :func:`run_of` turns any of them into its run,
by what the recording holds (never by the name of its source): a CUDA memory snapshot's
device, a file's memory records with the file's own counts, else a run profiled or estimated
here, with the program state tracked during its calls."""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

import numpy as np

from memprof.analysis.allocator import AllocatorSettings, simulate
from memprof.analysis.attribution import (
    Attribution,
    attribute,
    combine,
    counters_differ,
    with_device_counters,
)
from memprof.analysis.peaks import analyze, responsible_op, stack_at
from memprof.analysis.recorded import recorded_peak
from memprof.analysis.running import ops_at
from memprof.analysis.snapshot import SnapshotDevice, analyze_device, python_frames, site_of
from memprof.analysis.snapshot_replay import ALLOC, empty_trace, what_if
from memprof.analysis.untracked import untracked
from memprof.core.errors import first_line
from memprof.core.fields import copied
from memprof.core.gcpause import gc_paused
from memprof.core.names import aten_names, fused_kernels
from memprof.core.recording import RecordedMemory, RecordedSnapshot, Recording
from memprof.core.records import (
    MAPPED_RANGE,
    SNAPSHOT_ACTIONS,
    Allocations,
    RawProfile,
    SnapshotRecords,
    TrackedFacts,
)
from memprof.core.units import format_bytes
from memprof.model.estimate import AllocatorReplay
from memprof.model.recorded import (
    AllocatorModel,
    Fragmentation,
    OomEvent,
    SnapshotSection,
    SnapshotSite,
    WhatIf,
)
from memprof.model.run import RunResult
from memprof.model.timeline import CategoryTimeline, Timeline
from memprof.pipeline import build_run

_PROFILE_WORDS = ", which the profiler does not record"


def run_of(recording: Recording, what_if_settings: AllocatorSettings | None = None) -> RunResult:
    """The run of any recording, worked out by what it holds.

    - A CUDA memory snapshot's device (``recording.snapshot``): its allocator's trace replayed;
      ``what_if_settings``: its allocations replayed under these settings too (and under the
      default ones, to compare).
    - A file's memory records (``recording.memory``): the numbers read off them, with the
      file's own count of live and reserved bytes when it has one.
    - Else a run profiled or estimated here: the analysis of its records, with what the source
      measured and noticed, and the numbers and explanation of the tracked calls
      (``recording.facts``; exact: frees of tensors made before the call included),
      cross-checked with the device's own counters; an estimate of a CUDA device, its
      allocations replayed through the caching-allocator model.
    """
    # The analysis makes many objects that stay alive, none in cycles: a collection would walk
    # them, and everything the program holds, again and again.
    with gc_paused():
        if recording.snapshot is not None:
            return _snapshot_run(recording, recording.snapshot, what_if_settings)
        if recording.memory is not None:
            return _records_run(recording, recording.memory)
        return _profiled_run(recording)


# ---- a run profiled or estimated here ----------------------------------------------------------


def _profiled_run(recording: Recording) -> RunResult:
    """A run profiled or estimated here (see :func:`run_of`)."""
    notes = list(recording.notes)
    explained: Attribution | None = None
    if recording.facts is not None:
        explained = _explanation(recording, recording.facts, notes)
    if explained is not None and not recording.profiled:
        # The attribution's words are a profile's; a run that was not profiled has none.
        explained = replace(explained, notes=tuple(n.replace(_PROFILE_WORDS, "") for n in explained.notes))
    raw = untracked(recording.raw, recording.facts) if recording.op_tracked else recording.raw
    analysis = analyze(raw)
    if not recording.profiled:
        unknown = float("nan")
        untimed = tuple(replace(op, self_us=unknown, total_us=unknown) for op in analysis.ops)
        analysis = replace(analysis, ops=untimed)
    fields = dict(recording.fields)
    if recording.allocations is not None:
        replay = _replay(recording.allocations, recording.capacity_bytes)
        notes += _replay_notes(replay)
        fields["reserved_peak_bytes"] = replay.reserved_peak_bytes
        if fields.get("estimate") is not None:
            fields["estimate"] = replace(fields["estimate"], allocator=replay)
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
    if explained is not None:
        explained_numbers, explained_notes = _explained_numbers(recording, explained, raw)
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
        **{**numbers, **fields},
    )


def _explanation(recording: Recording, facts: TrackedFacts, notes: list[str]) -> Attribution | None:
    """The tracked calls' numbers and what is live at their peak, from the program state the
    source tracked (None, with a note, when that fails: the numbers are the records' then).
    An explained eager run: the measured calls' numbers, what is live at the peak from the
    explaining call (:func:`combine`), else from the measured calls' own state."""
    # The flat records cross-check the tracked ones, when there are flat records of a profile.
    raw = recording.raw if recording.profiled else None
    later = recording.explained_by_call
    try:
        measured = attribute(raw, facts, warm=recording.warm, explain=recording.explain and not later)
    except Exception as error:
        notes.append(
            f"memprof could not explain the peak ({first_line(error)}); the numbers are the "
            "allocator records'"
        )
        return None
    if not later:
        return measured

    def own() -> Attribution:
        """The measured calls explained by the program state they tracked."""
        try:
            return attribute(raw, facts, warm=recording.warm)
        except Exception as error:
            notes.append(f"memprof could not explain the peak ({first_line(error)})")
            return measured

    if recording.explaining is None:
        return own()
    try:
        explained = attribute(None, recording.explaining, warm=True)
    except Exception as error:
        notes.append(
            f"memprof could not explain the peak ({first_line(error)}); the numbers are the "
            "allocator records'"
        )
        return own()
    counters = recording.explaining_counters
    if "max_memory_allocated_bytes" in counters:
        counted = counters["max_memory_allocated_bytes"] - counters["memory_allocated_start_bytes"]
        if counters_differ(counted, explained.peak_bytes):
            # The records could not all be read with their addresses (torch's event tree lacks
            # some, and the allocator's history did not line up with them): what they explain
            # is not this peak. The measured calls' own explanation is.
            notes.append(
                f"the explaining call's records put its peak {explained.peak_bytes:,} B above its "
                f"start, torch.cuda.max_memory_allocated() {counted:,} B (its records could not all be "
                "read with their addresses): what is live at the peak is explained from the measured "
                "calls, by program state only (no ops or source lines for what the call made)"
            )
            return own()
    return combine(measured, explained)


def _mapped_note(files: tuple[tuple[str, int], ...], mapped_bytes: int) -> str:
    """The run's note when its records hold memory-mapped files."""
    names = ", ".join(sorted({name for name, _ in files if name})) or "a file"
    return (
        f"{format_bytes(mapped_bytes)} of the allocations are memory-mapped files ({names}; the "
        f"'{MAPPED_RANGE}' row): the profiler counts a mapping as an allocation of the file's size, "
        "although pages are read from disk only when touched, so far less may be resident"
    )


def _explained_numbers(
    recording: Recording, explained: Attribution, raw: RawProfile
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The run's numbers from the tracked calls: peak, footprint, live at start, net, inputs,
    the op at the exact peak, the exact timeline; and, with ``explain``, what is live at the
    peak, the modules, each call and the kernels. With the explanation's notes."""
    counters = recording.counters
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


# ---- an estimate of a CUDA device: the caching allocator's replay -----------------------------


def _replay(records: Allocations, capacity_bytes: int | None) -> AllocatorReplay:
    """Every allocation and free through the caching-allocator model: the reserve it would hold
    on a device with no limit, and with a capacity, whether every request finds room within it."""
    actions = list(zip(records.ptr.tolist(), records.bytes.tolist(), strict=True))
    free = simulate(actions)
    within = None
    if capacity_bytes is not None:
        within = simulate(actions, AllocatorSettings(capacity_bytes=capacity_bytes))
    return copied(
        AllocatorReplay,
        free,
        capacity_bytes=capacity_bytes,
        capacity_reserved_peak_bytes=within.reserved_peak_bytes if within is not None else None,
        ooms=len(within.ooms) if within is not None else 0,
    )


def _replay_notes(replay: AllocatorReplay) -> list[str]:
    """What the replay found within the capacity: out of memory, or the cache emptied."""
    if replay.ooms:
        return [
            f"within {format_bytes(replay.capacity_bytes or 0)} the caching-allocator model ran out of "
            f"memory {replay.ooms} time(s): a request found no room even after the cache was emptied"
        ]
    if replay.capacity_bytes is not None and replay.reserved_peak_bytes > replay.capacity_bytes:
        return [
            f"the reserve would reach {format_bytes(replay.reserved_peak_bytes)} on a larger device; "
            f"within {format_bytes(replay.capacity_bytes)} the allocator frees cached segments "
            f"instead and every request finds room (reserve at most "
            f"{format_bytes(replay.capacity_reserved_peak_bytes or 0)})"
        ]
    return []


# ---- a file's memory records (chrome traces) ---------------------------------------------------


def _records_run(recording: Recording, memory: RecordedMemory) -> RunResult:
    """One device's memory records, as a file gives them: the numbers read off them, the
    per-op table of the analysis. Records that memprof's own ``memprof.call`` ranges mark (a
    trace exported from a memprof-style profile) have their peak measured as ``memprof run``
    does, above each call's start."""
    raw = recording.raw
    analysis = analyze(raw)
    numbers = analysis.numbers
    read = recorded_peak(raw, memory)
    peak, peak_op, stack = read.peak_bytes, read.peak_op, read.peak_op_stack
    notes = [*recording.notes, *read.notes]
    if raw.calls:
        peak, peak_op, stack = numbers.peak_bytes, numbers.peak_op, numbers.peak_op_stack
        notes.append("peak above the start of each memprof.call range, as memprof run measures it")
    live_at_start = memory.live_at_start_bytes
    timeline = _timeline(read.timeline_t_ns, read.timeline_bytes, read.timeline_reserved, live_at_start)
    return build_run(
        label=recording.label,
        mode=recording.mode,
        source=recording.source,
        rank=_rank(recording),
        device=recording.device,
        device_name=recording.device_facts.get("device_name"),
        device_total_bytes=recording.device_facts.get("device_total_bytes"),
        peak_bytes=peak,
        footprint_bytes=read.footprint_bytes,
        live_at_start_bytes=live_at_start,
        # The host's allocator reserves nothing: its Total Reserved is always 0.
        reserved_peak_bytes=read.reserved_peak_bytes if recording.device != "cpu" else None,
        allocated_bytes=numbers.allocated_bytes,
        net_bytes=numbers.net_bytes,
        peak_op=peak_op,
        peak_op_stack=stack,
        records=memory.records if memory.records is not None else len(raw.mem_time),
        op_stats=analysis.ops,
        timeline=timeline,
        notes=(*notes, *analysis.notes),
    )


def _rank(recording: Recording) -> int | None:
    """The rank a file records (or its reader was given); None for a run made here."""
    return recording.file.rank if recording.file is not None else None


def _timeline(t_ns: np.ndarray, live: np.ndarray, reserved: np.ndarray, live_at_start: int) -> Timeline:
    """A recording's timeline, its live bytes counted above those live at its start."""
    return Timeline(
        t_ns=tuple(t_ns.tolist()),
        bytes=tuple((live - live_at_start).tolist()),
        reserved=tuple(reserved.tolist()),
    )


# ---- a CUDA memory snapshot's device ------------------------------------------------------------


def _snapshot_run(
    recording: Recording, recorded: RecordedSnapshot, settings: AllocatorSettings | None
) -> RunResult:
    """One device of a snapshot. Peak, live at start: requested bytes, as the trace records them;
    footprint and reserved peak: block sizes of the allocator model's replay (what
    ``max_memory_allocated``/``max_memory_reserved`` count). The op at the peak is the site of
    the allocation that reached it, with its Python stack (outermost first)."""
    records = recorded.records
    device = analyze_device(records, recorded.index)
    trace = records.traces.get(device.device_index) or empty_trace()
    notes = [*recording.notes, *device.notes]
    timeline = Timeline()
    if len(trace) and (trace.time_us >= 0).all():
        timeline = _timeline(
            device.timeline_t_ns, device.timeline_bytes, device.timeline_reserved, device.live_at_start_bytes
        )
    elif len(trace):
        notes.append("this snapshot records no times: no timeline")
    else:
        notes.append("this snapshot has no trace (history was not recorded): the numbers are at dump time")
    peak_op: str | None = None
    stack: tuple[str, ...] = ()
    if device.peak_index is not None:
        stack_id = int(trace.stack[device.peak_index])
        frames = records.stacks[stack_id] if stack_id >= 0 else ()
        peak_op = site_of(frames)
        stack = tuple(f"{f.filename}:{f.line} {f.name}" for f in reversed(python_frames(frames)))
    return build_run(
        label=recording.label,
        mode=recording.mode,
        source=recording.source,
        rank=_rank(recording),
        device=device.device,
        peak_bytes=device.peak_bytes,
        footprint_bytes=device.footprint_bytes,
        live_at_start_bytes=device.live_at_start_bytes,
        reserved_peak_bytes=device.reserved_peak_bytes,
        allocated_bytes=int(trace.size[trace.action == ALLOC].sum()),
        net_bytes=device.requested_bytes - device.live_at_start_bytes,
        peak_op=peak_op,
        peak_op_stack=stack,
        records=device.trace_events,
        timeline=timeline,
        notes=tuple(notes),
        snapshot=_section(records, device, settings),
        allocator_model=_model_check(device),
    )


def _section(
    records: SnapshotRecords, device: SnapshotDevice, settings: AllocatorSettings | None
) -> SnapshotSection:
    return copied(
        SnapshotSection,
        device,
        # In the order torch's trace names its actions (alloc, free_requested, free_completed, ...).
        trace_actions={
            a: device.trace_actions[a] for a in (*SNAPSHOT_ACTIONS, "other") if a in device.trace_actions
        },
        sites_at_peak=tuple(copied(SnapshotSite, s) for s in device.sites_at_peak),
        fragmentation=copied(Fragmentation, device.fragmentation),
        ooms=tuple(copied(OomEvent, o) for o in device.ooms),
        what_if=_what_if(records, device, settings) if settings is not None else (),
    )


def _what_if(
    records: SnapshotRecords, device: SnapshotDevice, settings: AllocatorSettings
) -> tuple[WhatIf, ...]:
    """The allocations replayed from an empty allocator with default settings and with
    ``settings``, each within the device's capacity when an out-of-memory recorded it."""
    out = []
    for chosen in (AllocatorSettings(), settings):
        chosen = replace(chosen, capacity_bytes=device.capacity_bytes)
        result = what_if(records, device.device_index, chosen)
        out.append(copied(WhatIf, result, capacity_bytes=device.capacity_bytes, ooms=len(result.ooms)))
    return tuple(out)


def _model_check(device: SnapshotDevice) -> AllocatorModel | None:
    check = device.allocator_model
    if check is None:
        return None
    return copied(AllocatorModel, check)
