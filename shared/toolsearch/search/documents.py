"""What of a tool the search indexes: its name, title, description and parameters.

Name words are repeated `NAME_WEIGHT` times (the title `TITLE_WEIGHT` times) so
a query word found in a tool's name outweighs the same word found in a long
description; more repeats lose recall, as BM25's length normalisation punishes
the longer documents. The weights are the ones `bench/bench_lexical.py --recall`
finds best on the evaluation set (figures in docs/benchmarks.md, "What the BM25
documents hold"). A tool's own search hint (`_meta["anthropic/searchHint"]`, `Tool.search_hint`)
and the operator's words for it (`extra`, the `search_words_file` setting) are indexed once each,
as description text. Schemas come from the upstream and may be malformed: anything
that is not the expected shape is skipped, never raised on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from toolsearch.catalogs.catalog import Tool
from toolsearch.search.text import split_camel_case, tokenize

__all__ = ["NAME_WEIGHT", "TITLE_WEIGHT", "document_text", "document_tokens", "name_words", "schema_text"]

NAME_WEIGHT = 2
TITLE_WEIGHT = 1
MAX_ENUM_VALUES = 20  # a longer enum (country codes, time zones) is noise, not a description
_NAME_SEPARATORS = re.compile(r"[\W_]+")


def name_words(name: str) -> str:
    """ "gcal.createEvent" -> "gcal create event"; also splits on "_", "-", "/" and other punctuation."""
    words = (part for chunk in _NAME_SEPARATORS.split(name) if chunk for part in split_camel_case(chunk))
    return " ".join(word.lower() for word in words)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _enum_text(prop: Mapping[str, Any]) -> str:
    values = prop.get("enum")
    if not isinstance(values, list) or len(values) > MAX_ENUM_VALUES:
        return ""
    return " ".join(str(v) for v in values if isinstance(v, str | int | float) and not isinstance(v, bool))


def _properties(schema: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
        return
    for name, prop in schema["properties"].items():
        if isinstance(name, str) and isinstance(prop, Mapping):
            yield name, prop


def _describe_property(name: str, prop: Mapping[str, Any]) -> list[str]:
    parts = [name_words(name), _text(prop.get("title")), _text(prop.get("description")), _enum_text(prop)]
    return [part for part in parts if part]


def schema_text(schema: Any) -> list[str]:
    """Parameter names, titles, descriptions and short enums: top level and one level of nesting."""
    texts: list[str] = []
    for name, prop in _properties(schema):
        texts.extend(_describe_property(name, prop))
        nested = prop.get("items") if isinstance(prop.get("items"), Mapping) else prop
        for child_name, child in _properties(nested):
            texts.extend(_describe_property(child_name, child))
    return texts


def document_text(
    tool: Tool, name_weight: int = NAME_WEIGHT, title_weight: int = TITLE_WEIGHT, extra: str = ""
) -> str:
    """The text indexed for `tool`, heavier fields repeated; `extra`: the operator's words for it."""
    parts = [name_words(tool.name)] * name_weight
    if title := tool.title:  # always a string: Tool.title skips odd titles and annotations
        parts += [title] * title_weight
    parts += [tool.description, tool.search_hint, extra]
    parts += schema_text(tool.input_schema)
    return "\n".join(part for part in parts if part)


def document_tokens(
    tool: Tool, name_weight: int = NAME_WEIGHT, title_weight: int = TITLE_WEIGHT, extra: str = ""
) -> list[str]:
    return tokenize(document_text(tool, name_weight, title_weight, extra))
