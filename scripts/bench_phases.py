"""Where an explained ``memprof run`` spends its time, phase by phase, on the CPU training step of
``scripts/bench.py`` (f), and what the command line's start and exit cost. The figures the
performance page gives for "where the time goes".

    PYTHONPATH=. python scripts/bench_phases.py               # 36 steps: ~98k profiler events
    PYTHONPATH=. python scripts/bench_phases.py --steps 146   # ~400k
    PYTHONPATH=. python scripts/bench_phases.py --step transformer --steps 55   # bench.py's other step

(1) In one process, ``memprof.compare`` of the step (explained, ``time_budget=0``) with a timer
    around each phase: the explaining call, the step inside it (under the op tracker), every
    profiler stop, the read of the measured calls' profile (one walk of its event tree) and of
    the explaining call's event tree, the collections, the attribution; then the
    freeing of the last profile (torch's destructor), which the command line leaves to its exit,
    explained and ``--no-explain``.
(2) The step alone, under a dispatch mode that does nothing (in the ``torch._dynamo.disable``
    wrapper torch puts around a mode, and keeping torch.compile's frame hook off itself, as
    memprof's op tracker does), and under memprof's op tracker without the profiler: what
    torch's Python dispatch costs, what its wrapper adds, and what memprof's record of each op
    adds; and under the tracker of program state alone (modules, optimizer steps, gradients as
    autograd makes them), as the measured calls run. The modes that do nothing see backward's
    ops too; the tracker takes its mode off there.
(3) Whole processes: ``import torch`` alone, then ``import torch, torch._dynamo`` (what
    ``torch.profiler.profile`` or an optimizer imports) with Python's exit and with ``os._exit``
    (the interpreter's teardown), and with the collector paused during the import and what it
    made frozen (``memprof.core.gcpause.start_up_imports``); (m) memprof's own modules that a run
    loads, after torch, where Python writes no bytecode (``PYTHONDONTWRITEBYTECODE``, a checkout
    installed in editable mode): compiled from source, and read from memprof's bytecode cache
    (``memprof.core.bytecode``); and, timed inside the process, the lazy
    import of ``torch._dynamo`` after the command line's start-up with the full collection made
    before the measured calls, as is and in ``memprof.core.gcpause.imports_frozen`` (the collector
    paused during the import, what it made frozen). Medians of 3.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from bench import TRAIN_STEPS  # noqa: E402 - the (f) steps, one definition


def _timed(owner: Any, name: str, label: str, times: dict[str, float]) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            times[label] = times.get(label, 0.0) + time.perf_counter() - start

    setattr(owner, name, wrapper)


def phases(folder: str) -> dict[str, float]:
    import gc

    from torch.autograd.profiler import profile  # the session memprof starts (profiling.memory_profile)

    import memprof
    from memprof.core import gcpause
    from memprof.pipeline import assemble
    from memprof.sources.live import measured
    from memprof.sources.live import run as live
    from memprof.sources.tracking import ops, tracker

    times: dict[str, float] = {}
    _timed(live, "explaining_call", "explaining call", times)  # as live.py calls it
    _timed(assemble, "attribute", "attribution (both passes)", times)
    _timed(
        measured, "read_measured", "reading the measured calls' profile (one walk of its event tree)", times
    )
    _timed(tracker, "read_profile", "the explaining call's event-tree read", times)
    _timed(profile, "__exit__", "profiler stops (both passes)", times)
    _timed(gc, "collect", "collections before the profiled calls", times)
    unprofiled = ops.Ops.unprofiled

    @contextlib.contextmanager
    def step(self: Any) -> Any:
        start = time.perf_counter()
        with unprofiled(self):
            yield
        times["the step under the op tracker"] = time.perf_counter() - start

    ops.Ops.unprofiled = step  # type: ignore[method-assign]
    gcpause.ends_here()  # as the command line: the last profile is held, its freeing timed here
    start = time.perf_counter()
    memprof.compare(f"{folder}/train_step.py:train", device="cpu", time_budget=0.0)
    times["memprof.compare"] = time.perf_counter() - start
    times["freeing the explaining call's profile (the command line leaves it to its exit)"] = _freed()
    rows = dict(times)  # the phases of the explained run alone
    memprof.compare(f"{folder}/train_step.py:train", device="cpu", time_budget=0.0, explain=False)
    rows["freeing the measured calls' profile, `--no-explain` (the same)"] = _freed()
    return rows


def _freed() -> float:
    from memprof.core import gcpause

    start = time.perf_counter()
    gcpause.release_held()
    return time.perf_counter() - start


def dispatch(folder: str) -> dict[str, float]:
    from torch._C._dynamo.eval_frame import set_eval_frame
    from torch.utils._python_dispatch import TorchDispatchMode

    from memprof.sources.tracking import Tracker

    sys.path.insert(0, folder)
    from train_step import train, train_inputs  # type: ignore[import-not-found]

    class Nothing(TorchDispatchMode):  # torch wraps it in torch._dynamo.disable
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    class NothingHookOff(TorchDispatchMode):  # not wrapped: it keeps the hook off as memprof's does
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            hook = set_eval_frame(None)
            try:
                return func(*args, **(kwargs or {}))
            finally:
                if hook is not None:
                    set_eval_frame(hook)

    inputs = train_inputs()
    train(*inputs)
    out: dict[str, float] = {}
    for label, make in (
        ("the step alone", contextlib.nullcontext),
        ("under a dispatch mode that does nothing, in torch's torch._dynamo.disable wrapper", Nothing),
        ("under a dispatch mode that does nothing, keeping the hook off itself", NothingHookOff),
        ("under memprof's op tracker (no profiler)", lambda: Tracker(inputs, func=train)),
        (
            "under memprof's program-state tracker, as the measured calls (no profiler)",
            lambda: Tracker(inputs, func=train, ops=False),
        ),
    ):
        walls = []
        for _ in range(3):
            with make():
                start = time.perf_counter()
                train(*inputs)
                walls.append(time.perf_counter() - start)
        out[label] = statistics.median(walls)
    return out


def whole(code: str) -> float:
    walls = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def inside(code: str, **env: str) -> float:
    """Median of 3 fresh processes of the seconds ``code`` prints (its last line)."""
    seconds = []
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        )
        seconds.append(float(done.stdout.split()[-1]))
    return statistics.median(seconds)


# After the command line's start-up (torch imported in start_up_imports): torch._dynamo imported
# lazily, as an optimizer's first use imports it, then the full collection made before the
# measured calls; with the collector as it is, and in imports_frozen() as memprof's setup runs.
LAZY_IMPORT = """
import gc, os, time
from memprof.core.gcpause import imports_frozen, start_up_imports
with start_up_imports():
    import torch
