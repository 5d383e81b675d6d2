"""jsonschema's keywords, bounded in time and memory against hostile schemas and arguments.

`bounded(cls)` gives a dialect's validator class in which:
- regular expressions (`pattern`, `patternProperties`, and those `additionalProperties` and
  `unevaluatedProperties` consult) are matched by `patterns` (RE2, linear time), never by
  Python's backtracking `re`; a schema's own patterns are checked (format "regex") the same way;
- `uniqueItems`, `unevaluatedItems` and `unevaluatedProperties` take linear time (jsonschema
  compares every pair, time that grows with the square of the length: docs/benchmarks.md,
  "Argument checks");
- messages show a few items of a long value, not all of it (jsonschema repeats a whole `enum`
  in the message of every item that misses it);
- every keyword applied and every pattern matched first checks the deadline of the `Check`
  running in this context (`checking`), raising `TimeUp` once it has passed.
"""

from __future__ import annotations

import contextlib
import math
import reprlib
import threading
import time
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import jsonschema
import jsonschema._keywords
import jsonschema._legacy_keywords
import jsonschema._utils
from jsonschema.exceptions import ValidationError

from toolsearch.errors import ToolsearchError
from toolsearch.validation import patterns

# -- the deadline every keyword and pattern match checks


class Check:
    """One check's deadline; `cancel` ends it at once (whoever waited for it gave up)."""

    __slots__ = ("deadline",)

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline  # a time.monotonic() value

    def cancel(self) -> None:
        self.deadline = -math.inf


_CHECK: ContextVar[Check | None] = ContextVar("toolsearch_validation_check", default=None)


def _deadline() -> float:
    check = _CHECK.get()
    return math.inf if check is None else check.deadline


@contextlib.contextmanager
def checking(check: Check) -> Iterator[None]:
    """Run the keywords of `bounded` classes against `check`'s deadline in this context."""
    token = _CHECK.set(check)
    try:
        yield
    finally:
        _CHECK.reset(token)


class TimeUp(ToolsearchError):
    """Raised inside a check whose deadline has passed."""


def _checkpoint() -> None:
    if time.monotonic() > _deadline():
        raise TimeUp


def _search(pattern: str, text: str) -> bool:
    return patterns.search(pattern, text, _deadline())


# -- bounded messages: a schema's enum or an argument can be a megabyte long

_SHORT = reprlib.Repr(maxlevel=3, maxlist=8, maxtuple=8, maxdict=6, maxstring=80, maxother=80)


def _short(value: Any) -> str:
    return _SHORT.repr(value)


def _were(names: list[Any]) -> str:
    return f"{_short(names)} {'was' if len(names) == 1 else 'were'}"


# -- keywords of our own, in place of jsonschema's

_CONTAINERS = (dict, list)


def _json_key(value: Any) -> Any:
    """A hashable form under which two JSON values are equal exactly when JSON Schema says so:
    1 and 1.0 alike, true and 1 not, objects regardless of key order."""
    if isinstance(value, bool):
        return (bool, value)
    if isinstance(value, int | float):
        return (float, value)  # 1 == 1.0 and both hash alike
    if isinstance(value, str):
        return (str, value)
    if isinstance(value, list):
        return (list, tuple(_json_key(item) for item in value))
    if isinstance(value, dict):
        return (dict, frozenset((key, _json_key(item)) for key, item in value.items()))
    return (None, None)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{_short(instance)} does not match {_short(pattern)}")


