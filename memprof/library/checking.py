"""The memory gate on a saved report, without torch or pandas: :func:`check_report`, what
``memprof check`` calls."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from memprof.core.errors import UsageError, param

if TYPE_CHECKING:
    from memprof.analysis.gate import GateConfig, GateResult


def check_report(path: str | os.PathLike[str], gate: GateConfig) -> GateResult:
    """The verdict of ``gate`` (budgets, a baseline with a tolerance, compiled against eager)
    on the report saved at ``path``: the same as the gate of the run that wrote it. A gate
    that checks nothing is a usage error, raised before the report is read."""
    from memprof.analysis.gate import evaluate
    from memprof.pipeline import load_report

    if not gate.active:
        raise UsageError(
            f"nothing to check: give {param('budget', 'SIZE')}, {param('baseline', 'BASE.json')} or "
            f"{param('require_compile_saves')}"
        )
    return evaluate(load_report(Path(path)), gate)
