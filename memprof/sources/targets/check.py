"""Usage mistakes in a target and its inputs, found from the source alone, before anything runs.

A misspelled module or function, a target that needs arguments and has no inputs factory, a
``--set`` name the factory does not take: each would otherwise be answered only after torch
and the user's module were imported (seconds to tens of seconds). :func:`check_before_running`
finds the module's file without importing it, reads its syntax tree (nothing in it runs) and
raises the very error the run would raise, when the source settles it. When it does not (a
name bound under a condition, a decorated function, a star import, a module that writes its
own globals, a module already imported), it returns and the run finds out as before.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memprof.core.errors import UsageError
from memprof.sources.targets import target as targets
from memprof.sources.targets.factory_fit import Returned, Signature, returns_of

MAX_SOURCE_BYTES = 4 * 1024 * 1024
"""Larger modules are left to the import (parsing them is not free)."""

# Calls and attributes through which a module's globals can change in ways its syntax does not
# show: anywhere in the file, and (for the calls in _TOP_LEVEL_DYNAMIC) at its top level.
_DYNAMIC_NAMES = frozenset({"globals", "exec", "eval", "__import__"})
_TOP_LEVEL_DYNAMIC = frozenset({"setattr", "delattr", "vars", "locals"})
_DYNAMIC_ATTRIBUTES = frozenset({"modules", "__dict__"})
# Text in a package's __init__ that may put submodules where finders do not look.
_DYNAMIC_PACKAGE = ("sys.modules", "__path__", "meta_path", "path_hooks", "extend_path")


@dataclass(frozen=True)
class Function:
    """A module-level function as its ``def`` declares it (what ``inspect.signature`` says)."""

    required: list[str]  # the parameters a call without arguments leaves unfilled
    keywords: list[str]  # the names it takes by keyword, device excluded
    open_ended: bool  # it takes **kwargs
    positional: list[str] = field(default_factory=list)  # the names it takes by position
    varargs: bool = False  # it takes *args
    returns: tuple[Returned, ...] = ()  # what each of its return statements gives
    line: int = 0

    def filled_by(self, factory: Function) -> bool | None:
        """Whether every return of ``factory`` fills this function's arguments: False when one
        surely does not, None when the source does not say."""
        signature = Signature(self.required, self.keywords, self.open_ended, self.positional, self.varargs)
        return signature.filled_by(factory.returns)


@dataclass
class Namespace:
    """What a module's top level binds, as far as its source says.

    ``certain``: bound whenever the module imports; ``possible``: may be bound (under a
    condition, in a ``try``, by a loop, by a ``global`` statement, as a submodule); ``dynamic``:
    its globals can change in ways the source does not show, so no name is known missing."""

    bindings: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)  # name -> (kind, conditional)
    functions: dict[str, Function] = field(default_factory=dict)
    dynamic: bool = False
    submodules: set[str] = field(default_factory=set)
    lines: dict[str, int] = field(default_factory=dict)  # name -> line of its first top-level binding

    @property
    def possible(self) -> set[str]:
        return set(self.bindings) | self.submodules

    @property
    def certain(self) -> set[str]:
        return {
            name
            for name, kinds in self.bindings.items()
            if any(not conditional for _, conditional in kinds) and all(kind != "del" for kind, _ in kinds)
        }

    def missing(self, name: str) -> bool:
        """Whether ``name`` is surely not an attribute of the imported module."""
        return not self.dynamic and not name.startswith("__") and name not in self.possible

    def close_names(self, name: str) -> list[str] | None:
        """The "did you mean" names of the run's message, or None when the source leaves them open."""
        lower, upper = targets.close_names(name, self.certain), targets.close_names(name, self.possible)
        return lower if lower == upper else None

    def factories(self, target: str) -> list[str] | None:
        """The module's own functions whose names read like inputs factories, the likeliest for
        the function ``target`` first, as the run lists them; None when the source leaves them
        open."""
        surely, maybe = set(), set()
        for name in self.possible:
            if not targets.looks_like_factory(name):
                continue
            kinds = self.bindings.get(name, [("other", True)])
            if all(kind == "import" for kind, _ in kinds):
                continue  # another module's function: never suggested
            maybe.add(name)
            if len(kinds) == 1 and kinds[0] in (("def", False), ("lambda", False)):
                surely.add(name)
        if surely != maybe:
            return None
        # A factory whose returns surely do not fill the target's arguments is never suggested.
        func = self.functions.get(target)
        fits = [
            name
            for name in surely
            if func is None or name not in self.functions or func.filled_by(self.functions[name]) is not False
        ]
        found = [(name, self.lines.get(name)) for name in fits]
        return targets.rank_factories(target, self.lines.get(target), found)


