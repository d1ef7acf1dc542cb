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
