"""The documentation is current: its generated pages (command line, JSON, the pages of committed
figures) are what their scripts write now, every option of the command line is documented, and
its examples print what they show."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType

import pytest
from test_readme import code_blocks, command_blocks, run_check_example
from typer.testing import CliRunner

from memprof.frontends.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def script(name: str) -> ModuleType:
    """One of scripts/ (not a package), imported by path."""
    spec = importlib.util.spec_from_file_location(f"docs_{name}", ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def page(path: str) -> str:
    return (DOCS / path).read_text()


def test_the_command_line_reference_is_what_the_commands_help_says_now() -> None:
    # If this fails: python scripts/gen_cli_reference.py, and commit docs/reference/cli.md.
    assert page("reference/cli.md") == script("gen_cli_reference").render()


def test_the_quoted_outputs_are_the_golden_files_now() -> None:
    # If this fails: python scripts/quote_goldens.py, and commit README.md and docs/install.md.
    quote = script("quote_goldens")
    for path, (start, block) in quote.QUOTES.items():
        text = path.read_text()
        assert quote.quoted(text, start, block()) == text, path


def test_the_json_reference_is_what_the_field_declarations_say_now() -> None:
    # If this fails: python scripts/gen_json_reference.py, and commit docs/reference/json.md.
    assert page("reference/json.md") == script("gen_json_reference").render()


def test_the_pages_of_committed_figures_are_rendered_from_their_data() -> None:
    # If this fails: python scripts/gen_data_pages.py, and commit the pages.
    pages = script("gen_data_pages").pages()
    assert {p.relative_to(DOCS).as_posix() for p in pages} == {
        "accuracy/h100.md",
        "accuracy/estimates.md",
        "performance.md",
    }
    for path, text in pages.items():
        assert path.read_text() == text, path


def test_every_option_of_every_command_is_documented() -> None:
    import typer.main

    group = typer.main.get_command(app)
    documented = "\n".join(p.read_text() for p in DOCS.rglob("*.md"))
    names = {f"memprof {name}": command for name, command in group.commands.items()}  # type: ignore[attr-defined]
    missing = [
        f"{name} {opt}"
        for name, command in names.items()
        for param in command.params
        for opt in [*param.opts, *param.secondary_opts]
        if opt.startswith("-") and not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", documented)
    ]
    assert missing == []


def test_run_help_groups_its_options() -> None:
    result = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    panels = re.findall(r"╭─ (.+?) ─", result.stdout)
    assert panels == ["Arguments", "Options", "Target and inputs", "Runs", "Reports", "Gates", "Distributed"]


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page() -> None:
    nav = re.findall(r":\s+(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert sorted(nav) == sorted(pages)


# ---- examples that print what they show ----------------------------------------------------

CI_CHECKS = command_blocks(page("guides/ci.md"), "check")


def test_the_ci_guide_shows_gate_examples() -> None:
    assert len(CI_CHECKS) >= 4


@pytest.mark.parametrize(("command", "expected"), CI_CHECKS, ids=[c for c, _ in CI_CHECKS])
def test_the_ci_guides_gate_example_prints_what_it_shows(command, expected, monkeypatch) -> None:
    run_check_example(command, expected, monkeypatch)


ANALYZE_EXAMPLES = command_blocks(page("guides/analyze.md"), "analyze")


def test_the_analyze_guide_shows_three_examples() -> None:
    assert len(ANALYZE_EXAMPLES) == 3


@pytest.mark.parametrize(("command", "expected"), ANALYZE_EXAMPLES, ids=[c for c, _ in ANALYZE_EXAMPLES])
def test_the_analyze_guides_example_prints_what_it_shows(command, expected, monkeypatch, tmp_path) -> None:
    import pickle

    from test_cli_analyze import oom_snapshot

    if "oom.pickle" in command:
        # The synthetic snapshot of tests/test_cli_analyze.py, under the name the guide gives it.
        (tmp_path / "oom.pickle").write_bytes(pickle.dumps(oom_snapshot()))
        monkeypatch.chdir(tmp_path)
    else:
        monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, shlex.split(command)[1:])
    assert result.exit_code == 0, result.output
    assert result.stdout == expected


def golden(name: str) -> str:
    return (ROOT / "tests" / "golden" / name).read_text()


def test_what_is_live_at_the_peak_shows_the_gpt_steps_peak_as_memprof_prints_it() -> None:
    """The concept page shows the eager GPT step's section of the golden terminal output
    (itself checked against a fresh run by tests/test_explain_run.py)."""
    shown = next(b for b in code_blocks(page("concepts/at-peak.md")) if b.startswith("At the peak of eager"))
    expected = golden("terminal_gpt_explained.txt")
    expected = expected[expected.index("At the peak of eager") : expected.index("At the peak of compile")]
    assert shown.strip() == expected.strip()


def test_getting_started_shows_the_similarity_report_as_memprof_prints_it() -> None:
    """The main job's output: every byte figure is the golden report's (the times are the run's
    own): from the first "At the peak" to the verdict, line for line."""
    shown = next(b for b in code_blocks(page("install.md")) if b.startswith("memprof: memprof.examples"))
    expected = golden("terminal_similarity_explained_short.txt")

    def bytes_part(text: str) -> str:
        return text[text.index("At the peak of eager") : text.index("\ncompile vs eager:")]

    assert bytes_part(shown) == bytes_part(expected)


ESTIMATE_EXAMPLES = command_blocks(page("guides/estimate.md"), "estimate")
SHARDED_EXAMPLES = command_blocks(page("guides/sharded.md"), "estimate")


def test_the_sharded_guide_shows_its_worked_example() -> None:
    assert [command for command, _ in SHARDED_EXAMPLES] == [
        "memprof estimate memprof.examples.fsdp:step --world-size 8 --gpu H100 -q"
    ]


def test_the_estimate_guide_shows_three_examples() -> None:
    assert len(ESTIMATE_EXAMPLES) == 3


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "expected"),
    ESTIMATE_EXAMPLES + SHARDED_EXAMPLES,
    ids=[c for c, _ in ESTIMATE_EXAMPLES + SHARDED_EXAMPLES],
)
def test_the_estimate_guides_example_prints_what_it_shows(command, expected, monkeypatch) -> None:
    # If this fails after an intended change: python scripts/docs_estimate_outputs.py
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, shlex.split(command)[1:])
    # Exit 1 when the verdict, repeated last, says it does not fit (a sweep's searched values
    # that do not fit are not a failure: it found the largest that does).
    fails = any(
        line.startswith("memprof estimate:") and "does not fit" in line for line in expected.splitlines()
    )
    assert result.exit_code == (1 if fails else 0), result.output
    assert result.stdout.rstrip("\n") + "\n" == expected


ADVISE_EXAMPLES = command_blocks(page("guides/advise.md"), "advise")


def shown_in_order(shown: str, printed: str) -> list[str]:
    """The lines of an excerpt (``...`` marks what it leaves out) that the printed output does
    not hold in the same order."""
    lines, at, missing = printed.splitlines(), 0, []
    for line in shown.splitlines():
        if line.strip() == "...":
            continue
        try:
            at = lines.index(line, at) + 1
        except ValueError:
            missing.append(line)
    return missing


def test_the_advise_guide_shows_two_worked_examples() -> None:
    assert [command.split()[4] for command, _ in ADVISE_EXAMPLES] == ["cpu", "cuda"]


@pytest.mark.slow  # two advice runs (~1 min)
@pytest.mark.parametrize(("command", "expected"), ADVISE_EXAMPLES, ids=[c for c, _ in ADVISE_EXAMPLES])
def test_the_advise_guides_examples_print_what_they_show(command, expected, monkeypatch) -> None:
    """Every line the guide shows (its excerpts leave parts out with ``...``) is printed, in order."""
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, shlex.split(command)[1:])
    assert result.exit_code == 0, result.output
    assert shown_in_order(expected, result.stdout) == []
