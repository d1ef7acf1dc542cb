"""Rewrite the outputs of the `memprof estimate` examples in docs/guides/estimate.md and
docs/guides/sharded.md with what they print now (tests/test_docs.py runs them with --run-slow
and fails when they differ).

PYTHONPATH=. python scripts/docs_estimate_outputs.py
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from memprof.frontends.cli import app

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "docs" / "guides" / "estimate.md", ROOT / "docs" / "guides" / "sharded.md")


def main() -> None:
    def rerun(match: re.Match[str]) -> str:
        command = match.group(1)
        result = CliRunner().invoke(app, shlex.split(command)[1:])
        return f"```\n$ {command}\n{result.stdout}```"

    for page in PAGES:
        text = page.read_text()
        page.write_text(re.sub(r"```\n\$ (memprof estimate [^\n]*)\n.*?```", rerun, text, flags=re.S))


if __name__ == "__main__":
    main()
