"""Check a call's arguments against the tool's input schema before the upstream sees them.

JSON Schema 2020-12 unless the schema names another dialect in `$schema`.
`$ref`s resolve inside the schema only: a reference to anything else is never
fetched (the MCP spec forbids dereferencing network URIs by default).

Both the schema (the upstream's) and the arguments (the caller's) may be
hostile, so a check is bounded: arguments nested deeper than
`nesting.MAX_DEPTH` are refused unchecked; the validator classes come from
`schema_keywords` (regular expressions by RE2, linear-time uniqueness, short
messages, a deadline checked at every keyword); and `check_arguments` runs
the check in a worker thread, so a long one holds no other caller up, and
answers at the deadline even if one step overran it.

A check that cannot finish raises `Uncheckable`: the call is refused, never
forwarded unchecked. `SchemaUnusable` (an invalid schema, an unknown dialect,
a `$ref` outside the schema) is the upstream's own problem: its call is
forwarded and the upstream validates it.
"""

from __future__ import annotations

import asyncio
import difflib
import itertools
import logging
import math
import re
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonschema
import jsonschema.exceptions
import referencing
import referencing.exceptions

from toolsearch.errors import ToolsearchError
from toolsearch.validation import patterns
from toolsearch.validation.nesting import MAX_DEPTH, deeper_than
from toolsearch.validation.quick import surely_fits
from toolsearch.validation.schema_keywords import Check, TimeUp, bounded, checking

logger = logging.getLogger(__name__)

MAX_REPORTED_ERRORS = 8
MAX_QUOTED = 60  # characters of a wrong value quoted back in a message
MAX_COLLECTED_ERRORS = 64  # errors gathered before the most useful are picked: a bound on work and memory
MAX_MESSAGE_CHARS = 400
VALIDATION_THREADS = 4
# How long past its deadline a check may keep its caller waiting: the worker stops at its next
# checkpoint, but one step (building a validator, one RE2 match over a long string) cannot be cut.
_GRACE = 0.25


class SchemaUnusable(ToolsearchError):
    """The tool's own schema cannot be used to validate (invalid, unknown dialect, external $ref)."""


