"""The upstream client against real servers: the SDK fixture (both eras), server-everything, and
small scripted servers for failures a well-behaved server never shows."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import hashlib
import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fixtures.hostile_upstream import TOOLS, Canned, RunningHostile, running_hostile
from fixtures.hostile_upstream import tool as hostile_tool
from fixtures.sdk_upstream import (
    INSTRUCTIONS,
    RunningUpstream,
    generated_tools,
    running_upstream,
)
from fixtures.servers import start_server
from toolsearch.mcp.param_headers import InvalidHeaderAnnotation, header_params, mirror
from toolsearch.mcp.protocol import encode_header_value as encode_value
from toolsearch.ops import deadline as request_deadline
from toolsearch.ops.deadline import MIN_CALL_SECONDS
from toolsearch.settings import Settings
from toolsearch.upstream import Listing, Upstream, UpstreamError
from toolsearch.upstream.sse import EventTooLarge, SSEParser

ALICE, BOB = "Bearer alice", "Bearer bob"
FAST = Settings(upstream_connect_timeout=2.0, upstream_timeout=10.0)


def new_requests(server: RunningUpstream, since: int) -> list[Any]:
    return server.requests[since:]


@pytest.fixture
async def modern(sdk_upstream: RunningUpstream) -> Any:
    upstream = Upstream(sdk_upstream.url, FAST.upstream)
    yield upstream
    await upstream.aclose()


@pytest.fixture(scope="module")
def legacy_server() -> Iterator[RunningUpstream]:
    with running_upstream(legacy_only=True) as server:
        yield server


async def tools_by_name(upstream: Upstream, authorization: str | None = ALICE) -> dict[str, dict]:
    listing = await upstream.list_tools(authorization)
    return {tool["name"]: tool for tool in listing.tools}


# -- the SDK fixture, 2026-07-28


async def test_lists_every_page_with_instructions_in_the_modern_era(sdk_upstream, modern):
    since = len(sdk_upstream.requests)
    listing = await modern.list_tools(ALICE)
    names = [tool["name"] for tool in listing.tools]
    expected = [t["name"] for t in generated_tools()]
    assert names[: len(expected)] == expected  # upstream order kept across pages
    assert "alice_only_tool" in names and "bob_only_tool" not in names
    assert len(names) == len(set(names)) == 307
    assert listing.instructions == INSTRUCTIONS
    assert modern.era == "modern"
    methods = [r.rpc_method for r in new_requests(sdk_upstream, since)]
    assert methods.count("tools/list") == 7  # 307 tools, 50 a page
    assert "initialize" not in methods


async def test_listings_differ_per_token(modern):
    alice, bob = await tools_by_name(modern, ALICE), await tools_by_name(modern, BOB)
    assert "alice_only_tool" in alice and "alice_only_tool" not in bob
    assert "bob_only_tool" in bob and "bob_only_tool" not in alice


async def test_invalid_x_mcp_header_tool_is_dropped_with_its_reason(modern):
    listing = await modern.list_tools(ALICE)
    assert "broken_header_tool" not in {t["name"] for t in listing.tools}
    (name, reason), *_ = listing.dropped
    assert name == "broken_header_tool" and "string, integer or boolean" in reason
    assert "route_query" in {t["name"] for t in listing.tools}  # a valid annotation stays


async def test_modern_request_carries_metadata_and_only_the_callers_authorization(sdk_upstream, modern):
    tools = await tools_by_name(modern)
    since = len(sdk_upstream.requests)
    result = await modern.call_tool(ALICE, tools["echo"], {"message": "hello"})
    assert result["structuredContent"] == {"message": "hello"}
    assert result["isError"] is False
    (request,) = new_requests(sdk_upstream, since)  # one round trip once the era is known
    headers = request.headers
    assert headers["authorization"] == ALICE
    assert headers["mcp-protocol-version"] == "2026-07-28"
    assert headers["mcp-method"] == "tools/call" and headers["mcp-name"] == "echo"
    assert "text/event-stream" in headers["accept"] and "application/json" in headers["accept"]
    assert "cookie" not in headers and "mcp-session-id" not in headers


async def test_x_mcp_header_values_are_mirrored_and_encoded(modern):
    tools = await tools_by_name(modern)
    result = await modern.call_tool(
        ALICE, tools["route_query"], {"region": "us-west1", "shard": 7, "query": "q"}
    )
    seen = result["structuredContent"]["mcp_headers"]
    assert seen["mcp-param-region"] == "us-west1" and seen["mcp-param-shard"] == "7"

    result = await modern.call_tool(ALICE, tools["route_query"], {"region": "Kaunas, Šančiai", "query": "q"})
    seen = result["structuredContent"]["mcp_headers"]
    encoded = seen["mcp-param-region"]
    assert encoded.startswith("=?base64?") and encoded.endswith("?=")
    assert base64.b64decode(encoded[9:-2]).decode() == "Kaunas, Šančiai"
    assert "mcp-param-shard" not in seen  # absent argument, no header


async def test_answer_over_sse_skips_the_notification_before_it(sdk_upstream, modern):
    tools = await tools_by_name(modern)
    since = len(sdk_upstream.requests)
    result = await modern.call_tool(ALICE, tools["stream_report"], {"topic": "sales"})
    assert result["structuredContent"] == {"topic": "sales", "status": "done"}
    (request,) = new_requests(sdk_upstream, since)
    assert request.content_type.startswith("text/event-stream")


async def test_tool_error_result_is_returned_unchanged(modern):
    tools = await tools_by_name(modern)
    result = await modern.call_tool(ALICE, tools["fail_tool"], {})
    assert result["isError"] is True and result["content"][0]["text"] == "it failed"


async def test_invalid_params_surface_as_rpc_error(modern):
    tools = await tools_by_name(modern)
    with pytest.raises(UpstreamError) as caught:
        await modern.call_tool(ALICE, tools["strict_add"], {"a": "one", "b": 2})
    error = caught.value
    assert error.kind == "rpc_error" and error.code == -32602
    assert error.to_data()["code"] == -32602 and error.data == {"required": ["a", "b"]}


async def test_missing_token_is_unauthorized_with_www_authenticate(sdk_upstream, modern):
    with pytest.raises(UpstreamError) as caught:
        await modern.list_tools(None)
    error = caught.value
    assert (error.kind, error.status) == ("unauthorized", 401)
    assert f'resource_metadata="{sdk_upstream.base_url}/.well-known/oauth-protected-resource"' in (
        error.www_authenticate or ""
    )
    assert "www" not in json.dumps(error.to_data()).lower()


async def test_forbidden_token_is_forbidden(modern):
    tools = await tools_by_name(modern)
    with pytest.raises(UpstreamError) as caught:
        await modern.call_tool("Bearer denied", tools["echo"], {})
    assert (caught.value.kind, caught.value.status) == ("forbidden", 403)
    assert "insufficient_scope" in (caught.value.www_authenticate or "")


async def test_answer_beyond_the_byte_bound_is_too_large(sdk_upstream):
    upstream = Upstream(sdk_upstream.url, FAST.replace(max_result_bytes=1000).upstream)
    try:
        tools = await tools_by_name(upstream)
        big = "x" * 200_000  # beyond 1000 bytes plus the 64 KiB margin
        for tool, arguments in ((tools["echo"], {"message": big}), (tools["stream_report"], {"topic": big})):
            with pytest.raises(UpstreamError) as caught:
                await upstream.call_tool(ALICE, tool, arguments)
            assert caught.value.kind == "too_large"
        assert (await upstream.call_tool(ALICE, tools["echo"], {"message": "small"}))["structuredContent"]
    finally:
        await upstream.aclose()


# -- the SDK fixture, handshake era only


async def test_legacy_upstream_falls_back_to_initialize(legacy_server):
    upstream = Upstream(legacy_server.url, FAST.upstream)
    try:
        since = len(legacy_server.requests)
        listing = await upstream.list_tools(ALICE)
        assert upstream.era == "legacy"
        assert listing.instructions == INSTRUCTIONS
        assert len(listing.tools) == 307 and "alice_only_tool" in {t["name"] for t in listing.tools}
        requests = new_requests(legacy_server, since)
        assert [r.rpc_method for r in requests[:3]] == [
            "server/discover",
            "initialize",
            "notifications/initialized",
        ]
        assert requests[0].status == 400  # the modern probe, refused
        session = requests[1].headers.get("mcp-session-id")
        assert session is None
        minted = {r.headers.get("mcp-session-id") for r in requests[2:]}
        assert len(minted) == 1 and None not in minted
        assert all(r.headers["mcp-protocol-version"] == "2025-11-25" for r in requests[2:])
        assert all("mcp-method" not in r.headers for r in requests[1:])  # modern headers on the probe only
        assert [r.rpc_method for r in requests].count("tools/list") == 7

        tools = {t["name"]: t for t in listing.tools}
        since = len(legacy_server.requests)
        result = await upstream.call_tool(ALICE, tools["echo"], {"message": "hi"})
        assert result["structuredContent"] == {"message": "hi"}
        assert len(new_requests(legacy_server, since)) == 1  # era and session remembered
    finally:
        await upstream.aclose()


async def test_legacy_sessions_are_per_caller(legacy_server):
    upstream = Upstream(legacy_server.url, FAST.upstream)
    try:
        alice = await tools_by_name(upstream, ALICE)
        since = len(legacy_server.requests)
        bob = await tools_by_name(upstream, BOB)
        assert "bob_only_tool" in bob and "bob_only_tool" not in alice
        bob_requests = new_requests(legacy_server, since)
        assert bob_requests[0].rpc_method == "initialize"  # bob gets his own session
        assert all(r.headers["authorization"] == BOB for r in bob_requests)
        keys = list(upstream._sessions._entries)
        assert keys == [hashlib.sha256(v.encode()).hexdigest() for v in (ALICE, BOB)]
    finally:
        await upstream.aclose()


async def test_expired_legacy_session_fails_the_call_once_and_renews_for_the_next(legacy_server):
    upstream = Upstream(legacy_server.url, FAST.upstream)
    try:
        tools = await tools_by_name(upstream)
        legacy_server.expire_sessions()
        since = len(legacy_server.requests)
        with pytest.raises(UpstreamError) as caught:
            await upstream.call_tool(ALICE, tools["echo"], {"message": "again"})
        assert (caught.value.kind, caught.value.status) == ("session_expired", 404)
        assert "not sent again" in caught.value.message
        assert [(r.rpc_method, r.status) for r in new_requests(legacy_server, since)] == [("tools/call", 404)]

        since = len(legacy_server.requests)
        result = await upstream.call_tool(ALICE, tools["echo"], {"message": "once more"})
        assert result["structuredContent"] == {"message": "once more"}
        assert [(r.rpc_method, r.status) for r in new_requests(legacy_server, since)] == [
            ("initialize", 200),
            ("notifications/initialized", 202),
            ("tools/call", 200),
        ]
    finally:
        await upstream.aclose()


async def test_expired_legacy_session_is_renewed_once_for_a_listing(legacy_server):
    upstream = Upstream(legacy_server.url, FAST.upstream)
    try:
        await upstream.list_tools(ALICE)
        legacy_server.expire_sessions()
        since = len(legacy_server.requests)
        listing = await upstream.list_tools(ALICE)
        assert len(listing.tools) == 307
        requests = new_requests(legacy_server, since)
        assert [(r.rpc_method, r.status) for r in requests[:4]] == [
            ("tools/list", 404),
            ("initialize", 200),
            ("notifications/initialized", 202),
            ("tools/list", 200),
        ]
    finally:
        await upstream.aclose()


# -- server-everything (TypeScript SDK, handshake era)


@pytest.mark.npm
async def test_everything_server_lists_and_calls(everything_url):
    upstream = Upstream(everything_url, FAST.upstream)
    try:
        listing = await upstream.list_tools(None)
        assert upstream.era == "legacy"
        tools = {t["name"]: t for t in listing.tools}
        assert {"echo", "get-sum"} <= set(tools)
        assert "Everything" in listing.instructions
        result = await upstream.call_tool(None, tools["echo"], {"message": "hi"})
        assert result["content"] == [{"type": "text", "text": "Echo: hi"}]
        # Progress notifications stream before the answer.
        result = await upstream.call_tool(
            None, tools["trigger-long-running-operation"], {"duration": 0.2, "steps": 2}
        )
        assert "completed" in json.dumps(result).lower()
    finally:
        await upstream.aclose()


# -- scripted servers for failures


Script = Callable[[dict, dict], tuple[int, dict[str, str], bytes]]


class Scripted:
    """A loopback server whose every answer comes from `script(body, headers)`; counts requests."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.bodies: list[dict] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = json.loads(b"".join(chunks) or b"{}")
        self.bodies.append(body)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        result = self.script(body, headers)
        if asyncio.iscoroutine(result):
            result = await result
        status, out_headers, payload = result
        raw = [(k.encode(), v.encode()) for k, v in out_headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": payload})

    def methods(self) -> list[str]:
        return [b.get("method", "") for b in self.bodies]


@pytest.fixture
def scripted() -> Iterator[Callable[[Script], tuple[Scripted, str]]]:
    started = []

    def start(script: Script) -> tuple[Scripted, str]:
        app = Scripted(script)
        thread = start_server(app)
        started.append(thread)
        return app, thread.base_url + "/mcp"

    yield start
    for thread in started:
        thread.stop()


JSON = {"content-type": "application/json"}


def answer(body: dict, result: dict) -> tuple[int, dict[str, str], bytes]:
    return 200, JSON, json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result}).encode()


