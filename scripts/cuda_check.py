"""Run memprof's CUDA path on a real GPU, with torch's own counters beside every figure.

    python scripts/cuda_check.py all OUT_DIR      # CUDA_CHECK_STEPS=examples,recordings: only those

writes OUT_DIR/log.txt (every command, its exit code, time and output) and OUT_DIR/results.tgz
(the reports, recordings and counters). What it runs:

- ``memprof run --device cuda`` of each built-in example, and beside it the same call without
  memprof (``plain``): ``torch.cuda.max_memory_allocated()`` above ``memory_allocated()`` at the
  call's start, and ``max_memory_reserved()``, for three calls in a row;
- ``--compare-compile`` of the similarity and GPT examples (Inductor's Triton kernels);
- a CUDA memory snapshot and a chrome trace of two examples, recorded with torch's own APIs
  (``record``), each with the counters over the recorded call, then ``memprof analyze`` of them;
- the DDP example under torchrun on NCCL (one rank: the machine has one GPU), and the FSDP2 and
  DDP examples as jobs of world size 1 measured on the GPU beside their estimates
  (``--world-size 1``);
- the allocations and frees of one call in torch's event tree against its flat event list,
  with memprof's tracker following ops and not (``tree``);
- the GPT step at the batch ``memprof estimate --gpu H100`` calls the largest that fits, and
  above it, without memprof (does it fit, and what the allocator reserved).

The subcommands ``plain TARGET [NAME=VALUE...]``, ``record TARGET PREFIX`` and ``tree TARGET``
print one JSON object; ``summary OUT_DIR/work`` (printed by ``all`` too) one line per run:
its peak and footprint against torch's counters, and how what is live at its peak was
explained.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

EXAMPLES = [
    "memprof.examples.similarity:similarity",
    "memprof.examples.no_grad:with_autograd",
    "memprof.examples.no_grad:no_grad",
    "memprof.examples.no_grad:inference_mode",
    "memprof.examples.channels_last:contiguous",
    "memprof.examples.channels_last:channels_last",
    "memprof.examples.activation_checkpointing:plain_step",
    "memprof.examples.activation_checkpointing:checkpointed_step",
    "memprof.examples.gpt:train_step",
    "memprof.examples.checkpoint_load:full_load",
    "memprof.examples.checkpoint_load:mmap_load",
    "memprof.examples.checkpoint_load:map_location_load",
    "memprof.examples.pinned_memory:pageable",
    "memprof.examples.pinned_memory:pinned",
]
RECORDED = ["memprof.examples.similarity:similarity", "memprof.examples.gpt:train_step"]
PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _call_of(target: str, sets: dict[str, Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    module_name, name = target.split(":")
    module = importlib.import_module(module_name)
    inputs = getattr(module, f"{name}_inputs")(device="cuda:0", **sets)
    if isinstance(inputs, dict):
        return getattr(module, name), (), inputs
    if isinstance(inputs, (tuple, list)):
        return getattr(module, name), tuple(inputs), {}
    return getattr(module, name), (inputs,), {}


def _counted(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    began = time.perf_counter()
    try:
        fn(*args, **kwargs)
        torch.cuda.synchronize()
        error = None
    except torch.OutOfMemoryError as oom:
        error = str(oom).splitlines()[0]
    return {
        "memory_allocated_start_bytes": start,
        "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
        "peak_above_start_bytes": torch.cuda.max_memory_allocated() - start,
        "max_memory_reserved_bytes": torch.cuda.max_memory_reserved(),
        "memory_allocated_end_bytes": torch.cuda.memory_allocated(),
        "seconds": round(time.perf_counter() - began, 4),
        "out_of_memory": error,
    }


def plain(target: str, settings: list[str]) -> dict[str, Any]:
    """Three calls of ``target`` on cuda:0 without any profiler, each with torch's counters."""
    import torch

    sets = {key: _value(value) for key, value in (item.split("=", 1) for item in settings)}
    fn, args, kwargs = _call_of(target, sets)
    calls = []
    for _ in range(3):
        calls.append(_counted(fn, args, kwargs))
        if calls[-1]["out_of_memory"]:
            break
    free, total = torch.cuda.mem_get_info()
    return {
        "target": target,
        "set": sets,
        "calls": calls,
        "device_free_bytes": free,
        "device_total_bytes": total,
    }


