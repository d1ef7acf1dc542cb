"""Write docs/reference/cli.md from the commands' own help: every command, argument and option
of ``memprof``, with the text ``--help`` prints for it, grouped as ``--help`` groups them.

    python scripts/gen_cli_reference.py            # rewrite the page
    python scripts/gen_cli_reference.py --check    # exit 1 when the page is not current

tests/test_docs.py fails when the committed page differs from what this script writes now.
"""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "cli.md"

HEADER = """# Command-line reference

This page is generated from the commands' own `--help` by `scripts/gen_cli_reference.py`; a test
fails when it is not current. Each command's guide explains its options with examples: see the
[guides](../index.md#guides). Exit codes of every command: 0 ok, 1 a memory gate failed (or an
estimate does not fit), 2 usage or input error, 3 the profiled code failed, 130 interrupted.
"""


def markdown_text(text: str) -> str:
    """Help text as Markdown that shows it as written: HTML and Markdown's own characters
    escaped, table pipes too."""
    text = html.escape(text, quote=False)
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", text)


def _panels(command: Any, ctx: Any) -> dict[str, list[tuple[str, str]]]:
    """(names and value, help) of each parameter, by the panel ``--help`` shows it in:
    arguments first, then the option panels in the order of their first option."""
    arguments: dict[str, list[tuple[str, str]]] = {}
    options: dict[str, list[tuple[str, str]]] = {}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:  # a hidden parameter
            continue
        is_argument = type(param).__name__.endswith("Argument")
        panel = getattr(param, "rich_help_panel", None) or ("Arguments" if is_argument else "Options")
        (arguments if is_argument else options).setdefault(panel, []).append(record)
    return {**arguments, **options}


def _command_section(name: str, command: Any, ctx: Any) -> list[str]:
    lines = [f"## `{name}`", "", f"```\n{command.get_usage(ctx)}\n```", ""]
    for paragraph in (command.help or "").split("\n\n"):
        paragraph = paragraph.strip()
        if paragraph.startswith("Example: "):
            lines += [f"```sh\n{paragraph.removeprefix('Example: ')}\n```", ""]
        elif paragraph:
            lines += [markdown_text(paragraph), ""]
    for panel, records in _panels(command, ctx).items():
        what = "argument" if panel == "Arguments" else "option"
        lines += [f"### {panel}", "", f"| {what} | what it does |", "|---|---|"]
        for names, help_text in records:
            # A pipe inside a code span does not split the table's cell (Python-Markdown).
            lines.append(f"| `{names}` | {markdown_text(help_text)} |")
        lines.append("")
    return lines


def render() -> str:
    """The page, from the help of the ``memprof`` command line as it is now."""
    import typer.main

    from memprof.frontends.cli import app

    group = typer.main.get_command(app)
    root = group.make_context("memprof", [], resilient_parsing=True)
    lines = [HEADER, *_command_section("memprof", group, root)]
    for name in group.list_commands(root):
        command = group.get_command(root, name)
        ctx = command.make_context(name, [], parent=root, resilient_parsing=True)
        lines += _command_section(f"memprof {name}", command, ctx)
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    from page_writer import main

    sys.path.insert(0, str(ROOT))
    sys.exit(main(__doc__.splitlines()[0], lambda: {PAGE: render()}))
