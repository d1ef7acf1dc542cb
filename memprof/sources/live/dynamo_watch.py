"""What Dynamo does during a compiled run: the graphs it captures, each graph break (Dynamo's
own record of it, ``torch._dynamo.utils.graph_break_reasons``, with the traced stack) and each
recompile (the failed guard Dynamo looks up before compiling a function again). Read while the
run compiles anyway: nothing is compiled for it."""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from memprof.model.compiled import CompileSection, GraphBreak, Recompile
from memprof.sources.tracking.lines import LIBRARY, USER, frame_kind, resolve_sites

_MAX_TEXT = 300


def frames_compiled() -> int:
    """How many frames Dynamo has compiled in this process (each compile and recompile)."""
    from torch._dynamo import utils

    return int(utils.counters["frames"]["total"])


def _counts() -> tuple[int, int, int]:
    """Graphs Dynamo has captured in this process, and Inductor's compiled graphs (a forward
    and a backward one per training graph): those it generated code for (its FX graph cache's
    misses and bypasses) and those it read from that cache (hits; AOTAutograd's cache reads
    its graphs through it). Read without adding a key: the ticker's thread reads them while
    the main thread compiles."""
    from torch._dynamo import utils

    counters = utils.counters

    def count(group: str, *names: str) -> int:
        found: dict[str, int] = counters.get(group) or {}
        return sum(int(found.get(name, 0)) for name in names)

    return (
        count("stats", "unique_graphs"),
        count("inductor", "fxgraph_cache_miss", "fxgraph_cache_bypass"),
        count("inductor", "fxgraph_cache_hit"),
    )


def _inductor(generated: int, cached: int) -> str:
    """``Inductor: 2 generated, 3 from its cache`` (empty when its cache was not looked up)."""
    return f"Inductor: {generated} generated, {cached} from its cache" if generated or cached else ""