def record(target: str, prefix: str) -> dict[str, Any]:
    """One warm-up call, then a call under ``_record_memory_history`` (snapshot PREFIX.pickle) and
    a call under torch.profiler with memory (trace PREFIX.json), each with its counters."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from memprof.core.records import CALL_MARKER

    fn, args, kwargs = _call_of(target, {})
    fn(*args, **kwargs)
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    snapshot = _counted(fn, args, kwargs)
    torch.cuda.memory._dump_snapshot(f"{prefix}.pickle")
    torch.cuda.memory._record_memory_history(enabled=None)
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=activities, profile_memory=True, record_shapes=True, with_stack=True) as prof:
        with record_function(CALL_MARKER):  # as memprof run marks a call: on the host and the GPU
            trace = _counted(fn, args, kwargs)
    prof.export_chrome_trace(f"{prefix}.json")
    truth = {
        "target": target,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
        "device_total_bytes": torch.cuda.get_device_properties(0).total_memory,
        "snapshot": snapshot,
        "trace": trace,
    }
    Path(f"{prefix}.truth.json").write_text(json.dumps(truth, indent=1))
    return truth


def tree_counts(target: str) -> dict[str, Any]:
    """Allocations and frees of cuda:0 in one call's profile, in torch's event tree against
    its flat event list, with memprof's tracker following program state only and following ops
    too (a ``TorchDispatchMode``): the "lacks free records" figures of docs/accuracy/h100.md."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from memprof.core.records import CALL_MARKER
    from memprof.sources.tracking import Tracker

    fn, args, kwargs = _call_of(target, {})
    fn(*args, **kwargs)
    torch.cuda.synchronize()
    counts: dict[str, Any] = {"target": target}
    for label, ops in (("state", False), ("ops", True)):
        with Tracker(args, kwargs, func=fn, device="cuda:0", ops=ops):
            with profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True
            ) as prof:
                with record_function(CALL_MARKER):
                    fn(*args, **kwargs)
                    torch.cuda.synchronize()
        tree, stack = [0, 0], list(prof.profiler.kineto_results.experimental_event_tree())
        while stack:
            node = stack.pop()
            if node.name == "[memory]" and node.extra_fields.device.type == "cuda":
                tree[node.extra_fields.alloc_size < 0] += 1
            stack += node.children
        flat = [0, 0]
        for event in prof.profiler.kineto_results.events():
            if event.name() == "[memory]" and event.device_type().name == "CUDA":
                flat[event.nbytes() < 0] += 1
        counts[label] = {"tree_allocs_frees": tree, "flat_allocs_frees": flat}
    return counts


class Log:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.path.write_text("")

    def write(self, text: str) -> None:
        with self.path.open("a") as handle:
            handle.write(text)


def _sh(log: Log, command: str, timeout: float, env: dict[str, str] | None = None) -> int:
    began = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            shell=True,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        code, out, err = 124, str(expired.stdout or ""), str(expired.stderr or "") + "\n[timed out]"
    took = time.perf_counter() - began
    log.write(f"\n### $ {command}\n### exit {code} in {took:.1f} s\n{out}")
    if err.strip():
        log.write(f"--- stderr ---\n{err[-6000:]}\n")
    return code


def _slug(target: str) -> str:
    return target.split(".")[-1].replace(":", "-")


def _examples(log: Log, work: Path) -> None:
    memprof = f"{PY} -m memprof"
    jobs = []
    for target in EXAMPLES:
        slug = _slug(target)
        jobs.append(f"{memprof} run {target} --device cuda -q --json {work}/run-{slug}.json")
        jobs.append(f"{PY} scripts/cuda_check.py plain {target} > {work}/plain-{slug}.json")
    jobs.append(
        f"{memprof} run memprof.examples.gpt:train_step --device cuda --repeat 3 -q "
        f"--json {work}/repeat-gpt.json"
    )
    for target in RECORDED:
        slug = _slug(target)
        jobs.append(
            f"{memprof} run {target} --device cuda --compare-compile -q --json {work}/compile-{slug}.json "
            f"--html {work}/compile-{slug}.html"
        )
        jobs.append(f"{PY} scripts/cuda_check.py record {target} {work}/rec-{slug}")
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda command: _sh(log, command, 300), jobs))


def _recordings(log: Log, work: Path) -> None:
    memprof = f"{PY} -m memprof"
    for target in RECORDED:
        prefix = f"{work}/rec-{_slug(target)}"
        _sh(log, f"{memprof} analyze {prefix}.json --json {prefix}.trace-report.json", 120)
        _sh(log, f"{memprof} analyze {prefix}.pickle --json {prefix}.snapshot-report.json", 120)
        _sh(log, f"{memprof} analyze {prefix}.json {prefix}.pickle --markdown {prefix}.both.md", 120)


