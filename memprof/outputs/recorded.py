"""What every format says about runs read from recordings (chrome traces, CUDA memory
snapshots), and about the device-wide numbers a live CUDA run also has: decided once here, so
the terminal, Markdown and HTML say the same sentences and show the same rows: the header, the
snapshots' details and what-if replays (:func:`snapshot_section`), the allocation sites live at
the peak (:func:`sites_section`).

Nothing here renders a format: each function returns text, rows or document blocks.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING

from memprof.core.units import format_bytes
from memprof.model.run import SEPARATORS, SITE, short_site
from memprof.outputs import document as doc
from memprof.outputs.context import TOP_SITES

if TYPE_CHECKING:
    from memprof.model.recorded import OomEvent, SnapshotSite, WhatIf
    from memprof.model.report import Report
    from memprof.model.run import RunResult


MEMORY_COLUMNS = (
    ("footprint", "footprint_bytes"),
    ("live at start", "live_at_start_bytes"),
    ("reserved peak", "reserved_peak_bytes"),
)
"""Device-wide numbers a run may know: (header, RunResult attribute)."""

RECORDED_COLUMNS = (
    ("peak above start", "peak_bytes"),
    *MEMORY_COLUMNS,
    ("allocated", "allocated_bytes"),
)
"""The size columns of a recorded report's runs table, in order (then the op at the peak)."""

_KIND_NAMES = {"trace": "chrome trace", "snapshot": "CUDA memory snapshot"}


def memory_columns(runs: Iterable[RunResult]) -> tuple[tuple[str, str], ...]:
    """The columns of :data:`MEMORY_COLUMNS` that at least one of ``runs`` knows (a live CUDA run
    knows them all; a live CPU run none)."""
    runs = list(runs)
    return tuple(
        (header, attr) for header, attr in MEMORY_COLUMNS if any(getattr(r, attr) is not None for r in runs)
    )


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def source_line(report: Report) -> str:
    """``tracelens.json.gz: chrome trace (torch 2.6.0)``, ``traces: 2 chrome traces (ranks 0, 1 of 2,
    nccl)``: what was read, and what it records about itself."""
    source = report.source
    assert source is not None
    files = source.files
    kinds = [_KIND_NAMES.get(kind, kind) for kind in dict.fromkeys(f.kind for f in files)]
    if len(files) == 1:
        what = kinds[0] if kinds else source.kind
    else:
        counts = {k: sum(1 for f in files if _KIND_NAMES.get(f.kind, f.kind) == k) for k in kinds}
        what = ", ".join(_plural(n, k) for k, n in counts.items())
    details = []
    ranks = [f.rank for f in files if f.rank is not None]
    if ranks:
        sizes = {f.world_size for f in files if f.world_size is not None}
        of = f" of {sizes.pop()}" if len(sizes) == 1 else ""
        details.append(f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}{of}")
    backends = list(dict.fromkeys(f.distributed_backend for f in files if f.distributed_backend))
    details += backends
    versions = list(dict.fromkeys(f.torch_version for f in files if f.torch_version))
    if versions:
        details.append("torch " + ", ".join(versions))
    return f"{report.target}: {what}" + (f" ({', '.join(details)})" if details else "")


RUNS_HELP = (
    "peak above start: the most live bytes above what was live when the recording began; footprint: "
    "everything live at that moment (the allocator's Total Allocated; for a snapshot, block sizes as "
    "max_memory_allocated counts them); live at start: allocated before the recording began; reserved "
    "peak: the most the CUDA caching allocator held from the device; allocated: all bytes allocated "
    "during the recording. A snapshot's peak and live at start are requested bytes, as its trace "
    "records them."
)
LEGEND = (
    "peak above start: the most live bytes above what was live when the recording began; footprint: "
    "everything live at that moment; reserved peak: the most the CUDA caching allocator held; snapshots "
    "count requested bytes, their footprint and reserve block sizes; sizes are 1024-based."
)


