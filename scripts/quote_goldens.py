"""Rewrite the terminal outputs README.md and docs/install.md quote with the golden files they
quote (tests/golden/, regenerated with --update-golden): README's main job (the start of the
short GPT report, up to its first "more entries" line) and Getting started's main job (the
whole short similarity report). tests/test_readme.py and tests/test_docs.py fail until they
match.

PYTHONPATH=. python scripts/quote_goldens.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"


def _readme_block() -> str:
    golden = (GOLDEN / "terminal_gpt_explained_short.txt").read_text()
    end = golden.index("\n", golden.index("more entries")) + 1
    return golden[:end]


def _install_block() -> str:
    return (GOLDEN / "terminal_similarity_explained_short.txt").read_text()


QUOTES = {
    ROOT / "README.md": ("memprof: memprof.examples.gpt:", _readme_block),
    ROOT / "docs" / "install.md": ("memprof: memprof.examples.similarity:", _install_block),
}


def quoted(text: str, start: str, block: str) -> str:
    """``text`` with the fenced block that starts with ``start`` replaced by ``block``."""
    begin = text.index(f"```\n{start}") + len("```\n")
    end = text.index("```\n", begin)
    return text[:begin] + block + text[end:]


def main(check: bool = False) -> int:
    stale = []
    for path, (start, block) in QUOTES.items():
        text = path.read_text()
        new = quoted(text, start, block())
        if new != text:
            stale.append(path)
            if not check:
                path.write_text(new)
    for path in stale:
        print(f"{'stale' if check else 'wrote'} {path.relative_to(ROOT)}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(check="--check" in sys.argv[1:]))
