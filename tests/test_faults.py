"""The proxy in front of an upstream that fails in every way we know of.

Each fault must reach the caller as a structured error (or a result cut with a
note) within a deadline the caller can rely on; the process and other requests
carry on. Listing is retried with backoff; calls are never retried behind the
caller's back. Deadlines are asserted with `bounded()`, which fails the test if
the proxy has not answered by then: generous bounds, far below what an
unbounded proxy would take.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from fixtures.faulty_upstream import Fault, RunningFaulty, blackhole, refused_url, running_faulty, tool
from fixtures.hostile_upstream import running_hostile
from fixtures.hostile_upstream import tool as hostile_tool
from fixtures.mcp_wire import call, modern
from toolsearch.app import build_proxy
from toolsearch.settings import Settings

TOKEN = "tok-alice"
USERS = {TOKEN: "alice", "tok-bob": "bob"}
TIMEOUT = 1.0  # upstream_timeout in these tests
LAMBDA_RESPONSE_LIMIT = 6 * 1024 * 1024


def settings(url: str, **changes: Any) -> Settings:
    base = Settings(
        upstream=url,
        embedder="none",
        upstream_timeout=TIMEOUT,
        upstream_connect_timeout=0.5,
        list_retries=2,
    )
    return base.replace(**changes)


@pytest.fixture
def faulty() -> Iterator[RunningFaulty]:
    with running_faulty(users=dict(USERS)) as server:
        yield server


@contextlib.asynccontextmanager
async def proxy_client(config: Settings, token: str = TOKEN) -> AsyncIterator[httpx.AsyncClient]:
    proxy = build_proxy(config)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app),
        base_url="http://proxy",
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    ) as client:
        yield client
    await proxy.upstream.aclose()


@contextlib.asynccontextmanager
async def bounded(seconds: float) -> AsyncIterator[None]:
    """Fail the test when the block takes longer than `seconds` (a deadline, not a speed claim)."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        pytest.fail(f"the proxy did not answer within {seconds} s")


async def tool_result(client: httpx.AsyncClient, name: str, arguments: dict) -> dict[str, Any]:
    reply = await client.post("/mcp", **call(name, arguments))
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert "result" in body, body
    return body["result"]


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is True, result
    return result["structuredContent"]["error"]


async def read_call(client: httpx.AsyncClient, name: str, arguments: dict | None = None) -> dict[str, Any]:
    return await tool_result(client, "call_read_tool", {"name": name, "arguments": arguments or {}})


# -- no upstream at all


async def test_connection_refused_is_a_structured_error_for_search_and_calls():
    async with proxy_client(settings(refused_url())) as client, bounded(10):
        assert error_of(await tool_result(client, "search_tools", {"query": "notes"}))["kind"] == "connect"
        assert error_of(await read_call(client, "notes_get", {"id": 1}))["kind"] == "connect"


async def test_connect_timeout_is_bounded_by_the_listing_deadline():
    with blackhole() as url:
        async with proxy_client(settings(url, list_retries=5)) as client, bounded(TIMEOUT + 3):
            error = error_of(await tool_result(client, "search_tools", {"query": "notes"}))
            assert error["kind"] in ("connect", "timeout")


# -- calls


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault.delay(30), "timeout"),  # a slow answer past the deadline
        (Fault.hang(), "timeout"),
        (Fault.stall_body(30), "timeout"),  # headers, then nothing: a read timeout
        (Fault.status_code(500), "unavailable"),
        (Fault.status_code(502), "unavailable"),
        (Fault.status_code(503, retry_after="1"), "unavailable"),
        (Fault.not_json(), "bad_response"),
        (Fault.sse_cut(), "bad_response"),
        (Fault.sse_unfinished(), "bad_response"),
        (Fault.drop(), "bad_response"),
        (Fault.huge(8_000_000), "too_large"),
        (Fault.nan(), "bad_response"),  # NaN is not JSON: passed on, it could not be answered
    ],
)
async def test_a_failing_call_is_a_structured_error_within_the_deadline_and_not_retried(faulty, fault, kind):
    faulty.upstream.fault("tools/call", fault)
    async with proxy_client(settings(faulty.url)) as client:
        async with bounded(TIMEOUT + 3):
            result = await read_call(client, "notes_get", {"id": 1})
        error = error_of(result)
        assert error["kind"] == kind and error["tool"] == "notes_get"
        assert len(faulty.upstream.seen("tools/call")) == 1  # never retried behind the caller's back
        # The process carries on: the next request is served (from the cached catalog).
        assert not (await tool_result(client, "search_tools", {"query": "notes"}))["isError"]


