"""Rewrite the outputs of README's `memprof estimate` examples with what they print now.

PYTHONPATH=. python scripts/readme_estimate_outputs.py
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from memprof.cli import app

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    path = ROOT / "README.md"
    text = path.read_text()
    start, end = text.index("## Will it fit? `memprof estimate`"), text.index("## Distributed jobs")
    section = text[start:end]

    def rerun(match: re.Match[str]) -> str:
        command = match.group(1)
        result = CliRunner().invoke(app, shlex.split(command)[1:])
        return f"```\n$ {command}\n{result.stdout}```"

    section = re.sub(r"```\n\$ (memprof estimate [^\n]*)\n.*?```", rerun, section, flags=re.S)
    path.write_text(text[:start] + section + text[end:])


if __name__ == "__main__":
    main()