def modern_tools(pages: Callable[[dict], dict], fail_first: int = 0, status: int = 503) -> Script:
    count = {"n": 0}

    def script(body: dict, headers: dict) -> tuple[int, dict[str, str], bytes]:
        count["n"] += 1
        if count["n"] <= fail_first:
            return status, {"retry-after": "0"}, b"busy"
        if body["method"] == "server/discover":
            return answer(
                body, {"supportedVersions": ["2026-07-28"], "capabilities": {}, "instructions": "hi"}
            )
        if body["method"] == "tools/list":
            return answer(body, pages(body.get("params") or {}))
        return 503, {}, b""

    return script


def tool(name: str) -> dict:
    return {"name": name, "inputSchema": {"type": "object"}}


async def test_listing_is_retried_on_5xx_and_429(scripted):
    for status in (503, 429):
        app, url = scripted(modern_tools(lambda p: {"tools": [tool("a")]}, fail_first=2, status=status))
        upstream = Upstream(url, FAST.replace(list_retries=2).upstream)
        listing = await upstream.list_tools(ALICE)
        assert [t["name"] for t in listing.tools] == ["a"] and listing.instructions == "hi"
        assert app.methods() == ["server/discover"] * 3 + ["tools/list"]
        await upstream.aclose()


async def test_listing_gives_up_after_its_retries(scripted):
    app, url = scripted(modern_tools(lambda p: {"tools": []}, fail_first=100))
    upstream = Upstream(url, FAST.replace(list_retries=1).upstream)
    with pytest.raises(UpstreamError) as caught:
        await upstream.list_tools(ALICE)
    assert (caught.value.kind, caught.value.status, caught.value.retry_after) == ("unavailable", 503, 0.0)
    assert len(app.bodies) == 2
    await upstream.aclose()


