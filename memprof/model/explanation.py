"""What an explained run says about its peak: the values :mod:`memprof.analysis.attribution`
computes and a report stores (what is live at the peak, the module table, each call's numbers,
the kernels of compiled code), with their part of the JSON contract (:mod:`memprof.core.fields`).

Pure and light: no numpy, no torch; pandas only to build a DataFrame on request. A saved
report loads these without either.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass
from dataclasses import fields as dataclass_fields
from functools import cached_property
from typing import TYPE_CHECKING

from memprof.core import fields

if TYPE_CHECKING:
    import pandas as pd


class Category(str, enum.Enum):
    """What live bytes are, in the order reports show them; each with its colour (the same in
    every chart, table and icicle) and what it means (docs/concepts/at-peak.md says more).

    When a storage is several things (a parameter that is also an argument), the first of
    parameter, gradient, optimizer state, input, other state, activation decides."""

    PARAMETER = "parameter"
    GRADIENT = "gradient"
    OPTIMIZER_STATE = "optimizer_state"
    INPUT = "input"
    ACTIVATION = "activation"
    TEMPORARY = "temporary"
    WORKSPACE = "workspace"
    OTHER = "other"

    @property
    def colour(self) -> str:
        return _COLOURS[self]

    @property
    def help(self) -> str:
        return _HELP[self]


_COLOURS = {
    Category.PARAMETER: "#4e79a7",
    Category.GRADIENT: "#f28e2b",
    Category.OPTIMIZER_STATE: "#e15759",
    Category.INPUT: "#76b7b2",
    Category.ACTIVATION: "#59a14f",
    Category.TEMPORARY: "#edc948",
    Category.WORKSPACE: "#b07aa1",
    Category.OTHER: "#9c755f",
}
_HELP = {
    Category.PARAMETER: "parameters of the model(s) found in the arguments, bound object or module globals",
    Category.GRADIENT: "the .grad of those parameters",
    Category.OPTIMIZER_STATE: "tensors an optimizer keeps in its state (AdamW's exp_avg, exp_avg_sq, step)",
    Category.INPUT: "other tensors reachable from the arguments",
    Category.ACTIVATION: "tensors autograd saved for backward (or rebuilt for it by a recompute)",
    Category.TEMPORARY: "made during the call by an op (one of its outputs), none of the above",
    Category.WORKSPACE: "allocated inside an op and never returned by it: not a tensor of the program",
    Category.OTHER: "module buffers, tensors the target module's globals hold, allocations outside any "
    "op, and what memprof cannot attribute (each such line with its reason)",
}

CATEGORIES = tuple(category.value for category in Category)
"""The categories' names, in the order reports show them (:class:`Category`)."""


@dataclass(frozen=True)
class AtPeakEntry:
    """Storages live at the peak that share category, module, phase, sources, op, shape, dtype
    and ``before_call``: ``count`` of them, ``bytes`` in all. ``phase`` is empty for state made
    before the call (``forward``, ``backward``, ``optimizer`` or ``recompute``: forward work
    done again in backward by activation checkpointing). ``source`` is ``file.py:LINE`` of the
    statement that made them, the innermost one in the user's code or an installed library's
    (``transformers/models/gpt2/modeling_gpt2.py:NNN``), and ``source_text`` that statement;
    ``user_source`` and ``user_source_text`` the innermost statement of the user's own code
    that led there, when that is another statement (empty otherwise). ``role``: what a sharded
    job's machinery holds them as (:data:`ROLES`; empty otherwise). ``graph``: in a compiled
    run, the compiled graph that allocated them: Dynamo's id of it (``frame/compile``, as its
    ``Torch-Compiled Region`` profiler range says) and the function it compiled, with where it
    begins (``0/0 step (train.py:12)``; the part of a function after a graph break is
    ``torch_dynamo_resume_in_step_at_27``), or ``eager, between graphs`` for what ran outside
    every graph (a graph break's statement); empty for state made before the call and in eager
    runs. Not part of the entry's key (:data:`ENTRY_KEY`): a diff of two compiled runs matches
    entries whatever their graphs' ids."""

    bytes: int = fields.size()
    count: int = fields.count()
    category: str = fields.text(default="other", choices=CATEGORIES)
    module: str = fields.text(default="")
    phase: str = fields.text(default="")
    source: str = fields.text(default="")
    source_text: str = fields.text(default="")
    op: str = fields.text(default="")
    shape: str = fields.text(default="")
    dtype: str = fields.text(default="")
    before_call: bool = fields.flag()
    user_source: str = fields.text(default="", omit=lambda entry: not entry.user_source)
    user_source_text: str = fields.text(default="", omit=lambda entry: not entry.user_source_text)
    role: str = fields.text(default="", omit=lambda entry: not entry.role)
    graph: str = fields.text(default="", omit=lambda entry: not entry.graph)