def check_before_running(target: str, inputs: str | None, params: dict[str, Any]) -> None:
    """Raise the usage error (exit 2) that resolving ``target`` and building its inputs from
    ``inputs`` (a factory's spec, or None for ``<function>_inputs``) with ``params`` would
    raise, when the source files settle it; return otherwise."""
    _file_alone(target)
    where, attr_path = targets.split_spec(target)
    namespace = _namespace(where, target)
    if namespace is None or not _has(namespace, where, attr_path):
        return
    func = namespace.functions.get(attr_path)
    if func is None:
        return  # a class, a method, a decorated function, a name bound twice: the run decides
    if params and inputs is None and not func.required:
        raise targets.no_factory_for(target, params)
    if inputs is not None:
        source = inputs
        factory_where, factory_attr = targets.split_spec(inputs)
        factory_namespace = _namespace(factory_where, inputs)
        if factory_namespace is None or not _has(factory_namespace, factory_where, factory_attr):
            return
        make = factory_namespace.functions.get(factory_attr)
    elif not func.required:
        return
    else:
        name = f"{attr_path}_inputs"
        source = f"{where}:{name}"
        if namespace.missing(name):
            found = namespace.factories(attr_path)
            if found is None:
                return
            raise UsageError(targets.missing_inputs_message(target, func.required, name, where, found))
        make = namespace.functions.get(name)
    if make is not None and params:
        targets.check_params(make.keywords, make.open_ended, source, params)


def _file_alone(target: str) -> None:
    """A Python file named without a function (``train.py``): say which functions it defines,
    with their inputs factories, and how to profile a block of a script instead."""
    if ":" in target or not target.endswith(".py"):
        return
    path = Path(target)
    targets.check_file(path, target)
    namespace = _read(path)
    listed = [] if namespace is None else _functions_listed(namespace)
    example = f"{target}:{listed[0][0]}" if listed else f"{target}:FUNCTION"
    found = (
        "; its functions: " + ", ".join(text for _, text in listed[:8]) + (", ..." if len(listed) > 8 else "")
        if listed
        else "; it defines no function at its top level"
    )
    raise UsageError(
        f"target {target!r} names a file, not a function in it: name one as {example!r}{found}. "
        "To profile a block of a script where it runs (a training loop), wrap it in "
        "`with memprof.track(model=model, optimizer=optimizer):` (docs/guides/track.md)"
    )


def _functions_listed(namespace: Namespace) -> list[tuple[str, str]]:
    """The file's functions a run could profile (not its factories nor private ones), in the
    order they are defined: (name, ``step (inputs step_inputs)``)."""
    listed = []
    for name, func in sorted(namespace.functions.items(), key=lambda item: item[1].line):
        if name.startswith("_") or targets.looks_like_factory(name):
            continue
        if not func.required:
            listed.append((name, f"{name} (no arguments)"))
            continue
        own = f"{name}_inputs"
        factories = [own] if own in namespace.functions else (namespace.factories(name) or [])
        made = f"inputs {' or '.join(factories[:2])}" if factories else f"needs {', '.join(func.required)}"
        listed.append((name, f"{name} ({made})"))
    return listed


def _has(namespace: Namespace, where: str, attr_path: str) -> bool:
    """False when the run could find the attribute or the source leaves it open; raises the
    run's error when the module surely has nothing of that name."""
    part = attr_path.split(".")[0]
    if not namespace.missing(part):
        return "." not in attr_path  # an object's attribute: the run looks it up
    close = namespace.close_names(part)
    if close is None:
        return False
    raise targets.no_attribute(where, part, close)


# ------------------------------------------------------------------------- finding the source


