"""Arguments that certainly fit their schema, known without running the validator.

Most calls' arguments fit, and most schemas (the five tools' own among them) use a few plain
keywords. For those, `surely_fits` walks the arguments once and says True only when the full
validator (`arguments.py`) would find nothing wrong: each keyword it knows is read exactly as JSON
Schema 2020-12 reads it, and any keyword it does not know, a value of a type it is not sure of
(an integer written `1.0`), or more than `MAX_NODES` values, is a False that only means "ask the
validator", which then lists what is wrong. So a fitting call skips building jsonschema's
iteration, and every error message still comes from the one validator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MAX_NODES = 1_000  # values walked before the validator is left to decide (it has the deadline)

# Keywords that never make an instance invalid (format is an annotation: no format checker is used).
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"}
    | {"format"}
)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "number": _is_number,
    # An integer-valued float is an integer to JSON Schema; not sure here, so the validator decides.
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
}


class _Walk:
    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_NODES

    def fits(self, schema: Any, value: Any) -> bool:
        self.left -= 1
        if self.left < 0:
            return False
        if schema is True:
            return True
        if not isinstance(schema, dict):
            return False  # `false`, or not a schema: the validator says what it makes of it
        for keyword, expected in schema.items():
            if keyword in _ANNOTATIONS:
                continue
            check = _KEYWORDS.get(keyword)
            if check is None or not check(self, expected, value):
                return False
        return True


def _type(walk: _Walk, expected: Any, value: Any) -> bool:
    if isinstance(expected, str):
        known = _TYPES.get(expected)
        return known is not None and known(value)
    return False  # a list of types: left to the validator


def _properties(walk: _Walk, expected: Any, value: Any) -> bool:
    if not isinstance(value, dict):
        return True
    if not isinstance(expected, dict):
        return False
    for name, item in value.items():
        schema = expected.get(name)
        if schema is not None and not walk.fits(schema, item):
            return False
    return True


def _required(walk: _Walk, expected: Any, value: Any) -> bool:
    if not isinstance(value, dict):
        return True
    return isinstance(expected, list) and all(isinstance(n, str) and n in value for n in expected)


def _items(walk: _Walk, expected: Any, value: Any) -> bool:
    if not isinstance(value, list):
        return True
    return all(walk.fits(expected, item) for item in value)


def _bound(size: Callable[[Any], int | None], at_least: bool) -> Callable[[_Walk, Any, Any], bool]:
    def check(walk: _Walk, expected: Any, value: Any) -> bool:
        measured = size(value)
        if measured is None:
            return True  # the keyword does not apply to this type
        if not _is_number(expected):
            return False
        return measured >= expected if at_least else measured <= expected

    return check


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    return len(value) if isinstance(value, list) else None


def _number(value: Any) -> Any:
    return value if _is_number(value) else None


_KEYWORDS: dict[str, Callable[[_Walk, Any, Any], bool]] = {
    "type": _type,
    "properties": _properties,
    "required": _required,
    "items": _items,
    "minLength": _bound(_length, at_least=True),
    "maxLength": _bound(_length, at_least=False),
    "minItems": _bound(_count, at_least=True),
    "maxItems": _bound(_count, at_least=False),
    "minimum": _bound(_number, at_least=True),
    "maximum": _bound(_number, at_least=False),
}


def surely_fits(schema: Any, arguments: Any) -> bool:
    """True only when `arguments` fit `schema` (a usable 2020-12 schema); False: the validator decides."""
    if isinstance(schema, dict) and "$schema" in schema:
        return False  # another dialect reads some keywords otherwise
    return _Walk().fits(schema, arguments)
