"""search_tools and describe_tool: what a caller's catalog holds, ranked or by name.

Both read the caller's indexed catalog and nothing else: they never reach the
upstream, and their answers are data (structured results). A query whose results match it only
weakly (`search.weak`: no result shares a word with it, and none is close in meaning) is marked
`match: "weak"` with a one-line note, so the model rephrases rather than calls the nearest wrong
tool; the field is absent otherwise.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from toolsearch.catalogs.catalog import Tool, short_description
from toolsearch.catalogs.store import IndexedCatalog, KeptHit
from toolsearch.search.weak import is_weak, strength
from toolsearch.service import tooldefs as T
from toolsearch.service.results import (
    StructuredResult,
    compact_json,
    error_result,
    escaped,
    holds_constant,
    structured_result,
)
from toolsearch.validation.arguments import closest_names

EXACT_NAME_PREFIX = "select:"
# Ranking costs a fixed part plus stemming, which grows with the characters of words the stemmer
# has not seen (docs/benchmarks.md, "Searching off the event loop"). Longer searches rank in a
# worker thread, so the event loop goes on serving other callers; short ones, nearly all, stay
# on the loop, where the thread hop costs more than it saves.
THREAD_ABOVE_CHARS = 200
WEAK_NOTE = (
    "No tool here shares a word with this query or is close to it in meaning: rephrase it (the task,"
    " in other words), or the tool may not exist here."
)


# A hit's one-line description, by the tool's text: the same few tools are found again and again.
_short_description = functools.lru_cache(maxsize=4096)(short_description)


def cut_query(text: str, limit: int) -> str:
    """The first `limit` characters of a query, ending at a space when one is near the end."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ", limit * 4 // 5)
    return head[:space] if space > 0 else head


async def search_tools(
    entry: IndexedCatalog, arguments: Mapping[str, Any], *, schemas: int, max_query_chars: int
) -> dict[str, Any]:
    """The best matches of each query, best first; the best `schemas` of each with input schemas.

    A query longer than `max_query_chars` is searched on its start, so the work per query stays
    bounded, and the answer's `note` says which were cut.
    """
    query, queries = arguments.get("query"), arguments.get("queries")
    if (query is None) == (queries is None):
        return error_result(
            "invalid_arguments",
            "Give either query (one thing to find) or queries (several at once), not both, not neither.",
        )
    limit = int(arguments.get("limit", T.DEFAULT_LIMIT))
    with_schemas = bool(arguments.get("schemas", True))
    given = [str(query)] if queries is None else [str(text) for text in queries]
    asked = [cut_query(text, max_query_chars) for text in given]
    cut = [i for i, (text, searched) in enumerate(zip(given, asked, strict=True)) if text != searched]
    if sum(len(text) for text in asked) > THREAD_ABOVE_CHARS:
        found = await asyncio.to_thread(_find, entry, asked, limit)
    else:
        found = _find(entry, asked, limit)
    kept = [
        [_kept_hit(entry, p, with_schemas and rank < schemas) for rank, p in enumerate(positions)]
        for positions, _ in found
    ]
    lists = [[hit.data for hit in hits] for hits in kept]
    data: dict[str, Any] = {"total": len(entry.catalog)}
    notes = []
    if cut:
        which = "The query was" if queries is None else f"Queries {', '.join(str(i + 1) for i in cut)} were"
        notes.append(
            f"{which} longer than {max_query_chars} characters: only the start was searched. A few words"
            " naming the task find tools best."
        )
    if queries is None:
        data["tools"] = lists[0]
        if found[0][1]:
            data["match"] = "weak"
            notes.append(WEAK_NOTE)
    else:
        data["results"] = [
            _result(q, hits, weak) for q, hits, (_, weak) in zip(asked, lists, found, strict=True)
        ]
    if notes:
        data["note"] = " ".join(notes)
    if queries is not None:
        return structured_result(data)
    # One query: the data's JSON as json.dumps writes it, its tools joined from each hit's kept text;
    # that JSON escaped for the text block, from each hit's kept escaped text likewise; and whether
    # it may hold a constant, from what each part was found to.
    hits = kept[0]
    members, escaped_members, constant = [], [], False
    for key, value in data.items():
        if key == "tools":
            members.append('"tools":[' + ",".join([hit.text for hit in hits]) + "]")
            escaped_members.append(escaped('"tools":[') + ",".join([hit.escaped for hit in hits]) + "]")
            constant = constant or any([hit.constant for hit in hits])
        else:
            members.append(member := f'"{key}":' + compact_json(value))
            escaped_members.append(escaped(member))
            constant = constant or holds_constant(member)
    text, escaped_text = "{" + ",".join(members) + "}", "{" + ",".join(escaped_members) + "}"
    return StructuredResult(data, text, escaped_text, constant)


