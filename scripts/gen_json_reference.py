"""Write docs/reference/json.md from the field declarations: every object of the JSON report
(``--json``, baselines, ``memprof check``), each key with its kind of value and when it is
written, read from the dataclasses' ``memprof.core.fields`` declarations that memprof.core.schema writes
and reads by.

    python scripts/gen_json_reference.py            # rewrite the page
    python scripts/gen_json_reference.py --check    # exit 1 when the page is not current

tests/test_docs.py fails when the committed page differs from what this script writes now.
"""

from __future__ import annotations

import dataclasses
import html
import inspect
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "json.md"

HEADER = """# JSON reference

What `--json` writes, `--baseline` and `memprof check` read, and `memprof.load_report` loads.
This page is generated from the field declarations (`memprof/core/fields.py`, on the dataclasses of
`memprof/model.py` and `memprof/analysis/`) by `scripts/gen_json_reference.py`, the same
declarations `memprof/core/schema.py` writes and checks every report by; a test fails when the page is
not current. What the numbers mean: [What the numbers mean](../concepts/numbers.md) and
[What is live at the peak](../concepts/at-peak.md); a tour of the report:
[Reports](../guides/reports.md#the-json-report).

Keys are stable and units are in their names (`_bytes`: a whole number of bytes, `_ms`, `_us`,
`_ns`, `_seconds`). Reading a report checks every value against its kind below: a value of the
wrong kind is exit 2, naming its place (`runs.eager.peak_bytes must be a number of bytes (a whole
number, 0 or more), got -5`). **written**: *always*; *when known* (left out where the run does
not know it; read back as null); *when it applies* (left out when empty or not applicable).
A key marked *required* must be present for a report to load.
"""

KINDS = {
    "text": "string",
    "maybe_text": "string or null",
    "size": "bytes (integer ≥ 0)",
    "signed_size": "bytes (integer, any sign)",
    "count": "integer ≥ 0",
    "integer": "integer",
    "number": "number (null: unknown)",
    "maybe_number": "number or null",
    "ratio": "number or null",
    "flag": "true or false",
}


def _doc(cls: type) -> str:
    """A class docstring as Markdown: reStructuredText's double backquotes and roles made
    Markdown code, lines joined into paragraphs."""
    text = inspect.cleandoc(cls.__doc__ or "")
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    text = html.escape(text, quote=False)
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n"))


def _anchor(cls: type) -> str:
    return cls.__name__.lower()


def _value(spec: Any, found: list[type]) -> str:
    """What a field's value is, in words; dataclasses met are appended to ``found``."""
    from memprof.core import fields

    kind = spec.kind
    if kind in (fields.LIST, fields.MAP):
        item = spec.item
        inner = _value(item if isinstance(item, fields.Spec) else _spec_of_item(item), found)
        if kind == fields.LIST:
            return f"array of {inner}"
        keyed = f", keyed by its `{spec.key_field}`" if spec.key_field else ""
        return f"object: name → {inner}{keyed}"
    if kind == fields.OBJECT:
        found.append(spec.item)
        text = f"[{spec.item.__name__}](#{_anchor(spec.item)})"
        return f"{text} or null" if spec.nullable else text
    text = KINDS[kind]
    if spec.choices:
        text += ": " + " or ".join(f"`{choice}`" for choice in spec.choices)
    if spec.nullable and "null" not in text:
        text += " or null"
    return text


def _spec_of_item(item: Any) -> Any:
    from memprof.core import fields

    return fields.Spec(item) if isinstance(item, str) else fields.Spec(fields.OBJECT, item=item)


def _written(spec: Any) -> str:
    if spec.required:
        return "always; *required*"
    if spec.omit_none:
        return "when known"
    if spec.omit is not None:
        return "when it applies"
    return "always"