async def test_429_on_a_call_passes_retry_after_to_the_model_without_retrying(faulty):
    faulty.upstream.fault("tools/call", Fault.status_code(429, retry_after="7"))
    async with proxy_client(settings(faulty.url)) as client, bounded(TIMEOUT + 3):
        error = error_of(await read_call(client, "notes_get", {"id": 1}))
    assert (error["kind"], error["status"], error["retryAfterSeconds"]) == ("rate_limited", 429, 7.0)
    assert len(faulty.upstream.seen("tools/call")) == 1


@pytest.mark.parametrize(
    ("header", "told"),
    [("900", 900.0), ("86401", 86_400.0), ("1e400", 86_400.0), ("inf", 86_400.0), ("-5", 0.0)],
)
async def test_a_calls_retry_after_reaches_the_caller_as_the_upstream_said_it(faulty, header, told):
    # A gateway's lockout says 900 s: the caller is told 900, not the proxy's own 10 s wait bound;
    # only what JSON cannot carry (or past a day) is bounded.
    faulty.upstream.fault("tools/call", Fault.status_code(429, retry_after=header))
    async with proxy_client(settings(faulty.url)) as client, bounded(TIMEOUT + 3):
        error = error_of(await read_call(client, "notes_get", {"id": 1}))
    assert (error["kind"], error["retryAfterSeconds"]) == ("rate_limited", told)


async def test_a_retry_after_given_as_a_date_is_told_in_seconds(faulty):
    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(minutes=15), usegmt=True)
    faulty.upstream.fault("tools/call", Fault.status_code(503, retry_after=when))
    async with proxy_client(settings(faulty.url)) as client, bounded(TIMEOUT + 3):
        error = error_of(await read_call(client, "notes_get", {"id": 1}))
    assert error["kind"] == "unavailable"
    assert 880 <= error["retryAfterSeconds"] <= 900


async def test_a_result_larger_than_a_lambda_response_is_cut_with_a_note(faulty):
    faulty.upstream.fault("huge_tool", Fault.huge(5_600_000))
    async with proxy_client(settings(faulty.url, max_result_bytes=5_000_000)) as client:
        reply = await client.post("/mcp", **call("call_read_tool", {"name": "huge_tool"}))
    assert reply.status_code == 200
    assert len(reply.content) < LAMBDA_RESPONSE_LIMIT
    result = reply.json()["result"]
    assert result["isError"] is False
    assert "it was cut" in result["content"][-1]["text"]
    assert len(result["content"][0]["text"]) > 1_000_000  # what fits is still passed on


async def _lone_surrogate_upstream(scope: dict, receive: Any, send: Any) -> None:
    """An upstream whose one tool answers text with a lone surrogate: valid JSON, not Unicode."""
    from fixtures.servers import read_asgi_body

    if scope["type"] != "http":
        return
    message = json.loads(await read_asgi_body(receive) or b"{}")
    if "id" not in message:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    method = message.get("method")
    if method == "server/discover":
        result: dict[str, Any] = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
    elif method == "tools/list":
        result = {"tools": [{"name": "blob_get", "inputSchema": {}, "annotations": {"readOnlyHint": True}}]}
    else:
        result = {
            "content": [{"type": "text", "text": "before \ud800 after"}],
            "structuredContent": {"s": "\udfff"},
        }
    body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()  # \ud800 escaped
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": body})


