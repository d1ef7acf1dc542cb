"""What every format says about runs read from recordings (chrome traces, CUDA memory
snapshots), and about the device-wide numbers a live CUDA run also has: decided once here, so
the terminal, Markdown and HTML say the same sentences and show the same rows.

Nothing here renders a format; each function returns plain text or plain rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memprof.model.run import SEPARATORS, SITE, peak_line, short_site
from memprof.units import format_bytes

if TYPE_CHECKING:
    from memprof.model import OomEvent, Report, RunResult, SnapshotSite, WhatIf

TOP_SITES = 10

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


def conclusions(report: Report) -> tuple[tuple[str, ...], ...]:
    """What a recorded report's summary ends with (its verdict section in HTML and Markdown):
    each run's :func:`peak_line`, then each comparison's verdict."""
    return tuple((peak_line(run),) for run in report.ok_runs()) + tuple(
        (diff.verdict,) for diff in report.diffs
    )


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


def what_if_rows(run: RunResult) -> list[list[str]]:
    """One row per what-if replay: default settings first, then the settings asked for."""
    snap = run.snapshot
    if snap is None:
        return []
    recorded = len(snap.ooms)
    return [
        [
            item.settings,
            format_bytes(item.reserved_peak_bytes),
            format_bytes(item.allocated_peak_bytes),
            format_bytes(item.reserve_overhead_bytes),
            f"{item.segment_allocations:,}",
            format_bytes(item.largest_free_block_bytes),
            _oom_text(item, recorded),
        ]
        for item in snap.what_if
    ]


def _oom_text(item: WhatIf, recorded: int) -> str:
    if item.capacity_bytes is None:
        return "-"
    return f"{item.ooms} of {recorded} still fail ({format_bytes(item.capacity_bytes)} capacity)"


def what_if_title(run: RunResult) -> str:
    return (
        f"What if, {run.label}: its allocations replayed from an empty allocator (the recorded reserve "
        "also holds what was cached before the trace)"
    )
