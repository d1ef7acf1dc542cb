"""memprof's pytest plugin: memory budgets and baselines for tests.

Installed with memprof (entry point ``pytest11``); without installing, load it with
``pytest -p memprof.frontends.pytest_plugin``. Importing it is cheap: torch loads on the first profile.

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

A failure shows the violation lines, each with what explains it (what grew at the peak over the
baseline, or the largest entries at the peak over a budget), the top ops of each run and the
gate's summary line.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from memprof.model.report import Report

_PROFILED = pytest.StashKey[int]()
_BASELINE_OWNERS = pytest.StashKey[dict[str, tuple[str, int]]]()
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
    from memprof.core.errors import UsageError
    from memprof.core.units import parse_percent

    try:
        parse_percent(config.getoption("--memprof-tolerance"))
    except UsageError as error:
        raise pytest.UsageError(f"--memprof-tolerance: {error.message}") from None
    folder = config.getoption("--memprof-baseline-dir")
    if config.getoption("--memprof-save-baseline") and not folder:
        raise pytest.UsageError("--memprof-save-baseline needs --memprof-baseline-dir DIR")
    if folder and os.path.exists(path := Path(config.invocation_params.dir, folder)) and not path.is_dir():
        # Every baseline would be "missing": the gate silently off.
        raise pytest.UsageError(
            f"--memprof-baseline-dir {folder!r} is a file, not a folder; give the folder that holds the "
            "baselines (or that --memprof-save-baseline writes them into)"
        )


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


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
# A node id whose only characters outside [A-Za-z0-9_.-] are its structure: "/" in the path,
# "::" between names, one [...] of parameters at the end.
_PLAIN_NODEID = re.compile(r"[A-Za-z0-9_.\-/]+(?:::[A-Za-z0-9_.\-]+)*(?:\[[A-Za-z0-9_.\-]*\])?")
_MAX_STEM = 120  # file names stay well under the usual 255-byte limit


def legacy_baseline_name(nodeid: str, index: int = 0) -> str:
    """The name memprof gave a baseline before names were made one-to-one (several node ids
    could share it: ``test_c[a b]`` and ``test_c[a_b]``)."""
    stem = _UNSAFE.sub("_", nodeid).strip("._") or "test"
    return f"{stem}.json" if index == 0 else f"{stem}-{index + 1}.json"


def baseline_name(nodeid: str, index: int = 0) -> str:
    """The file of a test's baseline: its node id made a readable file name, ``-2`` for its
    second profile and so on. ``tests/test_a.py::test_b[x]`` -> ``tests_test_a.py__test_b_x.json``.

    Where making the name replaced more than the node id's structure (a space or ``/`` inside
    the parameters, any other character) or cut a very long id, different node ids could get
    the same name; those names end in ``-`` and a hash of the whole node id, e.g.
    ``test_a.py__test_c_a_b-6987fce7b1.json`` for ``test_a.py::test_c[a b]``.
    """
    import hashlib

    stem = _UNSAFE.sub("_", nodeid).strip("._") or "test"
    if _PLAIN_NODEID.fullmatch(nodeid) is None or len(stem) > _MAX_STEM:
        digest = hashlib.sha256(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        stem = f"{stem[:_MAX_STEM]}-{digest}"
    return f"{stem}.json" if index == 0 else f"{stem}-{index + 1}.json"


def _claim(config: pytest.Config, name: str, nodeid: str, index: int) -> None:
    """Fail loudly when two profiles of a session would share a baseline file (compared
    case-insensitively: some file systems are)."""
    owners = config.stash.setdefault(_BASELINE_OWNERS, {})
    owner = owners.setdefault(name.lower(), (nodeid, index))
    if owner != (nodeid, index):
        other = owner[0] if owner[1] == 0 else f"{owner[0]} (profile {owner[1] + 1})"
        pytest.fail(
            f"memprof: baseline file {name} would also be used by {other}; rename one of the tests "
            "(or its parameter ids) so that each has its own baseline",
            pytrace=False,
        )


def _marker_options(node: pytest.Item) -> tuple[int | None, str]:
    marker = node.get_closest_marker("memprof")
    if marker is None:
        return None, "eager"
    from memprof.core.errors import UsageError, brief
    from memprof.core.units import SIZE_EXAMPLE, parse_size

    unknown = set(marker.kwargs) - {"peak", "mode"}
    if marker.args or unknown:
        pytest.fail(
            f"@pytest.mark.memprof takes peak= and mode= only, got {marker.args or sorted(unknown)}; "
            'e.g. @pytest.mark.memprof(peak="800 MB")',
            pytrace=False,
        )
    peak = marker.kwargs.get("peak")
    mode = marker.kwargs.get("mode", "eager")
    if not isinstance(mode, str) or mode not in ("eager", "compile", "both"):
        pytest.fail(f"@pytest.mark.memprof: mode {brief(mode)} is not eager, compile or both", pytrace=False)
    if peak is None:
        return None, mode
    if isinstance(peak, int) and not isinstance(peak, bool):
        if peak >= 0:
            return peak, mode
        message = f"{peak} is negative; a budget is a size like {SIZE_EXAMPLE}"
    elif not isinstance(peak, str):
        kind = type(peak).__name__
        message = f"{brief(peak)} is a {kind}; give a whole number of bytes or a size like {SIZE_EXAMPLE}"
    else:
        try:
            return parse_size(peak), mode
        except UsageError as error:
            message = error.message
    # Failed outside the except block: the report shows one message, not a chained traceback.
    pytest.fail(f"@pytest.mark.memprof: peak: {message}", pytrace=False)


def _top_ops(report: Report) -> list[str]:
    from memprof.core.units import format_bytes
    from memprof.outputs.rows import run_rows

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
    {"mode", "device", "warmup", "repeat", "compile_mode", "backend", "time_budget", "verbose", "explain"}
)


def _spelling(name: str, value: Any) -> str | None:
    from memprof.core.errors import python_spelling

    return python_spelling(name, value) if name in _PROFILE_PARAMETERS else None


@pytest.fixture
def memprof_profile(request: pytest.FixtureRequest) -> Callable[..., Report]:
    """Profile ``fn(*args, **kwargs)`` (like :func:`memprof.profile`) and return the Report;
    the test fails at once when the marker's peak or the stored baseline is exceeded."""
    item = request.node
    config = request.config
    budget, default_mode = _marker_options(item)

    def profile(fn: Callable[..., Any], *args: Any, mode: str | None = None, **kwargs: Any) -> Report:
        from memprof.analysis.gate import Budgets, GateConfig, evaluate
        from memprof.core.errors import UserCodeError, spelled_as, users_own
        from memprof.core.text import visible
        from memprof.core.units import parse_percent
        from memprof.library.api import profile

        __tracebackhide__ = True  # a failure shows the test's line and the user's code, not this
        index = item.stash.get(_PROFILED, 0)
        item.stash[_PROFILED] = index + 1
        # Tests gate memory: no calls are timed beyond the profiled ones unless asked for.
        time_budget = kwargs.pop("time_budget", 0)
        try:
            with spelled_as(_spelling):
                report = profile(fn, *args, mode=mode or default_mode, time_budget=time_budget, **kwargs)
        except UserCodeError as failed:
            if failed.raised is None:
                raise
            # The test fails with what the code raised, where it raised it, as without memprof.
            add_note = getattr(failed.raised, "add_note", None)  # Python 3.11+
            if add_note is not None:
                add_note(f"memprof: {failed.message}")
            raise users_own(failed.raised) from None
        baseline = _baseline(config, item.nodeid, index, report)
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
            warnings.warn(MemprofWarning(visible(warning)), stacklevel=2)
        if not result.passed:
            from memprof.outputs.gate import violation_lines

            lines = [*violation_lines(result), *_top_ops(report), result.summary()]
            pytest.fail(visible("\n".join(lines)), pytrace=False)
        return report

    return profile


