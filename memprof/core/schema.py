"""The one JSON (de)serialiser: dataclasses <-> JSON documents, driven by each field's
declaration (:mod:`memprof.core.fields`).

:func:`encode` writes every declared field; :func:`decode` reads a document back into the
dataclass and checks every value as it goes. A value of the wrong kind (a negative peak, a
fraction of a byte, a string where a number belongs) is an :class:`InputError` (exit 2) that
names its place, e.g. ``report.json: runs.eager.peak_bytes must be a number of bytes (a whole
number, 0 or more), got -5``. Nothing here knows which dataclasses exist: the model says what
a report holds, this module only how each kind of value is written and checked.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from memprof.core import fields as f
from memprof.core.errors import InputError, brief
from memprof.core.units import json_float

_INT64 = 2**63


def encode(obj: Any) -> dict[str, Any]:
    """The JSON form of a dataclass instance: each declared field under its key, in
    declaration order; fields that are Python-only, or ``omit`` now, are left out."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(obj):
        spec = f.spec_of(field)
        if spec is None or not spec.write or (spec.omit is not None and spec.omit(obj)):
            continue
        value = getattr(obj, field.name)
        if spec.omit_none and value is None:
            continue
        if spec.kind == f.ONE_OF:  # under the key of the value's own type
            out[spec.item.key_of(value)] = encode(value)
            continue
        out[spec.key or field.name] = _encode(spec, value)
    return out


def dumps(document: dict[str, Any]) -> str:
    """Indented JSON text (NaN and infinity are never written: they were made null)."""
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def _item_spec(item: Any) -> f.Spec:
    if isinstance(item, f.Spec):
        return item
    if isinstance(item, str):
        return f.Spec(item)
    return f.Spec(f.OBJECT, item=item)


def _encode(spec: f.Spec, value: Any) -> Any:
    kind = spec.kind
    if value is None:
        return None
    if kind in (f.SIZE, f.SIGNED_SIZE, f.COUNT, f.INTEGER):
        return int(value)
    if kind in (f.NUMBER, f.MAYBE_NUMBER):
        return json_float(value)
    if kind == f.RATIO:
        return float(value) if math.isfinite(value) else None
    if kind == f.FLAG:
        return bool(value)
    if kind == f.LIST:
        item = _item_spec(spec.item)
        return [_encode(item, v) for v in value]
    if kind == f.MAP:
        item = _item_spec(spec.item)
        return {str(k): _encode(item, v) for k, v in value.items()}
    if kind == f.OBJECT:
        return encode(value)
    return value


# ---------------------------------------------------------------------------------- reading


class _Place:
    """Where a value sits in the document, for messages: ``runs.eager.ops[3].calls``; a
    top-level key is quoted (``'runs'``)."""

    def __init__(self, where: str, parts: tuple[str | int, ...] = ()) -> None:
        self.where, self.parts = where, parts

    def __truediv__(self, part: str | int) -> _Place:
        return _Place(self.where, (*self.parts, part))

    @property
    def in_list(self) -> bool:
        return bool(self.parts) and isinstance(self.parts[-1], int)

    def fail(self, problem: str, sep: str = " ") -> InputError:
        text = ""
        for part in self.parts:
            if isinstance(part, str) and (len(part) > 60 or not part.isprintable()):
                part = brief(part)  # a key from the file: one short line in the message
            text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
        if len(self.parts) == 1:
            text = repr(text)
        return InputError(f"{self.where}: {text}{sep}{problem}" if text else f"{self.where}: {problem}")


def decode(cls: type, data: Any, where: str, *, place: _Place | None = None, **given: Any) -> Any:
    """Build ``cls`` from its JSON form ``data``, checking every declared field; ``given``
    fields are set by the caller (a run's label is its key in ``runs``). ``where`` names the
    document in messages (its path)."""
    place = place or _Place(where)
    declared = [(field, f.spec_of(field)) for field in dataclasses.fields(cls) if field.init]
    specs = [(field.name, spec) for field, spec in declared if spec is not None and spec.write]
    _check_object(
        data, place, [spec.key or name for name, spec in specs if spec.required and name not in given]
    )
    # A class may read documents written before one of its fields existed: ``from_older(data)``
    # gives the document in today's shape.
    from_older = getattr(cls, "from_older", None)
    if from_older is not None:
        data = from_older(data)
    values = dict(given)
    for name, spec in specs:
        if name in values:
            continue
        key = spec.key or name
        if spec.kind == f.ONE_OF:
            _one_of(spec.item, data, place, values, name)
        elif key in data:
            values[name] = _decode(spec, data[key], place / key)
        elif spec.default_from is not None and spec.default_from in values:
            values[name] = values[spec.default_from]
    for name, spec in specs:
        other = spec.same_length_as
        if other is None:
            continue
        count, other_count = len(values.get(name, ())), len(values.get(other, ()))
        if count != other_count and not (count == 0 and spec.omit is not None):
            key, other_key = spec.key or name, dict(specs)[other].key or other
            raise (place / key).fail(
                f"has {count} values but {other_key} has {other_count}; they go in pairs"
            )
    return cls(**values)


