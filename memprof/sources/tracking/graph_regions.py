"""Which compiled graph each of a compiled run's graph calls ran: Dynamo's id of the graph
(``frame/compile``, as its ``Torch-Compiled Region: 0/1`` profiler range says) and the function
it compiled (``step``; the part of a function after a graph break is Dynamo's
``torch_dynamo_resume_in_step_at_27``). What the at-peak entries say they were made by. And
who called each graph (:class:`GraphCall`): the statement of the user's or a library's code
that ran it (``loss.backward()`` for a backward graph) and the module whose forward did."""

from __future__ import annotations

import bisect
import contextlib
import os
import time
from types import FrameType
from typing import NamedTuple

from memprof.sources.live.tree import GraphSpans
from memprof.sources.tracking.lines import LIBRARY, USER, frame_kind

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


class GraphCall(NamedTuple):
    """A call of a compiled graph: when (the tracker's clock), the innermost statement of a
    library's or the user's code on the caller's stack and the user's own, as ``file:line``,
    and the module whose forward called it (its ``id``, or its path once named)."""

    time_ns: int
    where: str
    user_where: str
    module: int | str

    def named(self, paths: dict[int, str]) -> GraphCall:
        if isinstance(self.module, int):
            return self._replace(module=paths.get(self.module, ""))
        return self


def graph_call(frame: FrameType | None) -> GraphCall:
    """Who called a compiled graph, read from its caller's stack."""
    now = time.time_ns()
    where = user_where = ""
    module = 0
    while frame is not None and not (where and user_where and module):
        code = frame.f_code
        if not module and code.co_name in _MODULE_CALLS and frame.f_code.co_filename.endswith(_MODULE_FILE):
            owner = frame.f_locals.get("self")
            module = id(owner) if owner is not None else 0
        kind = frame_kind(code.co_filename)
        if kind in (USER, LIBRARY) and not where:
            where = f"{code.co_filename}:{frame.f_lineno}"
        if kind == USER and not user_where:
            user_where = f"{code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return GraphCall(now, where, user_where, module)


_MODULE_CALLS = frozenset({"_call_impl", "_wrapped_call_impl"})
_MODULE_FILE = os.path.join("torch", "nn", "modules", "module.py")


class CallsByTime:
    """The graph calls in order of time, to find the one noted last before a moment: the call
    a wrapper's range or its first kernel belongs to (both begin inside it)."""

    def __init__(self, calls: list[GraphCall]) -> None:
        self.calls = sorted(calls, key=lambda call: call.time_ns)
        self.starts = [call.time_ns for call in self.calls]

    def before(self, time_ns: int) -> GraphCall | None:
        at = bisect.bisect_right(self.starts, time_ns) - 1
        return self.calls[at] if at >= 0 else None


def graph_callers(spans: tuple[tuple[int, int, str], ...], calls: CallsByTime) -> list[tuple[str, str]]:
    """(statement, user's statement) of the caller of each graph call in ``spans``: the graph
    call noted last before the call's span starts (the span is the wrapper's range inside it)."""
    found = []
    for start, _, _ in spans:
        call = calls.before(start)
        found.append((call.where, call.user_where) if call is not None else ("", ""))
    return found
