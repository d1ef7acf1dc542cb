"""The README shows real output: its `memprof check` examples are run and compared line by line."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app

ROOT = Path(__file__).resolve().parents[1]
GATE_DATA = Path(__file__).parent / "data" / "gate"


def check_examples() -> list[tuple[str, str]]:
    """(command, expected output) pairs from README's "What the gate prints" block."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### What the gate prints") :]
    block = re.search(r"```\n(.*?)```", section, re.S)
    assert block is not None
    examples = []
    for chunk in re.split(r"^(?=\$ memprof check )", block.group(1), flags=re.M):
        if chunk.startswith("$ "):
            command, _, output = chunk.partition("\n")
            examples.append((command[2:], output.strip("\n") + "\n"))
    return examples


EXAMPLES = check_examples()


def test_readme_has_gate_examples() -> None:
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize(("command", "expected"), EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_readme_gate_example_prints_what_readme_shows(command, expected, monkeypatch) -> None:
    monkeypatch.chdir(GATE_DATA)
    args = shlex.split(command)[1:]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 1)
    assert result.stdout == expected


def analyze_examples() -> list[tuple[str, str]]:
    """(command, expected output) pairs of README's `memprof analyze` section."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## GPU memory recorded elsewhere") : text.index("## Reports")]
    found = []
    for block in re.findall(r"```\n(\$ memprof analyze .*?)```", section, re.S):
        command, _, output = block.partition("\n")
        found.append((command[2:], output))
    return found


ANALYZE_EXAMPLES = analyze_examples()


def test_readme_has_analyze_examples() -> None:
    assert len(ANALYZE_EXAMPLES) == 3


@pytest.mark.parametrize(("command", "expected"), ANALYZE_EXAMPLES, ids=[c for c, _ in ANALYZE_EXAMPLES])
def test_readme_analyze_example_prints_what_readme_shows(command, expected, monkeypatch, tmp_path) -> None:
    import pickle

    from test_cli_analyze import oom_snapshot

    if "oom.pickle" in command:
        # The synthetic snapshot of tests/test_cli_analyze.py, under the name README gives it.
        (tmp_path / "oom.pickle").write_bytes(pickle.dumps(oom_snapshot()))
        monkeypatch.chdir(tmp_path)
    else:
        monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, shlex.split(command)[1:])
    assert result.exit_code == 0, result.output
    assert result.stdout == expected


def estimate_examples() -> list[tuple[str, str]]:
    """(command, expected output) pairs of README's `memprof estimate` section."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Will it fit? `memprof estimate`") : text.index("## Distributed jobs")]
    found = []
    for block in re.findall(r"```\n(\$ memprof estimate .*?)```", section, re.S):
        command, _, output = block.partition("\n")
        found.append((command[2:], output))
    return found


ESTIMATE_EXAMPLES = estimate_examples()


def test_readme_has_estimate_examples() -> None:
    assert len(ESTIMATE_EXAMPLES) == 3


@pytest.mark.slow
@pytest.mark.parametrize(("command", "expected"), ESTIMATE_EXAMPLES, ids=[c for c, _ in ESTIMATE_EXAMPLES])
def test_readme_estimate_example_prints_what_readme_shows(command, expected, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, shlex.split(command)[1:])
    assert result.exit_code == (1 if "does not fit" in expected else 0), result.output
    assert result.stdout == expected