def facts(report: Report) -> list[tuple[str, str]]:
    """The header of a report read from recordings: what was read, each file (its kind, rank,
    torch and runs), each device's name, when it was analysed."""
    assert report.source is not None
    items: list[tuple[str, str]] = [("read", source_line(report))]
    for file in report.source.files:
        about = [_KIND_NAMES.get(file.kind, file.kind)]
        if file.rank is not None:
            about.append(f"rank {file.rank}" + (f" of {file.world_size}" if file.world_size else ""))
        if file.torch_version:
            about.append(f"torch {file.torch_version}")
        about.append("runs " + ", ".join(file.runs))
        items.append(("file", f"{file.path}: {'; '.join(about)}"))
    named = {run.device: run.device_name for run in report.ok_runs() if run.device_name}
    items += [("device", f"{device or '?'}: {device_name}") for device, device_name in named.items()]
    return [*items, ("analysed", report.created or "?")]


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%"


def device_line(run: RunResult) -> str | None:
    """``cuda:0: footprint 96.6 MiB = 0.1% of this NVIDIA H100 80GB HBM3's 79.2 GiB; reserved peak
    116.0 MiB = 0.1%``: the run's memory against its device's, when the recording names it."""
    total, name = run.device_total_bytes, run.device_name
    if not total:
        return f"{run.label}: {name}" if name else None
    device = f"this {name}'s" if name else "the device's"
    what, value = (
        ("footprint", run.footprint_bytes) if run.footprint_bytes is not None else ("peak", run.peak_bytes)
    )
    share = f"{_percent(value, total)} of {device} {format_bytes(total)}"
    line = f"{run.label}: {what} {format_bytes(value)} = {share}"
    reserved = run.reserved_peak_bytes
    if reserved is not None:
        line += f"; reserved peak {format_bytes(reserved)} = {_percent(reserved, total)}"
    return line


# ------------------------------------------------------------------------------------ snapshots


def snapshot_lines(run: RunResult) -> list[str]:
    """What a snapshot says about the device beyond the runs table: the reserve at dump time,
    the trace, fragmentation, the allocator model's check, each out-of-memory explained."""
    snap = run.snapshot
    if snap is None:
        return []
    lines = [
        f"at dump: {_plural(snap.segments, 'segment')} ({snap.large_segments:,} large, "
        f"{snap.small_segments:,} small, {snap.expandable_segments:,} expandable), "
        f"{format_bytes(snap.reserved_bytes)} reserved, {format_bytes(snap.allocated_bytes)} allocated",
        _trace_line(run),
    ]
    frag = snap.fragmentation
    line = (
        f"fragmentation at dump: {format_bytes(frag.cached_bytes)} cached (reserved - allocated), "
        f"largest free block {format_bytes(frag.largest_free_block_bytes)}"
    )
    if frag.largest_request_bytes is not None and frag.unusable_bytes is not None:
        line += (
            f"; {format_bytes(frag.unusable_bytes)} of the cache cannot hold the trace's largest request "
            f"({format_bytes(frag.largest_request_bytes)})"
        )
    lines.append(line)
    lines.append(model_line(run))
    lines += [oom_line(oom) for oom in snap.ooms]
    return lines


def _trace_line(run: RunResult) -> str:
    snap = run.snapshot
    assert snap is not None
    if not snap.trace_events:
        return "no trace (history was not recorded): the numbers are those at dump time"
    actions = ", ".join(f"{n:,} {action}" for action, n in snap.trace_actions.items())
    line = f"trace: {_plural(snap.trace_events, 'event')} ({actions})"
    start = format_bytes(run.live_at_start_bytes)
    if snap.frees_without_alloc:
        line += (
            f"; it began mid-run: it frees {_plural(snap.frees_without_alloc, 'block')} allocated before it, "
            f"so {start} live at its start is reconstructed (those, and blocks still allocated at dump "
            "that it never allocated)"
        )
    elif run.live_at_start_bytes:
        line += f"; {start} was live when it began (blocks still allocated at dump that it never allocated)"
    return line


