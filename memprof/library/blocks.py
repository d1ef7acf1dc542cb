"""``memprof.track``: profile a block of code where it runs, as a ``with`` statement or a
decorator, into a :class:`memprof.Report` like ``memprof run``'s.

A block runs once, so it is measured and explained in one pass (:mod:`memprof.sources.block`
says how the numbers stay an untracked pass's). It gets no warm-up and no repeat of its own:
the first pass through a block pays first-call costs (lazy state such as optimizer state,
caches, autotuning). ``skip`` lets the first entries through unprofiled.

Importing this module is cheap: torch loads when a block is first profiled.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from memprof.core.errors import MemprofError, UsageError, param
from memprof.core.text import visible
from memprof.pipeline import build_report

if TYPE_CHECKING:
    from memprof.core.recording import Recording
    from memprof.model.report import Report
    from memprof.model.run import RunResult
    from memprof.sources.block import Block

F = TypeVar("F", bound=Callable[..., Any])

FORMATS = ("json", "html", "markdown")
"""The report files a block (a training step, a notebook cell) can be written to."""

# Names of a notebook's namespace that hold IPython's own objects, not the program's state.
_NOT_ROOTS = frozenset({"In", "Out", "exit", "quit", "get_ipython"})

Path_ = str | os.PathLike[str]


def write_report(report: Report, files: Mapping[str, Path_ | None]) -> list[Path]:
    """Write ``report`` as each format of ``files`` (``json``, ``html``, ``markdown`` -> path;
    None: not that one), rendered first and written all or none, as ``memprof run`` does."""
    from memprof.core.writing import atomic_write_texts, check_output_paths
    from memprof.outputs import renderer

    wanted = {fmt: path for fmt, path in files.items() if path is not None}
    check_output_paths((param(fmt), path) for fmt, path in wanted.items())
    rendered = [(path, renderer(fmt)(report)) for fmt, path in wanted.items()]
    return atomic_write_texts(rendered)


def check_formats(formats: object, what: str = "formats") -> tuple[str, ...]:
    """``formats`` as a tuple of known formats (a single name is one format); a one-line
    :class:`UsageError` otherwise."""
    if isinstance(formats, str):
        formats = (formats,)
    if not isinstance(formats, Iterable):
        raise UsageError(f"{param(what)} must list formats among {', '.join(FORMATS)}")
    chosen: tuple[Any, ...] = tuple(formats)
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        wrong = f"unknown {', '.join(map(repr, unknown))}" if unknown else "none given"
        raise UsageError(
            f"{param(what, chosen)}: {wrong}; choose among {', '.join(FORMATS)}, "
            f"e.g. {param(what, ('json', 'html'))}"
        )
    return tuple(dict.fromkeys(chosen))


class Tracking:
    """A block to profile: a context manager (``with memprof.track() as t: ...``) and a
    decorator (``@memprof.track()``), made by :func:`track`. After the profiled entry,
    :attr:`report` holds its report and :attr:`run` its one run."""

    def __init__(
        self,
        roots: Mapping[str, Any],
        *,
        device: str | None,
        explain: bool,
        label: str | None,
        skip: int,
        verbose: bool,
        files: Mapping[str, Path_ | None],
    ) -> None:
        from memprof.core.writing import absolute, check_output_paths
        from memprof.sources.live.run import resolve_device
        from memprof.sources.options import RunOptions

        if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
            raise UsageError(f"{param('skip')} must be 0 or more entries to let through, got {skip!r}")
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise UsageError(f"{param('label')} must be a non-empty name, got {label!r}")
        check_output_paths((param(fmt), path) for fmt, path in files.items())
        self.roots = dict(roots)
        self.skip = skip
        self.label = label or "block"
        self.options = RunOptions(device=resolve_device(device), explain=explain, verbose=verbose)
        # Against the folder the program started in (the code may change folders meanwhile).
        self.files = {fmt: absolute(path) for fmt, path in files.items() if path is not None}
        self.entries = 0
        # One list per thread of the entries still running there (recursion nests): an entry
        # ends on the thread it began on, whatever other threads enter meanwhile.
        self._open: dict[int, list[Block | None]] = {}
        self._report: Report | None = None
        self._target = ""

    # ---- the result ----------------------------------------------------------------------------

    @property
    def report(self) -> Report:
        """The profiled entry's report; a :class:`UsageError` before it ended."""
        if self._report is None:
            raise UsageError(
                f"nothing was profiled yet: the block was entered {self.entries} time(s) and is "
                f"profiled at its entry {self.skip + 1} ({param('skip', self.skip)} lets "
                f"{self.skip} through); the report is there once that entry has ended"
            )
        return self._report

    @property
    def run(self) -> RunResult:
        """The report's one run (its numbers: ``peak_bytes``, ``footprint_bytes``, ``at_peak``)."""
        return self.report.runs[self.label]

    def write(
        self, *, json: Path_ | None = None, html: Path_ | None = None, markdown: Path_ | None = None
    ) -> list[Path]:
        """Write the report as JSON, HTML and/or Markdown (all or none); the paths written."""
        return write_report(self.report, {"json": json, "html": html, "markdown": markdown})

    def __repr__(self) -> str:
        state = repr(self._report) if self._report is not None else f"entered {self.entries} time(s)"
        return visible(f"<memprof.track {self.label}: {state}>", keep="")

    # ---- entering and leaving ------------------------------------------------------------------

    def __enter__(self) -> Tracking:
        if self.entries != self.skip:  # not profiled: nothing to look for
            self.begin("", {})
            return self
        frame = sys._getframe(1)
        where = f"block at {os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        self.begin(where, {**caller_roots(frame), **self.roots})
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end(error)

    def __call__(self, fn: F) -> F:
        """Decorate ``fn``: its call (entry ``skip + 1``) is profiled, with its arguments and
        its module's globals as roots, as :func:`memprof.profile` profiles a function. A
        function whose call runs none of its body (a generator function, an ``async def``) is
        refused, as ``memprof run`` refuses it: its block would measure nothing."""
        from memprof.sources.failures import check_ran
        from memprof.sources.targets.target import Target, check_measurable

        target = Target.of(fn)
        check_measurable(fn, target.spec)

        @functools.wraps(fn)
        def tracked(*args: Any, **kwargs: Any) -> Any:
            self.begin(target.spec, {**self.roots, **kwargs}, func=fn, args=args, module=target.module)
            try:
                result = fn(*args, **kwargs)
            except BaseException as error:
                self.end(error)
                raise
            self.end(None)
            check_ran(result, target.spec)  # a generator or coroutine returned: nothing ran
            return result

        tracked.track = self  # type: ignore[attr-defined]
        return tracked  # type: ignore[return-value]

    def begin(
        self,
        target: str,
        roots: Mapping[str, Any],
        *,
        func: Any = None,
        args: tuple[Any, ...] = (),
        module: Any = None,
    ) -> None:
        """An entry starts: profiled when it is entry ``skip + 1`` (for code that cannot use
        ``with``: call :meth:`end` after it, on the same thread)."""
        from memprof.sources.block import Block

        index = self.entries
        self.entries += 1
        if index != self.skip:
            self._entries_here().append(None)
            return
        block = Block(self.options, label=self.label, roots=roots, func=func, args=args, module=module)
        try:
            block.start()
        except BaseException:
            self.entries -= 1  # it did not start: the next entry is still the one to profile
            raise
        self._target = target
        self._entries_here().append(block)

    def _entries_here(self) -> list[Block | None]:
        return self._open.setdefault(threading.get_ident(), [])

    def end(self, error: BaseException | None = None) -> None:
        """The entry begun last ends (``error``: what it raised, which still propagates: the
        report then covers the block up to it)."""
        here = self._entries_here()
        block = here.pop() if here else None
        if block is None:
            return
        try:
            recording = block.stop(error)
            self._report = block_report(self._target, recording, self.options.device)
            if self.files:
                write_report(self._report, self.files)
        except MemprofError:
            if error is None:
                raise
            # The block's own failure is what the caller sees; memprof's is left out.


