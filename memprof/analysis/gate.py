"""The memory gate: budgets, baselines with a tolerance, and "compile must save memory".

Pure: a :class:`memprof.model.Report` and a :class:`GateConfig` in, a :class:`GateResult` out: a
value, evaluated before any output is written. No I/O, no printing, no exit; its text is the
outputs' (:mod:`memprof.outputs.gate`: the lines the commands and the pytest plugin print, and
the report's ``gate`` section). Every violation carries one line that says which run or op, its
peak, the limit and by how much, e.g.::

    eager peak 834.0 MiB exceeds baseline 795.4 MiB by 4.9% (tolerance 2%)

Run labels, op names and failure messages come from files (a trace's name, a report's ``runs``):
each line quotes them with :func:`memprof.core.text.one_line`, so that a label holding a newline
cannot print a line of its own (a forged ``memprof gate: passed``).

Verdicts depend only on the integer byte counts in the report, so the same numbers always
give the same answer (``memprof check`` on a saved report agrees with ``memprof run``).

A violation explains itself where the runs were explained (:class:`Explanation`): growth over
a baseline, or of the compiled peak over the eager one, lists what grew at the peak (the
at-peak diff's summary and its largest contributors by category, module, phase, line and op,
from the baseline's own at-peak entries); a budget lists the largest entries at the peak. A
baseline saved without them says so, and the gate stands on the numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from memprof.core.errors import InputError, UsageError, brief, param, param_if_any
from memprof.core.names import COMPILED_REGION, is_compiled_wrapper, normalize_name
from memprof.core.text import QUOTE_LIMIT, one_line
from memprof.core.units import format_bytes, parse_size

if TYPE_CHECKING:
    from memprof.model.explanation import AtPeakEntry
    from memprof.model.peak_diff import EntryDelta
    from memprof.model.report import Report
    from memprof.model.run import RunResult

DEFAULT_TOLERANCE = 0.05

BUDGET_EXAMPLE = "'800MB' (every run) or 'eager=1GB,compile=100MB'"

# The kinds of violation, in the order the summary lists them.
KINDS = ("budget", "baseline", "compile", "failed")


@dataclass(frozen=True)
class Budgets:
    """Peak limits in bytes: ``default`` for every run not named in ``per_label``."""

    default: int | None = None
    per_label: dict[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.default is not None or bool(self.per_label)

    def limit(self, label: str) -> int | None:
        return self.per_label.get(label, self.default)

    def check_labels(self, labels: list[str]) -> None:
        """A budget naming a run that does not exist is a typo, not a pass: exit 2."""
        unknown = [label for label in self.per_label if label not in labels]
        if unknown:
            raise UsageError(
                f"{param('budget')} names {_listed(unknown)}, but the runs are {_listed(labels)}; "
                f"e.g. {param('budget', f'{one_line(labels[0])}=800MB')}"
            )


def parse_budget(text: str | None) -> Budgets:
    """``800MB`` (every run) or ``eager=1GB,compile=100MB``; a bare size among labelled ones is
    the limit of every run not named. Bad syntax or size -> :class:`UsageError` (exit 2)."""
    if text is None:
        return Budgets()
    budget = param("budget")
    default: int | None = None
    per_label: dict[str, int] = {}
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        raise UsageError(f"{budget} is empty; write it like {BUDGET_EXAMPLE}")
    for part in parts:
        label, sep, size = part.partition("=")
        label = label.strip()
        if not sep and default is not None:
            raise UsageError(f"{budget} {text!r} gives two sizes for every run; keep one")
        if sep and not label:
            raise UsageError(f"{budget} {text!r}: {part!r} has no run label before '='")
        if sep and label in per_label:
            raise UsageError(f"{budget} {text!r} names {label!r} twice")
        try:
            limit = parse_size(size if sep else part)
        except UsageError as error:
            raise UsageError(
                f"{budget} {text!r}: {error.message}; per run: 'eager=1GB,compile=100MB'"
            ) from None
        if sep:
            per_label[label] = limit
        else:
            default = limit
    return Budgets(default=default, per_label=per_label)


@dataclass(frozen=True)
class GateConfig:
    """What to check. ``tolerance`` is a fraction (0.05 = 5%) allowed above the baseline, and
    allowed for the compiled peak above the eager one with ``require_compile_saves``."""

    budgets: Budgets = field(default_factory=Budgets)
    baseline: Report | None = None
    tolerance: float = DEFAULT_TOLERANCE
    per_op: bool = False
    require_compile_saves: bool = False
    strict_env: bool = False

    @property
    def active(self) -> bool:
        """Whether anything is checked at all."""
        return bool(self.budgets) or self.baseline is not None or self.require_compile_saves


@dataclass(frozen=True)
class Contributor:
    """One row of an explanation: ``bytes`` (a change when ``signed``) and ``what`` holds them,
    an entry live at the peak or a row of the at-peak diff: its category, module and phase,
    line (with its text) and op (each empty when unknown)."""

    bytes: int
    signed: bool
    what: AtPeakEntry | EntryDelta


@dataclass(frozen=True)
class Explanation:
    """What a violation's run holds at its peak, or what grew there: a ``heading`` (what the
    rows are, or why there are none), its largest ``rows``, and ``more`` (what is left out)."""

    heading: str
    rows: tuple[Contributor, ...] = ()
    more: str = ""


@dataclass(frozen=True)
class Violation:
    """One failed check. ``kind`` is budget, baseline, compile or failed; ``subject`` the run
    (``eager``) or op (``eager op aten::sum``); ``line`` the message; ``explanation`` what the
    run holds at its peak or what grew there (None for ops and failed runs)."""

    kind: str
    subject: str
    peak_bytes: int
    limit_bytes: int
    line: str
    explanation: Explanation | None = None


@dataclass
class GateResult:
    """Violations (the gate fails when there is any), improvements beyond the tolerance,
    warnings (e.g. a baseline from another device) and how many checks were made."""

    violations: list[Violation] = field(default_factory=list)
    improvements: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checks: int = 0

    @property
    def passed(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        """``memprof gate: passed (3 checks)`` or ``memprof gate: FAILED, 2 violations (budget 1,
        baseline 1)``."""
        if self.passed:
            return f"memprof gate: passed ({_plural(self.checks, 'check')})"
        counts = {kind: sum(v.kind == kind for v in self.violations) for kind in KINDS}
        detail = ", ".join(f"{kind} {n}" for kind, n in counts.items() if n)
        return f"memprof gate: FAILED, {_plural(len(self.violations), 'violation')} ({detail})"


def _quoted(label: str) -> str:
    """``'eager'``: a label in quotes, cut short (it comes from a file)."""
    return brief(label, QUOTE_LIMIT)


def _listed(labels: list[str], most: int = 10) -> str:
    """``'eager', 'compile'``: labels quoted short, the first ``most`` of them."""
    shown = ", ".join(_quoted(label) for label in labels[:most])
    return shown + (f" (and {len(labels) - most} more)" if len(labels) > most else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def format_tolerance(tolerance: float) -> str:
    """``0.02`` -> ``2%``, ``0.005`` -> ``0.5%``."""
    return f"{tolerance * 100:g}%"


def _sizes(peak: int, limit: int) -> tuple[str, str]:
    """Both sizes in MiB style, or in exact bytes when the rounding would print them the same
    (``2.0 MiB exceeds budget 2.0 MiB`` says nothing)."""
    a, b = format_bytes(peak), format_bytes(limit)
    if a == b:
        return f"{peak:,} B", f"{limit:,} B"
    return a, b


def _by(peak: int, limit: int, tolerance: float | None = None) -> str:
    """`` by 4.9%``: how far above the limit. One decimal, or two when one would print the
    tolerance itself (5.04% over a 5% tolerance must not read as "by 5.0% (tolerance 5%)")."""
    if limit <= 0:
        return ""
    growth = (peak - limit) / limit * 100
    text = f"{growth:.1f}"
    if tolerance is not None and float(text) <= tolerance * 100:
        text = f"{growth:.2f}"
    return f" by {text}%"


def environment_mismatch(report: Report, baseline: Report) -> str | None:
    """Why the baseline's numbers may not be comparable with the report's, or None."""
    differences = []
    if report.device != baseline.device:
        differences.append(f"device {one_line(baseline.device)} vs {one_line(report.device)}")
    base_torch = baseline.environment.get("torch")
    torch = report.environment.get("torch")
    if base_torch and torch and base_torch != torch:
        differences.append(f"torch {one_line(base_torch)} vs {one_line(torch)}")
    if not differences:
        return None
    return f"the baseline was measured on a different setup ({'; '.join(differences)})"


def evaluate(report: Report, config: GateConfig) -> GateResult:
    """Check ``report`` against ``config``.

    Raises :class:`UsageError` when a budget names a run the report lacks or
    ``require_compile_saves`` finds no eager and compiled run, and :class:`InputError` on an
    environment mismatch with ``strict_env`` (all exit 2: the gate could not be applied).
    """
    result = GateResult()
    labels = list(report.runs)
    config.budgets.check_labels(labels)
    pairs = _compile_pairs(report) if config.require_compile_saves else []

    for label, run in report.runs.items():
        if run.failed:
            result.violations.append(
                Violation(
                    "failed",
                    label,
                    0,
                    0,
                    f"{one_line(label)} run failed, its memory is unknown: "
                    f"{one_line(run.failed, 2 * QUOTE_LIMIT)}",
                )
            )
    ok = {label: run for label, run in report.runs.items() if not run.failed}

    for label, run in ok.items():
        limit = config.budgets.limit(label)
        if limit is None:
            continue
        result.checks += 1
        if run.peak_bytes > limit:
            peak, limit_text = _sizes(run.peak_bytes, limit)
            line = f"{one_line(label)} peak {peak} exceeds budget {limit_text}{_by(run.peak_bytes, limit)}"
            result.violations.append(
                Violation("budget", label, run.peak_bytes, limit, line, largest_at_peak(run))
            )

    if config.baseline is not None:
        _check_baseline(report, ok, config, result)

    for eager, compiled in pairs:
        if eager.failed or compiled.failed:
            continue
        result.checks += 1
        if grew_beyond(compiled.peak_bytes, eager.peak_bytes, config.tolerance):
            by = _by(compiled.peak_bytes, eager.peak_bytes, config.tolerance)
            compiled_text, eager_text = _sizes(compiled.peak_bytes, eager.peak_bytes)
            line = (
                f"{one_line(compiled.label)} peak {compiled_text} exceeds {one_line(eager.label)} peak "
                f"{eager_text}{by}"
                f" (tolerance {format_tolerance(config.tolerance)}): torch.compile does not save memory"
            )
            explanation = growth(eager, compiled, (eager.label, compiled.label), whose="run")
            result.violations.append(
                Violation("compile", compiled.label, compiled.peak_bytes, eager.peak_bytes, line, explanation)
            )
    return result


def _compile_pairs(report: Report) -> list[tuple[RunResult, RunResult]]:
    """The eager and the compiled run to compare: the first of each, or of each rank's runs in
    a report of several ranks."""
    by_rank: dict[int | None, list[RunResult]] = {}
    for run in report.runs.values():
        by_rank.setdefault(run.rank, []).append(run)
    pairs = []
    for runs in by_rank.values():
        eager = next((run for run in runs if run.mode == "eager"), None)
        compiled = next((run for run in runs if run.mode == "compile"), None)
        if eager is not None and compiled is not None:
            pairs.append((eager, compiled))
    if not pairs:
        shown = list(report.runs.items())[:10]
        modes = ", ".join(f"{one_line(name)} ({one_line(each.mode or each.source)})" for name, each in shown)
        raise UsageError(
            f"{param('require_compile_saves', True)} needs an eager and a compiled run, the report has "
            f"{modes}; profile both, e.g. `{param('mode', 'both')}`"
        )
    return pairs


def _check_baseline(report: Report, ok: dict[str, RunResult], config: GateConfig, result: GateResult) -> None:
    baseline = config.baseline
    assert baseline is not None
    mismatch = environment_mismatch(report, baseline)
    if mismatch is not None:
        if config.strict_env:
            raise InputError(f"{mismatch}; record a new baseline there, or drop {param('strict_env', True)}")
        strict = param_if_any("strict_env", True)
        result.warnings.append(
            f"{mismatch}; comparing anyway" + (f" ({strict} makes this an error)" if strict else "")
        )
    tolerance = config.tolerance
    for label in baseline.runs:
        if label not in report.runs:
            result.warnings.append(f"baseline run {_quoted(label)} is not in this report; not compared")
    for label, run in ok.items():
        base = baseline.runs.get(label)
        if base is None or base.failed:
            result.warnings.append(f"run {_quoted(label)} has no baseline; not compared")
            continue
        shown = one_line(label)
        _compare(
            result,
            f"{shown} peak",
            run.peak_bytes,
            base.peak_bytes,
            tolerance,
            partial(growth, base, run, ("the baseline", label)),
        )
        if config.per_op:
            base_ops = _op_peaks(base)
            if _kernels_uncounted(base) != _kernels_uncounted(run):
                # Its kernels' rows (0 B) and the rows around them are not comparable with rows
                # that own their buffers; the run's peak is still compared.
                older, fix = (
                    ("baseline", "save a new baseline")
                    if _kernels_uncounted(base)
                    else ("report", "profile again")
                )
                result.warnings.append(
                    f"the {older}'s run {_quoted(label)} was saved before memprof gave compiled kernels the "
                    f"buffers they produce: its ops are not compared one by one; {fix} to compare them"
                )
                continue
            for name, peak in _op_peaks(run).items():
                # An op the baseline lacks has nothing to compare with; the run's peak covers it.
                if name in base_ops:
                    _compare(result, f"{shown} op {one_line(name)} peak", peak, base_ops[name], tolerance)


def _kernels_uncounted(run: RunResult) -> bool:
    """Whether ``run`` (saved by an older memprof) counted its kernels' buffers on the wrapper:
    its op rows hold torch.compile's wrapper ranges one by one, not the one row memprof now
    makes of them. Such a kernel row's peak (0 B) is not comparable with one that owns its
    buffers."""
    names = {op.name for op in run.op_stats}
    return COMPILED_REGION not in names and any(is_compiled_wrapper(name) for name in names)


def _op_peaks(run: RunResult) -> dict[str, int]:
    """Peak per op, names normalised (compiled graph hashes and region ids differ per build)."""
    peaks: dict[str, int] = {}
    for op in run.op_stats:
        key = normalize_name(op.name)
        peaks[key] = max(peaks.get(key, 0), op.peak_bytes)
    return peaks


# Tolerances are compared in integer millionths: exact, so a peak exactly 5% above its baseline
# passes a 5% tolerance on every machine (1.05 * 2_000_000 is not exact in floating point).
_PARTS = 1_000_000


def grew_beyond(peak: int, base: int, tolerance: float, *, relative_to: int | None = None) -> bool:
    """Whether ``peak - base`` is more than ``tolerance`` of ``relative_to`` (default ``base``)."""
    reference = base if relative_to is None else relative_to
    return (peak - base) * _PARTS > round(tolerance * _PARTS) * reference


def _compare(
    result: GateResult,
    what: str,
    peak: int,
    base: int,
    tolerance: float,
    explain: Callable[[], Explanation | None] | None = None,
) -> None:
    result.checks += 1
    tol = format_tolerance(tolerance)
    if grew_beyond(peak, base, tolerance):
        if base > 0:
            by = _by(peak, base, tolerance)
        else:
            by = f" by {format_bytes(peak)}"
        peak_text, base_text = _sizes(peak, base)
        line = f"{what} {peak_text} exceeds baseline {base_text}{by} (tolerance {tol})"
        explanation = explain() if explain is not None else None
        result.violations.append(
            Violation("baseline", what.removesuffix(" peak"), peak, base, line, explanation)
        )
    elif grew_beyond(base, peak, tolerance, relative_to=base):
        drop = (base - peak) / base * 100
        peak_text, base_text = _sizes(peak, base)
        result.improvements.append(
            f"{what} {peak_text} is {drop:.1f}% below baseline {base_text}; "
            "save a new baseline to keep the gain"
        )


# ---- explanations -------------------------------------------------------------------------------

EXPLAINED_ROWS = 5
"""How many contributors (or entries at the peak) a violation lists."""


def largest_at_peak(run: RunResult) -> Explanation | None:
    """The largest entries live at ``run``'s peak (None when it was not explained)."""
    at_peak = run.at_peak
    if at_peak is None:
        return None
    rows = tuple(Contributor(e.bytes, False, e) for e in at_peak.entries[:EXPLAINED_ROWS])
    rest = len(at_peak.entries[EXPLAINED_ROWS:]) + len(at_peak.unattributed)
    left = sum(e.bytes for e in at_peak.entries[EXPLAINED_ROWS:]) + sum(u.bytes for u in at_peak.unattributed)
    entries = "entry" if rest == 1 else "entries"
    more = f"... {rest} more {entries}, {format_bytes(left)} in all" if rest else ""
    heading = f"largest at the peak (footprint {format_bytes(at_peak.footprint_bytes)}):"
    return Explanation(heading, rows, more)


