"""The proxy in front of a real upstream built with the official SDK, called by the SDK's client.

Covers what only a real upstream shows: per-token catalogs with concurrent
callers, auth failures passed through, x-mcp-header mirroring, SSE answers,
invalid params from the upstream, and what the proxy forwards.
"""

from __future__ import annotations

import asyncio

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from fixtures.faulty_upstream import refused_url
from fixtures.mcp_wire import call, legacy
from fixtures.servers import serve_in_thread
from toolsearch.app import build_proxy
from toolsearch.settings import Settings


@pytest.fixture(scope="module")
def proxy_url(sdk_upstream):
    proxy = build_proxy(Settings(upstream=sdk_upstream.url, embedder="none"))
    with serve_in_thread(proxy.app) as base:
        yield base + "/mcp"


def connect(url: str, token: str | None, mode: str = "2026-07-28", **headers: str) -> Client:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))
    return Client(transport, mode=mode)


async def _names_seen(url: str, token: str) -> set[str]:
    async with connect(url, token) as client:
        found = await client.call_tool("search_tools", {"query": "only tool can see", "limit": 25})
        described = await client.call_tool("describe_tool", {"names": ["alice_only_tool", "bob_only_tool"]})
        call = await client.call_tool("call_read_tool", {"name": f"{token}_only_tool"})
        assert not call.is_error
        seen = {tool["name"] for tool in found.structured_content["tools"]}
        seen |= {tool["name"] for tool in described.structured_content["tools"]}
        return seen


async def test_concurrent_callers_each_see_only_their_own_catalog(proxy_url):
    tokens = ["alice", "bob"] * 10
    seen = await asyncio.gather(*(_names_seen(proxy_url, token) for token in tokens))
    for token, names in zip(tokens, seen, strict=True):
        other = "bob" if token == "alice" else "alice"
        assert f"{token}_only_tool" in names
        assert f"{other}_only_tool" not in names


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_calls_reach_the_upstream_in_both_eras(proxy_url, mode):
    async with connect(proxy_url, "carol", mode) as client:
        result = await client.call_tool("call_read_tool", {"name": "echo", "arguments": {"message": "hi"}})
        assert not result.is_error
        assert result.structured_content == {"message": "hi"}
        streamed = await client.call_tool(
            "call_read_tool", {"name": "stream_report", "arguments": {"topic": "q3"}}
        )
        assert not streamed.is_error
        failed = await client.call_tool("call_write_tool", {"name": "fail_tool"})
        assert failed.is_error  # the upstream's own isError passes through


async def test_upstream_instructions_reach_the_client(proxy_url):
    async with connect(proxy_url, "carol", "legacy") as client:
        instructions = client.session.instructions if hasattr(client.session, "instructions") else None
        if instructions is None:
            pytest.skip("this SDK version does not expose instructions on the session")
        assert "Fixture upstream for mcp-toolsearch-proxy tests" in instructions


async def test_x_mcp_header_parameters_are_mirrored(proxy_url):
    async with connect(proxy_url, "carol") as client:
        result = await client.call_tool(
            "call_read_tool",
            {"name": "route_query", "arguments": {"region": "eu-north-1", "query": "q", "shard": 7}},
        )
        assert not result.is_error, result.content
        received = result.structured_content
        text = repr(received).lower()
        assert "eu-north-1" in text and "mcp-param-region" in text and "mcp-param-shard" in text


async def test_tool_with_an_invalid_x_mcp_header_is_dropped(proxy_url):
    async with connect(proxy_url, "carol") as client:
        described = await client.call_tool("describe_tool", {"names": ["broken_header_tool", "echo"]})
        assert described.structured_content["unknown"] == ["broken_header_tool"]


async def test_upstream_invalid_params_come_back_with_the_schema(proxy_url):
    async with connect(proxy_url, "carol") as client:
        result = await client.call_tool(
            "call_read_tool", {"name": "strict_add", "arguments": {"a": 1, "b": "2"}}
        )
        assert result.is_error
        error = result.structured_content["error"]
        assert error["kind"] == "invalid_arguments"
        assert error["inputSchema"]["required"] == ["a", "b"]


async def test_missing_token_is_401_with_the_upstream_challenge(proxy_url):
    async with httpx.AsyncClient() as http:
        reply = await http.post(proxy_url, **legacy("initialize", {"protocolVersion": "2025-11-25"}))
        assert reply.status_code == 401
        assert "resource_metadata" in reply.headers["www-authenticate"]
        denied = await http.post(
            proxy_url,
            headers={"Authorization": "Bearer denied", **legacy("initialize")["headers"]},
            json=legacy("initialize", {"protocolVersion": "2025-11-25"})["json"],
        )
        assert denied.status_code == 403


