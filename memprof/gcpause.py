"""Pause Python's cyclic garbage collector around work that makes many objects at once, and
freeze what survives the collection before a profiled call."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator


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
    unfreezes them when it chooses); what the command line froze at its start
    (:func:`start_up_imports`) is unfrozen with the rest, so that the garbage a run leaves is
    collected before the next run."""
    global _start_up_frozen
    ours = gc.get_freeze_count() == 0 or _start_up_frozen

    def collect() -> None:
        gc.collect()
        if ours:
            gc.freeze()

    try:
        yield collect
    finally:
        if ours:
            gc.unfreeze()
            _start_up_frozen = False


_start_up_frozen = False  # the command line froze what its imports made (start_up_imports)


@contextlib.contextmanager
def start_up_imports() -> Iterator[None]:
    """The command line's imports of torch and memprof before it runs a target: no collection
    meanwhile, and what they made (modules, classes, functions: never garbage) frozen after,
    so that no later collection walks it again. Each automatic collection during an import of
    torch walks everything imported so far (``scripts/bench_phases.py`` part 3 times the import
    both ways). For the command line only: a program that imports memprof keeps its collector
    as it set it."""
    global _start_up_frozen
    if gc.get_freeze_count():
        yield
        return
    with gc_paused():
        yield
    gc.freeze()
    _start_up_frozen = True
