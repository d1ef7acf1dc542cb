"""What the documentation generators share: write their pages, or check that the committed
pages are what they would write now (``--check``: exit 1 when one is not)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(description: str, pages: Callable[[], dict[Path, str]]) -> int:
    """The command line of a generator whose ``pages()`` gives each page's path and text."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 when a page is not current")
    args = parser.parse_args()
    stale = 0
    for page, text in pages().items():
        name = page.relative_to(ROOT)
        if args.check:
            current = page.exists() and page.read_text() == text
            stale += not current
            print(f"{name}: {'current' if current else 'out of date'}")
        else:
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(text)
            print(f"wrote {name}")
    return 1 if stale else 0
