"""Shared fixtures: hand-built reports with known numbers, a working directory for user modules,
and one compiled run per session (compiling costs ~11 s cold: every test that needs a compiled
run shares ``similarity_report``).

Tests marked ``slow`` (torch.compile, pytest subprocesses, the scale tests) run only with
``--run-slow`` (or ``MEMPROF_RUN_SLOW=1``): ``python -m pytest -q`` is the quick check,
``python -m pytest -q --run-slow`` everything. Property tests (hypothesis) try 25 examples each
in the quick check and their full count (100, or the count a test sets) with ``--run-slow``."""

from __future__ import annotations

import itertools
import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from memprof.model import Report, RunResult
from memprof.model.explanation import AtPeak, AtPeakEntry, CallNumbers, ModuleStats
from memprof.model.ops import OpStats
from memprof.model.timeline import CategoryTimeline, Timeline
from memprof.pipeline import build_report

_counter = itertools.count()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="Rewrite tests/golden/* instead of comparing (or set MEMPROF_UPDATE_GOLDEN=1).",
    )
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="Also run the tests marked slow (or set MEMPROF_RUN_SLOW=1).",
    )


settings.register_profile("quick", max_examples=25)
settings.register_profile("full")


def pytest_configure(config: pytest.Config) -> None:
    full = config.getoption("--run-slow") or os.environ.get("MEMPROF_RUN_SLOW") == "1"
    settings.load_profile("full" if full else "quick")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow") or os.environ.get("MEMPROF_RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow (or MEMPROF_RUN_SLOW=1)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _default_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output is laid out for ``COLUMNS`` when set: the tests start without it (the width of a
    pipe, 100), and those about another width set it themselves."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden")) or os.environ.get("MEMPROF_UPDATE_GOLDEN") == "1"


MIB = 1024 * 1024

# Names that must survive every format: HTML-special, Markdown-special, a table pipe, backticks.
SCRIPT_LABEL = "<script>alert(1)</script>"
PIPE_NAME = "my|op & <b>'quoted' \"twice\"</b>"
TICK_NAME = "weird `tick` *star* _under_"


def op_stats(rows: list[tuple[str, int, int, int, int, int]]) -> tuple[OpStats, ...]:
    """(name, calls, self, total, allocated, peak) rows -> the run's ops (times 1 us/call)."""
    return tuple(OpStats(*row, self_us=float(row[1]), total_us=float(row[1]) * 2) for row in rows)


def _run(
    label: str, mode: str, peak: int, allocated: int, net: int, ops: tuple[OpStats, ...], **extra: object
) -> RunResult:
    return RunResult(
        label=label,
        mode=mode,
        peak_bytes=peak,
        allocated_bytes=allocated,
        net_bytes=net,
        inputs_bytes=2 * MIB,
        wall_ms=12.5,
        op_stats=ops,
        **extra,  # type: ignore[arg-type]
    )


def make_compare_report() -> Report:
    """eager vs compile with exactly known bytes: eager allocates a 256 MiB temporary in
    ``aten::sub`` and 64 MiB in ``aten::abs`` on top (peak 320 MiB during abs); the compiled run
    fuses sub+abs into one kernel that allocates only its 1 MiB output."""
    eager_ops = op_stats(
        [
            ("aten::sub", 1, 256 * MIB, 256 * MIB, 256 * MIB, 256 * MIB),
            ("aten::abs", 1, 64 * MIB, 64 * MIB, 64 * MIB, 64 * MIB),
            (SCRIPT_LABEL, 1, -319 * MIB, 1 * MIB, 320 * MIB, 320 * MIB),
            (PIPE_NAME, 2, 0, 0, 0, 0),
            (TICK_NAME, 1, 1024, 1024, 1024, 1024),
        ]
    )
    compile_ops = op_stats(
        [
            ("cpp_fused_abs_sub_0", 1, 1 * MIB, 1 * MIB, 1 * MIB, 1 * MIB),
            (SCRIPT_LABEL, 1, 0, 1 * MIB, 1 * MIB, 1 * MIB),
            (PIPE_NAME, 2, 0, 0, 0, 0),
        ]
    )
    eager = _run(
        "eager",
        "eager",
        320 * MIB,
        320 * MIB + 1024,
        1 * MIB + 1024,
        eager_ops,
        peak_op="aten::abs",
        peak_op_stack=(SCRIPT_LABEL, "aten::abs"),
        timeline=Timeline(
            t_ns=(0, 1_000_000, 2_000_000, 3_000_000, 4_000_000),
            bytes=(0, 256 * MIB, 320 * MIB, 64 * MIB, 1 * MIB),
            op_names=("aten::sub", "aten::abs"),
            op_at=(-1, 0, 1, 1, -1),
        ),
        torch_table="Name  Self CPU Mem\n<script>alert(1)</script>  -319.00 MB\n",
    )
    compiled = _run(
        "compile",
        "compile",
        1 * MIB,
        1 * MIB,
        1 * MIB,
        compile_ops,
        peak_op="cpp_fused_abs_sub_0",
        compile_seconds=4.3,
        timeline=Timeline(
            t_ns=(0, 500_000, 900_000),
            bytes=(0, 1 * MIB, 1 * MIB),
            op_names=("cpp_fused_abs_sub_0",),
            op_at=(-1, 0, -1),
        ),
        notes=("blocks allocated before profiling were freed during it",),
    )
    return build_report(
        target="tests.workload:sub_abs",
        device="cpu",
        runs={"eager": eager, "compile": compiled},
        environment={"torch": "2.13.0+cpu", "python": "3.11.7", "platform": "Linux", "device_name": "x86_64"},
        created="2026-01-02T03:04:05+00:00",
    )


