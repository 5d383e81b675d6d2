"""What clients see is what the tools declare: results fit the output schemas, texts are words, eras apart.

A client that checks structuredContent against the tool's outputSchema, on error
results too (the MCP Inspector does), must see every result of search_tools and
describe_tool as valid, so it shows the proxy's message instead of a schema
complaint of its own. The error's text says it in words, for the model and for
people (most clients show a failed call's text alone); structuredContent.error
holds it as data. A handshake-era reply carries none of the 2026-07-28 fields.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fixtures.faulty_upstream import Fault, refused_url, running_faulty, tool
from fixtures.mcp_wire import legacy, modern
from fixtures.result_schemas import misfit
from toolsearch.app import build_proxy
from toolsearch.settings import Settings

MODERN_ONLY = ("resultType", "ttlMs", "cacheScope")
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


@contextlib.asynccontextmanager
async def proxy_client(settings: Settings, token: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    proxy = build_proxy(settings)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.ASGITransport(app=proxy.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy", headers=headers) as client:
        yield client
    await proxy.upstream.aclose()


def request(era: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return modern(method, params) if era == "modern" else legacy(method, params)


async def answer(client: httpx.AsyncClient, era: str, method: str, params: dict | None = None) -> dict:
    reply = await client.post("/mcp", **request(era, method, params))
    assert reply.status_code == 200, reply.text
    return reply.json()["result"]


async def listed(client: httpx.AsyncClient, era: str) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in (await answer(client, era, "tools/list"))["tools"]}


async def called(client: httpx.AsyncClient, era: str, name: str, arguments: dict) -> dict[str, Any]:
    return await answer(client, era, "tools/call", {"name": name, "arguments": arguments})


# -- every result fits the declared output schema


FAILING = [
    ("search_tools", {"query": "jira issue", "limit": 30}, "limit"),  # over the maximum of 25
    ("search_tools", {}, "query"),  # neither query nor queries
    ("search_tools", {"query": "a", "queries": ["b"]}, "query"),  # both
    ("search_tools", {"queries": []}, "queries"),
    ("search_tools", {"query": 5}, "query"),
    ("describe_tool", {}, "names"),
    ("describe_tool", {"names": ["jira_get_issue"] * 11}, "names"),
]


@pytest.mark.parametrize("era", ["modern", "legacy"])
@pytest.mark.parametrize(("name", "arguments", "named"), FAILING)
async def test_an_error_result_of_search_or_describe_fits_its_output_schema(era, name, arguments, named):
    async with proxy_client(Settings(embedder="none")) as client:
        tools = await listed(client, era)
        result = await called(client, era, name, arguments)
    assert result["isError"] is True
    assert misfit(tools[name], result) is None
    error = result["structuredContent"]["error"]
    assert error["kind"] == "invalid_arguments"
    # The real message reaches whoever reads the text, naming what to fix.
    text = result["content"][0]["text"]
    assert named in error["message"] and error["message"].rstrip(".") in text
    assert "\n" not in text  # no schema after it: the client has the five tools' schemas already


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_results_of_search_and_describe_fit_when_they_succeed_and_when_names_are_unknown(era):
    async with proxy_client(Settings(embedder="none")) as client:
        tools = await listed(client, era)
        results = [
            await called(client, era, "search_tools", {"query": "jira issue"}),
            await called(client, era, "search_tools", {"queries": ["jira", "weather"], "schemas": False}),
            await called(client, era, "describe_tool", {"names": ["jira_get_issue", "jira_get_isue"]}),
        ]
    for name, result in zip(["search_tools", "search_tools", "describe_tool"], results, strict=True):
        assert result["isError"] is False
        assert misfit(tools[name], result) is None
    assert results[2]["structuredContent"]["unknown"] == ["jira_get_isue"]


async def test_search_and_describe_fit_their_schemas_when_the_upstream_cannot_be_reached():
    async with proxy_client(Settings(upstream=refused_url(), embedder="none", list_retries=0)) as client:
        tools = await listed(client, "modern")
        for name, arguments in [("search_tools", {"query": "x"}), ("describe_tool", {"names": ["x"]})]:
            result = await called(client, "modern", name, arguments)
            assert result["isError"] is True
            assert result["structuredContent"]["error"]["kind"] == "connect"
            assert misfit(tools[name], result) is None


async def test_an_answer_of_search_or_describe_too_large_to_pass_on_is_an_error_its_schema_admits():
    big = {"type": "object", "properties": {"q": {"type": "string", "description": "x" * 40_000}}}
    huge = tool("padded_report", schema=big, description="Reports padding. " + "y" * 40_000)
    with running_faulty(users={"tok": "alice"}, extra_tools=[huge]) as faulty:
        settings = Settings(upstream=faulty.url, embedder="none", max_result_bytes=20_000)
        async with proxy_client(settings, token="tok") as client:
            tools = await listed(client, "modern")
            described = await called(client, "modern", "describe_tool", {"names": ["padded_report"]})
            searched = await called(client, "modern", "search_tools", {"query": "padded_report"})
            lean = await called(
                client, "modern", "search_tools", {"query": "padded_report", "schemas": False}
            )
    for name, result in [("describe_tool", described), ("search_tools", searched)]:
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["kind"] == "too_large"
        assert misfit(tools[name], result) is None
    assert "schemas: false" in searched["content"][0]["text"]  # what to ask instead
    assert lean["isError"] is False and lean["structuredContent"]["tools"][0]["name"] == "padded_report"


async def test_a_cut_result_that_lost_its_structured_content_is_marked_an_error():
    # A client checking a pinned tool's outputSchema refuses a success without structuredContent.
    with running_faulty(users={"tok": "alice"}) as faulty:
        settings = Settings(upstream=faulty.url, embedder="none", max_result_bytes=5_000)
        async with proxy_client(settings, token="tok") as client:
            big = await called(
                client,
                "modern",
                "call_read_tool",
                {"name": "notes_search", "arguments": {"text": "z" * 9_000}},
            )
            small = await called(
                client, "modern", "call_read_tool", {"name": "notes_search", "arguments": {"text": "z"}}
            )
    assert "structuredContent" not in big and big["isError"] is True
    assert "it was cut" in big["content"][-1]["text"]
    assert small["isError"] is False and small["structuredContent"]["arguments"] == {"text": "z"}


# -- error texts are words


async def test_error_texts_say_the_details_in_words_not_as_trailing_json():
    async with proxy_client(Settings(embedder="none")) as client:
        refused = await called(
            client,
            "modern",
            "call_read_tool",
            {
                "name": "jira_create_issue",
                "arguments": {"project_key": "WEB", "issue_type": "Bug", "summary": "x"},
            },
        )
        typo = await called(client, "modern", "call_read_tool", {"name": "jira_get_isue", "arguments": {}})
        unfit = await called(client, "modern", "call_read_tool", {"name": "jira_get_issue", "arguments": {}})
        unknown = await called(client, "modern", "call_read_tool", {"name": "zzqx_nothing", "arguments": {}})
    texts = {}
    for label, result in [("refused", refused), ("typo", typo), ("unfit", unfit), ("unknown", unknown)]:
        assert result["isError"] is True
        text = result["content"][0]["text"]
        texts[label] = text
        first = text.split("\n")[0]
        assert "{" not in first, first  # the sentence part holds no JSON
    assert "call_write_tool" in texts["refused"] and "jira_create_issue" in texts["refused"]
    assert "jira_get_issue" in texts["typo"]  # the name meant, in words
    # A model that sees only the text can fix its call: what is wrong, then the schema after a label.
    problems = unfit["structuredContent"]["error"]["problems"]
    assert problems and all(problem in texts["unfit"] for problem in problems)
    label, schema = texts["unfit"].split("\n")[1].split(": ", 1)
    assert "input schema" in label
    assert json.loads(schema) == unfit["structuredContent"]["error"]["inputSchema"]
    assert texts["unknown"].count("\n") == 0


async def test_an_upstream_failure_reads_as_a_sentence_with_its_retry_time():
    with running_faulty(users={"tok": "alice"}) as faulty:
        faulty.upstream.fault("tools/call", Fault.status_code(429, retry_after="7"))
        async with proxy_client(Settings(upstream=faulty.url, embedder="none"), token="tok") as client:
            result = await called(
                client, "modern", "call_read_tool", {"name": "notes_get", "arguments": {"id": 1}}
            )
    error = result["structuredContent"]["error"]
    assert (error["kind"], error["retryAfterSeconds"]) == ("rate_limited", 7.0)
    text = result["content"][0]["text"]
    assert "notes_get" in text and "7 s" in text and "{" not in text


# -- each era's replies carry that era's fields only


def modern_fields(result: dict[str, Any]) -> set[str]:
    found = {key for key in MODERN_ONLY if key in result}
    if isinstance(result.get("_meta"), dict) and SERVER_INFO in result["_meta"]:
        found.add("_meta serverInfo")
    return found


async def test_handshake_era_replies_carry_none_of_the_2026_fields_and_modern_ones_carry_theirs(sdk_upstream):
    # The upstream speaks 2026-07-28, so a pinned tool's own result comes with resultType and _meta.
    upstream_reply = httpx.post(
        sdk_upstream.url,
        headers={
            "Authorization": "Bearer alice",
            **modern("tools/call", {"name": "echo", "arguments": {}})["headers"],
        },
        json=modern("tools/call", {"name": "echo", "arguments": {"message": "hi"}})["json"],
        timeout=30,
    )
    assert "resultType" in upstream_reply.json()["result"]
    settings = Settings(upstream=sdk_upstream.url, embedder="none", pinned_tools=["echo"])
    async with proxy_client(settings, token="alice") as client:
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        handshake = {
            "initialize": await answer(client, "legacy", "initialize", init),
            "tools/list": await answer(client, "legacy", "tools/list"),
            "search_tools": await called(client, "legacy", "search_tools", {"query": "echo"}),
            "pinned echo": await called(client, "legacy", "echo", {"message": "hi"}),
            "call_read_tool": await called(client, "legacy", "call_read_tool", {"name": "echo"}),
            "an error": await called(client, "legacy", "search_tools", {"limit": 30}),
        }
        current = {
            "server/discover": await answer(client, "modern", "server/discover"),
            "tools/list": await answer(client, "modern", "tools/list"),
            "pinned echo": await called(client, "modern", "echo", {"message": "hi"}),
            "an error": await called(client, "modern", "search_tools", {"limit": 30}),
        }
    for what, result in handshake.items():
        assert modern_fields(result) == set(), what
    assert handshake["pinned echo"]["structuredContent"] == {"message": "hi"}
    for what, result in current.items():
        assert result["resultType"] == "complete", what
        assert result["_meta"][SERVER_INFO]["name"] == "mcp-toolsearch-proxy", what
    for what in ("server/discover", "tools/list"):
        assert current[what]["cacheScope"] == "private" and current[what]["ttlMs"] > 0
