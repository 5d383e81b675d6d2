"""Search words from the catalog and the operator: `_meta["anthropic/searchHint"]`, `search_words_file`.

A tool's own hint and the operator's words for it are indexed with it (BM25 document and embedded
text), so a query in words the description lacks finds it; each test holds the same catalog without
them beside, so it fails when the words are not indexed. Odd hints from an upstream (not a string,
too long, `_meta` not an object) are ignored or cut, never raised on; a bad operator file stops
start-up with what is wrong and where.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolsearch.app import build_proxy
from toolsearch.catalogs.catalog import MAX_SEARCH_HINT, Catalog
from toolsearch.catalogs.search_words import (
    MAX_ENTRIES,
    MAX_FILE_BYTES,
    MAX_WORDS_CHARS,
    SearchWordsError,
    load_search_words,
)
from toolsearch.search.embedder import load_configured_embedder
from toolsearch.search.embedding import VectorCache, build_embedding_index
from toolsearch.search.index import make_indexer
from toolsearch.settings import Settings

QUERY = "zorblat"  # a word no tool holds; the model puts ledger_post last, or nowhere


def tool(name: str, description: str, meta: Any = None) -> dict[str, Any]:
    definition: dict[str, Any] = {"name": name, "description": description, "inputSchema": {"type": "object"}}
    if meta is not None:
        definition["_meta"] = meta
    return definition


def catalog(meta: Any = None) -> Catalog:
    return Catalog.from_definitions(
        [
            tool("ledger_post", "Post an entry to the company ledger.", meta),
            tool("ledger_read", "Read the entries of the company ledger."),
            tool("reimburse_costs", "Record the costs an employee paid, to pay them back."),
            tool("payroll_run", "Pay every employee their salary for the month."),
        ]
    )


def first(cat: Catalog, query: str = QUERY, **indexer: Any) -> str | None:
    hits = make_indexer(**indexer)(cat).search([query], 5)[0]
    return cat.tools[hits[0].position].name if hits else None


@pytest.fixture(scope="module")
def embedder():
    return load_configured_embedder("model2vec")


@pytest.mark.parametrize("with_model", [False, True])
def test_a_search_hint_moves_its_tool_first(embedder, with_model):
    model = {"embedder": embedder} if with_model else {}

    assert first(catalog(), **model) != "ledger_post"
    assert first(catalog({"anthropic/searchHint": "zorblat reports, zorblats"}), **model) == "ledger_post"


@pytest.mark.parametrize(
    "meta",
    [
        {"anthropic/searchHint": 42},
        {"anthropic/searchHint": ["zorblat"]},
        {"anthropic/searchHint": {"words": "zorblat"}},
        {"anthropic/searchHint": None},
        "anthropic/searchHint: zorblat",  # _meta not an object
        ["zorblat"],
        {"anthropic/searchhint": "zorblat"},  # another key
    ],
)
def test_an_odd_search_hint_is_ignored_not_raised_on(embedder, meta):
    cat = catalog(meta)

    assert cat.get("ledger_post").search_hint == ""  # type: ignore[union-attr]
    assert first(cat) != "ledger_post" and first(cat, embedder=embedder) != "ledger_post"


def test_a_long_search_hint_is_cut_to_its_first_characters():
    padding = "filler " * (MAX_SEARCH_HINT // 7 + 1)
    late = catalog({"anthropic/searchHint": padding + "zorblat"})
    early = catalog({"anthropic/searchHint": "zorblat " + padding * 100})

    assert len(late.get("ledger_post").search_hint) == MAX_SEARCH_HINT  # type: ignore[union-attr]
    assert first(late) != "ledger_post"  # past the bound: not indexed
    assert first(early) == "ledger_post"


@pytest.mark.parametrize("with_model", [False, True])
def test_the_operators_words_move_a_tool_first(embedder, with_model):
    model = {"embedder": embedder} if with_model else {}
    words = {"ledger_post": "zorblat", "no_such_tool": "ignored"}

    assert first(catalog(), **model) != "ledger_post"
    assert first(catalog(), search_words=words, **model) == "ledger_post"


# -- the operator's file


def write(tmp_path: Path, content: str | bytes) -> str:
    path = tmp_path / "words.json"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return str(path)


def test_the_file_is_read_as_words_by_tool_name(tmp_path):
    path = write(tmp_path, json.dumps({"a": "zorblat", "b": "  "}))

    assert load_search_words(path) == {"a": "zorblat"}  # blank words are no words
    assert load_search_words("") == {}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "not JSON"),
        ('["a", "b"]', "expected an object"),
        ('{"a": 1}', "not a string"),
        (json.dumps({"a": "x" * (MAX_WORDS_CHARS + 1)}), f"exceed {MAX_WORDS_CHARS}"),
        (json.dumps({f"t{i}": "x" for i in range(MAX_ENTRIES + 1)}), "at most"),
        (json.dumps({"": "x"}), "empty"),
        (b" " * (MAX_FILE_BYTES + 1), "larger than"),
        (b"\xff\xfe{}", "not JSON"),
    ],
)
def test_a_bad_file_is_refused_with_what_is_wrong_and_where(tmp_path, content, says):
    path = write(tmp_path, content)

    with pytest.raises(SearchWordsError) as refused:
        load_search_words(path)

    assert says in str(refused.value) and path in str(refused.value)


def test_a_missing_file_stops_the_proxy_from_starting(tmp_path):
    missing = str(tmp_path / "absent.json")

    with pytest.raises(ValueError, match=r"search_words_file .*absent\.json: cannot be read"):
        build_proxy(Settings(embedder="none", search_words_file=missing))


async def test_the_files_words_find_a_tool_through_search_tools(tmp_path):
    # The demo upstream, in process: a query in words none of its tools holds, then with the file.
    query = {"name": "search_tools", "arguments": {"query": "zorblat quux", "limit": 3}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": query}
    headers = {"Authorization": "Bearer demo", "MCP-Protocol-Version": "2025-11-25"}
    found = {}
    for label, settings in {
        "without": Settings(embedder="none"),
        "with": Settings(
            embedder="none", search_words_file=write(tmp_path, '{"ha_turn_on": "zorblat quux"}')
        ),
    }.items():
        proxy = build_proxy(settings)
        transport = httpx.ASGITransport(app=proxy.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            reply = await client.post("/mcp", json=body, headers=headers)
        await proxy.upstream.aclose()
        found[label] = [t["name"] for t in reply.json()["result"]["structuredContent"]["tools"]]

    assert found["without"] == [] and found["with"][0] == "ha_turn_on"


def test_the_hint_and_the_operators_words_are_embedded_with_the_tool(embedder):
    query = embedder.encode(["expense claim"])
    position = [t.name for t in catalog().tools].index("ledger_post")

    def cosine(cat: Catalog, words: dict[str, str] | None = None) -> float:
        return float(
            build_embedding_index(cat.tools, embedder, VectorCache(), words).scores(query)[0][position]
        )

    plain = cosine(catalog())
    assert cosine(catalog({"anthropic/searchHint": "expense claim"})) > plain + 0.05
    assert cosine(catalog(), {"ledger_post": "expense claim"}) > plain + 0.05