async def test_a_result_holding_a_lone_surrogate_is_passed_on_with_a_replacement_not_a_500():
    from fixtures.servers import serve_in_thread

    with serve_in_thread(_lone_surrogate_upstream) as base:
        async with proxy_client(settings(base + "/mcp")) as client:
            reply = await client.post("/mcp", **call("call_read_tool", {"name": "blob_get"}))
    assert reply.status_code == 200
    result = reply.json()["result"]
    assert result["content"][0]["text"] == "before \ufffd after"
    assert result["structuredContent"] == {"s": "\ufffd"}


# -- callers the upstream refuses


async def test_anonymous_requests_in_a_row_reach_the_upstream_once_and_a_signed_in_caller_at_once(faulty):
    proxy = build_proxy(settings(faulty.url))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app), base_url="http://proxy"
    ) as client:
        replies = [await client.post("/mcp", **modern("tools/list")) for _ in range(3)]
        assert [reply.status_code for reply in replies] == [401, 401, 401]
        assert len({reply.headers["www-authenticate"] for reply in replies}) == 1  # the same challenge
        assert len(faulty.upstream.requests) == 1  # the first one asked; the next two were answered from it

        request = modern("tools/list")
        request["headers"]["Authorization"] = f"Bearer {TOKEN}"
        signed_in = await client.post("/mcp", **request)
    await proxy.upstream.aclose()
    assert signed_in.status_code == 200
    assert len(faulty.upstream.requests) > 1


# -- listing


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_listing_is_retried_and_then_succeeds(faulty, status):
    faulty.upstream.fault("tools/list", Fault.status_code(status, retry_after="0"), times=2)
    async with proxy_client(settings(faulty.url, list_retries=2)) as client, bounded(TIMEOUT + 3):
        result = await tool_result(client, "search_tools", {"query": "notes"})
    assert not result["isError"], result
    assert len(faulty.upstream.seen("tools/list")) == 3


async def test_listing_retries_with_a_long_retry_after_stay_within_the_deadline(faulty):
    # Retry-After 30 is past the listing's deadline: the caller is told at once, not after a wait.
    faulty.upstream.fault("tools/list", Fault.status_code(429, retry_after="30"))
    async with proxy_client(settings(faulty.url, list_retries=2)) as client, bounded(TIMEOUT + 3):
        error = error_of(await tool_result(client, "search_tools", {"query": "notes"}))
    assert (error["kind"], error["retryAfterSeconds"]) == ("rate_limited", 30.0)
    assert len(faulty.upstream.seen("tools/list")) == 1


async def test_a_listing_is_never_asked_again_before_the_upstreams_retry_after(faulty):
    # 12 s fits in the deadline but is more than the 10 s a listing waits: it fails at once, saying
    # 12, rather than asking again early (a gateway counts that as one more violation).
    faulty.upstream.fault("tools/list", Fault.status_code(429, retry_after="12"), times=1)
    async with proxy_client(settings(faulty.url, upstream_timeout=30.0)) as client, bounded(5):
        error = error_of(await tool_result(client, "search_tools", {"query": "notes"}))
    assert (error["kind"], error["retryAfterSeconds"]) == ("rate_limited", 12.0)
    assert len(faulty.upstream.seen("tools/list")) == 1


async def test_listing_retries_of_slow_pages_stay_within_the_deadline(faulty):
    faulty.upstream.fault("tools/list", Fault.delay(TIMEOUT * 0.9))  # each page just in time
    faulty.upstream.page_size = 1  # eight pages
    async with proxy_client(settings(faulty.url, list_retries=3)) as client, bounded(TIMEOUT + 3):
        error = error_of(await tool_result(client, "search_tools", {"query": "notes"}))
    assert error["kind"] == "timeout"


async def test_listing_that_hangs_on_every_attempt_stays_within_the_deadline(faulty):
    faulty.upstream.fault("tools/list", Fault.hang())
    async with proxy_client(settings(faulty.url, list_retries=3)) as client, bounded(TIMEOUT + 3):
        error = error_of(await tool_result(client, "search_tools", {"query": "notes"}))
    assert error["kind"] == "timeout"


