"""memprof's pytest plugin: memory budgets and baselines for tests.

Installed with memprof (entry point ``pytest11``); without installing, load it with
``pytest -p memprof.pytest_plugin``. Importing it is cheap: torch loads on the first profile.

The fixture ``memprof_profile(fn, *args, mode="eager", **kwargs)`` profiles ``fn(*args,
**kwargs)`` like :func:`memprof.profile` and returns the :class:`memprof.Report`. Each call is
gated at once, so the test fails at the line that profiled. Wall times come from the profiled
calls unless ``time_budget=`` asks for timed calls (tests gate memory; timing costs time), and
torch's own warnings and log records stay out of a failed test's output:

- ``@pytest.mark.memprof(peak="800 MB", mode="eager"|"compile"|"both")``: ``peak`` is the
  budget of every run profiled in the test; ``mode`` the default mode of the fixture's calls
  (an explicit ``mode=`` wins). A marked test must call the fixture, or it fails.
- ``--memprof-baseline-dir DIR`` compares every profile with ``DIR/<test id>.json`` (the
  second call in a test with ``<test id>-2.json``, ...) within ``--memprof-tolerance``
  (default 5%); ``--memprof-save-baseline`` writes those files instead of comparing.

A failure shows the violation lines, the top ops of each run and the gate's summary line.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from memprof.model import Report

_PROFILED = pytest.StashKey[int]()
_TOP_OPS = 5


class MemprofWarning(UserWarning):
    """A baseline is missing or comes from another device or torch version."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memprof", "memory budgets and baselines (memprof)")
    group.addoption(
        "--memprof-baseline-dir",
        default=None,
        metavar="DIR",
        help="Compare each memprof_profile call with the report stored in DIR for its test.",
    )
    group.addoption(
        "--memprof-tolerance",
        default="5%",
        metavar="PERCENT",
        help="Peak growth allowed over the stored baseline (default 5%%).",
    )
    group.addoption(
        "--memprof-save-baseline",
        action="store_true",
        default=False,
        help="Write each test's report into --memprof-baseline-dir instead of comparing.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        'memprof(peak="800 MB", mode="eager"): fail when a run profiled with the memprof_profile '
        "fixture peaks above `peak`; `mode` (eager, compile, both) is the fixture's default mode.",
    )
    from memprof.errors import UsageError
    from memprof.units import parse_percent

    try:
        parse_percent(config.getoption("--memprof-tolerance"))
    except UsageError as error:
        raise pytest.UsageError(f"--memprof-tolerance: {error.message}") from None
    if config.getoption("--memprof-save-baseline") and not config.getoption("--memprof-baseline-dir"):
        raise pytest.UsageError("--memprof-save-baseline needs --memprof-baseline-dir DIR")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    result = yield
    if item.get_closest_marker("memprof") is not None and not item.stash.get(_PROFILED, 0):
        pytest.fail(
            "@pytest.mark.memprof: the test never called the memprof_profile fixture, so nothing was "
            "measured; profile the code under test with memprof_profile(fn, *args)",
            pytrace=False,
        )
    return result