def _pattern_properties(
    validator: Any, pattern_properties: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for name, value in instance.items():
            if _search(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    matched_by = schema.get("patternProperties", {})
    extras = [
        name
        for name in instance
        if name not in declared and not any(_search(pattern, name) for pattern in matched_by)
    ]
    if validator.is_type(additional, "object"):
        for name in extras:
            yield from validator.descend(instance[name], additional, path=name)
    elif not additional and extras:
        if matched_by:
            yield ValidationError(
                f"{_short(extras)} {'does' if len(extras) == 1 else 'do'} not match any of the regexes:"
                f" {_short(list(matched_by))}"
            )
        else:
            yield ValidationError(f"Additional properties are not allowed ({_were(extras)} unexpected)")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    first: dict[Any, int] = {}
    for index, item in enumerate(instance):
        seen = first.setdefault(_json_key(item), index)
        if seen != index:
            yield ValidationError(
                f"{_short(instance)} has non-unique elements (items {seen} and {index} are equal)"
            )
            return


def _json_equal(one: Any, two: Any) -> bool:
    if isinstance(one, bool) or isinstance(two, bool):
        return one is two
    if isinstance(one, _CONTAINERS) or isinstance(two, _CONTAINERS):
        return _json_key(one) == _json_key(two)
    return one == two  # numbers (1 == 1.0), strings, null


def _enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    # Python's == is looser than JSON's (True == 1) but never stricter: `in`, at C speed, rules out
    # most values of a long enum before the exact comparison.
    if instance not in enums or not any(_json_equal(each, instance) for each in enums):
        yield ValidationError(f"{_short(instance)} is not one of {_short(enums)}")


def _const(validator: Any, const: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if instance != const or not _json_equal(instance, const):
        yield ValidationError(f"{_short(const)} was expected")


Finder = Callable[[Any, Any, Any], Iterable[Any]]


def _unevaluated_properties(evaluated_keys: Finder) -> Callable[..., Iterator[ValidationError]]:
    def unevaluated_properties(
        validator: Any, unevaluated: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        evaluated = set(evaluated_keys(validator, instance, schema))
        failing = [
            name
            for name in instance
            if name not in evaluated
            and next(iter(validator.descend(instance[name], unevaluated, path=name)), None) is not None
        ]
        if not failing:
            return
        if unevaluated is False:
            yield ValidationError(f"Unevaluated properties are not allowed ({_were(failing)} unexpected)")
        else:
            yield ValidationError(
                "Unevaluated properties are not valid under the given schema"
                f" ({_were(failing)} unevaluated and invalid)"
            )

    return unevaluated_properties


def _unevaluated_items(evaluated_indexes: Finder) -> Callable[..., Iterator[ValidationError]]:
    def unevaluated_items(
        validator: Any, unevaluated: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "array"):
            return
        evaluated = set(evaluated_indexes(validator, instance, schema))
        extras = [item for index, item in enumerate(instance) if index not in evaluated]
        if extras:
            yield ValidationError(f"Unevaluated items are not allowed ({_were(extras)} unexpected)")

    return unevaluated_items


def _rebound(function: Callable[..., Any], **names: Any) -> Callable[..., Any]:
    """A copy of a jsonschema helper that sees `names` in place of its module's globals of that name.

    Working out which properties `unevaluatedProperties` leaves is jsonschema's own (long) logic,
    but it matches `patternProperties` with `re.search`: its copy here gets `patterns` instead.
    Its recursive calls reach the copy.
    """
    namespace = {**function.__globals__, **names}
    copy = types.FunctionType(
        function.__code__, namespace, function.__name__, function.__defaults__, function.__closure__
    )
    namespace[function.__name__] = copy
    return copy


_BOUNDED_RE = types.SimpleNamespace(search=_search)
_UNEVALUATED_PROPERTIES = {
    jsonschema._keywords.unevaluatedProperties: _unevaluated_properties(
        _rebound(jsonschema._utils.find_evaluated_property_keys_by_schema, re=_BOUNDED_RE)
    ),
    jsonschema._legacy_keywords.unevaluatedProperties_draft2019: _unevaluated_properties(
        _rebound(jsonschema._legacy_keywords.find_evaluated_property_keys_by_schema, re=_BOUNDED_RE)
    ),
}
_UNEVALUATED_ITEMS = {
    jsonschema._keywords.unevaluatedItems: _unevaluated_items(
        jsonschema._utils.find_evaluated_item_indexes_by_schema
    ),
    jsonschema._legacy_keywords.unevaluatedItems_draft2019: _unevaluated_items(
        jsonschema._legacy_keywords.find_evaluated_item_indexes_by_schema
    ),
}
_OWN_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
    "enum": _enum,
    "const": _const,
}


def _with_checkpoint(keyword: Callable[..., Any]) -> Callable[..., Any]:
    def checked(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _checkpoint()
        return keyword(validator, value, instance, schema)

    return checked


def _bounded_keywords(cls: type[jsonschema.protocols.Validator]) -> dict[str, Callable[..., Any]]:
    keywords = {}
    for name, keyword in cls.VALIDATORS.items():
        if name in _OWN_KEYWORDS:
            keyword = _OWN_KEYWORDS[name]
        elif name == "unevaluatedProperties":
            keyword = _UNEVALUATED_PROPERTIES[keyword]
        elif name == "unevaluatedItems":
            keyword = _UNEVALUATED_ITEMS[keyword]
        keywords[name] = _with_checkpoint(keyword)
    return keywords


def _is_regex(instance: Any) -> bool:
    if isinstance(instance, str):
        patterns.check(instance)
    return True


_BOUNDED_CLASSES: dict[type, tuple[type[jsonschema.protocols.Validator], jsonschema.FormatChecker]] = {}
_LOCK = threading.Lock()


def bounded(cls: type[jsonschema.protocols.Validator]) -> tuple[Any, jsonschema.FormatChecker]:
    """The dialect's validator class with the keywords above, and the format checker for its schemas."""
    with _LOCK:
        found = _BOUNDED_CLASSES.get(cls)
        if found is None:
            extended = jsonschema.validators.extend(cls, _bounded_keywords(cls))
            # The meta-schema checks each `pattern` with format "regex": compiled by `patterns`, not `re`.
            schema_formats = jsonschema.FormatChecker(formats=())
            schema_formats.checkers = {
                **cls.FORMAT_CHECKER.checkers,
                "regex": (_is_regex, patterns.PatternError),
            }
            found = _BOUNDED_CLASSES[cls] = (extended, schema_formats)
        return found
