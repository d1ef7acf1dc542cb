"""The shape of the code, checked: data flows one way (no import cycles), functions stay short,
core modules name parameters (never the command line's flags), and a loaded report's diff does
not depend on what the process happens to have imported."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "memprof"
MAX_FUNCTION_LINES = 80


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement: at module level, inside functions, under ``TYPE_CHECKING`` too."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def import_graph() -> dict[str, set[str]]:
    """memprof module -> the memprof modules it imports by name, a package's edges to its own
    modules included."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                    for alias in node.names
                ]
            for target in targets:
                while target and target not in MODULES:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_memprof_has_no_import_cycles_counting_every_import() -> None:
    graph = import_graph()
    assert graph["memprof.model.run"] >= {
        "memprof.core.fields",
        "memprof.model.ops",
    }  # the graph sees imports
    assert "memprof.analysis.peaks" in graph["memprof.pipeline"]  # ... under TYPE_CHECKING
    assert "memprof.analysis.diff" in graph["memprof.pipeline"]  # ... and inside functions
    assert "memprof.model.report" in graph["memprof.model"]  # ... and a package face's own
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def reexported(package: str) -> set[str]:
    """The names a package's ``__init__`` imports from its own modules (its face for users)."""
    tree = ast.parse(MODULES[package].read_text())
    return {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package + ".")
        for alias in node.names
    }


def test_modules_import_a_name_from_the_module_that_defines_it() -> None:
    """``from memprof.model.report import Report``, not ``from memprof.model import Report``
    inside memprof: a package's face (for users) then closes no circle."""
    faces = {
        name: names for name in MODULES if MODULES[name].name == "__init__.py" if (names := reexported(name))
    }
    assert "Report" in faces["memprof.model"]
    found: list[str] = []
    for name, path in MODULES.items():
        if name == "memprof":
            continue  # the package's own face: its lazy attributes
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module in faces and name != node.module:
                found += [
                    f"{name}: from {node.module} import {a.name}"
                    for a in node.names
                    if a.name in faces[node.module]
                ]
    assert found == []


def test_outputs_compute_nothing() -> None:
    """A document shows what the report arrived with: no output runs the pipeline or an
    analysis (but for the gate's value types, and thinning a timeline to the points it draws)."""
    allowed = {"memprof.analysis.gate", "memprof.analysis.timeline"}
    found = [
        f"{name} imports {target}"
        for name, imported in import_graph().items()
        if name.startswith("memprof.outputs")
        for target in sorted(imported)
        if target.startswith(("memprof.pipeline", "memprof.analysis")) and target not in allowed
    ]
    assert found == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# The layers, lowest first: a module imports from its own layer and the ones below, never
# above. README.md and CONTRIBUTING.md draw them (test_the_documented_layers_are_the_checked_ones).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundations", ("memprof.core",)),
    ("model", ("memprof.model",)),
    ("sources", ("memprof.sources", "memprof.examples")),
    ("analysis", ("memprof.analysis",)),
    ("pipeline", ("memprof.pipeline",)),
    ("outputs", ("memprof.outputs",)),
    ("library", ("memprof.library",)),
    ("front ends", ("memprof.frontends", "memprof.integrations", "memprof.__main__")),
)


def layer_of(module: str) -> int:
    if module == "memprof":
        return len(LAYERS)  # the package: its lazy attributes reach everything
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def test_every_import_runs_down_the_layers() -> None:
    up = [
        f"{name} ({LAYERS[layer_of(name)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for name, imported in import_graph().items()
        for target in sorted(imported)
        if target != "memprof" and layer_of(target) > layer_of(name)
    ]
    assert up == []


def test_nothing_imports_the_package_itself() -> None:
    """``import memprof`` from inside memprof would make every module depend on the package's
    lazy attributes (and them on it): modules import the modules they use."""
    assert [name for name, imported in import_graph().items() if "memprof" in imported] == []


def long_functions() -> list[str]:
    found = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = (node.end_lineno or node.lineno) - start + 1
                if lines >= MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_of_80_lines_or_more() -> None:
    assert long_functions() == []


def cli_flags() -> set[str]:
    import typer

    from memprof.frontends.cli import app

    command = typer.main.get_command(app)
    flags = {opt for param in command.params for opt in param.opts if opt.startswith("--")}
    for sub in command.commands.values():  # type: ignore[attr-defined]
        flags |= {opt for param in sub.params for opt in param.opts if opt.startswith("--")}
    return flags


