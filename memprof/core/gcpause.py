"""Pause Python's cyclic garbage collector around work that makes many objects at once (imports
among them), freeze what survives the collection before a profiled call, and leave the last
profile of a command-line run to the process's end."""

from __future__ import annotations

import builtins
import contextlib
import gc
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block (the collector is restored as it was after).

    Reading a million profiler events or parsing a 100,000-row table creates millions of
    objects that stay alive, none in cycles; each collection pass would walk them all again
    (measured: ~40% of event reading, 2-3x the table parse)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def survivors_frozen() -> Iterator[Callable[[], None]]:
    """Inside, ``collect()`` is a full collection whose survivors are then frozen (``gc.freeze``),
    so that later collections walk only the objects made since; unfrozen when the block ends.

    A run collects garbage before each profiled call (the measured calls, then the explaining
    one), so that a collection during the call does not count frees of earlier garbage. Each full
    collection walks every object alive: a million once ``torch._dynamo`` is imported, 0.1-0.2 s
    a collection. What survives the first is what the program holds, and a later collection
    would find it alive again. Nothing is frozen when the program froze objects itself (it
    unfreezes them when it chooses); what memprof froze before (the command line's start-up,
    :func:`start_up_imports`; the imports of :func:`imports_frozen`) is unfrozen with the rest,
    so that the garbage a run leaves is collected before the next run."""
    ours = _ours()

    def collect() -> None:
        gc.collect()
        if ours:
            gc.freeze()

    try:
        yield collect
    finally:
        if ours:
            _unfreeze()


# Everything frozen now was frozen by memprof (start_up_imports, imports_frozen), none of it by
# the program, which may unfreeze its own objects when it chooses.
_memprof_froze = False


def _ours() -> bool:
    # gc.get_freeze_count() walks every frozen object (a million once torch is imported: about
    # 30 ms a call), so it is asked only when memprof froze nothing.
    return _memprof_froze or gc.get_freeze_count() == 0


def _unfreeze() -> None:
    global _memprof_froze
    gc.unfreeze()
    _memprof_froze = False


@contextlib.contextmanager
def start_up_imports() -> Iterator[None]:
    """The command line's imports of torch and memprof before it runs a target: no collection
    meanwhile, and what they made (modules, classes, functions: never garbage) frozen after,
    so that no later collection walks it again. Each automatic collection during an import of
    torch walks everything imported so far (``scripts/bench_phases.py`` part 3 times the import
    both ways). For the command line only: a program that imports memprof keeps its collector
    as it set it."""
    global _memprof_froze
    if gc.get_freeze_count():
        yield
        return
    with gc_paused():
        yield
        # Frozen before the collector is back on: the first collection after it would otherwise
        # walk everything the paused imports left in the youngest generation.
        gc.freeze()
    _memprof_froze = True


@contextlib.contextmanager
def memprof_freezes() -> Iterator[None]:
    """What memprof froze inside (:func:`imports_frozen`, :func:`survivors_frozen`) is unfrozen
    when the block ends, however it ends: a program that profiles keeps no object of its own
    frozen, which would never be collected."""
    try:
        yield
    finally:
        if _memprof_froze:
            _unfreeze()


@contextlib.contextmanager
def imports_frozen() -> Iterator[None]:
    """Inside, an import made on this thread that loads modules (the target's own imports, a
    library its inputs factory or its first call imports lazily: ``torch._dynamo`` when an
    optimizer is made, ``torch._inductor`` when torch.compile compiles) runs with the collector
    paused, after one collection of what is garbage before it; what the import made is frozen
    after it (when memprof may freeze: :func:`survivors_frozen`), so that later collections, the
    one before the measured calls among them, walk only what was made since.

    For the work before the measured calls only: a collection a measured call would make stays
    as it would be. Each automatic collection during an import walks everything made so far;
    the first full collection after it walks all of it once more (``torch._dynamo``'s import
    makes ~0.5 million objects; ``scripts/bench_phases.py`` part 3 times it both ways).
    Imports of modules already loaded pass straight through; ``importlib.import_module`` is not
    seen (the collector stays as it is there)."""
    original = builtins.__import__
    hook = _PausedImports(original)
    builtins.__import__ = hook
    sys.meta_path.insert(0, hook)  # type: ignore[arg-type]
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(hook)  # type: ignore[arg-type]
        if builtins.__import__ is hook:
            builtins.__import__ = original
        hook.close()


class _PausedImports:
    """``builtins.__import__`` (counting the nesting of imports) and the first of the import
    system's finders (asked only for a module not loaded yet: where an import starts to load)."""

    def __init__(self, original: Callable[..., Any]) -> None:
        self.thread = threading.get_ident()
        self.original = original
        self.depth = 0
        self.loading = False  # the outermost import is loading: collector paused
        self.freeze = False

    def __call__(
        self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        if threading.get_ident() != self.thread:
            return self.original(name, globals, locals, fromlist, level)
        self.depth += 1
        try:
            return self.original(name, globals, locals, fromlist, level)
        finally:
            self.depth -= 1
            if not self.depth:
                self.close()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if self.depth and not self.loading and gc.isenabled() and threading.get_ident() == self.thread:
            self.loading, self.freeze = True, _ours()
            # What is garbage now is collected, not frozen with the import's objects (little is
            # left unfrozen to walk: what earlier imports made is frozen already).
            gc.collect()
            gc.disable()
        return None  # the other finders find it

    def close(self) -> None:
        """The outermost import is done: what it made frozen, the collector on again."""
        if not self.loading:
            return
        global _memprof_froze
        self.loading = False
        if self.freeze:
            gc.freeze()
            _memprof_froze = True
        gc.enable()


# What the process keeps until it ends (hold_to_end): one object at a time.
_held: list[Any] = []
_ends_here = False


def ends_here() -> None:
    """This process ends with :func:`memprof.frontends.exiting.exit_fast` (the console script): from now on,
    :func:`hold_to_end` keeps what it is given until then."""
    global _ends_here
    _ends_here = True


def hold_to_end(thing: Any) -> None:
    """Keep ``thing`` alive until the process ends, when it ends with ``exit_fast``, which
    frees nothing: the last profile a command-line run takes, whose freeing costs time (torch's
    destructor, ~1 us an event; ``scripts/bench_phases.py`` part 1 times it) just before the process
    ends anyway. One thing at a time: what was held before is freed now. Elsewhere (a program
    that imports memprof, a test), nothing is held: ``thing`` is freed as usual."""
    _held.clear()
    if _ends_here:
        _held.append(thing)


def release_held() -> None:
    """Free what :func:`hold_to_end` kept: before a new profile is taken, so that no two are
    alive at once."""
    _held.clear()
