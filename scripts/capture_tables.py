"""Regenerate the captured torch profiler tables under tests/data/ (CPU only).

Run: python scripts/capture_tables.py [--compile]

The tables are real output of ``prof.key_averages().table(...)`` on small CPU workloads; the
tests assert on names, calls and byte counts that are deterministic for these workloads.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def _workload() -> torch.Tensor:
    a = torch.ones(256, 1000)  # 1,024,000 B
    b = torch.zeros(1000, 100)  # 400,000 B
    with record_function("my block: matmul & sum <fp32>"):
        c = a @ b  # 102,400 B
        d = c.sum(dim=1)  # 1,024 B
    e = torch.empty(10)  # 40 B
    del a
    return d + e.sum()


def _profile(**kwargs: object) -> profile:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, **kwargs) as prof:
        _workload()
    return prof


def _header(note: str) -> str:
    return (
        f"# captured with torch {torch.__version__}, python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}: {note}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--compile", action="store_true", help="also capture a torch.compile table")
    args = parser.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    _profile()  # the first profiler start in a process is slow and noisy

    prof = _profile()
    table = prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=-1)
    (DATA / "cpu_memory.txt").write_text(table)

    prof = _profile(record_shapes=True)
    table = prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_memory_usage", row_limit=-1)
    (DATA / "input_shapes.txt").write_text(table)

    # torch 2.13 fills op stacks only with the verbose experimental config.
    prof = _profile(
        with_stack=True,
        experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True),
    )
    table = prof.key_averages(group_by_stack_n=3).table(sort_by="self_cpu_memory_usage", row_limit=6)
    (DATA / "source_location.txt").write_text(table)

    prof = _profile(with_flops=True)
    table = prof.key_averages().table(
        sort_by="cpu_time_total", row_limit=-1, top_level_events_only=True, header="Top level"
    )
    (DATA / "top_level_flops.txt").write_text(table)

    # A log: noise before, between and after two tables, as a training script would print.
    first = _profile().key_averages().table(sort_by="cpu_memory_usage", row_limit=5)
    second = (
        _profile(record_shapes=True)
        .key_averages()
        .table(sort_by="self_cpu_time_total", row_limit=3, max_name_column_width=30)
    )
    log = (
        _header("two tables in a training log") + "epoch 1/2 loss=0.6931\n"
        "STAGE:2024-05-01 12:00:00 1234:1234 ActivityProfilerController.cpp:314]"
        " Completed Stage: Warm Up\n" + first + "\nepoch 2/2 loss=0.5012\n-----\n" + second + "done in 3.2s\n"
    )
    (DATA / "two_tables.log").write_text(log)

    if args.compile:
        fn = torch.compile(lambda x, y: (x[:, None, :] - y[None, :, :]).abs().lt(0.5).sum(-1))
        x, y = torch.randn(64, 100), torch.randn(80, 100)
        fn(x, y)  # compile outside the profile
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn(x, y)
        table = prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=-1)
        (DATA / "compiled.txt").write_text(table)
    print(f"wrote tables to {DATA}", file=sys.stderr)


if __name__ == "__main__":
    main()