async def test_calls_are_never_retried(scripted):
    app, url = scripted(modern_tools(lambda p: {"tools": [tool("a")]}))
    upstream = Upstream(url, FAST.replace(list_retries=3).upstream)
    await upstream.list_tools(ALICE)
    with pytest.raises(UpstreamError) as caught:
        await upstream.call_tool(ALICE, tool("a"), {})
    assert caught.value.kind == "unavailable"
    assert app.methods().count("tools/call") == 1
    await upstream.aclose()


async def test_pagination_stops_at_a_repeated_cursor_and_drops_duplicates(scripted):
    def pages(params: dict) -> dict:
        if "cursor" not in params:
            return {"tools": [tool("a"), tool("b")], "nextCursor": "loop"}
        return {"tools": [tool("b"), tool("c"), {"description": "nameless"}], "nextCursor": "loop"}

    app, url = scripted(modern_tools(pages))
    upstream = Upstream(url, FAST.upstream)
    listing = await upstream.list_tools(ALICE)
    assert [t["name"] for t in listing.tools] == ["a", "b", "c"]
    assert ("b", "duplicate name (the first one is kept)") in listing.dropped
    assert ("(no name)", "no name") in listing.dropped
    assert app.methods().count("tools/list") == 2  # the second page repeats "loop": stop there
    await upstream.aclose()


