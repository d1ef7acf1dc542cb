"""Leaving the ``memprof`` process: everything Python's exit does for the program, without
tearing the interpreter down, nor freeing what a run held for its end
(:func:`memprof.core.gcpause.hold_to_end`: its last profile).

Once torch (and ``torch._dynamo``, which an optimizer or the profiler imports) is loaded,
Python's own exit spends most of a second after the last exit handler freeing every module's
objects and running torch's C++ static destructors (``scripts/bench_phases.py`` part 3 times
``import torch, torch._dynamo`` leaving both ways). Nothing of that is the program's: the command
line leaves as Python would up to that point (threads waited for, exit handlers run, open files
flushed), then ends the process.
"""

from __future__ import annotations

import _io
import atexit
import gc
import os
import sys
import threading
from typing import NoReturn


def exit_fast(code: str | int | None) -> NoReturn:
    """``sys.exit(code)`` for the process's last act: exit handlers (``atexit``, the finalizers
    of ``weakref.finalize``, logging's, multiprocessing's) run and every open file is flushed, as
    Python's exit does, then the process ends without the interpreter's teardown. When a
    non-daemon thread still runs (Python would wait for it) or ``code`` is not an exit status,
    Python's own exit."""
    if not isinstance(code, int) or isinstance(code, bool) or _threads_to_wait_for():
        sys.exit(code)
    atexit._run_exitfuncs()  # runs each handler once, reporting its error as Python's exit does
    if not _flushed():
        sys.exit(code)  # a file that cannot be flushed: Python's exit reports it
    os._exit(code)


def _threads_to_wait_for() -> bool:
    main = threading.main_thread()
    return any(t is not main and t.is_alive() and not t.daemon for t in threading.enumerate())


def _flushed() -> bool:
    """Every open writable file object flushed (the program's own included: its buffered writes
    reach the file as when Python's exit closes it); False when one fails."""
    streams = [sys.stdout, sys.stderr]
    try:
        objects = gc.get_objects()
        # By type, not isinstance: isinstance reads ``__class__``, which some of torch's
        # deprecated objects answer with a warning.
        kinds = {kind for kind in set(map(type, objects)) if issubclass(kind, _io._IOBase)}
        streams += [o for o in objects if type(o) in kinds]
        del objects
        for stream in streams:
            if stream is not None and not stream.closed and stream.writable():
                stream.flush()
    except Exception:  # a broken pipe, a detached wrapper: let Python's exit say so
        return False
    return True