class Uncheckable(ToolsearchError):
    """The arguments could not be checked against the schema, so the call must not go ahead.

    `reason` is "too_deep" (the arguments nest deeper than the proxy checks), "too_complex" (the
    schema's references recurse deeper than Python can follow) or "timeout" (the deadline passed).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    if len(text) <= limit:
        return text
    keep = (limit - 1) // 2
    return text[:keep] + "…" + text[-keep:]


# -- validators, built once per schema


_Built = jsonschema.protocols.Validator | SchemaUnusable | Uncheckable


class Validators:
    """Each schema's validator, built once per schema object for as long as this object lives.

    One per catalog (`catalog_store.IndexedCatalog`): a catalog is immutable, so its schemas
    stay the same objects, and its validators go with it. An unusable schema is remembered as such.
    """

    def __init__(self) -> None:
        self._built: dict[int, tuple[Mapping[str, Any], _Built]] = {}
        self._lock = threading.Lock()  # checks run in several worker threads

    def validator(self, schema: Mapping[str, Any]) -> jsonschema.protocols.Validator:
        key = id(schema)
        with self._lock:
            entry = self._built.get(key)
        if entry is None or entry[0] is not schema:  # the id of a schema no longer alive: build anew
            try:
                built: _Built = _build(schema)
            except (SchemaUnusable, Uncheckable) as exc:
                built = exc
            entry = (schema, built)
            with self._lock:
                self._built[key] = entry
        if isinstance(entry[1], SchemaUnusable | Uncheckable):
            raise entry[1]
        return entry[1]


def _build(schema: Any) -> jsonschema.protocols.Validator:
    if not isinstance(schema, Mapping):
        raise SchemaUnusable("input schema is not an object")
    dialect = schema.get("$schema")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if dialect is not None and cls is jsonschema.Draft202012Validator and "2020-12" not in str(dialect):
        raise SchemaUnusable(f"unsupported JSON Schema dialect {dialect!r}")
    bounded_cls, schema_formats = bounded(cls)
    try:
        # jsonschema takes format_checker here; its published stubs lag behind.
        cls.check_schema(dict(schema), format_checker=schema_formats)  # type: ignore[call-arg]
    except jsonschema.exceptions.SchemaError as exc:
        raise SchemaUnusable(f"invalid input schema: {_clip(exc.message, 200)}") from exc
    except RecursionError:
        raise Uncheckable("too_complex", "the tool's input schema nests too deeply to check") from None
    # An empty registry: only references inside the schema itself resolve.
    return bounded_cls(schema, registry=referencing.Registry())


# -- the check


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
    return message


def _errors(
    schema: Mapping[str, Any], arguments: Any, max_depth: int, check: Check, validators: Validators
) -> list[str]:
    if deeper_than(arguments, max_depth):
        raise Uncheckable("too_deep", f"the arguments nest more than {max_depth} levels deep")
    validator = validators.validator(schema)  # first: an unusable schema is that, fitting or not
    if surely_fits(schema, arguments):
        return []
    try:
        with checking(check):
            errors = list(itertools.islice(validator.iter_errors(arguments), MAX_COLLECTED_ERRORS + 1))
    except referencing.exceptions.Unresolvable as exc:
        raise SchemaUnusable(f"input schema has a $ref that does not resolve inside it: {exc}") from exc
    except patterns.PatternError as exc:
        raise SchemaUnusable(f"input schema has a pattern no engine compiles: {exc}") from exc
    except (TimeUp, patterns.PatternTimeout):
        raise Uncheckable("timeout", "the check did not finish in time") from None
    except RecursionError:
        raise Uncheckable(
            "too_complex", "the tool's input schema recurses deeper for these arguments than can be followed"
        ) from None
    errors.sort(key=lambda e: (len(e.absolute_path), e.message))
    messages = [_clip(f"{_where(error)}: {_message(error)}") for error in errors[:MAX_REPORTED_ERRORS]]
    if len(errors) > MAX_COLLECTED_ERRORS:
        messages.append("… and more")
    elif len(errors) > MAX_REPORTED_ERRORS:
        messages.append(f"… and {len(errors) - MAX_REPORTED_ERRORS} more")
    return messages


def argument_errors(
    schema: Mapping[str, Any],
    arguments: Any,
    *,
    max_depth: int = MAX_DEPTH,
    timeout: float | None = None,
    validators: Validators | None = None,
) -> list[str]:
    """What is wrong with `arguments`, most useful first; empty when they fit.

    Raises SchemaUnusable when the schema itself cannot be used, Uncheckable when the arguments
    cannot be checked (deeper than `max_depth`, or not within `timeout` seconds). Without
    `validators`, the schema's validator is built for this one check.
    """
    deadline = math.inf if timeout is None else time.monotonic() + timeout
    return _errors(schema, arguments, max_depth, Check(deadline), validators or Validators())


_POOL = ThreadPoolExecutor(max_workers=VALIDATION_THREADS, thread_name_prefix="toolsearch-validation")


async def check_arguments(
    schema: Mapping[str, Any],
    arguments: Any,
    *,
    timeout: float,
    validators: Validators,
    max_depth: int = MAX_DEPTH,
) -> list[str]:
    """`argument_errors` in a worker thread, answered within `timeout` seconds (waiting included).

    Whatever ends the wait (an answer, the deadline, the caller going away), the worker stops at
    its next checkpoint.
    """
    check = Check(time.monotonic() + timeout)
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(_POOL, _errors, schema, arguments, max_depth, check, validators)
    try:
        async with asyncio.timeout(timeout + _GRACE):
            return await future
    except TimeoutError:
        raise Uncheckable("timeout", "the check did not finish in time") from None
    finally:
        check.cancel()


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