async def test_pagination_stops_at_max_list_pages(scripted):
    def endless(params: dict) -> dict:
        page = int(params.get("cursor", "0"))
        return {"tools": [tool(f"t{page}")], "nextCursor": str(page + 1)}

    app, url = scripted(modern_tools(endless))
    upstream = Upstream(url, FAST.replace(max_list_pages=4).upstream)
    listing = await upstream.list_tools(ALICE)
    assert len(listing.tools) == 4 and app.methods().count("tools/list") == 4
    await upstream.aclose()


async def test_sse_stream_that_ends_without_the_answer_is_bad_response(scripted):
    def script(body: dict, headers: dict) -> tuple[int, dict[str, str], bytes]:
        note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
        stream = ": keepalive\r\n\r\nevent: message\r\ndata: " + json.dumps(note) + "\r\n\r\n"
        stream += (
            'data: {"jsonrpc": "2.0", "id": ' + str(body["id"]) + ', "result": {"content": []}}'
        )  # no blank line
        return 200, {"content-type": "text/event-stream"}, stream.encode()

    _app, url = scripted(script)
    upstream = Upstream(url, FAST.upstream)
    upstream.era = "modern"
    with pytest.raises(UpstreamError) as caught:
        await upstream.call_tool(ALICE, tool("a"), {})
    assert caught.value.kind == "bad_response"
    await upstream.aclose()


async def test_sse_answer_split_over_lines_is_read(scripted):
    def script(body: dict, headers: dict) -> tuple[int, dict[str, str], bytes]:
        other = {"jsonrpc": "2.0", "id": "not-ours", "result": {}}
        mine = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {"content": [], "isError": False}})
        half = len(mine) // 2
        stream = f"data: {json.dumps(other)}\n\ndata: {mine[:half]}\ndata:{mine[half:]}\n\n"
        return 200, {"content-type": "text/event-stream; charset=utf-8"}, stream.encode()

    _app, url = scripted(script)
    upstream = Upstream(url, FAST.upstream)
    upstream.era = "modern"
    assert await upstream.call_tool(ALICE, tool("a"), {}) == {"content": [], "isError": False}
    await upstream.aclose()


async def test_unsupported_version_listing_only_handshake_versions_falls_back(scripted):
    def script(body: dict, headers: dict) -> tuple[int, dict[str, str], bytes]:
        if headers.get("mcp-protocol-version") == "2026-07-28":
            error = {"code": -32022, "message": "Unsupported", "data": {"supported": ["2025-06-18"]}}
            return 400, JSON, json.dumps({"jsonrpc": "2.0", "id": body["id"], "error": error}).encode()
        if body["method"] == "initialize":
            return answer(body, {"protocolVersion": "2025-06-18", "capabilities": {}, "instructions": "old"})
        if body["method"] == "notifications/initialized":
            return 202, {}, b""
        return answer(body, {"tools": [tool("a")]})

    app, url = scripted(script)
    upstream = Upstream(url, FAST.upstream)
    listing = await upstream.list_tools(ALICE)
    assert upstream.era == "legacy" and listing.instructions == "old"
    assert app.methods() == ["server/discover", "initialize", "notifications/initialized", "tools/list"]
    await upstream.aclose()


