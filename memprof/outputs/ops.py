"""The ops and fused kernels every format shows (the rows chosen by :mod:`memprof.outputs.rows`):
each op table (a comparison's, both runs side by side, or a run's) with what it leaves out, and
each compiled run's fused kernels with the eager ops they replaced and those ops' peaks."""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING

from memprof.core.units import format_bytes, format_ms
from memprof.model.kind import ReportKind
from memprof.outputs import document as doc
from memprof.outputs.estimate import chosen_run
from memprof.outputs.rows import DiffTable, FusedRow, RunTable, fused_count, fused_rows, op_tables, run_table

if TYPE_CHECKING:
    from memprof.model.diff import OpDiff, RunDiff
    from memprof.outputs.context import Context

_TERMINAL = frozenset({doc.TERMINAL})
_PAGES = frozenset({doc.MARKDOWN, doc.HTML})

OPS_HELP = (
    "Click a column header to sort (again to reverse). peak: the most live bytes above the op's start "
    "while it ran (its children included); self: net bytes the op itself left allocated (negative when "
    "it freed); allocated: all bytes it allocated."
)
RECORDED_OPS_HELP = (
    "Ops of each device's memory events, matched by time (a snapshot has none: its sites are above). "
    + OPS_HELP
)


def ops_section(context: Context) -> doc.Section | None:
    """The op tables: the first comparison's (in HTML, every comparison's), or each run's (of a
    sweep, the run it details; of recordings, those with ops), each cut to the format's
    ``top`` with what was left out said (or, in HTML, kept behind a toggle)."""
    limits, report, kind = context.limits, context.detail, context.kind
    tables: tuple[DiffTable | RunTable, ...]
    if kind is ReportKind.SWEEP:
        run = chosen_run(report)
        tables = (run_table(run, limits.sort, limits.top, limits.quiet),) if run is not None else ()
    else:
        tables = op_tables(
            report,
            limits.sort,
            limits.top,
            every_comparison=limits.every_comparison,
            keep_hidden=limits.quiet,
            chains=limits.chains,
        )
    blocks: list = []
    for table in tables:
        if isinstance(table, DiffTable):
            blocks += [doc.Heading(doc.words(_title(limits.top, limits.sort, table))), diff_table(table)]
        elif kind is ReportKind.RECORDED and not table.run.op_stats:
            continue
        else:
            blocks += [doc.Heading(doc.words(_title(limits.top, limits.sort, table))), run_ops_table(table)]
        if len(table.left_out):
            # The short terminal report counts what it leaves out, without naming it.
            groups = 0 if limits.short else 3
            blocks.append(doc.Paragraph(table.left_out.inline(groups), "help", purpose=doc.LEFT_OUT))
    if not blocks:
        return None
    delta = " Deltas are the later run minus the first, an absent op counting 0." if report.diffs else ""
    help_text = RECORDED_OPS_HELP if kind is ReportKind.RECORDED else OPS_HELP + delta
    blocks.append(doc.Paragraph(doc.words(help_text), "help", purpose=doc.EXPLAINS))
    return doc.Section("ops", "Ops", tuple(blocks))


def _title(top: int | None, sort: str, table: DiffTable | RunTable) -> str:
    """``Top 15 ops by peak bytes, eager vs compile``, ``Top 10 ops of eager by peak bytes``."""
    ops = f"Top {top} ops" if top is not None else "Ops"
    if isinstance(table, DiffTable):
        return f"{ops} by {sort} bytes, {table.diff.base} vs {table.diff.other}"
    return f"{ops} of {table.run.label} by {sort} bytes"


def run_ops_table(table: RunTable) -> doc.Table:
    """A run's ops: calls, peak, self, total and allocated bytes, CPU time."""
    columns = (
        doc.Column("op", doc.NAME),
        doc.Column("calls", doc.COUNT, drop=3),
        doc.Column("peak", doc.SIZE, strong=True),
        doc.Column("self", doc.SIZE, signed=True),
        doc.Column("total", doc.SIZE, signed=True, drop=4, secondary=True),
        doc.Column("allocated", doc.SIZE, drop=1),
        doc.Column("cpu self", doc.NUMBER, detail=True),
        doc.Column("cpu time", doc.NUMBER, drop=2, full="cpu total", secondary=True),
    )
    rows = tuple(
        doc.Row(
            (doc.name(op.name), *_RUN_FIGURES(op), _ms(op.self_us), _ms(op.total_us)),
            hidden=table.hidden.get(op.name, ""),
        )
        for op in table.rows
    )
    return doc.Table(columns, rows, name="ops", sortable=True, filter=True, data=(("run", table.run.label),))


_RUN_FIGURES = attrgetter("calls", "peak_bytes", "self_bytes", "total_bytes", "allocated_bytes")


def _ms(us: float) -> doc.Value:
    return doc.Value(format_ms(us / 1000), None if us != us else round(us, 3))