def model_line(run: RunResult) -> str:
    """The allocator model's check, e.g. ``allocator model (default settings): 1,721 of 1,721
    placements, 0 of 0 segments, 455 of 455 blocks at dump as recorded: exact``."""
    check = run.allocator_model
    if check is None:
        return "allocator model: not checked (see the notes)"
    line = (
        f"allocator model ({check.settings} settings): {check.placements_matched:,} of {check.placements:,} "
        f"placements, {check.segments_matched:,} of {check.segments:,} segments, "
        f"{check.blocks_matched:,} of {check.blocks:,} blocks at dump as recorded"
    )
    if check.segments_unexpected:
        line += f", {_plural(check.segments_unexpected, 'segment')} the trace does not have"
    line += ": exact" if check.exact else ": not exact, footprint and reserved peak are modelled"
    if check.settings_differ:
        line += f" (the snapshot's settings it does not follow: {'; '.join(check.settings_differ)})"
    return line


def oom_line(oom: OomEvent) -> str:
    """``out of memory at event 10: asked 16.0 MiB with 5.0 MiB free on the device; the allocator
    held 40.0 MiB reserved, 12.0 MiB allocated, largest free block 14.0 MiB: fragmentation``."""
    cached = oom.reserved_bytes - oom.allocated_bytes
    cause = (
        f"fragmentation ({format_bytes(cached)} cached, but no free block fits)"
        if oom.cause == "fragmentation"
        else "capacity (the cache and the device together had no room)"
    )
    return (
        f"out of memory at event {oom.index:,}: asked {format_bytes(oom.requested_bytes)} with "
        f"{format_bytes(oom.free_on_device_bytes)} free on the device; the allocator held "
        f"{format_bytes(oom.reserved_bytes)} reserved, {format_bytes(oom.allocated_bytes)} allocated, "
        f"largest free block {format_bytes(oom.largest_free_block_bytes)}: {cause}"
    )


def site_prefix(sites: Iterable[str]) -> str:
    """The folder every path among ``sites`` (``file:line function``) shares, with its trailing
    separator (``D:\\work\\proj\\``), or "" when they share none: shown once, cut from each."""
    paths = [
        match["path"] for site in sites if (match := SITE.match(site)) and SEPARATORS.search(match["path"])
    ]
    if len(paths) < 2:
        return ""
    prefix = os.path.commonprefix(paths)
    cut = max(prefix.rfind("/"), prefix.rfind("\\"))
    return prefix[: cut + 1] if cut > 0 else ""


@dataclass(frozen=True)
class SiteRow:
    """A site live at the peak (without the folder all shown sites share), with its share of the
    peak's requested bytes."""

    site: str
    bytes: int
    count: int
    share: str


def site_rows(run: RunResult, top: int = TOP_SITES) -> tuple[SiteRow, ...]:
    """The ``top`` sites holding most bytes at the snapshot's peak (largest first)."""
    snap = run.snapshot
    if snap is None:
        return ()
    total = snap.peak_requested_bytes or 1
    sites: tuple[SnapshotSite, ...] = snap.sites_at_peak[:top]
    prefix = site_prefix(s.site for s in sites)
    return tuple(
        SiteRow(short_site(s.site, prefix), s.bytes, s.count, _percent(s.bytes, total)) for s in sites
    )


def sites_title(run: RunResult, top: int = TOP_SITES) -> str:
    """``Top 10 of 19 allocation sites live at the peak of cuda:0 (13.0 GiB requested; paths under
    D:\\proj\\)``."""
    snap = run.snapshot
    assert snap is not None
    shown = snap.sites_at_peak[:top]
    prefix = site_prefix(s.site for s in shown)
    under = f"; paths under {prefix}" if prefix else ""
    return (
        f"Top {len(shown)} of {len(snap.sites_at_peak)} allocation sites live at the peak of {run.label} "
        f"({format_bytes(snap.peak_requested_bytes)} requested{under})"
    )


WHAT_IF_HEADERS = (
    "settings",
    "reserved peak",
    "allocated peak",
    "reserved - allocated",
    "segments asked",
    "largest free at end",
    "out of memory",
)


def _ooms(item: WhatIf) -> int | None:
    """How many recorded out-of-memory requests still fail (None: the capacity is unknown)."""
    return item.ooms if item.capacity_bytes is not None else None


