"""The report model: every value a report holds, as plain frozen dataclasses whose field
declarations (:mod:`memprof.core.fields`) are the JSON contract, read and written by
:mod:`memprof.core.schema`.

The model imports nothing of memprof above the fields, the schema and the units: the analysis
makes these values, the pipeline puts them together, the renderers and the gate read them. A
saved report loads back (:func:`memprof.pipeline.load_report`) without torch or pandas;
``run.ops``, ``run.modules`` and ``report.diff.ops`` build pandas DataFrames on demand.

- :mod:`.report`: :class:`Report`; :mod:`.kind`: what a report is (:class:`ReportKind`);
- :mod:`.run`: :class:`RunResult`, one run, and a run in one line;
- :mod:`.ops`: :class:`OpStats`, per-op numbers; :mod:`.timeline`: :class:`Timeline`;
- :mod:`.explanation`: what is live at the peak (:class:`AtPeak`), modules, kernels, calls;
- :mod:`.diff`: two runs compared (:class:`RunDiff`); :mod:`.ranks`: runs of several ranks;
- :mod:`.compiled`: what torch.compile made of a compiled run (:class:`CompileSection`);
- :mod:`.estimate`: what an estimate adds (:class:`EstimateSection`, :class:`Fits`);
  :mod:`.sweep`: a sweep of one parameter;
- :mod:`.recorded`: where numbers come from (:class:`Source`) and what snapshots add;
- :mod:`.timing`: how timed calls spread; :mod:`.recipe`: how a run was made (:class:`Recipe`).
"""

from memprof.model.advice import Advice, AdviceBaseline, AdvicePlan, AdvisedTechnique
from memprof.model.compiled import CompileSection, GraphBreak, Recompile
from memprof.model.diff import OpDiff, RunDiff
from memprof.model.estimate import AllocatorReplay, EstimateSection, Fits, Guess
from memprof.model.explanation import (
    CATEGORIES,
    AtPeak,
    AtPeakEntry,
    CallNumbers,
    KernelStats,
    ModuleStats,
    Unattributed,
)
from memprof.model.kind import ReportKind
from memprof.model.ops import OP_COLUMNS, OpStats
from memprof.model.ranks import Imbalance, RankRow, RankSummary
from memprof.model.recipe import Recipe
from memprof.model.recorded import (
    AllocatorModel,
    Fragmentation,
    OomEvent,
    SnapshotSection,
    SnapshotSite,
    Source,
    SourceFile,
    WhatIf,
)
from memprof.model.report import READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION, Report
from memprof.model.run import FAILED, OK, RunResult
from memprof.model.sweep import Sweep, SweepPoint
from memprof.model.timeline import CategoryTimeline, Timeline

__all__ = [
    "CATEGORIES",
    "FAILED",
    "OK",
    "OP_COLUMNS",
    "READABLE_SCHEMA_VERSIONS",
    "SCHEMA_VERSION",
    "AllocatorModel",
    "AllocatorReplay",
    "AtPeak",
    "AtPeakEntry",
    "CallNumbers",
    "CategoryTimeline",
    "CompileSection",
    "EstimateSection",
    "Fits",
    "Fragmentation",
    "GraphBreak",
    "Guess",
    "Imbalance",
    "KernelStats",
    "ModuleStats",
    "OomEvent",
    "OpDiff",
    "OpStats",
    "RankRow",
    "Recipe",
    "RankSummary",
    "Recompile",
    "Report",
    "ReportKind",
    "RunDiff",
    "RunResult",
    "SnapshotSection",
    "SnapshotSite",
    "Source",
    "SourceFile",
    "Sweep",
    "Advice",
    "AdviceBaseline",
    "AdvicePlan",
    "AdvisedTechnique",
    "SweepPoint",
    "Timeline",
    "Unattributed",
    "WhatIf",
]
