"""The quick start for your own training step (README's "Your own training step" and the docs'
home page) runs as written: the file they show is ``docs/examples/train_step.py``, and their
commands, run from a folder holding it where they say, exit 0 and end with the answer.

The step's figures are known without memprof: the model has 256 x 1024 + 1024 + 1024 x 10 + 10
= 273,418 float32 parameters (1,093,672 B), and AdamW keeps two moments of each and a step
count per parameter tensor."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.frontends.cli import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "train_step.py"
PARAMETER_BYTES = (256 * 1024 + 1024 + 1024 * 10 + 10) * 4


def section(text: str) -> str:
    return text[text.index("## Your own training step") :].split("\n## ", 1)[0]


def fenced(text: str, info: str) -> list[str]:
    return re.findall(rf"^```{info}\n(.*?)^```", text, re.S | re.M)


PAGES = {"README.md": ROOT / "README.md", "docs/index.md": ROOT / "docs" / "index.md"}


def commands(page: str) -> list[str]:
    """The page's quick-start command lines, without their comments."""
    (block,) = fenced(section(PAGES[page].read_text()), "sh")
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.parametrize("page", PAGES)
def test_the_file_shown_is_the_example_file(page: str) -> None:
    (shown,) = fenced(section(PAGES[page].read_text()), "python")
    assert shown == EXAMPLE.read_text()
    assert commands(page) == commands("README.md")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding docs/examples/train_step.py, as the repository's root does."""
    (tmp_path / "docs" / "examples").mkdir(parents=True)
    shutil.copy(EXAMPLE, tmp_path / "docs" / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(command: str, *extra: str) -> list[str]:
    args = shlex.split(command)
    assert args[0] == "memprof"
    result = CliRunner().invoke(app, [*args[1:], *extra], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_the_first_command_runs_as_written_and_ends_with_the_answer(folder: Path) -> None:
    first = commands("README.md")[0]
    assert first == "memprof run docs/examples/train_step.py:step"
    lines = run(first, "--json", "report.json")
    run_ = json.loads((folder / "report.json").read_text())["runs"]["eager"]
    by_category = run_["at_peak"]["by_category"]
    assert by_category["parameter"] == PARAMETER_BYTES
    # Two moments of each parameter, and the step count of each of the 4 parameter tensors (a
    # float32 scalar).
    assert by_category["optimizer_state"] == 2 * PARAMETER_BYTES + 4 * 4
    assert run_["recipe"]["inputs"] == "docs/examples/train_step.py:step_inputs"
    # The answer last: the peak, the footprint, the largest entries.
    start = max(i for i, line in enumerate(lines) if line.startswith("eager: peak "))
    assert len(lines) - start <= 8
    assert any(line.startswith("largest: ") for line in lines[start:])


@pytest.mark.slow  # a torch.compile (the first command covers the quick tier)
@pytest.mark.parametrize("index", [1, 2])
def test_the_other_commands_run_as_written(folder: Path, index: int) -> None:
    command = commands("README.md")[index]
    lines = run(command)
    if "--compare-compile" in command:
        assert (folder / "report.html").is_file()
        assert any(line.startswith("biggest cause: ") for line in lines[-6:])
    else:
        assert "largest batch that fits" in " ".join(lines[-4:])
