"""search_tools says when its results match a query only weakly (`match: "weak"` and a note).

Weak: the best result holds under a fifth of the query's search terms and no tool is close to it
in meaning (`search.weak`); with BM25 alone, only an answer that shares no word. The field and the
note are absent otherwise, so an ordinary answer carries nothing more; both are declared in the
output schema, and a weak answer fits it. Over the demo catalog (567 tools) and the bundled model.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fixtures.result_schemas import misfit
from toolsearch.catalogs.catalog import Catalog
from toolsearch.catalogs.store import IndexedCatalog
from toolsearch.search.embedder import load_configured_embedder
from toolsearch.search.index import make_indexer
from toolsearch.search.weak import Strength, is_weak
from toolsearch.server.demo import demo_tools
from toolsearch.server.response_size import JsonAnswer, body_text
from toolsearch.service import tooldefs as T
from toolsearch.service.finding import WEAK_NOTE, search_tools
from toolsearch.service.results import StructuredResult

FOUND = "turn on the kitchen lights"
NOT_HERE = "bake a sourdough loaf"
SEARCH_TOOLS = T.proxy_tools(max_batch_calls=5, max_query_chars=500)[0]


@pytest.fixture(scope="module", params=["hybrid", "lexical"])
def entry(request) -> IndexedCatalog:
    catalog = Catalog.from_definitions(demo_tools())
    embedder = load_configured_embedder("model2vec") if request.param == "hybrid" else None
    return IndexedCatalog(catalog, make_indexer(embedder)(catalog))


async def search(entry: IndexedCatalog, **arguments: Any) -> dict[str, Any]:
    result = await search_tools(entry, arguments, schemas=3, max_query_chars=500)
    assert misfit(SEARCH_TOOLS, result) is None
    return result["structuredContent"]


async def test_a_query_nothing_here_matches_is_marked_weak_with_what_to_do(entry):
    data = await search(entry, query=NOT_HERE)

    assert data["match"] == "weak" and data["note"] == WEAK_NOTE


async def test_a_query_that_finds_its_tool_carries_no_mark_and_no_note(entry):
    data = await search(entry, query=FOUND)

    assert set(data) == {"total", "tools"} and data["tools"][0]["name"].startswith("ha_turn_")


async def test_each_query_of_several_is_judged_on_its_own(entry):
    data = await search(entry, queries=[FOUND, NOT_HERE])

    first, second = data["results"]
    assert set(first) == {"query", "tools"}
    assert second["match"] == "weak" and second["note"] == WEAK_NOTE
    assert "match" not in data and "note" not in data


async def test_a_long_message_is_not_called_weak_for_its_small_share_of_words_held(entry):
    # A user's message passed on whole: the tool for it holds a few of its many words.
    message = (
        "so yesterday was a mess, the kids were loud, dinner burned, my boss called twice and honestly"
        " I just want to know whether it will rain tomorrow morning before school"
    )
    data = await search(entry, query=message)

    assert "match" not in data and "note" not in data
    if getattr(entry.index, "semantic", None) is not None:  # the model finds it among the first
        assert any(tool["name"].startswith("owm.forecast") for tool in data["tools"][:3])


async def test_a_cut_query_keeps_both_notes(entry):
    data = await search(entry, query=NOT_HERE + " " + "sourdough " * 60)

    assert data["match"] == "weak"
    assert "only the start was searched" in data["note"] and data["note"].endswith(WEAK_NOTE)


@pytest.mark.parametrize(
    ("found", "weak"),
    [
        (Strength(0.0, 0.39), True),
        (Strength(0.19, 0.1), True),
        (Strength(0.2, 0.1), False),  # a fifth of the words reach a result
        (Strength(0.0, 0.41), False),  # close in meaning
        (Strength(0.0, None), True),  # BM25 alone, nothing shares a word
        (Strength(0.1, None), False),  # BM25 alone: a shared word, nothing to confirm it is weak
        (Strength(0.1, 0.1, terms=12), True),
        (Strength(0.1, 0.1, terms=13), False),  # a whole message: one tool does a part of it
    ],
)
def test_the_rule(found, weak):
    assert is_weak(found) is weak


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": FOUND},
        {"query": NOT_HERE},
        {"query": FOUND, "schemas": False, "limit": 3},
        {"query": "šviesa virtuvėje " * 40},  # cut, and not ASCII
        {"query": "ha_turn_on_light"},
        {"queries": [FOUND, NOT_HERE]},
    ],
)
async def test_the_text_block_is_the_json_of_the_structured_content_as_a_fresh_encoding_writes_it(
    entry, arguments
):
    for _ in range(2):  # the second from the hits' kept text
        result = await search_tools(entry, arguments, schemas=3, max_query_chars=100)
        fresh = json.dumps(result["structuredContent"], ensure_ascii=False, separators=(",", ":"))
        assert result["content"][0]["text"] == fresh == result.data_text()
        assert_written_as_a_fresh_encoding(result)


def assert_written_as_a_fresh_encoding(result: StructuredResult) -> None:
    """The answer's body, its text block written from the kept escaped text when there is one (one
    query), is the bytes json.dumps writes for the same message."""
    text = result["content"][0]["text"]
    several = "results" in result["structuredContent"]  # several queries: encoded as a whole
    assert result.text_json() == (None if several else json.dumps(text, ensure_ascii=False))
    message = {"jsonrpc": "2.0", "id": 7, "result": result}
    fresh = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    assert body_text(message) == fresh and JsonAnswer(message).body == fresh.encode()


ODD_TEXT = 'Turn "on" the kitchen \\lights\n\tšviesa virtuvėje 💡 \x01 \u2028 </script>'


async def test_a_text_needing_escapes_is_written_as_a_fresh_encoding_writes_it():
    """Quotes, backslashes, control and non-ASCII characters in the hits, escaped from their kept
    parts: the same bytes as json.dumps of the whole answer."""
    tools = [
        {
            "name": f"light_{i}",
            "description": f"{ODD_TEXT} {i}",
            "inputSchema": {"type": "object", "properties": {"mode": {"enum": [ODD_TEXT, "a\\b"]}}},
        }
        for i in range(5)
    ]
    catalog = Catalog.from_definitions(tools)
    entry = IndexedCatalog(catalog, make_indexer(None)(catalog))
    for arguments in ({"query": "kitchen lights"}, {"query": "šviesa", "schemas": False}):
        for _ in range(2):  # the second from the hits' kept text
            result = await search_tools(entry, arguments, schemas=3, max_query_chars=100)
            text = result["content"][0]["text"]
            assert text == json.dumps(result["structuredContent"], ensure_ascii=False, separators=(",", ":"))
            assert result.text_json() == json.dumps(text, ensure_ascii=False)
            assert all(part in text for part in ('\\"on\\"', "\\\\lights", "\\u0001", "💡"))
            assert_written_as_a_fresh_encoding(result)


async def test_an_answer_holding_a_constant_is_refused_as_encoding_it_whole_would_be():
    """A hit whose schema holds NaN: the answer's body is refused (no JSON has NaN), from the kept
    text as when encoded whole; "NaN" only inside a string is written as ever."""
    tools = [
        {"name": "nan_in_words", "description": "Lights: NaN or Infinity in words", "inputSchema": {}},
        {
            "name": "nan_in_schema",
            "description": "Lights with a NaN default",
            "inputSchema": {"type": "object", "properties": {"level": {"default": float("nan")}}},
        },
    ]
    catalog = Catalog.from_definitions(tools)
    entry = IndexedCatalog(catalog, make_indexer(None)(catalog))
    for _ in range(2):  # the second from the hits' kept text
        words = await search_tools(entry, {"query": "words"}, schemas=3, max_query_chars=100)
        assert [hit["name"] for hit in words["structuredContent"]["tools"]] == ["nan_in_words"]
        assert_written_as_a_fresh_encoding(words)
        schema = await search_tools(entry, {"query": "default"}, schemas=3, max_query_chars=100)
        assert [hit["name"] for hit in schema["structuredContent"]["tools"]] == ["nan_in_schema"]
        with pytest.raises(ValueError):
            JsonAnswer({"jsonrpc": "2.0", "id": 1, "result": schema})


async def test_each_catalog_answers_with_its_own_tools_text_when_another_kept_the_same_positions():
    """A hit's text is kept on its catalog: a second caller's catalog, its tools at the same
    positions but described otherwise, never answers with the first's kept text, nor it with its."""
    tools = demo_tools()
    other = [{**tool, "description": "Other caller's: " + tool.get("description", "")} for tool in tools]
    indexer = make_indexer(None)
    first, second = (
        IndexedCatalog(catalog, indexer(catalog))
        for catalog in (Catalog.from_definitions(tools), Catalog.from_definitions(other))
    )
    for entry, own in ((first, False), (second, True), (first, False), (second, True)):
        result = await search_tools(entry, {"query": FOUND}, schemas=3, max_query_chars=500)
        text = result["content"][0]["text"]
        assert text == json.dumps(result["structuredContent"], ensure_ascii=False, separators=(",", ":"))
        hits = json.loads(text)["tools"]
        assert hits and all(hit["description"].startswith("Other caller's") is own for hit in hits)