def _baseline(config: pytest.Config, nodeid: str, index: int, report: Report) -> Report | None:
    """With ``--memprof-baseline-dir``: save ``report`` as the baseline of this profile, or
    load the one saved (None, with a warning, when there is none). A baseline that cannot be
    read or written fails the test with memprof's one-line message."""
    from memprof.core.errors import MemprofError, OutputError
    from memprof.core.writing import atomic_write_text
    from memprof.pipeline import load_report

    option = config.getoption("--memprof-baseline-dir")
    if option is None:
        return None
    name = baseline_name(nodeid, index)
    _claim(config, name, nodeid, index)
    shown = Path(option, name)
    # Against the folder pytest started in: a test that changes folder does not move it.
    folder = Path(config.invocation_params.dir, option)
    path = folder / name
    try:
        if config.getoption("--memprof-save-baseline"):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                reason = error.strerror or str(error)
                raise OutputError(f"cannot create the baseline folder {option!r}: {reason}") from None
            atomic_write_text(path, report.to_json())
            return None
        if os.path.lexists(path):
            return load_report(path)
    except MemprofError as error:
        message = error.message
    else:
        legacy = legacy_baseline_name(nodeid, index)
        hint = ""
        if legacy != name and (folder / legacy).exists():
            hint = f" ({legacy} has this test's old baseline name, which other tests may share)"
        warnings.warn(
            MemprofWarning(f"no memprof baseline {shown}{hint}; write it with --memprof-save-baseline"),
            stacklevel=3,
        )
        return None
    # Failed outside the except block: the report shows one message, not a chained traceback.
    pytest.fail(f"memprof: {message}", pytrace=False)