ROLES = {
    "fsdp_unsharded_parameter": "FSDP unsharded",
    "fsdp_all_gather_buffer": "FSDP all-gather",
    "fsdp_unsharded_gradient": "FSDP unsharded",
    "fsdp_reduce_scatter_buffer": "FSDP reduce-scatter",
    "ddp_gradient_bucket": "DDP bucket",
}
"""What the distributed machinery holds a storage as (an entry's ``role``), and its short
name in tables: ``fsdp_unsharded_parameter``, a parameter FSDP gathered whole for forward or
backward (category parameter); ``fsdp_all_gather_buffer``, FSDP's flat buffer the shards are
gathered into before they are copied out per parameter (other); ``fsdp_unsharded_gradient``,
the gradient of a gathered parameter, before FSDP reduce-scatters it into the shard's
(gradient); ``fsdp_reduce_scatter_buffer``, FSDP's flat buffer of those gradients sent to the
reduce-scatter (gradient); ``ddp_gradient_bucket``, a gradient bucket DDP's C++ reducer holds
(other; counted from DDP's own figures of its bucket sizes: no tensor reaches it)."""


@dataclass(frozen=True)
class Unattributed:
    """Bytes live at the peak that memprof cannot attribute, and why. They are counted in
    ``by_category["other"]``."""

    bytes: int = fields.size()
    count: int = fields.count()
    reason: str = fields.text(default="")
    before_call: bool = fields.flag()

    def as_entry(self) -> AtPeakEntry:
        """These bytes as an entry of category ``other`` that says nothing else of them."""
        return AtPeakEntry(self.bytes, self.count, before_call=self.before_call)


EAGER_GRAPH = "eager, between graphs"
"""An entry's ``graph`` when it was allocated during a compiled run's call outside every graph."""

ENTRY_KEY = tuple(f.name for f in dataclass_fields(AtPeakEntry) if f.name not in ("bytes", "count", "graph"))
"""What identifies an entry live at the peak: its fields but its bytes, count and graph. The one
declaration of it: the rows of an at-peak diff (:mod:`memprof.model.peak_diff`), the gate's
contributors and :data:`AT_PEAK_COLUMNS` each hold a part of it."""

LINE_TEXTS = ("source_text", "user_source", "user_source_text")
"""The fields of :data:`ENTRY_KEY` that describe an entry's line rather than identify it: a
diff's row groups entries without them and takes them from its largest entry (a line's text,
and the user's line that led there, may differ between two runs of the same line)."""

_ROLE = [f.name for f in dataclass_fields(AtPeakEntry)].index("role")

AT_PEAK_COLUMNS = ("bytes", "count", *(name for name in ENTRY_KEY if name != "role"), "reason")
"""Columns of :attr:`AtPeak.frame` (and of the at-peak CSV, after its ``run`` column)."""


@dataclass(frozen=True)
class AtPeak:
    """Everything live at the peak moment: ``sum(by_category.values())`` equals
    ``footprint_bytes``, and so does the sum of ``entries`` and ``unattributed``; the entries
    and unattributed lines made during the call add up to ``peak_bytes +
    freed_before_peak_bytes`` (blocks live at the call's start and freed before its peak).
    Those are the run's footprint and peak when the explaining call reproduced the measured
    run (a note says when it did not).

    ``frame``: one row per entry, then one per unattributed line (its ``reason`` set, category
    ``other``): every byte of the footprint, as a DataFrame."""

    by_category: Mapping[str, int] = fields.mapping(fields.SIZE)
    entries: tuple[AtPeakEntry, ...] = fields.items(AtPeakEntry)
    unattributed: tuple[Unattributed, ...] = fields.items(Unattributed)
    footprint_bytes: int = fields.size()
    peak_bytes: int = fields.size()
    freed_before_peak_bytes: int = fields.size()

    def rows(self) -> list[tuple[object, ...]]:
        """The entries, then the unattributed lines, as tuples of :data:`AT_PEAK_COLUMNS`."""
        # An entry's role (sharded jobs) is in the JSON and the tables, not in these columns.
        rows: list[tuple[object, ...]] = [(*astuple(entry)[:_ROLE], "") for entry in self.entries]
        rows += [(*astuple(u.as_entry())[:_ROLE], u.reason) for u in self.unattributed]
        return rows

    @cached_property
    def frame(self) -> pd.DataFrame:
        """What is live at the peak as a DataFrame (columns :data:`AT_PEAK_COLUMNS`, int64
        bytes and counts), largest entry first, then what could not be attributed."""
        import pandas as pd

        frame = pd.DataFrame(self.rows(), columns=list(AT_PEAK_COLUMNS))
        for column in ("bytes", "count"):
            frame[column] = frame[column].astype("int64")
        frame["before_call"] = frame["before_call"].astype(bool)
        return frame


