"""What memprof needs of the interpreter, kept from the profiled code.

The profiled code runs in memprof's own process, and it may leave that process changed:
``sys.stdout.close()``, ``sys.modules["json"] = ...``, ``builtins.open = ...``. memprof then
still has a report to print and files to write (and torch, imports to make). While the
commands run the user's code inside :func:`kept_from_user_code`, whatever the code replaced
among the modules already imported, the builtins and the standard streams is put back
afterwards, and a failure of memprof's own work that such a change caused is the profiled
code's failure (exit 3), said in one line, instead of a traceback. (The functions
:mod:`memprof.core.writing` writes with are bound when it is imported, so replacing ``os.replace``
cannot make memprof skip writing a report.)

Two changes cannot be put back afterwards, so they are caught as they happen:

- ``os._exit()`` ends the process at once, with the code's status and without memprof's report
  or gate: a gate that could not run would pass as exit 0. In memprof's process it raises
  :class:`memprof.core.errors.HardExit` instead (on the main thread: the run fails, exit 3, like
  ``sys.exit()``), or ends the process with exit 3 and a line saying why (on another thread). A
  process forked by the code (a DataLoader worker) still ends as it asks.
- Closing file descriptors 0, 1 or 2 (``os.close(1)``) leaves memprof nothing to print its
  report and errors on: copies of them are kept and put back in their place afterwards.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memprof.core.errors import EXIT_USER_CODE, HardExit, MemprofError, UserCodeError, brief, what_it_did

_STREAMS = ("stdin", "stdout", "stderr")
_open = io.open  # bound now: the profiled code may replace builtins.open
_FDS = {"stdin": 0, "stdout": 1, "stderr": 2}


@dataclass(frozen=True)
class _State:
    modules: dict[str, Any]
    builtins: dict[str, Any]
    streams: dict[str, Any]


def _state() -> _State:
    return _State(
        modules=dict(sys.modules),
        builtins=dict(vars(builtins)),
        streams={name: getattr(sys, name) for name in _STREAMS},
    )


def _closed(stream: Any) -> bool:
    try:
        return bool(stream.closed)
    except Exception:  # noqa: BLE001 - a stream object of the user's that fails to say
        return True


def changes(kept: _State) -> list[str]:
    """What differs from ``kept``: ``sys.modules['json']``, ``builtins.open``, ``sys.stdout``
    (replaced or closed). Modules imported since, or removed (an import brings them back), are
    not changes."""
    found = [
        f"sys.modules[{name!r}]"
        for name, module in kept.modules.items()
        if name in sys.modules and sys.modules[name] is not module
    ]
    current = vars(builtins)
    found += [
        f"builtins.{name}" for name, value in kept.builtins.items() if current.get(name, value) is not value
    ]
    for name, stream in kept.streams.items():
        if getattr(sys, name) is not stream or (stream is not None and _closed(stream)):
            found.append(f"sys.{name}")
    return found


def restore(kept: _State) -> None:
    """Put back what :func:`changes` lists. A standard stream the code closed is opened again
    on its file descriptor (which closing ``sys.stdout`` leaves open)."""
    for name, module in kept.modules.items():
        if name in sys.modules and sys.modules[name] is not module:
            sys.modules[name] = module
    current = vars(builtins)
    for name, value in kept.builtins.items():
        if current.get(name, value) is not value:
            current[name] = value
    for name, stream in kept.streams.items():
        if stream is not None and _closed(stream):
            stream = _reopened(name, stream)
        setattr(sys, name, stream)


def _reopened(name: str, stream: Any) -> Any:
    fd = _FDS[name]
    try:
        os.fstat(fd)
    except OSError:
        return stream  # the descriptor itself is gone: nothing to write to
    encoding = getattr(stream, "encoding", None) or "utf-8"
    errors = getattr(stream, "errors", None) or "backslashreplace"
    mode = "r" if name == "stdin" else "w"
    return _open(fd, mode, buffering=1, encoding=encoding, errors=errors, closefd=False)


@contextlib.contextmanager
def _standard_fds_kept() -> Iterator[None]:
    """Copies of file descriptors 0-2, put back in place afterwards where the code closed one."""
    copies: dict[int, int] = {}
    for fd in _FDS.values():
        with contextlib.suppress(OSError):
            copies[fd] = os.dup(fd)  # not inheritable: no child of the code's gets them
    try:
        yield
    finally:
        for fd, copy in copies.items():
            try:
                os.fstat(fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.dup2(copy, fd)
            os.close(copy)


@contextlib.contextmanager
def _exit_caught() -> Iterator[None]:
    """``os._exit`` (and ``posix._exit``) of memprof's process raise :class:`HardExit` on the
    main thread, and end the process with exit 3 on another, while the block runs."""
    real = getattr(os._exit, "memprof_real", os._exit)  # nested blocks: the system's own
    pid = os.getpid()

    def _exit(status: int) -> Any:
        if os.getpid() != pid:  # a forked child: it ends as it asks
            real(status)
        if threading.current_thread() is threading.main_thread():
            raise HardExit(status)
        with contextlib.suppress(OSError):
            os.write(
                2,
                f"memprof: error: the profiled code called os._exit({brief(status)}) on a thread, which ends "
                "the process: nothing was reported and no gate ran\n".encode(),
            )
        real(EXIT_USER_CODE)

    _exit.memprof_real = real  # type: ignore[attr-defined]
    modules = [
        module for module in (os, sys.modules.get("posix"), sys.modules.get("nt")) if module is not None
    ]
    before = [module._exit for module in modules]
    for module in modules:
        module._exit = _exit  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, previous in zip(modules, before, strict=True):
            if getattr(module, "_exit", None) is _exit:
                module._exit = previous  # type: ignore[attr-defined]


@contextlib.contextmanager
def kept_from_user_code() -> Iterator[None]:
    """Run a block that runs the user's code (and memprof's work on its results): afterwards
    the interpreter is as the block found it (see :func:`restore`). An exception that is not
    memprof's, raised while the code's changes were in place, is a :class:`UserCodeError`
    (exit 3) naming the first change."""
    kept = _state()
    try:
        with _standard_fds_kept(), _exit_caught():
            yield
    except (MemprofError, KeyboardInterrupt):
        raise
    except Exception as error:
        changed = changes(kept)
        if not changed:
            raise
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise UserCodeError(
            f"the profiled code changed {changed[0]}{more}, which memprof and torch need, and then "
            f"memprof's own work {what_it_did(error)}; leave {changed[0]} as it was, or put it back "
            "before returning"
        ) from None
    finally:
        restore(kept)