@pytest.mark.parametrize("fault", [Fault.not_json(), Fault.sse_cut(), Fault.huge(8_000_000)])
async def test_a_broken_listing_is_an_error_and_not_cached(faulty, fault):
    faulty.upstream.fault("tools/list", fault, times=1)
    async with proxy_client(settings(faulty.url, list_retries=0)) as client:
        first = await tool_result(client, "search_tools", {"query": "notes"})
        assert first["isError"]
        second = await tool_result(client, "search_tools", {"query": "notes_get"})
    assert not second["isError"]  # listed again, not served an empty catalog
    assert second["structuredContent"]["tools"][0]["name"] == "notes_get"


@pytest.mark.parametrize("pagination", ["endless", "repeat"])
async def test_pagination_that_never_ends_keeps_what_was_listed(pagination):
    with running_faulty(users=dict(USERS), pagination=pagination, page_size=3) as server:
        async with proxy_client(settings(server.url, max_list_pages=5)) as client, bounded(10):
            result = await tool_result(client, "search_tools", {"query": "notes_get"})
        assert not result["isError"]
        assert result["structuredContent"]["tools"][0]["name"] == "notes_get"
        assert len(server.upstream.seen("tools/list")) <= 5


ODD_TOOLS = [
    tool("notes_get", description="A second notes_get: the first one listed wins."),
    tool("bad_schema_string", schema="not a schema"),
    tool(
        "bad_header", schema={"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}
    ),
    tool("unchecked_schema", schema={"type": "object", "properties": {"n": {"type": 5}}}),
    tool("odd_annotations", annotations="read-only please"),
    tool("odd_fields", description={"text": "not a string"}, title=42),
    {"name": 17, "inputSchema": {"type": "object"}},
    {"description": "no name at all"},
    "not even an object",
]


async def test_duplicate_names_and_invalid_definitions_are_dropped_not_fatal():
    with running_faulty(users=dict(USERS), extra_tools=ODD_TOOLS) as server:
        async with proxy_client(settings(server.url)) as client:
            found = await tool_result(client, "search_tools", {"query": "notes_get", "limit": 25})
            assert not found["isError"], found
            described = await tool_result(
                client,
                "describe_tool",
                {"names": ["notes_get", "bad_schema_string", "bad_header", "odd_annotations", "odd_fields"]},
            )
            assert not described["isError"], described
            data = described["structuredContent"]
            notes = [t for t in data["tools"] if t["name"] == "notes_get"]
            assert len(notes) == 1 and notes[0]["description"] == "notes get."
            assert {"bad_schema_string", "bad_header"} <= set(data.get("unknown", []))
            # Odd fields are ignored, not fatal; annotations that are not an object mark no read.
            odd = {t["name"]: t for t in data["tools"]}
            assert odd["odd_annotations"]["readOnly"] is False
            assert isinstance(odd["odd_fields"]["description"], str)
            # A schema the proxy cannot use to check is left to the upstream to judge.
            unchecked = await read_call(client, "unchecked_schema", {"n": 1})
            assert not unchecked["isError"], unchecked


# -- one bad call among many


async def test_call_read_tools_isolates_a_hanging_a_huge_and_a_failing_call(faulty):
    faulty.upstream.fault("slow_tool", Fault.hang())
    faulty.upstream.fault("huge_tool", Fault.huge(8_000_000))
    faulty.upstream.fault("broken_tool", Fault.status_code(502))
    calls = [
        {"name": "slow_tool"},
        {"name": "huge_tool"},
        {"name": "broken_tool"},
        {"name": "notes_get", "arguments": {"id": 5}},
    ]
    async with proxy_client(settings(faulty.url)) as client, bounded(TIMEOUT + 4):
        result = await tool_result(client, "call_read_tools", {"calls": calls})
    texts = [block["text"] for block in result["content"] if block["type"] == "text"]
    assert texts[0].startswith("[1] slow_tool: failed")
    assert any(t.startswith("[2] huge_tool: failed") for t in texts)
    assert any(t.startswith("[3] broken_tool: failed") for t in texts)
    assert any(t.startswith("[4] notes_get: ok") for t in texts)
    ok = json.loads(texts[texts.index("[4] notes_get: ok") + 1])
    assert ok == {"tool": "notes_get", "user": "alice", "arguments": {"id": 5}}
    assert result["isError"] is False  # one good answer among them


async def test_call_read_tools_of_many_large_results_fits_one_response(faulty):
    faulty.upstream.fault("huge_tool", Fault.huge(3_000_000))
    calls = [{"name": "huge_tool"}] * 4  # 12 MB together, each under max_result_bytes alone
    async with proxy_client(settings(faulty.url, max_result_bytes=5_000_000)) as client:
        reply = await client.post("/mcp", **call("call_read_tools", {"calls": calls}))
    assert reply.status_code == 200
    assert len(reply.content) < LAMBDA_RESPONSE_LIMIT
    texts = [block["text"] for block in reply.json()["result"]["content"]]
    assert sum("it was cut" in text for text in texts) == 4  # each one says it was cut
    assert [t for t in texts if t.endswith("huge_tool: ok")] == [f"[{n}] huge_tool: ok" for n in range(1, 5)]


async def test_a_hanging_call_does_not_hold_up_other_callers(faulty):
    faulty.upstream.fault("slow_tool", Fault.hang())
    config = settings(faulty.url, upstream_timeout=20)
    async with proxy_client(config) as alice, proxy_client(config, token="tok-bob") as bob:
        await tool_result(alice, "search_tools", {"query": "notes"})  # alice's catalog is listed
        hanging = asyncio.create_task(read_call(alice, "slow_tool"))
        await asyncio.sleep(0.2)
        async with bounded(5):
            for _ in range(5):
                assert not (await read_call(bob, "notes_get", {"id": 2}))["isError"]
                assert not (await read_call(alice, "notes_get", {"id": 3}))["isError"]
        assert not hanging.done()
        hanging.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await hanging


# -- one caller's failure stays with that caller; a call reaches the upstream at most once


@pytest.mark.parametrize("status", [400, 404, 405])
async def test_a_write_answered_with_a_plain_4xx_is_sent_once_and_changes_nothing_for_others(faulty, status):
    faulty.upstream.fault("notes_delete", Fault.status_code(status), times=1)  # a JSON body, not JSON-RPC
    async with (
        proxy_client(settings(faulty.url)) as alice,
        proxy_client(settings(faulty.url), "tok-bob") as bob,
    ):
        await tool_result(alice, "search_tools", {"query": "notes"})
        result = await tool_result(alice, "call_write_tool", {"name": "notes_delete", "arguments": {"id": 1}})
        error = error_of(result)
        assert (error["kind"], error["status"], error["tool"]) == ("bad_response", status, "notes_delete")
        assert len(faulty.upstream.seen("tools/call")) == 1  # not re-sent after any era switch
        # Every caller, alice too, is still served in the era the upstream speaks.
        assert not (await read_call(bob, "notes_get", {"id": 2}))["isError"]
        assert not (await read_call(alice, "notes_get", {"id": 3}))["isError"]
    assert faulty.upstream.seen("initialize") == []


async def test_a_catalog_too_large_for_one_caller_fails_that_caller_only():
    huge = [hostile_tool(f"bulk_{n}", description="padding " * 1_000) for n in range(200)]  # ~1.6 MB
    with running_hostile(catalogs={"Bearer tok-alice": huge}) as server:
        config = settings(server.url, max_catalog_bytes=500_000)
        async with proxy_client(config) as alice, proxy_client(config, "tok-bob") as bob:
            for _ in range(2):  # a refused catalog is not cached, neither as empty nor as the error
                error = error_of(await tool_result(alice, "search_tools", {"query": "bulk"}))
                assert error["kind"] == "too_large" and "max_catalog_bytes" in error["message"]
                found = await tool_result(bob, "search_tools", {"query": "notes"})
                assert {t["name"] for t in found["structuredContent"]["tools"]} == {
                    "notes_get",
                    "notes_delete",
                }