start = time.perf_counter()
with {context}:
    import torch._dynamo
gc.collect()
print(time.perf_counter() - start)
os._exit(0)
"""


# memprof's modules that a run loads, after torch, where Python writes no bytecode.
RUN_PATH = """
import os, time
import torch
start = time.perf_counter()
import memprof.frontends.cli, memprof.library.api, memprof.sources.live.run
import memprof.pipeline, memprof.outputs.terminal
print(time.perf_counter() - start)
os._exit(0)
"""


def start_and_exit() -> dict[str, float]:
    imports = "import torch, torch._dynamo"
    lazy = "`import torch._dynamo` after the start-up, then a full collection"
    no_bytecode = "(m) memprof's modules a run loads, after torch, `PYTHONDONTWRITEBYTECODE=1`"
    with tempfile.TemporaryDirectory() as cache:
        inside(RUN_PATH, PYTHONDONTWRITEBYTECODE="1", XDG_CACHE_HOME=cache)  # fills the cache
        cached = inside(RUN_PATH, PYTHONDONTWRITEBYTECODE="1", XDG_CACHE_HOME=cache)
    return {
        f"{no_bytecode}: compiled from source (`MEMPROF_BYTECODE_CACHE=0`)": inside(
            RUN_PATH, PYTHONDONTWRITEBYTECODE="1", MEMPROF_BYTECODE_CACHE="0"
        ),
        f"{no_bytecode}: from memprof's bytecode cache": cached,
        lazy: inside(LAZY_IMPORT.format(context="open(os.devnull)")),
        f"{lazy}, in `imports_frozen()`": inside(LAZY_IMPORT.format(context="imports_frozen()")),
        "`import torch`, `os._exit`": whole("import torch, os; os._exit(0)"),
        f"`{imports}`, Python's exit": whole(imports),
        f"`{imports}`, `os._exit`": whole(f"{imports}, os; os._exit(0)"),
        f"`{imports}` in `start_up_imports()`, `os._exit`": whole(
            "import os\nfrom memprof.core.gcpause import start_up_imports\n"
            f"with start_up_imports():\n    {imports}\nos._exit(0)"
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=36, help="training steps per call (~2,726 events each)")
    parser.add_argument(
        "--step", choices=sorted(TRAIN_STEPS), default="mlp", help="which (f) step (bench.py --step)"
    )
    parser.add_argument("--part", default="123", help=argparse.SUPPRESS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "train_step.py").write_text(TRAIN_STEPS[args.step])
        os.environ["MEMPROF_BENCH_STEPS"] = str(args.steps)
        if args.part == "123":  # each part in a fresh process: the first profiler start is slow
            for part in "123":
                command = [sys.executable, __file__, "--steps", str(args.steps), "--step", args.step]
                command += ["--part", part]
                subprocess.run(command, check=True)
            return
        found = {"1": phases, "2": dispatch}.get(args.part)
        rows = found(folder) if found else start_and_exit()
    for label, seconds in rows.items():
        print(f"| ({args.part}) {label} | {seconds:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
