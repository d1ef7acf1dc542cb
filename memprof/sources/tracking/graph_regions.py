"""Which compiled graph each of a compiled run's graph calls ran: Dynamo's id of the graph
(``frame/compile``, as its ``Torch-Compiled Region: 0/1`` profiler range says) and the function
it compiled (``step``; the part of a function after a graph break is Dynamo's
``torch_dynamo_resume_in_step_at_27``). What the at-peak entries say they were made by."""

from __future__ import annotations

import contextlib
import os

from memprof.sources.live.tree import GraphSpans

UNKNOWN_GRAPH = "a compiled graph"
"""A graph call in no compiled region and not paired with a forward one."""


def compiled_functions() -> dict[str, str]:
    """The function of each graph Dynamo compiled in this process (the last ones it keeps
    the metrics of), by compile id (``0/1``): ``step (train.py:12)``, where it begins."""
    names: dict[str, str] = {}
    with contextlib.suppress(Exception):  # a torch without these metrics: ids alone
        from torch._dynamo.utils import get_compilation_metrics

        for metrics in get_compilation_metrics():
            if metrics.compile_id and metrics.co_name:
                file = metrics.co_filename
                where = f" ({os.path.basename(file)}:{metrics.co_firstlineno})" if file else ""
                names[str(metrics.compile_id)] = str(metrics.co_name) + where
    return names


def graph_calls(
    spans: GraphSpans | None, paired: dict[int, int], functions: dict[str, str] | None = None
) -> tuple[tuple[int, int, str], ...]:
    """(start, end, graph) of each Inductor wrapper call, in order of start: a forward graph is
    the innermost compiled region around its call (a graph break's eager code and the graphs
    after it run inside the region of the frame that broke); a backward graph is its forward's
    (``paired``: backward wrapper call -> forward one). The graph reads ``0/1 step (train.py:12)``."""
    if spans is None or not spans.wrappers:
        return ()
    names = compiled_functions() if functions is None else functions
    labels = {
        wrapper: _innermost(spans.regions, start, end)
        for wrapper, (start, end) in spans.wrappers.items()
        if wrapper not in paired
    }
    found = []
    for wrapper, (start, end) in spans.wrappers.items():
        region = labels.get(paired.get(wrapper, wrapper), "")
        name = names.get(region, "")
        found.append((start, end, f"{region} {name}".strip() if region else UNKNOWN_GRAPH))
    return tuple(sorted(found))


def _innermost(regions: list[tuple[int, int, str]], start: int, end: int) -> str:
    """The id of the latest-starting region that holds ``start``..``end`` (empty: none does)."""
    holding = [(r0, -r1, label) for r0, r1, label in regions if r0 <= start and end <= r1]
    return max(holding)[2] if holding else ""
