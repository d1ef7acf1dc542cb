"""Shared fixtures. Compiling is slow (~11 s cold), so the compiled similarity report is made
once per session and shared by every test that needs a compiled run."""

from __future__ import annotations

import itertools
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

MiB = 1024 * 1024
_counter = itertools.count()


@pytest.fixture(scope="session")
def similarity_report():
    """Eager and compiled profiles of the built-in similarity example (256 x 500)."""
    from memprof.api import mode_variants, run_variants
    from memprof.examples.similarity import similarity, similarity_inputs
    from memprof.target import Inputs

    x, y = similarity_inputs()
    report, error = run_variants(
        "memprof.examples.similarity:similarity",
        mode_variants(similarity, Inputs(args=(x, y)), "both", "similarity"),
        device="cpu",
        keep_table=True,
    )
    assert error is None
    return report


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