def strings(path: Path) -> list[tuple[int, str]]:
    """Every string a module can say at run time: its string literals and f-string parts, but
    not its docstrings (documentation may show how the command line is used)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_core_modules_never_spell_a_command_line_flag() -> None:
    flags = cli_flags()
    assert {"--repeat", "--strict-env", "--lenient", "--table-index", "--compare-compile", "--json"} <= flags
    pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(f) for f in sorted(flags)) + r")(?![\w-])")
    found = [
        f"{path.relative_to(ROOT)}:{line}: {match.group(1)}"
        for name, path in MODULES.items()
        # The front doors with options of their own: the command line, the notebook magic.
        if not name.startswith("memprof.frontends.commands")
        and name not in ("memprof.frontends.cli", "memprof.frontends.ipython")
        for line, text in strings(path)
        for match in pattern.finditer(text)
    ]
    assert found == []


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


# A version-1 report (written before runs stored their fused kernels) whose compiled run has a
# kernel whose name splits differently with torch's whole op vocabulary (`_to_copy`) than with
# the aten ops the runs contain (`add` only).
V1_REPORT = {
    "schema_version": 1,
    "target": "m:f",
    "device": "cpu",
    "runs": {
        "eager": {"mode": "eager", "peak_bytes": 300, "ops": [{"name": "aten::add", "peak_bytes": 300}]},
        "compile": {
            "mode": "compile",
            "peak_bytes": 100,
            "ops": [{"name": "cpp_fused__to_copy_add_0", "peak_bytes": 100}],
        },
    },
}

_DIFF_PROBE = """
import json, sys
if sys.argv[2] == "torch":
    import torch  # noqa: F401
from memprof.pipeline import load_report
print(json.dumps(load_report(sys.argv[1]).to_dict()["diff"]))
"""


def test_a_loaded_reports_diff_is_the_same_with_and_without_torch(tmp_path: Path) -> None:
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(V1_REPORT))

    def diff(mode: str) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", _DIFF_PROBE, str(path), mode],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    without, with_torch = diff("none"), diff("torch")
    assert without == with_torch
    kernel = next(op for op in without["ops"] if op["name"] == "cpp_fused__to_copy_add_0")
    # Split with the runs' own aten names: `add` is known, `_to_copy` is not, so its words stand.
    assert kernel["fused_ops"] == ["aten::to", "aten::copy", "aten::add"]


@pytest.mark.parametrize(
    ("module", "heavy"),
    [
        ("memprof.analysis.diff", "pandas"),
        ("memprof.core.schema", "numpy"),
        ("memprof.analysis.gate", "pandas"),
    ],
)
def test_the_pure_parts_import_no_heavy_library(module: str, heavy: str) -> None:
    code = f"import sys, {module}; print({heavy!r} in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "False", done.stderr


def diagram_layers(path: Path) -> list[str]:
    """The layer names a document's layer diagram lists, highest first: the first code block
    after its heading whose lines start with a layer's name."""
    text = path.read_text()
    names = {name for name, _ in LAYERS}
    for block in text.split("```")[1::2]:
        found = [name for line in block.splitlines() for name in names if line.startswith(name + "  ")]
        if len(found) >= 3:
            return found
    raise AssertionError(f"{path.name} has no layer diagram")


@pytest.mark.parametrize("document", ["README.md", "CONTRIBUTING.md"])
def test_the_documented_layers_are_the_checked_ones(document: str) -> None:
    assert diagram_layers(ROOT / document) == [name for name, _ in reversed(LAYERS)]


def test_every_layer_is_folders_and_every_module_is_in_one() -> None:
    """A module's layer is read from its folder: each layer names top-level packages of memprof,
    and each of memprof's packages and modules (but the package face) falls in exactly one."""
    for _, prefixes in LAYERS:
        for prefix in prefixes:
            folder = ROOT / prefix.replace(".", "/")
            assert folder.is_dir() or prefix == "memprof.__main__", prefix
            assert prefix.count(".") == 1, f"{prefix}: a layer is a top-level folder"
    for name in MODULES:
        if name != "memprof":
            owners = [
                layer for layer, prefixes in LAYERS for p in prefixes if name == p or name.startswith(p + ".")
            ]
            assert len(owners) == 1, (name, owners)