def _find(entry: IndexedCatalog, asked: list[str], limit: int) -> list[tuple[list[int], bool]]:
    """Each query's result positions, and whether they match it only weakly."""
    found = []
    for text, hits in zip(asked, entry.index.search(asked, limit), strict=True):
        positions = _exact_name_first(entry, text, [hit.position for hit in hits])[:limit]
        found.append((positions, is_weak(strength(entry.index, text, positions))))
    return found


def _result(query: str, tools: list[dict[str, Any]], weak: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"query": query, "tools": tools}
    if weak:
        result |= {"match": "weak", "note": WEAK_NOTE}
    return result


def describe_tools(entry: IndexedCatalog, names: Sequence[str]) -> dict[str, Any]:
    """The full definitions of the named tools; unknown names listed with the closest ones."""
    found, unknown, similar = [], [], {}
    for name in dict.fromkeys(names):  # each name once, in the order asked
        tool = entry.catalog.get(name)
        if tool is None:
            unknown.append(name)
            similar[name] = closest_names(name, entry.catalog.by_name)
            continue
        described: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description,
            "readOnly": tool.read_only,
            "inputSchema": tool.input_schema,
        }
        if tool.title:
            described["title"] = tool.title
        if isinstance(tool.definition.get("outputSchema"), dict):
            described["outputSchema"] = tool.definition["outputSchema"]
        found.append(described)
    data: dict[str, Any] = {"tools": found}
    if unknown:
        data["unknown"] = unknown
        data["similar"] = similar
    return structured_result(data)


def _hit(tool: Tool, with_schema: bool) -> dict[str, Any]:
    hit: dict[str, Any] = {
        "name": tool.name,
        "description": _short_description(tool.description or tool.title),
        "readOnly": tool.read_only,
    }
    if with_schema:
        hit["inputSchema"] = tool.input_schema
    return hit


def _kept_hit(entry: IndexedCatalog, position: int, with_schema: bool) -> KeptHit:
    """A hit, its data and compact JSON, kept on its catalog: at most two per tool, gone with the
    catalog. Its data is the same object in every answer: nothing changes an answer's data."""
    key = (position, with_schema)
    kept = entry.hit_json.get(key)
    if kept is None:
        data = _hit(entry.catalog.tools[position], with_schema)
        text = compact_json(data)
        kept = entry.hit_json[key] = KeptHit(data, text, escaped(text), holds_constant(text))
    return kept


def named_tool(query: str) -> str:
    """The tool name a query would be if it named one exactly (`name` or `select:name`)."""
    wanted = query.strip()
    if wanted.startswith(EXACT_NAME_PREFIX):
        wanted = wanted[len(EXACT_NAME_PREFIX) :].strip()
    return wanted


def _exact_name_first(entry: IndexedCatalog, query: str, positions: list[int]) -> list[int]:
    """A query that is a tool's exact name (or `select:name`) returns that tool first."""
    tool = entry.catalog.get(named_tool(query))
    if tool is None:
        return positions
    position = entry.catalog.tools.index(tool)
    return [position] + [p for p in positions if p != position]
