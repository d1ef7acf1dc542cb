"""Whether an inputs factory's value fills a target's arguments, read from the factory's source
(nothing runs): the hint for a target without inputs suggests only factories that may fit
(``step(model, x)`` is not offered ``make_model``, which returns one value).

The run passes a factory's value as the target's arguments: a tuple or list as positional
arguments, a dict as keyword arguments, anything else as the one argument. What a ``return``
gives is read from its expression (:func:`returns_of`): a tuple, list or dict literal (or a
name assigned one), or a value surely single (a module or tensor made by a class or by torch:
``Net()``, ``torch.randn(...)``, ``.to(device)`` of one). Anything else is left open, and a
factory left open is still suggested.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

Returned = int | frozenset[str] | None
"""What one ``return`` of a factory gives its target: a count of positional arguments, the
names of keyword arguments (a dict literal), or None when the source does not say."""


@dataclass(frozen=True)
class Signature:
    """What a target takes: ``required`` (unfilled by a call without arguments), ``keywords``
    (``device`` excluded), ``open_ended`` (``**kwargs``), ``positional`` names, ``varargs``."""

    required: list[str]
    keywords: list[str]
    open_ended: bool
    positional: list[str]
    varargs: bool

    def takes(self, returned: Returned) -> bool | None:
        """Whether one value a factory returns fills these arguments (None: not known)."""
        if returned is None:
            return None
        if isinstance(returned, int):
            fillable = [name for name in self.required if name in self.positional]
            return (
                len(fillable) == len(self.required)
                and len(fillable) <= returned
                and (returned <= len(self.positional) or self.varargs)
            )
        known = {*self.keywords, "device"}
        return set(self.required) <= returned and (returned <= known or self.open_ended)

    def filled_by(self, returns: Sequence[Returned]) -> bool | None:
        """Whether every return of a factory fills these arguments: False when one surely does
        not, None when the source does not say."""
        said = [self.takes(returned) for returned in returns] or [None]
        return False if False in said else None if None in said else True


def signature_of(func: Callable[..., Any]) -> Signature | None:
    """A callable's :class:`Signature` (None when Python cannot tell it)."""
    try:
        parameters = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return None
    kind = inspect.Parameter
    by_position = (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)
    return Signature(
        required=[
            p.name
            for p in parameters
            if p.default is kind.empty and p.kind in (*by_position, kind.KEYWORD_ONLY)
        ],
        keywords=[
            p.name
            for p in parameters
            if p.kind in (kind.POSITIONAL_OR_KEYWORD, kind.KEYWORD_ONLY) and p.name != "device"
        ],
        open_ended=any(p.kind is kind.VAR_KEYWORD for p in parameters),
        positional=[p.name for p in parameters if p.kind in by_position],
        varargs=any(p.kind is kind.VAR_POSITIONAL for p in parameters),
    )


def factory_returns(make: Callable[..., Any]) -> tuple[Returned, ...]:
    """What each ``return`` of a factory function gives, from its source; () when its source
    cannot be read."""
    try:
        source = textwrap.dedent(inspect.getsource(inspect.unwrap(make)))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, ValueError):
        return ()
    node = tree.body[0] if tree.body else None
    return returns_of(node) if isinstance(node, ast.FunctionDef) else ()


def returns_of(node: ast.FunctionDef) -> tuple[Returned, ...]:
    """What each ``return`` of a function's own body gives."""
    assigned: dict[str, list[ast.expr]] = {}
    returns: list[ast.expr | None] = []
    for child in _own_nodes(node):
        if (
            isinstance(child, ast.Assign)
            and len(child.targets) == 1
            and isinstance(child.targets[0], ast.Name)
        ):
            assigned.setdefault(child.targets[0].id, []).append(child.value)
        elif isinstance(child, ast.Return):
            returns.append(child.value)
    return tuple(_returned(value, assigned) for value in returns)


def _own_nodes(node: ast.FunctionDef) -> Iterator[ast.AST]:
    """The nodes of a function's own body, not of the functions, classes or lambdas in it."""
    pending: list[ast.AST] = list(node.body)
    while pending:
        child = pending.pop()
        yield child
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            pending.extend(ast.iter_child_nodes(child))


def _returned(value: ast.expr | None, assigned: dict[str, list[ast.expr]]) -> Returned:
    if isinstance(value, ast.Name) and value.id in assigned:
        said = {_returned(each, {}) for each in assigned[value.id]}
        return said.pop() if len(said) == 1 else None
    if isinstance(value, ast.Tuple | ast.List):
        starred = any(isinstance(element, ast.Starred) for element in value.elts)
        return None if starred else len(value.elts)
    if isinstance(value, ast.Dict):
        keys = [key.value if isinstance(key, ast.Constant) else None for key in value.keys]
        names = [key for key in keys if isinstance(key, str)]
        return frozenset(names) if len(names) == len(keys) else None
    if isinstance(value, ast.Constant):
        return None if value.value is None else 1
    return 1 if value is not None and _one_value(value) else None


def _one_value(value: ast.expr) -> bool:
    """Whether an expression surely makes one value, not a tuple: a module or tensor made by a
    class (``Net()``, ``nn.Linear(...)``) or by torch (``torch.randn(...)``), and methods of it
    (``.to(device)``)."""
    names: list[str] = []
    while isinstance(value, ast.Call | ast.Attribute):
        if isinstance(value, ast.Attribute):
            names.append(value.attr)
        value = value.func if isinstance(value, ast.Call) else value.value
    if isinstance(value, ast.Name):
        names.append(value.id)
    return bool(names) and (names[-1] in ("torch", "nn") or any(name[:1].isupper() for name in names))