def baseline_name(nodeid: str, index: int = 0) -> str:
    """The file of a test's baseline: its node id made a safe file name, ``-2`` for its
    second profile and so on. ``tests/test_a.py::test_b[x]`` -> ``tests_test_a.py__test_b_x_.json``."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", nodeid).strip("._") or "test"
    return f"{stem}.json" if index == 0 else f"{stem}-{index + 1}.json"


def _marker_options(node: pytest.Item) -> tuple[int | None, str]:
    marker = node.get_closest_marker("memprof")
    if marker is None:
        return None, "eager"
    from memprof.errors import UsageError
    from memprof.units import parse_size

    unknown = set(marker.kwargs) - {"peak", "mode"}
    if marker.args or unknown:
        pytest.fail(
            f"@pytest.mark.memprof takes peak= and mode= only, got {marker.args or sorted(unknown)}; "
            'e.g. @pytest.mark.memprof(peak="800 MB")',
            pytrace=False,
        )
    peak = marker.kwargs.get("peak")
    mode = marker.kwargs.get("mode", "eager")
    if mode not in ("eager", "compile", "both"):
        pytest.fail(f"@pytest.mark.memprof: mode {mode!r} is not eager, compile or both", pytrace=False)
    if peak is None or isinstance(peak, int) and not isinstance(peak, bool):
        return peak, mode
    try:
        return parse_size(str(peak)), mode
    except UsageError as error:
        message = error.message
    # Failed outside the except block: the report shows one message, not a chained traceback.
    pytest.fail(f"@pytest.mark.memprof: peak: {message}", pytrace=False)


def _top_ops(report: Report) -> list[str]:
    from memprof.report.rows import run_rows
    from memprof.units import format_bytes

    lines = []
    for label, run in report.runs.items():
        if run.failed:
            continue
        listed = ", ".join(
            f"{op.name} {format_bytes(op.peak_bytes)}" for op in run_rows(run, "peak", _TOP_OPS)
        )
        lines.append(f"top ops of {label} by peak: {listed or '(none)'}")
    return lines


# Messages inside the fixture name memprof.profile's keywords as the fixture takes them; the
# gate's other knobs (strict_env, ...) do not exist here, so hints about them are left out.
_PROFILE_PARAMETERS = frozenset(
    {"mode", "device", "warmup", "repeat", "compile_mode", "backend", "time_budget", "verbose"}
)


def _spelling(name: str, value: Any) -> str | None:
    from memprof.errors import python_spelling

    return python_spelling(name, value) if name in _PROFILE_PARAMETERS else None


@pytest.fixture
def memprof_profile(request: pytest.FixtureRequest) -> Callable[..., Report]:
    """Profile ``fn(*args, **kwargs)`` (like :func:`memprof.profile`) and return the Report;
    the test fails at once when the marker's peak or the stored baseline is exceeded."""
    item = request.node
    config = request.config
    budget, default_mode = _marker_options(item)
    baseline_dir = config.getoption("--memprof-baseline-dir")
    save = bool(config.getoption("--memprof-save-baseline"))

    def profile(fn: Callable[..., Any], *args: Any, mode: str | None = None, **kwargs: Any) -> Report:
        import memprof
        from memprof.errors import spelled_as
        from memprof.fileio import atomic_write_text
        from memprof.gate import Budgets, GateConfig, evaluate
        from memprof.model import load_report
        from memprof.units import parse_percent

        index = item.stash.get(_PROFILED, 0)
        item.stash[_PROFILED] = index + 1
        # Tests gate memory: no calls are timed beyond the profiled ones unless asked for.
        time_budget = kwargs.pop("time_budget", 0)
        with spelled_as(_spelling):
            report = memprof.profile(fn, *args, mode=mode or default_mode, time_budget=time_budget, **kwargs)

        baseline = None
        if baseline_dir is not None:
            path = Path(baseline_dir) / baseline_name(item.nodeid, index)
            if save:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(path, report.to_json())
            elif path.exists():
                baseline = load_report(path)
            else:
                warnings.warn(
                    MemprofWarning(f"no memprof baseline {path}; write it with --memprof-save-baseline"),
                    stacklevel=2,
                )
        gate = GateConfig(
            budgets=Budgets(default=budget),
            baseline=baseline,
            tolerance=parse_percent(config.getoption("--memprof-tolerance")),
        )
        if not gate.active:
            return report
        with spelled_as(_spelling):
            result = evaluate(report, gate)
        for warning in result.warnings:
            warnings.warn(MemprofWarning(warning), stacklevel=2)
        if not result.passed:
            lines = [v.line for v in result.violations] + _top_ops(report) + [result.summary()]
            pytest.fail("\n".join(lines), pytrace=False)
        return report

    return profile