def block_report(target: str, recording: Recording, device: str) -> Report:
    """The report of a profiled block: its one run (assembled from what the block recorded),
    with the environment it ran in."""
    from memprof.model.recorded import Source
    from memprof.pipeline.assemble import run_of
    from memprof.sources.live.run import environment

    run = run_of(recording)
    return build_report(
        target=target,
        device=device,
        runs={run.label: run},
        environment=environment(device),
        source=Source(kind="live"),
    )


def caller_roots(frame: FrameType) -> dict[str, Any]:
    """The names a block can reach where it runs: its frame's locals (a module's or a
    notebook's globals at top level), less private names and IPython's own."""
    namespace = frame.f_locals
    roots = namespace_roots(namespace)
    if namespace is not frame.f_globals and sys.version_info < (3, 13):
        # Before Python 3.13 a function's f_locals is a copy that its frame keeps until the next
        # read: it would keep alive what the block deletes. Emptied, it is filled again by
        # whatever reads it next (f_locals, locals() and debuggers refresh it from the frame).
        namespace.clear()
    return roots


def namespace_roots(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The names of ``namespace`` (locals, a notebook's variables) that can hold the program's
    state: not private names (``_``, ``_3``, ``__builtins__``), nor IPython's own objects."""
    return {
        name: value
        for name, value in list(namespace.items())
        if not name.startswith("_") and name not in _NOT_ROOTS
    }


def track(
    *,
    device: str | None = None,
    explain: bool = True,
    label: str | None = None,
    skip: int = 0,
    verbose: bool = False,
    json: Path_ | None = None,
    html: Path_ | None = None,
    markdown: Path_ | None = None,
    **roots: Any,
) -> Tracking:
    """Profile a block of code where it runs: ``with memprof.track() as t: ...``, then
    ``t.report`` is a :class:`memprof.Report` with one run, as ``memprof run`` gives for a
    function: the peak above the block's start (``t.run.peak_bytes``, exact), the footprint
    (what was live at the start, as far as memprof can reach it, plus the peak), the ops, and
    with ``explain`` (default) what is live at the peak by category, module and source line.

    ``roots`` name what the block works on, e.g. ``track(model=model, optimizer=opt)``: its
    parameters, gradients and optimizer state are recognised as such, and tensors reachable
    from the roots (and from the caller's locals) when the block starts are its inputs. As a
    decorator, the function's arguments and module globals are roots too.

    ``device`` ("auto"/None: CUDA when available) picks whose allocator is measured;
    ``label`` names the run (default "block"); ``verbose`` lets torch's own messages through.
    ``json``/``html``/``markdown``: files the report is written to when the block ends (checked
    before it starts). ``skip``: entries let through unprofiled first (the same ``Tracking``
    used in a loop, or the decorated function called repeatedly): ``skip=1`` profiles the
    second. A block runs once: no warm-up, no repeat, its first pass pays first-call costs.

    >>> import torch, memprof
    >>> with memprof.track() as t:
    ...     x = torch.ones(1024, 1024)
    >>> t.run.peak_bytes
    4194304
    """
    return Tracking(
        roots,
        device=device,
        explain=explain,
        label=label,
        skip=skip,
        verbose=verbose,
        files={"json": json, "html": html, "markdown": markdown},
    )
