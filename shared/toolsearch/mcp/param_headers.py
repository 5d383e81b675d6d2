"""The `x-mcp-header` marks of MCP 2026-07-28: which arguments a tool mirrors into headers.

A tool may mark parameters of its input schema with `x-mcp-header: Name`; a
client then copies those argument values into `Mcp-Param-Name` headers so
gateways can route without reading the body. A tool whose annotations break
the spec's rules must be left out of the listing (`header_params` raises).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolsearch.errors import ToolsearchError
from toolsearch.mcp.protocol import encode_header_value

X_MCP_HEADER = "x-mcp-header"
PARAM_PREFIX = "Mcp-Param-"

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 tchar
_HEADER_TYPES = ("string", "integer", "boolean")

# JSON Schema keywords whose values are subschemas (single, map of, or list of).
# Everything else (enum, const, default, examples...) is data and never holds an annotation.
_SCHEMA_KEYWORDS = frozenset(
    [
        "items",
        "additionalProperties",
        "additionalItems",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
    ]
)
_SCHEMA_MAP_KEYWORDS = frozenset(["patternProperties", "$defs", "definitions", "dependentSchemas"])
_SCHEMA_LIST_KEYWORDS = frozenset(["allOf", "anyOf", "oneOf", "prefixItems", "items"])


class InvalidHeaderAnnotation(ToolsearchError, ValueError):
    """A tool's `x-mcp-header` annotations break the spec's rules; the message says which."""


@dataclass(frozen=True, slots=True)
class HeaderParam:
    header: str  # the name after `Mcp-Param-`, as the tool spelled it
    path: tuple[str, ...]  # property keys from the arguments' root to the value
    type: str  # string | integer | boolean


def header_params(input_schema: Any) -> tuple[HeaderParam, ...]:
    """The parameters a tool mirrors into headers; raises InvalidHeaderAnnotation for a bad one."""
    found: list[HeaderParam] = []
    if isinstance(input_schema, Mapping):
        _walk_reachable(input_schema, (), found)
    seen: dict[str, str] = {}
    for param in found:
        folded = param.header.lower()
        if folded in seen:
            raise InvalidHeaderAnnotation(f"x-mcp-header {param.header!r} is used twice (case-insensitively)")
        seen[folded] = param.header
    return tuple(found)


def mirror(params: tuple[HeaderParam, ...], arguments: Mapping[str, Any]) -> dict[str, str]:
    """`Mcp-Param-*` headers for one call; a parameter absent or null in the arguments sends none."""
    headers: dict[str, str] = {}
    for param in params:
        value: Any = arguments
        for key in param.path:
            value = value.get(key) if isinstance(value, Mapping) else None
        text = _as_text(value, param.type)
        if text is not None:
            headers[PARAM_PREFIX + param.header] = encode_header_value(text)
    return headers


def _as_text(value: Any, kind: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and kind == "integer" and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return value
    return None  # a value of the wrong shape: the upstream judges the body alone


def _walk_reachable(schema: Mapping[str, Any], path: tuple[str, ...], found: list[HeaderParam]) -> None:
    if X_MCP_HEADER in schema:
        if not path:
            raise InvalidHeaderAnnotation("x-mcp-header on the schema root")
        found.append(_annotation(schema, path))
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            if isinstance(sub, Mapping):
                _walk_reachable(sub, (*path, str(name)), found)
    _refuse_elsewhere(schema, skip=("properties",))


def _annotation(schema: Mapping[str, Any], path: tuple[str, ...]) -> HeaderParam:
    where = ".".join(path)
    name = schema[X_MCP_HEADER]
    if not isinstance(name, str) or not name:
        raise InvalidHeaderAnnotation(f"x-mcp-header of {where} is empty or not a string")
    if not _TOKEN.fullmatch(name):
        raise InvalidHeaderAnnotation(f"x-mcp-header of {where} is not an HTTP token")
    kind = _primitive_type(schema.get("type"))
    if kind is None:
        raise InvalidHeaderAnnotation(
            f"x-mcp-header of {where} is on a parameter that is not string, integer or boolean"
        )
    return HeaderParam(header=name, path=path, type=kind)


def _primitive_type(declared: Any) -> str | None:
    if isinstance(declared, str):
        return declared if declared in _HEADER_TYPES else None
    if isinstance(declared, list):  # ["string", "null"] is still one primitive
        kinds = [k for k in declared if k != "null"]
        if len(kinds) == 1 and kinds[0] in _HEADER_TYPES:
            return kinds[0]
    return None


def _refuse_elsewhere(schema: Mapping[str, Any], skip: tuple[str, ...] = ()) -> None:
    """Raise if an annotation sits where only `properties` chains may lead (items, anyOf, $defs...)."""
    for key, value in schema.items():
        if key in skip:
            continue
        subschemas: list[Any] = []
        if key in _SCHEMA_KEYWORDS and isinstance(value, Mapping):
            subschemas = [value]
        elif key in _SCHEMA_LIST_KEYWORDS and isinstance(value, list):
            subschemas = value
        elif key in _SCHEMA_MAP_KEYWORDS and isinstance(value, Mapping):
            subschemas = list(value.values())
        for sub in subschemas:
            if isinstance(sub, Mapping):
                _refuse_unreachable(sub, key)


def _refuse_unreachable(schema: Mapping[str, Any], keyword: str) -> None:
    if X_MCP_HEADER in schema:
        raise InvalidHeaderAnnotation(
            f"x-mcp-header under {keyword} is not reachable through properties only"
        )
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for sub in properties.values():
            if isinstance(sub, Mapping):
                _refuse_unreachable(sub, keyword)
    _refuse_elsewhere(schema, skip=("properties",))
