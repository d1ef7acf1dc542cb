"""README shows real output and installs that work: its main job's output is memprof's own
rendering of a saved run, its `memprof check` example is run and compared line by line, and it
stays a page people read (tests/test_docs.py does the same for the documentation's pages)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.frontends.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def code_blocks(text: str) -> list[str]:
    """The text of each fenced code block without an info string (output, not code to run)."""
    blocks: list[str] = []
    inside, info, lines = False, "", []
    for line in text.splitlines(keepends=True):
        if not line.startswith("```"):
            lines.append(line)
        elif inside:
            if not info:
                blocks.append("".join(lines))
            inside = False
        else:
            inside, info, lines = True, line.strip("`\n "), []
    return blocks


def command_blocks(text: str, command: str) -> list[tuple[str, str]]:
    """(command line, expected output) of every ``$ memprof COMMAND ...`` in the text's output
    blocks, a block holding one or more of them."""
    examples = []
    for block in code_blocks(text):
        for chunk in re.split(rf"^(?=\$ memprof {command} )", block, flags=re.M):
            if chunk.startswith(f"$ memprof {command} "):
                line, _, output = chunk.partition("\n")
                examples.append((line[2:], output.strip("\n") + "\n"))
    return examples


def run_check_example(command: str, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``memprof check`` example on the reports of tests/data/gate prints what it shows, run as
    written from the repository's root."""
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, shlex.split(command)[1:])
    assert result.exit_code in (0, 1)
    assert result.stdout == expected


README_CHECKS = command_blocks(README, "check")


def test_readme_shows_a_gate_example() -> None:
    assert len(README_CHECKS) == 1


@pytest.mark.parametrize(("command", "expected"), README_CHECKS, ids=[c for c, _ in README_CHECKS])
def test_readme_gate_example_prints_what_readme_shows(command, expected, monkeypatch) -> None:
    run_check_example(command, expected, monkeypatch)


def test_readme_main_job_shows_the_gpt_step_as_memprof_prints_it() -> None:
    """The main job's output is the start of the golden (short, default) terminal output of a
    saved GPT step report (the full one is checked against a fresh run by
    tests/test_explain_run.py), line for line."""
    shown = next(block for block in code_blocks(README) if block.startswith("memprof: "))
    golden = (ROOT / "tests" / "golden" / "terminal_gpt_explained_short.txt").read_text()
    assert golden.startswith(shown)
    assert "At the peak of eager" in shown and "more entries" in shown.splitlines()[-1]


def test_readme_is_a_page_people_read() -> None:
    assert len(README.splitlines()) <= 300
    # For users: no measurement diary, no history, no goals not reached.
    assert re.search(r"load average|no longer|is not met|next step", README, re.I) is None


def test_readme_installs_only_what_can_be_installed() -> None:
    """memprof is installed from a clone (it is not on the package index); torch from the CPU
    index or the default one."""
    installs = re.findall(r"^pip install .*$", README, re.M)
    assert installs, "README says how to install"
    assert not [line for line in installs if "torch-memprof" in line or re.search(r"\bmemprof\b", line)]
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in README
    assert "pip install -e ." in README


def test_readme_links_point_at_files_of_the_repository() -> None:
    links = re.findall(r"\]\(((?!https?://)[^)#]+)(?:#[^)]*)?\)", README)
    assert links
    assert [link for link in links if not (ROOT / link).exists()] == []
