"""A hostile caller's huge queries and names: refused as data, never echoed, never stalling others."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from fixtures.mcp_wire import call, modern
from toolsearch.app import build_proxy, catalog_store, tool_service
from toolsearch.callers.identity import Caller, caller_key
from toolsearch.ops.telemetry import Telemetry
from toolsearch.search.index import make_indexer
from toolsearch.server.demo import DEMO_URL, demo_app
from toolsearch.service.tooldefs import MAX_NAME_CHARS
from toolsearch.settings import Settings
from toolsearch.upstream import Upstream

HUGE = 190_000  # a query that still fits five times in the 1 MB body limit
LIMIT = Settings().max_query_chars
SMALL_ANSWER = 20_000  # bytes: a refusal is a few sentences and the tool's schema, nothing echoed


def long_text(chars: int, word: str = "invoice") -> str:
    return ((word + " ") * (chars // (len(word) + 1) + 1))[:chars]


@pytest.fixture
async def client():
    proxy = build_proxy(Settings(embedder="none"))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app),
        base_url="http://testserver",
        headers={"Authorization": "Bearer hostile"},
    ) as c:
        yield c


def refusal(reply: httpx.Response) -> dict:
    assert reply.status_code == 200
    assert len(reply.content) < SMALL_ANSWER, f"{len(reply.content):,} bytes answered"
    result = reply.json()["result"]
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    assert error["kind"] == "invalid_arguments"
    return error


async def test_search_tools_states_its_query_limit_in_its_schema():
    proxy = build_proxy(Settings(embedder="none", max_query_chars=120))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=proxy.app), base_url="http://t") as c:
        tools = (await c.post("/mcp", **modern("tools/list"))).json()["result"]["tools"]

    search = next(tool for tool in tools if tool["name"] == "search_tools")
    schema = search["inputSchema"]
    # Not a maxLength: a client that checks it would refuse what the proxy searches on its start.
    assert "maxLength" not in schema["properties"]["query"]
    assert "maxLength" not in schema["properties"]["queries"]["items"]
    assert (
        "past 120 characters, only the first 120 are searched" in schema["properties"]["query"]["description"]
    )
    assert "note" in search["outputSchema"]["properties"]


def searched(reply: httpx.Response) -> dict:
    assert reply.status_code == 200
    assert len(reply.content) < 200_000, f"{len(reply.content):,} bytes answered"
    result = reply.json()["result"]
    assert result["isError"] is False
    return result["structuredContent"]


@pytest.mark.parametrize("shape", ["query", "queries"])
async def test_a_huge_query_is_searched_on_its_start_said_so_and_not_echoed(client, shape):
    text = long_text(HUGE)
    arguments = {"query": text} if shape == "query" else {"queries": ["calendar", text]}

    reply = await client.post("/mcp", **call("search_tools", arguments))

    found = searched(reply)
    tools = found["tools"] if shape == "query" else found["results"][1]["tools"]
    assert tools and "invoice" in tools[0]["name"]  # found, as a short query finds it
    assert found["note"].startswith("The query was" if shape == "query" else "Queries 2 were")
    assert f"longer than {LIMIT} characters" in found["note"]
    assert long_text(LIMIT + 50) not in reply.text  # at most the searched start is quoted back
    if shape == "queries":
        assert len(found["results"][1]["query"]) <= LIMIT and "note" in found


async def test_a_query_one_character_over_the_limit_is_cut_at_a_space(client):
    text = long_text(LIMIT - 3) + " xyz"  # LIMIT + 1 characters, the last word past the limit
    found = searched(await client.post("/mcp", **call("search_tools", {"queries": ["calendar", text]})))
    assert found["results"][1]["query"] == long_text(LIMIT - 3).rstrip()
    assert "Queries 2 were" in found["note"]


async def test_a_query_at_the_limit_says_nothing_of_cutting(client):
    found = searched(await client.post("/mcp", **call("search_tools", {"query": long_text(LIMIT)})))
    assert "note" not in found


@pytest.mark.parametrize(
    "word",
    ["invoice", "sąskaitų faktūrų", "請求書を送る", "청구서"],  # English, Lithuanian, Japanese, Korean
)
async def test_a_query_at_the_limit_is_searched_in_any_script(client, word):
    text = long_text(LIMIT, word)

    reply = await client.post("/mcp", **call("search_tools", {"query": text}))

    result = reply.json()["result"]
    assert result["isError"] is False and "tools" in result["structuredContent"]


@pytest.mark.parametrize(
    "tool, arguments",
    [
        ("describe_tool", {"names": [long_text(HUGE // 10, "x")] * 10}),
        ("call_read_tool", {"name": long_text(HUGE, "x")}),
        ("call_write_tool", {"name": long_text(HUGE, "x")}),
        ("call_read_tools", {"calls": [{"name": long_text(HUGE // 5, "x")}] * 5}),
    ],
)
async def test_a_huge_tool_name_is_refused_as_data_and_not_echoed(client, tool, arguments):
    reply = await client.post("/mcp", **call(tool, arguments))

    error = refusal(reply)
    assert f"at most {MAX_NAME_CHARS}" in error["message"]


async def test_a_huge_wrong_argument_to_an_upstream_tool_is_not_echoed_either(client):
    arguments = {"query": "select", "max_results": long_text(HUGE, "x"), long_text(HUGE, "y"): 1}

    reply = await client.post("/mcp", **call("call_read_tool", {"name": "qbo_query", "arguments": arguments}))

    error = refusal(reply)
    assert "max_results" in error["message"] and "is not of type 'integer'" in error["message"]


# -- one caller's search does not hold up another's


class GatedIndex:
    """The real index; a search for GATED waits, in whatever thread runs it, until the test opens."""

    GATED = "gated-hostile-search"

    def __init__(self, inner, entered: threading.Event, gate: threading.Event) -> None:
        self.inner, self.entered, self.gate = inner, entered, gate

    def search(self, queries, limit):
        if any(self.GATED in query for query in queries):
            self.entered.set()
            self.gate.wait(timeout=10)  # bounded: with search on the event loop, this stalls everyone
        return self.inner.search(queries, limit)


async def test_another_caller_is_answered_while_a_hostile_search_runs():
    entered, gate = threading.Event(), threading.Event()
    lexical = make_indexer(None)
    settings = Settings(embedder="none")
    http = httpx.AsyncClient(transport=httpx.ASGITransport(demo_app()))
    upstream = Upstream(DEMO_URL, settings.upstream, http=http)
    store = catalog_store(settings, upstream, lambda catalog: GatedIndex(lexical(catalog), entered, gate))
    service = tool_service(settings, store, upstream, Telemetry())
    hostile, other = (
        Caller(f"Bearer {t}", caller_key(DEMO_URL, f"Bearer {t}")) for t in ("hostile", "other")
    )
    for caller in (hostile, other):  # both catalogs listed and indexed beforehand
        await store.get(caller)
    finished: list[str] = []

    async def search(caller: Caller, query: str, name: str) -> dict:
        result = await service.call(caller, "search_tools", {"query": query})
        finished.append(name)
        return result

    hostile_query = long_text(LIMIT, GatedIndex.GATED)  # the longest allowed
    hostile_search = asyncio.create_task(search(hostile, hostile_query, "hostile"))
    assert await asyncio.to_thread(entered.wait, 10)  # the hostile search is ranking now
    other_result = await asyncio.wait_for(search(other, "send an email", "other"), timeout=30)
    gate.set()
    hostile_result = await asyncio.wait_for(hostile_search, timeout=30)

    assert finished == ["other", "hostile"]
    assert other_result["isError"] is False and other_result["structuredContent"]["tools"]
    assert hostile_result["isError"] is False
    await upstream.http.aclose()