def _oom_text(item: WhatIf, recorded: int) -> str:
    if item.capacity_bytes is None:
        return "-"
    return f"{item.ooms} of {recorded} still fail ({format_bytes(item.capacity_bytes)} capacity)"


def what_if_title(run: RunResult) -> str:
    return (
        f"What if, {run.label}: its allocations replayed from an empty allocator (the recorded reserve "
        "also holds what was cached before the trace)"
    )


# ---- the document's sections ----------------------------------------------------------------------

# The what-if table's columns, the first to go when narrow last: the settings and the reserve
# always; the out-of-memory verdict last to go.
_WHAT_IF_DROPS = (0, 0, 3, 2, 5, 4, 1)


def what_if_table(run: RunResult) -> doc.Table:
    """One row per what-if replay: default settings first, then the settings asked for."""
    snap = run.snapshot
    assert snap is not None
    kinds = (doc.NAME, doc.SIZE, doc.SIZE, doc.SIZE, doc.COUNT, doc.SIZE, doc.NUMBER)
    columns = tuple(
        doc.Column(header, kind, drop=drop)
        for header, kind, drop in zip(WHAT_IF_HEADERS, kinds, _WHAT_IF_DROPS, strict=True)
    )
    sizes = attrgetter(
        "reserved_peak_bytes",
        "allocated_peak_bytes",
        "reserve_overhead_bytes",
        "segment_allocations",
        "largest_free_block_bytes",
    )
    recorded = len(snap.ooms)
    rows = tuple(
        doc.Row((doc.name(item.settings), *sizes(item), doc.Value(_oom_text(item, recorded), _ooms(item))))
        for item in snap.what_if
    )
    return doc.Table(columns, rows, name="what-if")


def snapshot_section(report: Report) -> doc.Section | None:
    """Each snapshot's details (the reserve, trace, fragmentation, model check, out-of-memory
    events) and its what-if replays; None without a snapshot."""
    blocks: list = []
    for run in report.ok_runs():
        if run.snapshot is None:
            continue
        facts = doc.Items(tuple(doc.words(line) for line in snapshot_lines(run)), nested=True)
        blocks += [doc.Heading(doc.words(f"{run.label}, snapshot")), facts]
        if run.snapshot.what_if:
            blocks += [doc.Heading(doc.words(what_if_title(run)), level=4), what_if_table(run)]
    return doc.Section("snapshot", "Snapshots", tuple(blocks)) if blocks else None


def sites_section(report: Report, top: int = TOP_SITES) -> doc.Section | None:
    """The ``top`` allocation sites live at each snapshot's peak, largest first; None without a
    snapshot."""
    snapshots = [run for run in report.ok_runs() if run.snapshot is not None]
    if not snapshots:
        return None
    blocks: list = []
    for run in snapshots:
        rows = site_rows(run, top)
        if not rows:
            continue
        largest = max(row.bytes for row in rows) or 1
        total = (run.snapshot.peak_requested_bytes if run.snapshot is not None else 0) or 1
        columns = (
            doc.Column("site", doc.NAME, width=30),
            doc.Column("bytes", doc.SIZE),
            doc.Column("of peak", doc.NUMBER),
            doc.Column("blocks", doc.COUNT, drop=1),
            doc.Column("", doc.BAR),
        )
        cells = (
            (
                doc.name(row.site),
                row.bytes,
                doc.Value(row.share, row.bytes / total),
                row.count,
                row.bytes / largest,
            )
            for row in rows
        )
        table = doc.Table(columns, tuple(doc.Row(c) for c in cells), name="sites", sortable=True)
        blocks += [doc.Heading(doc.words(sites_title(run, top)), level=4), table]
    if not blocks:
        empty = (
            "No allocation was live at a peak above the start (a snapshot without history: "
            "torch.cuda.memory._record_memory_history records it)."
        )
        blocks.append(doc.Paragraph(doc.words(empty), "empty", purpose=doc.WHY_EMPTY))
    return doc.Section("sites", "Allocation sites at the peak", tuple(blocks))
