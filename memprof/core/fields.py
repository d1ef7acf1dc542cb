"""The JSON contract, declared on the dataclasses themselves: what kind of value each field is.

A field of a report dataclass (``RunResult``, ``OpStats``, ``RunDiff``, ...) is declared with
one of the helpers below, e.g. ``peak_bytes: int = fields.size(required=True)``. That one line
is the whole contract for it: :mod:`memprof.core.schema` writes and reads (and checks) every field
from these declarations, so adding a field to the JSON is adding one line to a dataclass.

This module only declares (and :func:`copied` makes a report value from an analysis value
holding the same facts); it has no dependencies, so any stage (the analysis included) can
describe its values without importing the serialiser.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import MISSING
from typing import Any, TypeVar

SPEC = "memprof.json"

_T = TypeVar("_T")

# Kinds of value (what schema.py knows how to write and check).
TEXT = "text"  # a string
MAYBE_TEXT = "maybe_text"  # a string or null
SIZE = "size"  # a whole number of bytes, 0 or more
SIGNED_SIZE = "signed_size"  # a whole number of bytes, any sign
COUNT = "count"  # a whole number, 0 or more
INTEGER = "integer"  # a whole number, any sign
NUMBER = "number"  # a float; null in JSON is NaN in Python (unknown); written rounded to 6 decimals
MAYBE_NUMBER = "maybe_number"  # a float or None (null); written rounded to 6 decimals
RATIO = "ratio"  # a float or None, written exactly
LIST = "list"  # a JSON array of `item`: a tuple in Python
MAP = "map"  # a JSON object of name -> `item`: a dict in Python
OBJECT = "object"  # one nested dataclass (`item`), or null when `nullable`
FLAG = "flag"  # true or false
ONE_OF = "one_of"  # one of several dataclasses (`item`: a Choices), under its own type's key, or None


@dataclasses.dataclass(frozen=True)
class Spec:
    """How one field is written and read.

    ``key``: the JSON key when it differs from the attribute. ``item``: the kind of a list's or
    map's items (a kind name, a dataclass or a Spec), or the dataclass of an object.
    ``required``: a report without the key is rejected. ``nullable``: null is allowed (None in
    Python). ``nonempty``: a map must hold at least one entry. ``omit``: given the owning
    object, true when the key is left out of the JSON. ``write``: False for Python-only
    fields. ``choices``: the allowed values of a text. ``default_from``: when missing, take the
    value of that other field. ``key_field``: for a map of objects, the item field that holds
    the map's key. ``omit_none``: the key is left out of the JSON while the value is None
    (absent and null both read back as None): fields that only some runs know.
    ``same_length_as``: a list that must hold as many items as that other list field (a
    timeline's times and bytes); one that is left out when empty (``omit``) may also be empty.
    """

    kind: str
    key: str | None = None
    item: Any = None
    required: bool = False
    nullable: bool = False
    nonempty: bool = False
    omit: Callable[[Any], bool] | None = None
    write: bool = True
    choices: tuple[str, ...] = ()
    default_from: str | None = None
    key_field: str | None = None
    omit_none: bool = False
    same_length_as: str | None = None


class Choices:
    """An open table of dataclasses, each written under a JSON key of its own: what a
    :func:`one_of` field may hold. A type joins by :meth:`register` (a class decorator, run when
    its module is imported); ``discover``, when given, imports the modules that register, once,
    before the table is first read (so that reading a document finds every type)."""

    def __init__(self, name: str, discover: Callable[[], None] | None = None) -> None:
        self.name = name
        self._keys: dict[type, str] = {}
        self._discover = discover

    def register(self, key: str) -> Callable[[type[_T]], type[_T]]:
        """A class decorator: the class is written under ``key``."""

        def joined(cls: type[_T]) -> type[_T]:
            taken = {k: c for c, k in self._keys.items()}.get(key)
            if taken is not None and taken.__qualname__ != cls.__qualname__:
                raise ValueError(f"{self.name} key {key!r} is {taken.__qualname__}'s already")
            if taken is not None:  # the same class again (its module reloaded)
                del self._keys[taken]
            self._keys[cls] = key
            return cls

        return joined

    def unregister(self, key: str) -> None:
        """Forget the type written under ``key`` (a test's own)."""
        self._keys = {c: k for c, k in self._keys.items() if k != key}

    def items(self) -> list[tuple[str, type]]:
        """Each key and its type, in the order they registered."""
        if self._discover is not None:
            discover, self._discover = self._discover, None
            discover()
        return [(key, cls) for cls, key in self._keys.items()]

    def key_of(self, value: object) -> str:
        """The key ``value`` is written under (its type's, or a base class's)."""
        self.items()
        for cls in type(value).__mro__:
            if cls in self._keys:
                return self._keys[cls]
        raise TypeError(f"{type(value).__qualname__} is no registered {self.name}")


def spec_of(field: dataclasses.Field[Any]) -> Spec | None:
    """The declaration of a dataclass field, or None for a field outside the contract."""
    return field.metadata.get(SPEC)


def _field(
    kind: str, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True, **spec: Any
) -> Any:
    return dataclasses.field(
        default=default, default_factory=default_factory, init=init, metadata={SPEC: Spec(kind, **spec)}
    )


def text(default: Any = MISSING, **spec: Any) -> Any:
    return _field(TEXT, default, **spec)


def maybe_text(default: Any = None, **spec: Any) -> Any:
    return _field(MAYBE_TEXT, default, **spec)


def size(default: Any = 0, **spec: Any) -> Any:
    """Bytes that cannot be negative: a peak, an amount allocated."""
    return _field(SIZE, default, **spec)


def signed_size(default: Any = 0, **spec: Any) -> Any:
    """Bytes that may be negative: net and self bytes, deltas."""
    return _field(SIGNED_SIZE, default, **spec)


def count(default: Any = 0, **spec: Any) -> Any:
    return _field(COUNT, default, **spec)


def number(default: Any = math.nan, **spec: Any) -> Any:
    """A float that may be unknown (NaN in Python, null in JSON): times."""
    return _field(NUMBER, default, **spec)


def maybe_number(default: Any = None, **spec: Any) -> Any:
    """A float or None (null in JSON): a compile time that does not apply to eager runs."""
    return _field(MAYBE_NUMBER, default, **spec)


def ratio(default: Any = None, **spec: Any) -> Any:
    """A float or None, written exactly (ratios are compared to many digits)."""
    return _field(RATIO, default, **spec)


def items(item: Any, **spec: Any) -> Any:
    """A JSON array of ``item`` (a kind or a dataclass); a tuple in Python."""
    return _field(LIST, default=(), item=item, **spec)


def mapping(item: Any, default: Any = MISSING, **spec: Any) -> Any:
    """A JSON object of name -> ``item``; a dict in Python (empty by default)."""
    if default is MISSING:
        return _field(MAP, default_factory=dict, item=item, **spec)
    return _field(MAP, default, item=item, **spec)


def nested(item: type, default: Any = MISSING, **spec: Any) -> Any:
    """One nested dataclass (a JSON object); without a default, an empty ``item()``."""
    if default is MISSING:
        return _field(OBJECT, default_factory=item, item=item, **spec)
    return _field(OBJECT, default, item=item, **spec)


def list_of(item: Any) -> Spec:
    """The item kind "a list of ``item``", for a list or map whose items are lists."""
    return Spec(LIST, item=item)


def flag(default: Any = False, **spec: Any) -> Any:
    """True or false."""
    return _field(FLAG, default, **spec)


def maybe_size(**spec: Any) -> Any:
    """Bytes (0 or more) that only some runs know: None (left out of the JSON) elsewhere."""
    return _field(SIZE, None, nullable=True, omit_none=True, **spec)


def maybe_count(**spec: Any) -> Any:
    """A count (0 or more) that only some runs know: None (left out of the JSON) elsewhere."""
    return _field(COUNT, None, nullable=True, omit_none=True, **spec)


def optional_text(**spec: Any) -> Any:
    """A string that only some runs know: None (left out of the JSON) elsewhere."""
    return _field(MAYBE_TEXT, None, omit_none=True, **spec)


def optional(item: type, **spec: Any) -> Any:
    """One nested dataclass that only some runs have: None (left out of the JSON) elsewhere."""
    return _field(OBJECT, None, item=item, nullable=True, omit_none=True, **spec)


def one_of(choices: Choices, **spec: Any) -> Any:
    """One value of any type of ``choices`` (or None): written under the key of its type, read
    from whichever of their keys the document holds; left out of the JSON while None."""
    return _field(ONE_OF, None, item=choices, nullable=True, omit_none=True, **spec)


def python_only(default: Any = None) -> Any:
    """A field kept in Python and never written (e.g. torch's printed table)."""
    return _field(MAYBE_TEXT, default, write=False)


def copied(cls: type[_T], source: object, **given: Any) -> _T:
    """A ``cls`` (a report dataclass) made from a value of the analysis that holds the same
    facts: each field is ``given``, else ``source``'s attribute of the same name. A field that
    ``source`` lacks and that is not given is an error (AttributeError), never a default."""
    names = [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    return cls(**{name: given[name] if name in given else getattr(source, name) for name in names})
