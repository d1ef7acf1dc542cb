"""Write the documentation pages whose figures are committed as data: each docs/data/*.json
names its page (``page``, under docs/) and holds its title, text, tables and where the figures
came from (``source``). Numbers in tables are written with thousands separators; a list of
numbers as ``a / b / c``.

    python scripts/gen_data_pages.py            # rewrite the pages
    python scripts/gen_data_pages.py --check    # exit 1 when a page is not current

To change a figure, change its data file (and say in ``source`` how it was measured), then
rerun this. tests/test_docs.py fails when a committed page differs from what this writes now.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DATA = DOCS / "data"


def _cell(value: Any, unit: str = "") -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    if isinstance(value, list):
        return " / ".join(_cell(v) for v in value) + (unit if value else "")
    return str(value)


def _table(table: dict[str, Any]) -> list[str]:
    columns, align = table["columns"], table.get("align") or ["left"] * len(table["columns"])
    unit = table.get("unit", "")
    rule = "|" + "|".join("---:" if a == "right" else "---" for a in align) + "|"
    lines = ["| " + " | ".join(columns) + " |", rule]
    for row in table["rows"]:
        lines.append("| " + " | ".join(_cell(value, unit) for value in row) + " |")
    return lines


def render(data: dict[str, Any], name: str) -> str:
    """One page from its data."""
    lines = [f"# {data['title']}", ""]
    for block in data["body"]:
        if "heading" in block:
            lines += [f"## {block['heading']}", ""]
        elif "text" in block:
            lines += [block["text"], ""]
        elif "list" in block:
            lines += [*(f"- {item}" for item in block["list"]), ""]
        elif "table" in block:
            lines += [*_table(block["table"]), ""]
        else:
            raise ValueError(f"docs/data/{name}: a block needs heading, text, list or table: {block}")
    lines += [
        "---",
        "",
        f"*Where these figures come from:* {data['source']} *This page is rendered from "
        f"`docs/data/{name}` by `scripts/gen_data_pages.py`.*",
    ]
    return "\n".join(lines) + "\n"


def pages() -> dict[Path, str]:
    """Every data page: its path and its text as rendered now."""
    out = {}
    for path in sorted(DATA.glob("*.json")):
        data = json.loads(path.read_text())
        out[DOCS / data["page"]] = render(data, path.name)
    return out


if __name__ == "__main__":
    from page_writer import main

    sys.exit(main(__doc__.splitlines()[0], pages))