def _namespace(where: str, spec: str) -> Namespace | None:
    """The namespace of the module ``where`` names, from its source; None when it cannot be
    read without running code (or is imported already: then the run is quick to answer)."""
    if where in sys.modules:
        return None
    if targets.is_path(where):
        path = Path(where)
        targets.check_file(path, spec)
        if targets.module_name_of_file(path) in sys.modules:
            return None
    else:
        found = _module_file(where, spec)
        if found is None:
            return None
        path = found
    namespace = _read(path)
    if namespace is not None and path.name == "__init__.py":
        namespace.submodules = {child.name.partition(".")[0] for child in path.parent.iterdir()}
    return namespace


def _module_file(where: str, spec: str) -> Path | None:
    """The source file of module ``where``, found as the import system would find it (the
    working directory first, as the run puts it) without running any of it; the run's
    "not found" error when nothing provides it."""
    parts = where.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    cwd = targets.working_directory_on_path()
    found: importlib.machinery.ModuleSpec | None = None
    for depth in range(1, len(parts) + 1):
        name, parent = ".".join(parts[:depth]), found
        loaded = sys.modules.get(name)
        try:
            if loaded is not None:
                found = getattr(loaded, "__spec__", None)
                if found is None:
                    return None
            elif parent is None:
                found = importlib.util.find_spec(name)
            elif parent.submodule_search_locations is None:
                found = None  # the parent is a module, not a package
            else:
                search = list(parent.submodule_search_locations)
                found = importlib.machinery.PathFinder.find_spec(name, search)
        except (ImportError, ValueError, AttributeError):
            return None
        if found is None:
            if parent is not None and _dynamic_package(parent):
                return None
            raise targets.module_not_found(name, cwd, spec)
    loader = found.loader if found is not None else None
    if found is None or not isinstance(loader, importlib.machinery.SourceFileLoader) or not found.origin:
        return None  # a built-in, compiled or namespace module: the import decides
    return Path(found.origin)


def _dynamic_package(package: importlib.machinery.ModuleSpec) -> bool:
    """Whether a package's ``__init__`` may provide submodules that no finder sees."""
    if not package.origin or not package.has_location:
        return False
    try:
        text = Path(package.origin).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    return any(marker in text for marker in _DYNAMIC_PACKAGE)


def _read(path: Path) -> Namespace | None:
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            return None
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError, MemoryError, RecursionError):
        return None  # unreadable or not Python: the import says what is wrong
    return namespace_of(tree)


# ------------------------------------------------------------------------- reading the syntax tree


def namespace_of(tree: ast.Module) -> Namespace:
    """What a module's top level binds, read from its syntax tree."""
    namespace = Namespace()
    _bind_statements(namespace, tree.body, conditional=False)
    namespace.dynamic = namespace.dynamic or _writes_its_globals(tree)
    for node in tree.body:
        kinds = namespace.bindings.get(getattr(node, "name", ""), [])
        if isinstance(node, ast.FunctionDef) and kinds == [("def", False)] and not _is_generator(node):
            namespace.functions[node.name] = _function(node)
    if "__getattr__" in namespace.bindings or "__dir__" in namespace.bindings:
        namespace.dynamic = True  # a module __getattr__ answers any name
    return namespace


def _bind(namespace: Namespace, name: str, kind: str, conditional: bool, line: int | None = None) -> None:
    namespace.bindings.setdefault(name, []).append((kind, conditional))
    if line is not None:
        namespace.lines.setdefault(name, line)


_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match)