@dataclass(frozen=True)
class ModuleStats:
    """One module, in one phase (forward, backward, or recompute: its forward run again in
    backward by activation checkpointing), during the peak call. Bytes include its submodules'.

    ``peak_bytes``: highest live bytes inside it above live at its start (highest over its
    calls; in backward, over the span from its first to its last backward op). ``allocated_bytes``:
    bytes allocated (forward: inside its calls; backward: by the backward ops of its autograd
    nodes). ``at_peak_bytes``: bytes live at the run's peak that it created. ``module_class``:
    the module's class (``GPT2MLP``; empty in reports written before memprof stored it).
    ``parent``: the module whose call its first call ran inside (``transformer`` for
    ``transformer.h.0``; empty for an outermost call, and in reports written before memprof
    stored it)."""

    module: str = fields.text(default="")
    phase: str = fields.text(default="forward")
    calls: int = fields.count()
    peak_bytes: int = fields.size()
    allocated_bytes: int = fields.size()
    at_peak_bytes: int = fields.size()
    module_class: str = fields.text(default="", omit=lambda stats: not stats.module_class)
    parent: str = fields.text(default="", omit=lambda stats: not stats.parent)


MODULE_COLUMNS = (
    "module",
    "phase",
    "calls",
    "peak_bytes",
    "allocated_bytes",
    "at_peak_bytes",
    "module_class",
    "parent",
)
"""Columns of the module table's DataFrame (``run.modules``)."""


def modules_frame(modules: Sequence[ModuleStats]) -> pd.DataFrame:
    """The module table as a DataFrame with :data:`MODULE_COLUMNS` (int64 counts and bytes)."""
    import pandas as pd

    frame = pd.DataFrame([astuple(m) for m in modules], columns=list(MODULE_COLUMNS))
    for column in ("calls", "peak_bytes", "allocated_bytes", "at_peak_bytes"):
        frame[column] = frame[column].astype("int64")
    return frame


BY_CLASS = "class"
"""Modules grouped by their class (the alternative: by path patterns)."""


@dataclass(frozen=True)
class ModuleGroup:
    """Modules of one class (``by`` ``class``), or whose path matches one pattern (``by``
    ``pattern``), in one phase: ``group`` (the class or the pattern), ``modules`` (how many
    outermost members), their ``calls``, ``at_peak_bytes`` and ``allocated_bytes`` summed, and
    the highest ``peak_bytes`` inside any member."""

    group: str = fields.text(required=True)
    by: str = fields.text(default=BY_CLASS, choices=(BY_CLASS, "pattern"))
    phase: str = fields.text(default="forward")
    modules: int = fields.count()
    calls: int = fields.count()
    peak_bytes: int = fields.size()
    allocated_bytes: int = fields.size()
    at_peak_bytes: int = fields.size()


GROUP_COLUMNS = ("group", "by", "phase", "modules", "calls", "peak_bytes", "allocated_bytes", "at_peak_bytes")
"""Columns of :func:`groups_frame`."""


def groups_frame(groups: Sequence[ModuleGroup]) -> pd.DataFrame:
    """Groups as a DataFrame with :data:`GROUP_COLUMNS` (int64 counts and bytes)."""
    import pandas as pd

    frame = pd.DataFrame([astuple(g) for g in groups], columns=list(GROUP_COLUMNS))
    for column in ("modules", "calls", "peak_bytes", "allocated_bytes", "at_peak_bytes"):
        frame[column] = frame[column].astype("int64")
    return frame


@dataclass(frozen=True)
class KernelStats:
    """A kernel of compiled code during the peak call: ``allocated_bytes`` of the buffers it
    produces (Inductor's wrapper allocates each buffer just before the kernel that writes it),
    ``at_peak_bytes`` of those live at the peak, and the eager aten ops it replaces (from
    Inductor's provenance: the graph nodes it computes)."""

    name: str = fields.text(required=True)
    phase: str = fields.text(default="forward")
    calls: int = fields.count()
    allocated_bytes: int = fields.size()
    at_peak_bytes: int = fields.size()
    replaces: tuple[str, ...] = fields.items(fields.TEXT)


@dataclass(frozen=True)
class CallNumbers:
    """One measured call: live bytes at its start, at its highest point (footprint) and at its
    end (its result included), the peak above the start, and how much live bytes grew until the
    next call started (None for the last call)."""

    call: int = fields.count(required=True)
    live_at_start_bytes: int = fields.size()
    footprint_bytes: int = fields.size()
    peak_bytes: int = fields.size()
    live_at_end_bytes: int = fields.size()
    growth_bytes: int | None = fields.signed_size(default=None, nullable=True)


def nonzero_categories(by_category: Mapping[str, int]) -> list[tuple[str, int]]:
    """The categories holding bytes, in :data:`CATEGORIES` order (unknown names last)."""
    known = [(c, by_category[c]) for c in CATEGORIES if by_category.get(c)]
    return known + [(c, b) for c, b in by_category.items() if c not in CATEGORIES and b]