def _distributed(log: Log, work: Path) -> None:
    ddp = "memprof.examples.ddp:step --warmup 1 --device cuda"
    _sh(
        log,
        f"{PY} -m torch.distributed.run --standalone --nproc-per-node 1 -m memprof run {ddp} "
        f"--json {work}/ddp-torchrun.json",
        180,
    )
    _sh(log, f"{PY} -m memprof run {ddp} --nproc-per-node 1 --json {work}/ddp-nproc1.json", 180)
    _sh(log, f"{PY} -m memprof run {ddp} --nproc-per-node 2", 180)
    # Sharded jobs of world size 1 on the GPU against their estimates: FSDP2 and DDP examples,
    # measured under torchrun on NCCL, estimated with --world-size 1 for the card.
    for example in ("fsdp", "ddp"):
        target = f"memprof.examples.{example}:step"
        _sh(
            log,
            f"{PY} -m torch.distributed.run --standalone --nproc-per-node 1 -m memprof run {target} "
            f"--device cuda --json {work}/{example}-world1-measured.json",
            240,
        )
        _sh(
            log,
            f"{PY} -m memprof estimate {target} --world-size 1 --device cuda "
            f"--json {work}/{example}-world1-estimated.json",
            240,
        )


def _tree(log: Log, work: Path) -> None:
    for target in ("memprof.examples.no_grad:no_grad", "memprof.examples.gpt:train_step"):
        _sh(log, f"{PY} scripts/cuda_check.py tree {target} > {work}/tree-{_slug(target)}.json", 120)


def _fit(log: Log, work: Path) -> None:
    for batch in (14719, 16384):
        _sh(
            log,
            f"{PY} scripts/cuda_check.py plain memprof.examples.gpt:train_step batch={batch} "
            f"> {work}/fit-{batch}.json",
            240,
        )
    _sh(
        log,
        f"{PY} -m memprof run memprof.examples.gpt:train_step --device cuda --set batch=16384 "
        "--no-explain --time-budget 0",
        240,
    )


def everything(out: Path) -> None:
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    log = Log(out / "log.txt")
    _sh(
        log,
        "nvidia-smi; " + shlex.quote(PY) + " -c 'import torch, sys; print(sys.version, torch.__version__, "
        "torch.version.cuda, torch.cuda.get_device_name(0), "
        "torch.cuda.get_device_properties(0).total_memory)'",
        60,
    )
    steps = [_examples, _recordings, _distributed, _tree, _fit]
    only = os.environ.get("CUDA_CHECK_STEPS")  # e.g. "examples,recordings"
    for step in steps:
        if only and step.__name__.lstrip("_") not in only.split(","):
            continue
        began = time.perf_counter()
        step(log, work)
        log.write(f"\n=== {step.__name__} took {time.perf_counter() - began:.1f} s\n")
        with tarfile.open(out / "results.tgz", "w:gz") as tar:
            tar.add(work, arcname="work")


def summary(work: Path) -> list[str]:
    """One line per run of the reports under ``work``: whether its peak and footprint are
    torch's counters to the byte, whether what is live at the peak was explained from the
    explaining call (else from the measured calls, with a note), and its largest entry made
    during the call."""
    lines = []
    for path in sorted(work.glob("*.json")):
        document = json.loads(path.read_text())
        if not isinstance(document, dict) or "runs" not in document:
            continue
        for label, run in document["runs"].items():
            counters = run.get("device_counters") or {}
            if "allocator_peak_above_start_bytes" not in counters:
                continue
            exact = run["peak_bytes"] == counters["allocator_peak_above_start_bytes"] and run[
                "footprint_bytes"
            ] == counters.get("max_memory_allocated_bytes")
            fallback = any("explaining call's records" in note for note in run.get("notes", []))
            made = [e for e in (run.get("at_peak") or {}).get("entries", []) if not e["before_call"]]
            top = f"{made[0]['bytes']:,} B {made[0]['op']} {made[0]['source']}" if made else "-"
            lines.append(
                f"{'exact' if exact else 'DIFFERS'} {'fallback' if fallback else 'explained'} "
                f"{path.stem}/{label}: peak {run['peak_bytes']:,} B, "
                f"footprint {run['footprint_bytes']:,} B; {top}"
            )
    return lines


def main() -> None:
    verb = sys.argv[1]
    if verb == "plain":
        print(json.dumps(plain(sys.argv[2], sys.argv[3:]), indent=1))
    elif verb == "tree":
        print(json.dumps(tree_counts(sys.argv[2]), indent=1))
    elif verb == "record":
        print(json.dumps(record(sys.argv[2], sys.argv[3]), indent=1))
    elif verb == "all":
        everything(Path(sys.argv[2]))
        print("\n".join(summary(Path(sys.argv[2]) / "work")))
    elif verb == "summary":
        print("\n".join(summary(Path(sys.argv[2]))))
    else:
        raise SystemExit(f"unknown verb {verb!r}: all, summary, plain, record or tree")


if __name__ == "__main__":
    main()