def _section(cls: type, where: str, found: list[type]) -> list[str]:
    from memprof.core import fields

    lines = [f"## {cls.__name__}", "", f"Where: {where}.", ""]
    doc = _doc(cls)
    if doc:
        lines += [doc, ""]
    lines += ["| key | value | written |", "|---|---|---|"]
    for field in dataclasses.fields(cls):
        spec = fields.spec_of(field)
        if spec is None or not spec.write:
            continue  # Python only
        for key, one in _keys(spec, field.name):
            lines.append(f"| `{key}` | {_value(one, found)} | {_written(one)} |")
    return [*lines, ""]


def _keys(spec: Any, name: str) -> list[tuple[str, Any]]:
    """The keys a field is written under, each with what it holds: one of a ``one_of`` field's
    types' keys (sorted: the order types register in depends on what was imported first)."""
    from memprof.core import fields

    if spec.kind != fields.ONE_OF:
        return [(spec.key or name, spec)]
    return [
        (key, dataclasses.replace(spec, kind=fields.OBJECT, item=cls))
        for key, cls in sorted(spec.item.items(), key=lambda pair: pair[0])
    ]


def _top_level(found: list[type]) -> list[str]:
    """The document's own keys: those ``Report.to_dict`` adds around the report's fields."""
    from memprof.model import SCHEMA_VERSION
    from memprof.model.diff import RunDiff
    from memprof.model.ranks import RankSummary

    found += [RunDiff, RankSummary]
    return [
        "## The document",
        "",
        f"A JSON object: `schema_version` ({SCHEMA_VERSION}; reports of version 1 still load) and "
        "`memprof_version`, then the keys of [Report](#report), then the comparisons and the ranks:",
        "",
        "| key | value | written |",
        "|---|---|---|",
        "| `schema_version` | integer ≥ 0 | always; *required* |",
        "| `memprof_version` | string | always |",
        "| *the keys of [Report](#report)* | | |",
        "| `diff` | [RunDiff](#rundiff): the second run against the first | with two or more comparable "
        "runs (one device, one rank) |",
        "| `diffs` | object: label → [RunDiff](#rundiff), every later run against the first | with three "
        "or more comparable runs |",
        "| `ranks` | [RankSummary](#ranksummary): a row per run and the imbalance of their peaks | when "
        "runs carry a rank |",
        "",
    ]


def render() -> str:
    """The page, from the declarations as they are now."""
    from memprof.model import Report
    from memprof.model.diff import RunDiff
    from memprof.model.ranks import RankSummary

    found: list[type] = [Report]
    lines = [HEADER, *_top_level(found)]
    paths = {Report: "the document itself", RunDiff: "`diff`, `diffs.<label>`", RankSummary: "`ranks`"}
    done: set[type] = set()
    index = 0
    while index < len(found):
        cls = found[index]
        index += 1
        if cls in done:
            continue
        done.add(cls)
        before = len(found)
        lines += _section(cls, paths.get(cls, "see the objects above"), found)
        for child in found[before:]:
            paths.setdefault(child, _where(cls, child, paths.get(cls, "")))
    return "\n".join(lines).rstrip("\n") + "\n"


def _where(parent: type, child: type, parent_where: str) -> str:
    """Where ``child`` sits: the key(s) of ``parent`` that hold it."""
    from memprof.core import fields

    keys = []
    for field in dataclasses.fields(parent):
        spec = fields.spec_of(field)
        if spec is None or not spec.write:
            continue
        keys += [f"`{key}`" for key, one in _keys(spec, field.name) if child in _classes_in(one)]
    return f"{' and '.join(keys)} of [{parent.__name__}](#{_anchor(parent)})"


def _classes_in(spec: Any) -> list[type]:
    from memprof.core import fields

    if spec.kind == fields.OBJECT:
        return [spec.item]
    if spec.kind in (fields.LIST, fields.MAP) and spec.item is not None and not isinstance(spec.item, str):
        return _classes_in(spec.item) if isinstance(spec.item, fields.Spec) else [spec.item]
    return []


if __name__ == "__main__":
    from page_writer import main

    sys.path.insert(0, str(ROOT))
    sys.exit(main(__doc__.splitlines()[0], lambda: {PAGE: render()}))
