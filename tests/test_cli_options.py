"""Options declared once: option groups spread into a command's options and built back once;
the library's parameter names become this command line's flags; a failed gate is exit 1 through
the one error handler, its lines on stdout and nothing on stderr."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.core.errors import param, param_if_any, spelled_as
from memprof.frontends.cli import app
from memprof.frontends.commands.groups import OptionGroup, cli_spelling, option_flags, with_option_groups
from memprof.frontends.commands.options import GateOptions, OutputOptions, Repeat, Sort

DATA = Path(__file__).parent / "data" / "gate"


def test_a_command_takes_each_group_as_one_parameter() -> None:
    seen = {}

    def command(report: str, *, output: OutputOptions, gate: GateOptions) -> None:
        seen.update(report=report, output=output, gate=gate)

    spread = with_option_groups(command)
    names = list(inspect.signature(spread).parameters)
    assert names[0] == "report" and {"json_path", "top", "quiet", "budget", "strict_env"} <= set(names)
    spread(
        **{name: p.default for name, p in inspect.signature(spread).parameters.items()}
        | {"report": "r", "top": 3}
    )
    assert seen["output"] == OutputOptions(top=3) and seen["gate"] == GateOptions()
    assert seen["output"].sort is Sort.peak


@dataclass(frozen=True)
class Clashing(OptionGroup):
    top: Repeat = 1


def test_two_groups_declaring_one_option_is_an_error() -> None:
    def command(*, output: OutputOptions, mine: Clashing) -> None: ...

    with pytest.raises(TypeError, match="declare top twice"):
        with_option_groups(command)


def test_every_command_spells_parameters_as_its_flags() -> None:
    commands = {c.callback.__name__: c.callback for c in app.registered_commands}
    assert option_flags(commands["run"])["json_path"] == "--json"
    assert option_flags(commands["check"])["require_compile_saves"] == "--require-compile-saves"
    with spelled_as(cli_spelling(commands["run"])):
        assert param("repeat") == "--repeat"
        assert param("mode", "eager") == "--mode eager"
        assert param("strict_env", True) == "--strict-env"
        assert param("mode", "both") == "--compare-compile"
    with spelled_as(cli_spelling(commands["check"])):
        assert param_if_any("repeat") is None  # check has no such option
        assert param("mode", "both") == "memprof run TARGET --compare-compile"  # the command that has
        assert param("repeat") == "repeat"
    assert param("mode", "eager") == "mode='eager'"  # outside a command: Python's spelling


def test_a_failed_gate_is_exit_1_with_its_lines_on_stdout_only() -> None:
    result = CliRunner().invoke(app, ["check", str(DATA / "base.json"), "--budget", "eager=500 MB"])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == "memprof gate: FAILED, 1 violation (budget 1)"
    assert result.stderr == ""


@pytest.mark.parametrize("command", ["run", "compare", "estimate", "analyze", "check", "diff", "parse"])
def test_help_shows_flags_without_a_value_and_values_as_words(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    for typed in ("<bool>", "<str>", "<int range>", "<float range>", "[x>="):
        assert typed not in result.stdout, (command, typed)
    # A flag's row is its name and its help; an option with a value names it.
    assert next(line for line in lines if line.startswith("│ --help ")).split()[2:5] == ["-h", "Show", "this"]
    if command == "run":
        row = next(line for line in lines if line.startswith("│ --compare-compile "))
        assert row.split()[2:4] == ["Profile", "eager"]
        assert next(line for line in lines if line.startswith("│ --warmup ")).split()[2] == "N"