def make_single_report() -> Report:
    """One eager run: three 4 MiB buffers from ``aten::empty`` and one from ``aten::add`` (16 MiB
    allocated); at most two are alive at once (peak 8 MiB, during add); one is left (net 4 MiB)."""
    ops = op_stats(
        [
            ("aten::empty", 3, 12 * MIB, 12 * MIB, 12 * MIB, 4 * MIB),
            ("aten::add", 1, 4 * MIB, 4 * MIB, 4 * MIB, 4 * MIB),
            ("[memory]", 0, -12 * MIB, -12 * MIB, 0, 0),  # frees outside any op
        ]
    )
    run = _run(
        "eager",
        "eager",
        8 * MIB,
        16 * MIB,
        4 * MIB,
        ops,
        peak_op="aten::add",
        timeline=Timeline(t_ns=(0, 10, 20, 30), bytes=(0, 4 * MIB, 8 * MIB, 4 * MIB)),
    )
    return build_report(
        target="tests/workload.py:three",
        device="cpu",
        runs={"eager": run},
        environment={"torch": "2.13.0+cpu"},
        created="2026-01-02T03:04:05+00:00",
    )


def make_explained_report() -> Report:
    """One explained eager run with exactly known numbers: 4 MiB live at the start (a 2 MiB
    parameter and 2 MiB of optimizer state), then a 4 MiB activation of ``net.fc1`` and a 2 MiB
    temporary made in backward by a module with a hostile name: footprint 10 MiB, peak 6 MiB."""
    entries = (
        AtPeakEntry(4 * MIB, 1, "activation", "net.fc1", "forward", "model.py:12", "h = self.fc1(x)",
                    "aten::addmm", "(1024, 1024)", "float32", False),
        AtPeakEntry(2 * MIB, 1, "temporary", SCRIPT_LABEL, "backward", "model.py:20",
                    f"y = f('{SCRIPT_LABEL}')", "aten::mm", "(512, 1024)", "float32", False),
        AtPeakEntry(2 * MIB, 2, "optimizer_state", "net.fc1", "", "", "", "", "(512, 512)", "float32", True),
        AtPeakEntry(2 * MIB, 1, "parameter", "net.fc1", "", "", "", "", "(512, 1024)", "float32", True),
    )  # fmt: skip
    by_category = {"parameter": 2 * MIB, "gradient": 0, "optimizer_state": 2 * MIB, "input": 0}
    by_category.update(activation=4 * MIB, temporary=2 * MIB, workspace=0, other=0)
    at_peak = AtPeak(by_category, entries, (), footprint_bytes=10 * MIB, peak_bytes=6 * MIB)
    t_ns = (0, 1_000_000, 2_000_000, 3_000_000)
    series = dict.fromkeys(by_category, (0, 0, 0, 0))
    series.update(
        parameter=(2 * MIB,) * 4,
        optimizer_state=(2 * MIB,) * 4,
        activation=(0, 4 * MIB, 4 * MIB, 0),
        temporary=(0, 0, 2 * MIB, 0),
    )
    run = _run(
        "eager",
        "eager",
        6 * MIB,
        6 * MIB,
        0,
        op_stats(
            [
                ("aten::addmm", 1, 4 * MIB, 4 * MIB, 4 * MIB, 4 * MIB),
                ("aten::mm", 1, 2 * MIB, 2 * MIB, 2 * MIB, 2 * MIB),
            ]
        ),
        footprint_bytes=10 * MIB,
        live_at_start_bytes=4 * MIB,
        peak_op="aten::mm",
        at_peak=at_peak,
        module_stats=(
            ModuleStats("net", "forward", 1, 4 * MIB, 4 * MIB, 4 * MIB),
            ModuleStats("net.fc1", "forward", 1, 4 * MIB, 4 * MIB, 4 * MIB),
            ModuleStats(SCRIPT_LABEL, "backward", 1, 2 * MIB, 2 * MIB, 2 * MIB),
        ),
        call_numbers=(CallNumbers(1, 4 * MIB, 10 * MIB, 6 * MIB, 4 * MIB, None),),
        peak_call=1,
        timeline=Timeline(
            t_ns=t_ns,
            bytes=(0, 4 * MIB, 6 * MIB, 0),
            by_category=CategoryTimeline(t_ns=t_ns, bytes=series),
        ),
    )
    return build_report(
        target="tests/model.py:step",
        device="cpu",
        runs={"eager": run},
        environment={"torch": "2.13.0+cpu"},
        created="2026-01-02T03:04:05+00:00",
    )


@pytest.fixture
def explained_report() -> Report:
    return make_explained_report()


@pytest.fixture
def compare_report() -> Report:
    return make_compare_report()


@pytest.fixture
def single_report() -> Report:
    return make_single_report()


@pytest.fixture(scope="session")
def similarity_report():
    """Eager and compiled profiles of the built-in similarity example (256 x 500)."""
    import memprof

    return memprof.compare(
        "memprof.examples.similarity:similarity", mode="both", device="cpu", keep_table=True
    )


@pytest.fixture
def make_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """Write a uniquely named module into a fresh working directory; returns its name.

    The working directory becomes ``tmp_path`` (targets resolve from there, as for a user)."""
    monkeypatch.chdir(tmp_path)
    names: list[str] = []

    def make(source: str, name: str | None = None) -> str:
        module = name or f"usermod_{next(_counter)}"
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
        names.append(module)
        return module

    saved_path = list(sys.path)
    yield make
    sys.path[:] = saved_path
    for module in names:
        sys.modules.pop(module, None)
