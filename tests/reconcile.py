"""The reconciliation every explained run satisfies, asserted by every test that profiles.

An explained run's numbers hold together exactly: the footprint is live at the start plus the
peak; every byte live at the peak is in exactly one category, and in exactly one entry or
unattributed line; what the call made, less what it freed from before it, is the peak; the
explaining call reproduced the measured peak; the stacked timeline's highest point is the
footprint; the peak call's numbers are the run's; and the JSON keeps all of it."""

from __future__ import annotations

import json
from typing import Any

from memprof.model import Report, RunResult
from memprof.model.explanation import CATEGORIES


def assert_explained(run: RunResult, *, reproduced: bool = True) -> None:
    """``run``'s numbers and explanation add up (``reproduced``: the explaining call's peak is
    the measured one, as it is for every workload memprof's tests profile)."""
    assert run.footprint_bytes is not None and run.live_at_start_bytes is not None, run.label
    assert run.footprint_bytes - run.live_at_start_bytes == run.peak_bytes
    if run.call_numbers:
        worst = run.call_numbers[(run.peak_call or 1) - 1]
        assert (worst.peak_bytes, worst.footprint_bytes) == (run.peak_bytes, run.footprint_bytes)
        assert run.peak_bytes == max(call.peak_bytes for call in run.call_numbers)
        assert [call.call for call in run.call_numbers] == list(range(1, len(run.call_numbers) + 1))
        assert run.call_numbers[-1].growth_bytes is None
    at_peak = run.at_peak
    if at_peak is None:
        return
    assert_at_peak_adds_up(at_peak)
    other = sum(e.bytes for e in at_peak.entries if e.category == "other") + sum(
        u.bytes for u in at_peak.unattributed
    )
    assert other == at_peak.by_category["other"]
    assert [e.bytes for e in at_peak.entries] == sorted((e.bytes for e in at_peak.entries), reverse=True)
    if reproduced:
        assert (at_peak.footprint_bytes, at_peak.peak_bytes) == (run.footprint_bytes, run.peak_bytes), (
            run.notes
        )
        assert not any("the attribution pass peaked at" in note for note in run.notes)
    timeline = run.timeline.by_category
    if timeline is not None and timeline.t_ns:
        columns = len(timeline.t_ns)
        assert all(len(values) == columns for values in timeline.bytes.values())
        totals = [sum(values[i] for values in timeline.bytes.values()) for i in range(columns)]
        assert max(totals) == at_peak.footprint_bytes
    for module in run.module_stats:
        assert module.at_peak_bytes <= at_peak.footprint_bytes


def assert_at_peak_adds_up(at_peak: Any) -> None:
    """Every byte live at the peak in exactly one category, and in exactly one entry or
    unattributed line; what the call made, less what it freed from before it, is the peak.
    ``at_peak``: a report's (:class:`memprof.model.AtPeak`) or the analysis's."""
    assert set(at_peak.by_category) == set(CATEGORIES)
    assert sum(at_peak.by_category.values()) == at_peak.footprint_bytes
    listed = sum(e.bytes for e in at_peak.entries) + sum(u.bytes for u in at_peak.unattributed)
    assert listed == at_peak.footprint_bytes
    during = sum(e.bytes for e in at_peak.entries if not e.before_call) + sum(
        u.bytes for u in at_peak.unattributed if not u.before_call
    )
    assert during == at_peak.peak_bytes + at_peak.freed_before_peak_bytes


def assert_reconciled(report: Report) -> None:
    """Every successful run of ``report`` that knows its footprint adds up, and its JSON keeps
    every explained number."""
    checked = 0
    for run in report.ok_runs():
        if run.footprint_bytes is not None:
            assert_explained(run)
            checked += 1
    assert checked, "no explained run in the report"
    assert_json_keeps(report.to_dict(), report)


def assert_json_keeps(data: dict[str, Any], report: Report | None = None, *, reproduced: bool = True) -> None:
    """A report's JSON reads back with the same explanation (and adds up by itself)."""
    loaded = Report.from_dict(json.loads(json.dumps(data)))
    for label, run in loaded.runs.items():
        if run.failed or run.footprint_bytes is None:
            continue
        assert_explained(run, reproduced=reproduced)
        if report is not None:
            original = report.runs[label]
            assert (run.at_peak, run.module_stats, run.call_numbers, run.kernels) == (
                original.at_peak,
                original.module_stats,
                original.call_numbers,
                original.kernels,
            )
            assert run.timeline.by_category == original.timeline.by_category