async def test_modern_error_on_400_is_not_mistaken_for_legacy(scripted):
    def script(body: dict, headers: dict) -> tuple[int, dict[str, str], bytes]:
        error = {"code": -32020, "message": "Header mismatch"}
        return 400, JSON, json.dumps({"jsonrpc": "2.0", "id": body["id"], "error": error}).encode()

    app, url = scripted(script)
    upstream = Upstream(url, FAST.upstream)
    with pytest.raises(UpstreamError) as caught:
        await upstream.call_tool(ALICE, tool("a"), {})
    assert (caught.value.kind, caught.value.code) == ("rpc_error", -32020)
    assert app.methods() == ["server/discover", "tools/call"]  # no initialize
    assert upstream.era == "modern"  # a recognized modern error answered discovery
    await upstream.aclose()


async def test_slow_upstream_times_out(scripted):
    async def script(body: dict, headers: dict) -> tuple[int, dict[str, str], bytes]:
        await asyncio.sleep(3)
        return answer(body, {"content": []})

    _app, url = scripted(script)
    upstream = Upstream(url, FAST.replace(upstream_timeout=0.3).upstream)
    upstream.era = "modern"
    with pytest.raises(UpstreamError) as caught:
        await upstream.call_tool(ALICE, tool("a"), {})
    assert caught.value.kind == "timeout"
    await upstream.aclose()


async def test_connection_refused_is_connect():
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    upstream = Upstream(f"http://127.0.0.1:{port}/mcp", FAST.replace(list_retries=0).upstream)
    with pytest.raises(UpstreamError) as caught:
        await upstream.call_tool(ALICE, tool("a"), {})
    assert caught.value.kind == "connect"
    with pytest.raises(UpstreamError) as caught:
        await upstream.list_tools(ALICE)
    assert caught.value.kind == "connect"
    await upstream.aclose()


# -- x-mcp-header rules and value encoding


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ],
)
def test_header_values_encode_as_the_spec_shows(value, encoded):
    assert encode_value(value) == encoded


