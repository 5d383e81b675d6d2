"""Check a call's arguments against the tool's input schema before the upstream sees them.

JSON Schema 2020-12 unless the schema names another dialect in `$schema`.
`$ref`s resolve inside the schema only: a reference to anything else is never
fetched (the MCP spec forbids dereferencing network URIs by default).
"""

from __future__ import annotations

import difflib
import logging
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema
import jsonschema.exceptions
import referencing
import referencing.exceptions

logger = logging.getLogger(__name__)

MAX_REPORTED_ERRORS = 8
MAX_QUOTED = 60  # characters of a wrong value quoted back in a message
MAX_MESSAGE = 400


class SchemaUnusable(Exception):
    """The tool's own schema cannot be used to validate (invalid, unknown dialect, external $ref)."""


_VALIDATORS: OrderedDict[int, tuple[Mapping[str, Any], jsonschema.protocols.Validator | SchemaUnusable]] = (
    OrderedDict()
)
_MAX_VALIDATORS = 4096


def _compiled(schema: Mapping[str, Any]) -> jsonschema.protocols.Validator:
    """The schema's validator, built once per schema object (catalogs are immutable, so ids are stable
    while the entry keeps the schema alive); an unusable schema is remembered as such."""
    key = id(schema)
    entry = _VALIDATORS.get(key)
    if entry is None or entry[0] is not schema:
        try:
            built: jsonschema.protocols.Validator | SchemaUnusable = _build(schema)
        except SchemaUnusable as exc:
            built = exc
        entry = (schema, built)
        _VALIDATORS[key] = entry
        while len(_VALIDATORS) > _MAX_VALIDATORS:
            _VALIDATORS.popitem(last=False)
    else:
        _VALIDATORS.move_to_end(key)
    if isinstance(entry[1], SchemaUnusable):
        raise entry[1]
    return entry[1]


def _build(schema: Any) -> jsonschema.protocols.Validator:
    if not isinstance(schema, Mapping):
        raise SchemaUnusable("input schema is not an object")
    dialect = schema.get("$schema")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if dialect is not None and cls is jsonschema.Draft202012Validator and "2020-12" not in str(dialect):
        raise SchemaUnusable(f"unsupported JSON Schema dialect {dialect!r}")
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise SchemaUnusable(f"invalid input schema: {exc.message}") from exc
    # An empty registry: only references inside the schema itself resolve.
    return cls(schema, registry=referencing.Registry())


def _where(error: jsonschema.exceptions.ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return "arguments" + path


def _message(error: jsonschema.exceptions.ValidationError) -> str:
    """jsonschema's message without a huge input echoed back: the value it quotes cut short."""
    message = error.message
    quoted = repr(error.instance)
    if len(quoted) > MAX_QUOTED:
        message = message.replace(quoted, quoted[:MAX_QUOTED] + "…", 1)
    if error.validator == "maxLength" and isinstance(error.instance, str):
        message += f" ({len(error.instance):,} characters; at most {error.validator_value:,})"
    if len(message) > MAX_MESSAGE:  # what else a message quotes (an unexpected property's name...)
        message = message[:MAX_MESSAGE] + "…"
    return message


def argument_errors(schema: Mapping[str, Any], arguments: Any) -> list[str]:
    """What is wrong with `arguments`, most useful first; empty when they fit.

    Raises SchemaUnusable when the schema itself cannot be used.
    """
    validator = _compiled(schema)
    try:
        errors = sorted(validator.iter_errors(arguments), key=lambda e: (len(e.absolute_path), e.message))
        messages = []
        for error in errors[:MAX_REPORTED_ERRORS]:
            messages.append(f"{_where(error)}: {_message(error)}")
        if len(errors) > MAX_REPORTED_ERRORS:
            messages.append(f"… and {len(errors) - MAX_REPORTED_ERRORS} more")
        return messages
    except referencing.exceptions.Unresolvable as exc:
        raise SchemaUnusable(f"input schema has a $ref that does not resolve inside it: {exc}") from exc
    except RecursionError as exc:
        raise SchemaUnusable("input schema nests too deeply to validate") from exc


def closest_names(name: str, names: Iterable[str], n: int = 3) -> list[str]:
    """Tool names most like `name`, closest first."""
    names = list(names)
    lowered = {candidate.lower(): candidate for candidate in names}
    exact = lowered.get(name.lower())
    close = difflib.get_close_matches(name, names, n=n, cutoff=0.6)
    if exact and exact not in close:
        close.insert(0, exact)
    return close[:n]


def _folded(name: str) -> str:
    return re.sub(r"[\s_.\-/]+", "_", name.strip().lower())


def edit_distance(a: str, b: str, bound: int = 3) -> int:
    """Levenshtein distance with adjacent swaps (a typo's usual shapes), stopping past `bound`."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, start=1):
            cost = 0 if ca == cb else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        if min(current) > bound:
            return bound + 1
        previous2, previous = previous, current
    return previous[-1]


def clear_typo_of(name: str, names: Iterable[str]) -> str | None:
    """The one tool `name` is clearly a misspelling of, or None when it is not clear.

    Clear means: the same name but for case or separators, or one or two slips of the keyboard
    (two only in a long name) with no other tool as close. A different word is not a typo:
    `github_get_issue` is not `github_create_issue`, whatever their overall likeness.
    """
    names = list(names)
    folded = _folded(name)
    same = [candidate for candidate in names if _folded(candidate) == folded]
    if len(same) == 1:
        return same[0]
    allowed = 1 if len(folded) < 10 else 2
    # get_close_matches filters cheaply first, so this stays fast on 10,000 names.
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.7)
    distances = sorted((edit_distance(folded, _folded(c), allowed), c) for c in close)
    if not distances or distances[0][0] > allowed:
        return None
    if len(distances) > 1 and distances[1][0] == distances[0][0]:
        return None  # two tools are as close: not clear which was meant
    return distances[0][1]