def _one_of(
    choices: f.Choices, data: dict[str, Any], place: _Place, values: dict[str, Any], name: str
) -> None:
    """The value of a ``one_of`` field: read from whichever of its types' keys ``data`` holds
    (none: the field keeps its default); two of them is an error."""
    present = [(key, cls) for key, cls in choices.items() if key in data]
    if len(present) > 1:
        keys = " and ".join(sorted(repr(key) for key, _ in present))
        raise place.fail(f"holds {keys}, but one of them at most belongs in it; keep one")
    for key, cls in present:
        value = data[key]
        values[name] = None if value is None else decode(cls, value, place.where, place=place / key)


def _check_object(data: Any, place: _Place, required: list[str]) -> None:
    """An object with every required key; an item of a list says what it must hold."""
    keys = " and ".join(repr(k) for k in required)
    holding = f" with {'a ' if len(required) == 1 else ''}{keys}" if required and place.in_list else ""
    if not isinstance(data, dict):
        raise place.fail(f"must be an object{holding}")
    missing = [k for k in required if k not in data]
    if missing and holding:
        raise place.fail(f"must be an object{holding}")
    if missing:
        listed = ", ".join(repr(k) for k in missing)
        raise place.fail(f"missing {listed}; is this a memprof report?", sep=": ")


_WHOLE = {
    f.SIZE: ("a number of bytes (a whole number, 0 or more)", 0),
    f.SIGNED_SIZE: ("a number of bytes (a whole number)", None),
    f.COUNT: ("a count (a whole number, 0 or more)", 0),
    f.INTEGER: ("a whole number", None),
}


def _decode(spec: f.Spec, value: Any, place: _Place) -> Any:
    kind = spec.kind
    if value is None and (spec.nullable or kind in (f.MAYBE_TEXT, f.MAYBE_NUMBER, f.RATIO)):
        return None
    if kind in _WHOLE:
        return _whole(value, place, *_WHOLE[kind])
    if kind in (f.NUMBER, f.MAYBE_NUMBER, f.RATIO):
        return _number(value, place, none=math.nan if kind == f.NUMBER else None)
    if kind in (f.TEXT, f.MAYBE_TEXT):
        return _text(spec, value, place)
    if kind == f.FLAG:
        if not isinstance(value, bool):
            raise place.fail(f"must be true or false, got {value!r}")
        return value
    if kind == f.LIST:
        if not isinstance(value, list):
            raise place.fail("must be a JSON array")
        item = _item_spec(spec.item)
        return tuple(_decode(item, v, place / i) for i, v in enumerate(value))
    if kind == f.MAP:
        return _map(spec, value, place)
    if kind == f.OBJECT:
        return decode(spec.item, value, place.where, place=place)
    raise AssertionError(f"unknown field kind {kind!r}")  # pragma: no cover - a declaration error


def _whole(value: Any, place: _Place, what: str, floor: int | None) -> int:
    """A whole number within int64 (an integral float such as 1e3 counts), at least ``floor``."""
    ok = not isinstance(value, bool) and isinstance(value, int | float)
    if ok and isinstance(value, float):
        ok = math.isfinite(value) and value.is_integer()
    if ok:
        ok = -_INT64 <= value < _INT64 and (floor is None or value >= floor)
    if not ok:
        raise place.fail(f"must be {what}, got {brief(value)}")
    return int(value)


def _number(value: Any, place: _Place, none: float | None) -> float | None:
    if value is None:
        return none
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        # 1e400 parses as infinity: not a time or ratio anything measured
        raise place.fail(f"must be a number or null, got {brief(value)}")
    return float(value)


def _text(spec: f.Spec, value: Any, place: _Place) -> str:
    if not isinstance(value, str):
        raise place.fail(
            f"must be a string{' or null' if spec.kind == f.MAYBE_TEXT else ''}, got {brief(value)}"
        )
    if spec.choices and value not in spec.choices:
        raise place.fail(f"must be one of {', '.join(repr(c) for c in spec.choices)}, got {brief(value)}")
    return value


def _map(spec: f.Spec, value: Any, place: _Place) -> dict[str, Any]:
    if not isinstance(value, dict) or (spec.nonempty and not value):
        raise place.fail(f"must be an object{' with at least one entry' if spec.nonempty else ''}")
    item = _item_spec(spec.item)
    if spec.key_field is not None:
        return {
            key: decode(item.item, v, place.where, place=place / key, **{spec.key_field: key})
            for key, v in value.items()
        }
    return {key: _decode(item, v, place / key) for key, v in value.items()}