def schema(**properties: Any) -> dict:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(
    ("input_schema", "why"),
    [
        (schema(a={"type": "string", "x-mcp-header": ""}), "empty"),
        (schema(a={"type": "string", "x-mcp-header": "Bad Name"}), "token"),
        (schema(a={"type": "string", "x-mcp-header": "Line\n"}), "token"),
        (
            schema(a={"type": "string", "x-mcp-header": "Id"}, b={"type": "string", "x-mcp-header": "ID"}),
            "twice",
        ),
        (schema(a={"type": "number", "x-mcp-header": "N"}), "not string"),
        (schema(a={"type": "object", "x-mcp-header": "O"}), "not string"),
        (schema(a={"x-mcp-header": "T"}), "not string"),
        (schema(a={"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}), "items"),
        (schema(a={"anyOf": [{"type": "string", "x-mcp-header": "U"}]}), "anyOf"),
        ({"type": "object", "$defs": {"d": {"type": "string", "x-mcp-header": "D"}}}, r"\$defs"),
        ({"type": "object", "x-mcp-header": "Root"}, "root"),
    ],
)
def test_invalid_annotations_are_refused(input_schema, why):
    with pytest.raises(InvalidHeaderAnnotation, match=why):
        header_params(input_schema)


def test_nested_properties_are_mirrored_and_data_keywords_ignored():
    input_schema = schema(
        target={
            "type": "object",
            "properties": {"zone": {"type": ["string", "null"], "x-mcp-header": "Zone"}},
        },
        flag={"type": "boolean", "x-mcp-header": "Flag"},
        count={"type": "integer", "x-mcp-header": "Count"},
        blob={"type": "object", "default": {"x-mcp-header": "NotAnAnnotation"}},
        **{"x-mcp-header": {"type": "string"}},  # a property with that name is just a property
    )
    params = header_params(input_schema)
    assert {p.header: p.path for p in params} == {
        "Zone": ("target", "zone"),
        "Flag": ("flag",),
        "Count": ("count",),
    }
    headers = mirror(params, {"target": {"zone": "eu"}, "flag": False, "count": 42.0})
    assert headers == {"Mcp-Param-Zone": "eu", "Mcp-Param-Flag": "false", "Mcp-Param-Count": "42"}
    assert mirror(params, {"target": {"zone": None}}) == {}


# -- SSE parsing


def test_sse_parser_handles_split_line_endings_comments_and_multiline_data():
    parser = SSEParser(max_event_chars=1000)
    events = []
    for chunk in [": hi\r", "\nevent: message\r", "\ndata: one\r\ndata:two\r", "\r", "data: three\n\n"]:
        events += parser.feed(chunk)
    assert [(e.type, e.data) for e in events] == [("message", "one\ntwo"), ("message", "three")]


def test_sse_parser_skips_empty_events_and_bounds_size():
    parser = SSEParser(max_event_chars=10)
    assert parser.feed("id: 1\ndata:\n\n") == []
    with pytest.raises(EventTooLarge):
        parser.feed("data: " + "x" * 20 + "\n")


def test_error_to_data_is_structured():
    error = UpstreamError("rate_limited", "slow down", status=429, retry_after=2.0, www_authenticate="Bearer")
    assert error.to_data() == {
        "error": "rate_limited",
        "message": "slow down",
        "status": 429,
        "retryAfterSeconds": 2.0,
    }
    assert isinstance(Listing(tools=[], instructions="", dropped=[]), Listing)


async def test_session_id_that_is_not_visible_ascii_is_refused(scripted):
    def script(body: dict, headers: dict) -> tuple[int, dict[str, str], bytes]:
        if body["method"] == "initialize":
            status, out, payload = answer(body, {"protocolVersion": "2025-11-25", "capabilities": {}})
            return status, {**out, "mcp-session-id": "two words"}, payload
        return 400, {}, b"Bad Request"  # a legacy refusal of the modern request

    app, url = scripted(script)
    upstream = Upstream(url, FAST.upstream)
    with pytest.raises(UpstreamError) as caught:
        await upstream.call_tool(ALICE, tool("a"), {})
    assert caught.value.kind == "bad_response" and "session id" in caught.value.message
    assert app.methods() == ["server/discover", "initialize"]  # the call is never the era's probe
    await upstream.aclose()


async def test_cookies_from_one_answer_never_ride_on_the_next_request(scripted):
    seen: list[dict] = []

    def script(body: dict, headers: dict) -> tuple[int, dict[str, str], bytes]:
        seen.append(headers)
        status, out, payload = answer(body, {"content": []})
        return status, {**out, "set-cookie": "session=alice-secret; Path=/"}, payload

    _app, url = scripted(script)
    upstream = Upstream(url, FAST.upstream)
    upstream.era = "modern"
    await upstream.call_tool(ALICE, tool("a"), {})
    await upstream.call_tool(BOB, tool("a"), {})
    assert len(seen) == 2 and "cookie" not in seen[1]
    await upstream.aclose()


# -- a counting, hostile upstream: the era is the upstream's, a call is sent at most once


@pytest.fixture
def hostile() -> Iterator[RunningHostile]:
    with running_hostile() as server:
        yield server


@pytest.mark.parametrize(
    "refusal",
    [Canned.text(404), Canned.html(400), Canned.text(405)],
    ids=["404 text/plain", "400 text/html", "405 text/plain"],
)
async def test_one_callers_plain_4xx_is_that_callers_error_and_changes_no_era(hostile, refusal):
    upstream = Upstream(hostile.url, FAST.upstream)
    try:
        await upstream.list_tools(ALICE)
        hostile.upstream.call_answers.append(refusal)
        with pytest.raises(UpstreamError) as caught:
            await upstream.call_tool(ALICE, TOOLS[1], {"id": 1})
        assert (caught.value.kind, caught.value.status) == ("bad_response", refusal.status)
        assert upstream.era == "modern"
        # Every other caller (and alice again) is served in the modern era, with no handshake.
        assert (await upstream.call_tool(BOB, TOOLS[1], {"id": 2}))["content"][0][
            "text"
        ] == "ran notes_delete"
        assert (await upstream.call_tool(ALICE, TOOLS[1], {"id": 3}))["isError"] is False
        assert "initialize" not in hostile.upstream.methods()
    finally:
        await upstream.aclose()


AT_MOST_ONCE_CASES = [
    "404",
    "400 text/html",
    "405",
    "unsupported version",
    "era change",
    "legacy session expired",
    "timeout",
]
UNSUPPORTED = {
    "code": -32022,
    "message": "Unsupported protocol version",
    "data": {"supported": ["2025-11-25"]},
}


@pytest.mark.parametrize("case", AT_MOST_ONCE_CASES)
async def test_a_tools_call_reaches_the_upstream_at_most_once(case):
    era = "legacy" if case == "legacy session expired" else "dual"
    settings = FAST.replace(upstream_timeout=0.5) if case == "timeout" else FAST
    with running_hostile(era=era) as server:
        upstream = Upstream(server.url, settings.upstream)
        try:
            await upstream.list_tools(ALICE)
            hostile = server.upstream
            if case == "404":
                hostile.call_answers.append(Canned.text(404))
            elif case == "400 text/html":
                hostile.call_answers.append(Canned.html(400))
            elif case == "405":
                hostile.call_answers.append(Canned.text(405))
            elif case == "unsupported version":  # a JSON-RPC answer naming handshake versions only
                error = json.dumps({"jsonrpc": "2.0", "id": 0, "error": UNSUPPORTED}).encode()
                hostile.call_answers.append(Canned(400, "application/json", error))
            elif case == "era change":
                hostile.era = "legacy"  # the upstream was replaced by a handshake-era one
            elif case == "legacy session expired":
                hostile.expire_sessions()
            else:
                hostile.call_delay = 3
            try:
                await upstream.call_tool(ALICE, TOOLS[1], {"id": 1})
                outcome = "a result"
            except UpstreamError as exc:
                outcome = exc.kind
            assert hostile.calls == 1, f"the caller got {outcome}"
            # What the caller is told: its own error, never a second attempt's result.
            expected = {
                "unsupported version": "rpc_error",
                "legacy session expired": "session_expired",
                "timeout": "timeout",
            }
            assert outcome == expected.get(case, "bad_response")
        finally:
            await upstream.aclose()


@pytest.mark.parametrize("era", ["dual", "legacy"])
@pytest.mark.parametrize("left", [-1.0, 0.0, MIN_CALL_SECONDS / 5, MIN_CALL_SECONDS * 0.9])
async def test_a_call_with_its_requests_time_all_but_spent_is_refused_unsent(left, era):
    # On Lambda the request's deadline can be nearly spent before the call (a slow listing, a
    # gateway's clock): sent then, the call would be abandoned mid-flight, its outcome unknown.
    with running_hostile(era=era) as hostile:
        await _refused_unsent_then_sent(hostile, left)


async def _refused_unsent_then_sent(hostile: RunningHostile, left: float) -> None:
    upstream = Upstream(hostile.url, FAST.upstream)
    try:
        await upstream.list_tools(ALICE)
        due = asyncio.get_running_loop().time() + left
        with request_deadline.answer_by(due), pytest.raises(UpstreamError) as caught:
            await upstream.call_tool(ALICE, TOOLS[1], {"id": 1})
        assert caught.value.kind == "no_time" and "not sent" in caught.value.message
        assert hostile.upstream.calls == 0
        # With time to answer, the same call is sent, once.
        with request_deadline.answer_by(asyncio.get_running_loop().time() + 5.0):
            assert (await upstream.call_tool(ALICE, TOOLS[1], {"id": 1}))["isError"] is False
        assert hostile.upstream.calls == 1
    finally:
        await upstream.aclose()


async def test_a_timeout_shorter_than_the_sending_floor_still_sends_the_call(hostile):
    # The floor is for a request's deadline cut short, not a reason to refuse every call of a
    # proxy configured with an upstream_timeout under it: there it is half the timeout.
    upstream = Upstream(hostile.url, FAST.replace(upstream_timeout=MIN_CALL_SECONDS * 0.9).upstream)
    try:
        await upstream.list_tools(ALICE)
        outcome = "a result"
        try:
            await upstream.call_tool(ALICE, TOOLS[1], {"id": 1})
        except UpstreamError as exc:  # 45 ms may pass on a loaded machine: then a timeout
            outcome = exc.kind
        assert outcome in ("a result", "timeout")
    finally:
        await upstream.aclose()


async def test_discovery_refused_for_one_caller_decides_no_era_for_the_others(hostile):
    # A front end refuses every request with bob's (say, 10 KB) Authorization header.
    hostile.upstream.refused[BOB] = Canned.html(400)
    upstream = Upstream(hostile.url, FAST.upstream)
    try:
        with pytest.raises(UpstreamError) as caught:
            await upstream.list_tools(BOB)
        assert (caught.value.kind, caught.value.status) == ("bad_response", 400)
        assert "server/discover" in caught.value.message and "initialize" in caught.value.message
        assert upstream.era is None
        listing = await upstream.list_tools(ALICE)
        assert [t["name"] for t in listing.tools] == ["notes_get", "notes_delete"]
        assert upstream.era == "modern" and listing.instructions == "new"
    finally:
        await upstream.aclose()


async def test_a_failed_era_check_keeps_the_era_for_the_others(hostile):
    # Every request checks the era again.
    upstream = Upstream(hostile.url, FAST.replace(upstream_era_ttl=0).upstream)
    try:
        await upstream.list_tools(ALICE)
        hostile.upstream.refused[BOB] = Canned.html(400)
        with pytest.raises(UpstreamError) as caught:
            await upstream.call_tool(BOB, TOOLS[1], {"id": 1})
        # bob's check proved nothing (the fallback was tried too); his call went out in the era
        # still standing and got the front end's answer, which is his alone.
        assert (caught.value.kind, caught.value.status) == ("bad_response", 400)
        assert "initialize" in hostile.upstream.methods()
        assert upstream.era == "modern"
        assert (await upstream.call_tool(ALICE, TOOLS[1], {"id": 2}))["isError"] is False
        assert hostile.upstream.calls == 2  # one each
    finally:
        await upstream.aclose()


async def test_the_era_is_checked_again_after_upstream_era_ttl():
    with running_hostile(era="legacy") as server:
        fresh = Upstream(server.url, FAST.upstream)  # the default: five minutes
        expiring = Upstream(server.url, FAST.replace(upstream_era_ttl=0).upstream)
        try:
            for upstream in (fresh, expiring):
                await upstream.list_tools(ALICE)
                assert upstream.era == "legacy"
            server.upstream.era = "modern"  # the upstream was upgraded
            listing = await expiring.list_tools(ALICE)
            assert expiring.era == "modern" and listing.instructions == "new"
            assert (await expiring.call_tool(ALICE, TOOLS[1], {"id": 1}))["isError"] is False
            discovers = server.upstream.methods().count("server/discover")
            with pytest.raises(UpstreamError):
                await fresh.list_tools(ALICE)  # still legacy within its five minutes
            assert server.upstream.methods().count("server/discover") == discovers
        finally:
            await fresh.aclose()
            await expiring.aclose()


async def test_concurrent_first_requests_share_one_discovery(hostile):
    hostile.upstream.discover_delay = 0.3
    upstream = Upstream(hostile.url, FAST.upstream)
    try:
        callers = [f"Bearer caller-{n}" for n in range(20)]
        results = await asyncio.gather(*(upstream.call_tool(c, TOOLS[0], {"id": 1}) for c in callers))
        assert all(result["isError"] is False for result in results)
        assert hostile.upstream.methods().count("server/discover") == 1
        assert hostile.upstream.calls == 20
    finally:
        await upstream.aclose()


# -- a catalog's size is bounded


def padded_tools(count: int, size: int) -> list[dict]:
    return [hostile_tool(f"t{n}", description="x" * size) for n in range(count)]


async def test_a_catalog_over_max_catalog_bytes_fails_that_caller_only(hostile):
    hostile.upstream.catalogs[ALICE] = padded_tools(100, 10_000)  # ~1 MB in 10 pages of ~100 KB
    hostile.upstream.page_size = 10
    upstream = Upstream(hostile.url, FAST.replace(max_catalog_bytes=250_000).upstream)
    try:
        with pytest.raises(UpstreamError) as caught:
            await upstream.list_tools(ALICE)
        assert caught.value.kind == "too_large"
        assert "250000 bytes" in caught.value.message and "max_catalog_bytes" in caught.value.message
        assert hostile.upstream.methods().count("tools/list") == 3  # the third page was cut off unread
        assert [t["name"] for t in (await upstream.list_tools(BOB)).tools] == ["notes_get", "notes_delete"]
    finally:
        await upstream.aclose()


async def test_the_catalog_bound_counts_every_byte_of_an_sse_listing(hostile):
    # Three pages, each small, but each after 100 KB of notifications (10 KB each) read and skipped.
    hostile.upstream.catalogs[ALICE] = padded_tools(6, 10)
    hostile.upstream.page_size, hostile.upstream.list_sse_padding = 2, 100_000
    upstream = Upstream(hostile.url, FAST.replace(max_catalog_bytes=250_000).upstream)
    try:
        with pytest.raises(UpstreamError) as caught:
            await upstream.list_tools(ALICE)
        assert caught.value.kind == "too_large" and "max_catalog_bytes" in caught.value.message
        assert hostile.upstream.methods().count("tools/list") == 3
    finally:
        await upstream.aclose()


async def test_a_catalog_over_max_catalog_tools_fails_that_caller_only(hostile):
    hostile.upstream.catalogs[ALICE] = padded_tools(120, 10)
    upstream = Upstream(hostile.url, FAST.replace(max_catalog_tools=100).upstream)
    try:
        with pytest.raises(UpstreamError) as caught:
            await upstream.list_tools(ALICE)
        assert caught.value.kind == "too_large"
        assert "100 tools" in caught.value.message and "max_catalog_tools" in caught.value.message
        assert len((await upstream.list_tools(BOB)).tools) == 2
    finally:
        await upstream.aclose()


# -- a request HTTP cannot carry is named, never sent, never retried


@pytest.mark.parametrize(
    ("authorization", "why"),
    [
        ("Bearer alice ", "whitespace"),
        (" Bearer alice", "whitespace"),
        ("Bearer al\x00ice", "control character"),
        ("Bearer ali\r\nX-Injected: 1", "control character"),
        ("Bearer alič", "outside ASCII"),
    ],
)
async def test_an_authorization_header_http_cannot_carry_is_named_and_never_sent(hostile, authorization, why):
    upstream = Upstream(hostile.url, FAST.replace(list_retries=3).upstream)
    try:
        for attempt in (upstream.list_tools(authorization), upstream.call_tool(authorization, TOOLS[0], {})):
            with pytest.raises(UpstreamError) as caught:
                await attempt
            assert caught.value.kind == "bad_request"
            assert "Authorization header" in caught.value.message and why in caught.value.message
            assert "alice" not in caught.value.message  # the value itself is never repeated
        assert hostile.upstream.seen == []  # nothing was sent, so nothing was retried
    finally:
        await upstream.aclose()


async def test_text_that_is_not_unicode_is_refused_before_sending(hostile):
    upstream = Upstream(hostile.url, FAST.upstream)
    try:
        await upstream.list_tools(ALICE)
        with pytest.raises(UpstreamError) as caught:
            await upstream.call_tool(ALICE, TOOLS[0], {"id": "\ud800"})  # a lone surrogate
        assert caught.value.kind == "bad_request"
        assert hostile.upstream.calls == 0
    finally:
        await upstream.aclose()


async def test_no_task_exception_is_left_unretrieved_when_discovery_and_listing_both_fail(hostile):
    loop = asyncio.get_running_loop()
    unretrieved: list[dict] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
    upstream = Upstream(hostile.url, FAST.upstream)
    try:
        await upstream.list_tools(ALICE)  # the era is known: discovery runs beside the pages
        hostile.upstream.refused["Bearer refused"] = Canned(503, "text/plain", b"down")
        for failing in ("Bearer alice ", "Bearer refused"):  # unsendable; refused by every request
            with contextlib.suppress(UpstreamError):  # its kind is another test's business
                await upstream.list_tools(failing)
        await asyncio.sleep(0.05)
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
        await upstream.aclose()
    assert [c.get("message") for c in unretrieved] == []