class DynamoWatch:
    """Entered around a compiled run's calls; :meth:`section` says what Dynamo made of them."""

    def __init__(self) -> None:
        self._breaks: list[Any] = []
        self._recompiles: list[tuple[str, str, int, str]] = []
        self._graphs = 0
        self._start: tuple[int, int, int] = (0, 0, 0)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        from torch._dynamo import convert_frame, utils

        reasons = utils.graph_break_reasons
        # The run's compile resets Dynamo (torch._dynamo.reset() empties the list in place): what
        # is there at the end and was not before is this run's. The earlier entries are held, so
        # that no new entry can take the identity of one freed meanwhile.
        before = list(reasons)
        seen = {id(item) for item in before}
        self._start = _counts()
        original = getattr(convert_frame, "get_and_maybe_log_recompilation_reasons", None)
        if original is not None:

            def recompiling(cache_entry: Any, frame: Any, *args: Any, **kwargs: Any) -> Any:
                found = original(cache_entry, frame, *args, **kwargs)
                with contextlib.suppress(Exception):  # a torch whose frames differ: no recompile noted
                    code = frame.f_code
                    self._recompiles.append(
                        (code.co_name, code.co_filename, code.co_firstlineno, found[0] if found else "")
                    )
                return found

            convert_frame.get_and_maybe_log_recompilation_reasons = recompiling  # type: ignore[assignment]
        try:
            yield
        finally:
            if original is not None:
                convert_frame.get_and_maybe_log_recompilation_reasons = original
            self._breaks += [item for item in reasons if id(item) not in seen]
            del before

    def _since(self) -> tuple[int, int, int]:
        """:func:`_counts` since the run's compile began."""
        (graphs, generated, cached), (graphs0, generated0, cached0) = _counts(), self._start
        return max(0, graphs - graphs0), max(0, generated - generated0), max(0, cached - cached0)

    def progress(self) -> str:
        """What the compiling call has done so far, for its ticks: ``, 2 graphs so far;
        Inductor: 1 generated, 3 from its cache`` (Dynamo finds a step's graphs as it runs it:
        how many there will be is not known before)."""
        graphs, generated, cached = self._since()
        inductor = _inductor(generated, cached)
        return f", {graphs} graph{'s' if graphs != 1 else ''} so far" + (f"; {inductor}" if inductor else "")

    def first_call_done(self) -> str:
        """The first (compiling) call has returned: its graphs are the run's (recompiles add
        graphs of their own, listed apart). Returns `` (3 graphs; Inductor: 0 generated, 5
        from its cache)`` for the status line."""
        self._graphs, generated, cached = self._since()
        inductor = _inductor(generated, cached)
        return (
            f" ({self._graphs} graph{'s' if self._graphs != 1 else ''}{'; ' + inductor if inductor else ''})"
        )

    def section(self) -> CompileSection:
        """The graphs, the breaks (each once, however many frames of its traced path Dynamo met
        it in; most frequent first, then by line) and the recompiles."""
        paths: set[tuple[str, tuple[tuple[str, int], ...]]] = set()
        for item in self._breaks:
            stack = tuple((f.filename, f.lineno or 0) for f in getattr(item, "user_stack", ()) or ())
            paths.add((_reason(str(getattr(item, "reason", ""))), stack))
        counted: Counter[tuple[str, tuple[str, int] | None, tuple[str, int] | None]] = Counter()
        stacks = {stack for _, stack in paths}
        for reason, stack in sorted(paths):
            # A break inside an inlined call is met again, as Dynamo compiles each frame of that
            # call on its own (their stacks are parts of the first one's, their reasons that one
            # or "step_unsupported" at the call): one break, the first.
            if stack and any(len(o) > len(stack) and _inside(stack, o) for o in stacks):
                continue
            where, user = _statements(stack)
            counted[(reason, where, user)] += 1
        lines = [line for _, where, user in counted for line in (where, user) if line is not None]
        sites = dict(zip(lines, resolve_sites(lines), strict=True))
        breaks = []
        order = sorted(counted.items(), key=lambda item: (-item[1], item[0][1] or ("", 0), item[0][0]))
        for (reason, where, user), count in order:
            site = sites[where] if where is not None else None
            mine = sites[user] if user is not None and user != where else None
            breaks.append(
                GraphBreak(
                    reason=reason,
                    source=site.source if site else "",
                    source_text=site.text if site else "",
                    user_source=mine.source if mine else "",
                    user_source_text=mine.text if mine else "",
                    count=count,
                )
            )
        recompiles = tuple(
            Recompile(function=name, source=resolve_sites([(file, line)])[0].source, guard=_guard(guard))
            for name, file, line, guard in self._recompiles
        )
        return CompileSection(graphs=self._graphs, breaks=tuple(breaks), recompiles=recompiles)


def _inside(part: tuple[Any, ...], whole: tuple[Any, ...]) -> bool:
    """Whether ``part`` is a run of consecutive items of ``whole``."""
    return any(whole[i : i + len(part)] == part for i in range(len(whole) - len(part) + 1))


def _statements(stack: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int] | None, tuple[str, int] | None]:
    """The innermost user or library frame of a traced stack (outermost first), else its
    innermost frame (torch's own code), and the innermost user frame."""
    where = user = None
    for frame in reversed(stack):
        kind = frame_kind(frame[0])
        if kind in (USER, LIBRARY) and where is None:
            where = frame
        if kind == USER:
            user = frame
            break
    return where or (stack[-1] if stack else None), user


def _reason(text: str) -> str:
    """Dynamo's reason on one line: its first line, and its explanation when it gives one."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "unknown"
    explanation = next((line for line in lines[1:] if line.startswith("Explanation:")), "")
    shown = lines[0] + (f": {explanation.removeprefix('Explanation:').strip()}" if explanation else "")
    return shown[:_MAX_TEXT]


def _guard(text: str) -> str:
    """``2/0: n == 2   # return y * n  # ...`` -> ``n == 2``."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = re.sub(r"^\d+/\d+:\s*", "", first)
    return first.split("  #", 1)[0].strip()[:_MAX_TEXT]
