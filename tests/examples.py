"""How many examples a property test tries: its full count with ``--run-slow`` (CI), a quarter
of it (at least 25) in the quick check. conftest.py loads the hypothesis profile before the test
modules are imported, so the count is decided when a test's ``@settings`` is."""

from __future__ import annotations

from hypothesis import settings


def examples(full: int) -> int:
    """``full`` under ``--run-slow``; a quarter of it (at least 25) otherwise."""
    quick = settings().max_examples < 100  # the "quick" profile of conftest.py
    return max(25, full // 4) if quick else full