def diff_table(table: DiffTable) -> doc.Table:
    """A comparison's ops: each run's peak, the delta, each run's self and allocated bytes, and
    what explains the row (what a kernel fuses, what an op was fused into, where it ran)."""
    diff = table.diff
    a, b = diff.base, diff.other
    columns = (
        doc.Column("op", doc.NAME),
        doc.Column(f"peak {a}", doc.SIZE, label=True),
        doc.Column(f"peak {b}", doc.SIZE, label=True),
        doc.Column("delta", doc.SIZE, signed=True, delta=True, full="peak delta"),
        doc.Column(f"self {a}", doc.SIZE, signed=True, label=True, drop=1, secondary=True),
        doc.Column(f"self {b}", doc.SIZE, signed=True, label=True, drop=1, secondary=True),
        doc.Column(f"allocated {a}", doc.SIZE, label=True, detail=True),
        doc.Column(f"allocated {b}", doc.SIZE, label=True, detail=True),
        doc.Column("note", doc.NOTE),
    )
    rows = tuple(
        doc.Row(
            (
                doc.name(op.name),
                _side(op.base, "peak_bytes"),
                _side(op.other, "peak_bytes"),
                op.peak_bytes_delta,
                _side(op.base, "self_bytes"),
                _side(op.other, "self_bytes"),
                _side(op.base, "allocated_bytes"),
                _side(op.other, "allocated_bytes"),
                _chained(table.chains.get(op.name, ""), note(diff, op)),
            ),
            hidden=table.hidden.get(op.name, ""),
        )
        for op in table.rows
    )
    return doc.Table(columns, rows, name="ops", sortable=True, filter=True, data=(("base", a), ("other", b)))


def _side(stats: object, column: str) -> int | None:
    return None if stats is None else int(getattr(stats, column))


def _chained(chain: str, said: doc.Listing | doc.Inline) -> doc.Listing | doc.Inline:
    """A wrapper's chain (``-> aten::matmul -> aten::mm``, shown with ``chains``) before its note."""
    if not chain:
        return said
    if isinstance(said, doc.Listing):
        said = said.inline()
    return doc.join(chain, "; " if said else "", said)


FOLDED = 6
"""The terminal names this many of the ops a fused kernel fuses, then how many more (and the
kernel an op was fused into, or how many): Markdown and HTML list them all."""


def note(diff: RunDiff, op: OpDiff) -> doc.Listing | doc.Inline:
    """What explains a comparison's row: ``fuses abs, sub`` for a fused kernel, ``fused into
    <kernel>`` for an op a kernel replaced, else ``eager only`` / ``compile only`` (nothing when
    in both)."""
    if op.fused_ops:
        return doc.Listing(
            "fuses ", tuple(doc.name(part.removeprefix("aten::")) for part in op.fused_ops), short=FOLDED
        )
    if op.fused_into:
        kernels = tuple(doc.name(kernel) for kernel in op.fused_into)
        return doc.Listing("fused into ", kernels, noun="kernels", short=0)
    return doc.words(diff.label(op.presence)) if op.presence != "both" else ()


def fused_section(context: Context) -> doc.Section | None:
    """The fused kernels of the compiled runs, most memory first: each kernel with its own peak
    and the ops it replaced with their peaks in the base run. The terminal groups them by run,
    the three largest ops of each kernel first; Markdown and HTML list them in one table."""
    report, limits = context.detail, context.limits
    if limits.short:
        return None  # the short terminal report: the op rows say what was fused
    rows = fused_rows(report, limits.fused)
    blocks: list = []
    for run, base in dict.fromkeys((row.run, row.base) for row in rows):
        title = f"Fused kernels of {run}, and the {base} ops each replaced (their peak in {base})"
        kernels = (
            doc.Column("kernel", doc.NAME, width=30),
            doc.Column("peak", doc.SIZE),
            doc.Column("replaced", doc.NOTE),
        )
        table = tuple(
            doc.Row((doc.name(row.kernel), row.peak_bytes, _largest(row)))
            for row in rows
            if (row.run, row.base) == (run, base)
        )
        blocks += [
            doc.Heading(doc.words(title), only=_TERMINAL),
            doc.Table(kernels, table, name="fused", only=_TERMINAL),
        ]
    if rows:
        columns = (
            doc.Column("run", doc.LABEL),
            doc.Column("fused kernel", doc.NAME),
            doc.Column("kernel peak", doc.SIZE),
            doc.Column(
                "aten ops it replaced", doc.NOTE, full="aten ops it replaced (their peak in the base run)"
            ),
        )
        table = tuple(
            doc.Row((row.run, doc.name(row.kernel), row.peak_bytes, _replaced(row))) for row in rows
        )
        blocks.append(doc.Table(columns, table, name="fused", only=_PAGES))
    more = fused_count(report) - len(rows)
    if more > 0:
        text = f"and {more} more fused kernels (the HTML and JSON reports list them all)"
        blocks.append(doc.Paragraph(doc.words(text), "help", purpose=doc.LEFT_OUT))
    if not blocks and report.diffs and any(run.mode == "compile" for run in report.ok_runs()):
        blocks.append(
            doc.Paragraph(doc.words("No fused kernels in these runs."), "empty", purpose=doc.WHY_EMPTY)
        )
    return doc.Section("fused", "Fused kernels", tuple(blocks), titled=_PAGES) if blocks else None


def _largest(row: FusedRow) -> doc.Listing:
    """The ops a kernel replaced, largest peak in the base run first: ``aten::sum 490.2 MiB``."""
    ops = sorted(row.replaced, key=lambda op: -(op.base_peak_bytes or 0))
    items = tuple(
        doc.join(
            doc.name(op.op), f" {format_bytes(op.base_peak_bytes)}" if op.base_peak_bytes is not None else ""
        )
        for op in ops
    )
    return doc.Listing("", items, short=3)


def _replaced(row: FusedRow) -> doc.Listing:
    """The ops a kernel replaced, as its name lists them: ``aten::abs (64.0 MiB peak in eager)``."""
    items = tuple(
        doc.join(
            doc.name(op.op),
            f" ({format_bytes(op.base_peak_bytes)} peak in {row.base})"
            if op.base_peak_bytes is not None
            else "",
        )
        for op in row.replaced
    )
    return doc.Listing("", items)
