"""How a source file is named in a report (memprof.sources.tracking.lines.shown_path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memprof.sources.tracking import lines


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder holding its own virtual environment (``.venv``, as uv and poetry make
    it), the working directory."""
    site = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
    (site / "transformers").mkdir(parents=True)
    monkeypatch.setattr(lines, "site_dirs", lambda: (os.path.join(str(site), ""),))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_library_in_a_venv_inside_the_project_is_named_from_its_site_directory(project: Path) -> None:
    library = project / ".venv/lib/python3.11/site-packages/transformers/modeling_gpt2.py"
    assert lines.shown_path(str(library)) == "transformers/modeling_gpt2.py"


def test_the_projects_own_files_are_named_from_the_working_directory(project: Path) -> None:
    assert lines.shown_path(str(project / "train" / "step.py")) == os.path.join("train", "step.py")


def test_other_files_keep_their_name(project: Path) -> None:
    assert lines.shown_path("/elsewhere/tool.py") == "/elsewhere/tool.py"
    assert lines.shown_path("<stdin>") == "<stdin>"


EAGER = """import torch


@torch.compiler.disable
def parts(h):
    a = torch.relu(h)
    c = (h
         * 3.0)
    d = c + a
    return a, c, d
"""


def test_code_between_two_statements_is_the_later_ones_only_if_none_starts_between(tmp_path: Path) -> None:
    """What eager code at a graph break allocates between two noted statements is put on the
    later one only when nothing else could have run there (lines.nothing_between)."""
    source = tmp_path / "eager_parts.py"
    source.write_text(EAGER)
    at = {text: n for n, text in enumerate(EAGER.splitlines(), 1)}
    line = at.__getitem__
    file = str(source)
    pairs = [
        # The function's first event (its decorator's line) to its first statement: the def
        # header between is no statement.
        ((file, line("@torch.compiler.disable")), (file, line("    a = torch.relu(h)"))),
        # The same statement twice: not known (it may be a loop's next turn, after the rest of its body).
        ((file, line("    c = (h")), (file, line("         * 3.0)"))),
        # From the end of a two-line statement to the next: adjacent.
        ((file, line("         * 3.0)")), (file, line("    d = c + a"))),
        # Two statements apart: `c = ...` and `d = ...` lie between.
        ((file, line("    a = torch.relu(h)")), (file, line("    return a, c, d"))),
        # Backwards (a loop), and another file.
        ((file, line("    d = c + a")), (file, line("    a = torch.relu(h)"))),
        ((file, line("    d = c + a")), (str(tmp_path / "other.py"), line("    return a, c, d"))),
    ]
    assert lines.nothing_between(pairs) == [True, False, True, False, False, False]