def growth(
    base: RunResult, run: RunResult, labels: tuple[str, str], *, whose: str = "the baseline's run"
) -> Explanation:
    """What grew between ``base``'s peak and ``run``'s: the at-peak diff's summary and its
    largest contributors; where either was not explained, why the gate stands on the numbers."""
    from memprof.analysis.peak_diff import contributors, diff_at_peak

    if base.at_peak is None:
        again = "save a new baseline" if whose != "run" else "profile it again"
        return Explanation(
            f"{whose} {_quoted(base.label)} has no at-peak entries (profiled without explaining, or saved by "
            f"an older memprof): gated on the numbers only; {again} to see what grew"
        )
    if run.at_peak is None:
        return Explanation(f"run {_quoted(run.label)} was not explained: gated on the numbers only")
    diff = diff_at_peak(base, run, labels)
    assert diff is not None and base.at_peak is not None and run.at_peak is not None
    grew = [row for row in contributors(base.at_peak, run.at_peak) if row.delta_bytes > 0]
    rows = tuple(Contributor(r.delta_bytes, True, r) for r in grew[:EXPLAINED_ROWS])
    rest = grew[EXPLAINED_ROWS:]
    grown = format_bytes(sum(r.delta_bytes for r in rest), signed=True)
    rows_word = "row" if len(rest) == 1 else "rows"
    more = f"... {len(rest)} more {rows_word} that grew, {grown} in all" if rest else ""
    return Explanation(f"what grew: {diff.summary}", rows, more)