def _bind_statements(namespace: Namespace, statements: list[ast.stmt], conditional: bool) -> None:
    for node in statements:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            kind = "decorated" if node.decorator_list or isinstance(node, ast.AsyncFunctionDef) else "def"
            _bind(namespace, node.name, kind, conditional, node.lineno)
            _bind_globals(namespace, node)
        elif isinstance(node, ast.ClassDef):
            _bind(namespace, node.name, "other", conditional)
            _bind_globals(namespace, node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    namespace.dynamic = True
                else:
                    _bind(namespace, alias.asname or alias.name.split(".")[0], "import", conditional)
        elif isinstance(node, ast.Delete):
            for name in _stored(node, ast.Del):
                _bind(namespace, name, "del", True)
        elif isinstance(node, _COMPOUND) or type(node).__name__ == "TryStar":
            for name in _stored(node, ast.Store, statements=False):
                _bind(namespace, name, "other", True)
            for child in _statement_lists(node):
                _bind_statements(namespace, child, conditional=True)
        elif isinstance(node, ast.AnnAssign) and node.value is None:
            continue  # `x: int` declares x without binding it
        else:
            lambda_value = isinstance(getattr(node, "value", None), ast.Lambda)
            targets_ = getattr(node, "targets", [getattr(node, "target", None)])
            single = len(targets_) == 1 and isinstance(targets_[0], ast.Name)
            for name in _stored(node, ast.Store):
                walrus = not any(isinstance(t, ast.Name) and t.id == name for t in targets_)
                kind = "lambda" if lambda_value and single and not walrus else "other"
                _bind(namespace, name, kind, conditional or walrus, getattr(node, "lineno", None))


def _statement_lists(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        statements = getattr(node, name, None)
        if statements:
            yield statements
    for part in [*getattr(node, "handlers", []), *getattr(node, "cases", [])]:
        yield part.body


def _stored(node: ast.AST, context: type, statements: bool = True) -> Iterator[str]:
    """Names a statement binds (``context`` Store) or deletes (Del) in the module's scope: not
    inside a lambda, nor a comprehension's own variables (its walrus targets are the module's);
    ``statements=False``: the compound statement's own header only (targets, ``as`` names)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt) and not statements:
            continue
        if isinstance(child, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(child, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            yield from (n.target.id for n in ast.walk(child) if isinstance(n, ast.NamedExpr))
            continue
        if isinstance(child, ast.Name) and isinstance(child.ctx, context):
            yield child.id
        for name in ("name", "rest"):  # except ... as name; match patterns
            value = getattr(child, name, None)
            if isinstance(value, str) and isinstance(child, ast.ExceptHandler | ast.pattern):
                yield value
        yield from _stored(child, context, statements)


def _bind_globals(namespace: Namespace, scope: ast.AST) -> None:
    """``global NAME`` inside a function or class may bind NAME when it runs."""
    for node in ast.walk(scope):
        if isinstance(node, ast.Global):
            for name in node.names:
                _bind(namespace, name, "other", True)


def _writes_its_globals(tree: ast.Module) -> bool:
    """Whether the module may change its own globals in ways its bindings do not show:
    ``globals()``, ``exec``, ``sys.modules[...]``, a ``__dict__`` anywhere; ``setattr``,
    ``vars()``, ``locals()`` at its top level."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _DYNAMIC_NAMES:
            return True
        if isinstance(node, ast.Attribute) and node.attr in _DYNAMIC_ATTRIBUTES:
            return True
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue  # their own scope (global statements are bindings already)
        called = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None
        if isinstance(node, ast.Call) and called in _TOP_LEVEL_DYNAMIC:
            if called in ("setattr", "delattr") or not (node.args or node.keywords):
                return True
        pending.extend(ast.iter_child_nodes(node))
    return False


def _is_generator(node: ast.FunctionDef) -> bool:
    """Whether the function's own body yields (a generator function: the run refuses it)."""
    pending: list[ast.AST] = list(node.body)
    while pending:
        child = pending.pop()
        if isinstance(child, ast.Yield | ast.YieldFrom):
            return True
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            pending.extend(ast.iter_child_nodes(child))
    return False


def _function(node: ast.FunctionDef) -> Function:
    arguments = node.args
    positional = [*arguments.posonlyargs, *arguments.args]
    without_default = len(positional) - len(arguments.defaults)
    required = [a.arg for a in positional[:without_default]]
    required += [a.arg for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d is None]
    keywords = [a.arg for a in [*arguments.args, *arguments.kwonlyargs] if a.arg != "device"]
    return Function(
        required=required,
        keywords=keywords,
        open_ended=arguments.kwarg is not None,
        positional=[a.arg for a in positional],
        varargs=arguments.vararg is not None,
        returns=returns_of(node),
        line=node.lineno,
    )