async def test_only_the_authorization_header_is_forwarded(proxy_url, sdk_upstream):
    before = len(sdk_upstream.requests)
    async with connect(proxy_url, "dave", Cookie="session=abc", **{"X-Caller-Secret": "xyz"}) as client:
        await client.call_tool("call_read_tool", {"name": "echo", "arguments": {"message": "m"}})
    forwarded = sdk_upstream.requests[before:]
    assert forwarded, "no request reached the upstream"
    for request in forwarded:
        assert request.headers.get("authorization") == "Bearer dave"
        assert "cookie" not in request.headers and "x-caller-secret" not in request.headers


async def test_a_legacy_only_upstream_works_behind_the_proxy(legacy_upstream):
    proxy = build_proxy(Settings(upstream=legacy_upstream.url, embedder="none"))
    with serve_in_thread(proxy.app) as base:
        async with connect(base + "/mcp", "erin") as client:
            found = await client.call_tool("search_tools", {"query": "echo arguments"})
            assert "echo" in [tool["name"] for tool in found.structured_content["tools"]]
            result = await client.call_tool("call_read_tool", {"name": "echo", "arguments": {"message": "x"}})
            assert result.structured_content == {"message": "x"}


async def test_pinned_tools_are_listed_and_called_directly(sdk_upstream):
    settings = Settings(
        upstream=sdk_upstream.url, embedder="none", pinned_tools=["echo", "search_tools", "nope"]
    )
    proxy = build_proxy(settings)
    with serve_in_thread(proxy.app) as base:
        async with connect(base + "/mcp", "frank") as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            # A pinned name that clashes with the five, or that the caller's catalog lacks, is left out.
            assert names[-1] == "echo" and names.count("search_tools") == 1 and "nope" not in names
            result = await client.call_tool("echo", {"message": "pinned"})
            assert result.structured_content == {"message": "pinned"}


async def test_a_pinned_tool_whose_catalog_cannot_be_listed_is_a_401_or_an_error_result_not_a_500(
    sdk_upstream,
):
    async with httpx.AsyncClient(timeout=30) as http:
        for upstream_url in (sdk_upstream.url, refused_url()):
            proxy = build_proxy(Settings(upstream=upstream_url, embedder="none", pinned_tools=["echo"]))
            with serve_in_thread(proxy.app) as base:
                # No token: the upstream refuses the listing (401); a closed port: it cannot be reached.
                # Both eras: a 2026-07-28 call reads the tool's schema first, for its Mcp-Param headers.
                replies = [
                    await http.post(base + "/mcp", **legacy("tools/call", {"name": "echo", "arguments": {}})),
                    await http.post(base + "/mcp", **call("echo", {})),
                ]
            for reply in replies:
                if upstream_url == sdk_upstream.url:
                    assert reply.status_code == 401
                    assert "resource_metadata" in reply.headers["www-authenticate"]
                else:
                    assert reply.status_code == 200
                    result = reply.json()["result"]
                    assert result["isError"] is True
                    assert result["structuredContent"]["error"]["kind"] == "connect"


async def test_server_everything_behind_the_proxy(everything_url):
    """A third-party upstream (the reference TypeScript server, handshake era, sessions)."""
    proxy = build_proxy(Settings(upstream=everything_url, embedder="none"))
    with serve_in_thread(proxy.app) as base:
        for mode in ("2026-07-28", "legacy"):
            async with connect(base + "/mcp", None, mode) as client:
                found = await client.call_tool("search_tools", {"query": "add two numbers", "limit": 3})
                assert found.structured_content["tools"][0]["name"] == "get-sum"
                summed = await client.call_tool(
                    "call_read_tool", {"name": "get-sum", "arguments": {"a": 2, "b": 3}}
                )
                assert not summed.is_error and "5" in summed.content[0].text
                images = await client.call_tool("call_read_tool", {"name": "get-tiny-image"})
                assert any(block.type == "image" for block in images.content)  # content passes through
                wrong = await client.call_tool(
                    "call_read_tool", {"name": "get-sum", "arguments": {"a": "two"}}
                )
                assert wrong.is_error and wrong.structured_content["error"]["kind"] == "invalid_arguments"
                refused = await client.call_tool("call_read_tool", {"name": "toggle-simulated-logging"})
                assert refused.is_error and "call_write_tool" in refused.content[0].text
