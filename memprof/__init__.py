"""memprof: how much memory your PyTorch code needs, which op is responsible, and whether a
change (torch.compile, channels_last, mmap loading, no_grad, checkpointing) lowers it.

``import memprof`` is cheap: torch, pandas and the profiler load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memprof.core import bytecode

bytecode.install()  # before memprof's other modules load: where Python writes no bytecode

from memprof.core.version import __version__  # noqa: E402 - after the bytecode cache is in place

__all__ = [
    "Inputs",
    "Report",
    "ReportKind",
    "RunResult",
    "Variant",
    "advise",
    "analyze",
    "compare",
    "diff",
    "estimate",
    "group_modules",
    "profile",
    "profile_ranks",
    "track",
    "read_table",
    "load_report",
    "__version__",
]

if TYPE_CHECKING:
    from memprof.library.advice import advise
    from memprof.library.api import Variant, analyze, compare, estimate, group_modules, profile, track
    from memprof.library.diffing import diff
    from memprof.library.jobs import profile_ranks
    from memprof.model.kind import ReportKind
    from memprof.model.report import Report
    from memprof.model.run import RunResult
    from memprof.pipeline import load_report
    from memprof.sources.files.table import read_table
    from memprof.sources.targets.target import Inputs

_LAZY = {
    "profile": "memprof.library.api",
    "compare": "memprof.library.api",
    "analyze": "memprof.library.api",
    "estimate": "memprof.library.api",
    "group_modules": "memprof.library.api",
    "Variant": "memprof.library.api",
    "track": "memprof.library.api",
    "profile_ranks": "memprof.library.jobs",
    "advise": "memprof.library.advice",
    "diff": "memprof.library.diffing",
    "Inputs": "memprof.sources.targets.target",
    "Report": "memprof.model",
    "ReportKind": "memprof.model",
    "RunResult": "memprof.model",
    "load_report": "memprof.pipeline",
    "read_table": "memprof.sources.files.table",
}


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext memprof``: the ``%memprof`` and ``%%memprof`` magics (:mod:`memprof.frontends.ipython`)."""
    import importlib

    importlib.import_module("memprof.frontends.ipython").load_ipython_extension(ipython)


def _show_reports_in_notebooks() -> None:
    # Inside IPython (a notebook, a console), a Report displays as its HTML report: registered
    # here, by the front end, so that the report model imports no renderer.
    import sys

    if "IPython" in sys.modules:
        from memprof.frontends.display import register

        register()


_show_reports_in_notebooks()


def __getattr__(name: str) -> Any:
    # Lazy attributes keep `import memprof` (and so `memprof --help`) free of torch.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memprof' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
