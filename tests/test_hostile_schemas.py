"""Schemas and arguments built to stall or crash the argument check, through the proxy's endpoint.

The upstream is the fault-injecting fixture with extra tools: one whose schema
holds a regular expression that backtracks exponentially, one whose check is
long, ones nested past what recursive code can follow. Every such call must
come back as a structured error without a 500; arguments that could not be
checked never reach the upstream; the rest of the catalog and the other
callers carry on. `bounded()` is a deadline, not a speed claim: generous,
and far below what an unbounded check takes (Python's `re` needs minutes for
the 30 `a`s below, twice as long with each more).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from fixtures.faulty_upstream import FaultyUpstream, RunningFaulty, running_faulty, tool
from fixtures.mcp_wire import call
from fixtures.servers import start_server
from toolsearch.app import build_proxy
from toolsearch.settings import Settings
from toolsearch.validation.nesting import MAX_DEPTH, MAX_RELAYED_DEPTH

ALICE, BOB = "tok-alice", "tok-bob"
USERS = {ALICE: "alice", BOB: "bob"}
BACKTRACKING = "^(a+)+$"  # exponential for a backtracking engine on "aaa…a!"
LOOKAHEAD = "^(a|a)+(?=b)"  # exponential too, and RE2 cannot compile it (lookahead)
BRANCHES = 200


def nested_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def nested_value(levels: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def string_tool(name: str, pattern: str) -> dict[str, Any]:
    return tool(name, schema={"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}})


HOSTILE_TOOLS = [
    string_tool("redos_check", BACKTRACKING),
    string_tool("lookahead_check", LOOKAHEAD),
    string_tool("named_group_check", "^(?<word>[a-z]+)$"),  # ECMA-262 syntax Python's re rejects
    tool(
        "redos_keys",
        schema={"type": "object", "patternProperties": {BACKTRACKING: {}}, "additionalProperties": False},
    ),
    tool(
        # Every row is checked against 200 alternatives before the last one fits: a long, valid check.
        "slow_check",
        schema={
            "type": "object",
            "properties": {
                "rows": {
                    "type": "array",
                    "items": {"anyOf": [{"type": "object", "required": [f"k{i}"]} for i in range(BRANCHES)]},
                }
            },
        },
    ),
    tool(
        # A tree: each level's `n` must be an integer, at any depth.
        "tree_check",
        schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "additionalProperties": {"$ref": "#"},
        },
    ),
    tool("open_check", schema={"type": "object"}),
]


def settings(url: str, **changes: Any) -> Settings:
    return Settings(upstream=url, embedder="none", upstream_timeout=5.0, list_retries=0).replace(**changes)


@pytest.fixture
def faulty() -> Iterator[RunningFaulty]:
    with running_faulty(users=dict(USERS), extra_tools=HOSTILE_TOOLS) as server:
        yield server


@contextlib.asynccontextmanager
async def proxy_clients(config: Settings) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """One proxy, one client per caller."""
    proxy = build_proxy(config)
    transport = httpx.ASGITransport(app=proxy.app)
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            token: await stack.enter_async_context(
                httpx.AsyncClient(
                    transport=transport,
                    base_url="http://proxy",
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=120,
                )
            )
            for token in USERS
        }
        yield clients
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


async def read_call(client: httpx.AsyncClient, name: str, arguments: Any) -> dict[str, Any]:
    return await tool_result(client, "call_read_tool", {"name": name, "arguments": arguments})


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is True, result
    return result["structuredContent"]["error"]


def called(server: RunningFaulty, name: str) -> list[Any]:
    return [
        server.upstream.arguments_of(seen) for seen in server.upstream.seen("tools/call") if seen.tool == name
    ]


# -- item 3: regular expressions and long checks


async def test_a_backtracking_pattern_is_checked_in_linear_time(faulty):
    async with proxy_clients(settings(faulty.url)) as clients, bounded(10):
        alice = clients[ALICE]
        refused = error_of(await read_call(alice, "redos_check", {"s": "a" * 30 + "!"}))
        assert refused["kind"] == "invalid_arguments", refused
        assert "does not match" in refused["problems"][0]
        keys = error_of(await read_call(alice, "redos_keys", {"a" * 30 + "!": 1}))
        assert keys["kind"] == "invalid_arguments", keys
        fits = await read_call(alice, "redos_check", {"s": "a" * 30})
        assert fits["isError"] is False, fits
    assert called(faulty, "redos_check") == [{"s": "a" * 30}]
    assert called(faulty, "redos_keys") == []


async def test_a_pattern_only_a_backtracking_engine_can_match_is_cut_at_the_deadline(faulty):
    async with proxy_clients(settings(faulty.url, validation_timeout=0.5)) as clients, bounded(20):
        alice = clients[ALICE]
        stalled = error_of(await read_call(alice, "lookahead_check", {"s": "a" * 30 + "!"}))
        assert stalled["kind"] == "validation_timeout", stalled
        assert "0.5 s" in stalled["message"] and "not called" in stalled["message"]
        # The same pattern on a short string is matched, and refused or passed on as it should be.
        no = error_of(await read_call(alice, "lookahead_check", {"s": "aaa!"}))
        assert no["kind"] == "invalid_arguments", no
        yes = await read_call(alice, "lookahead_check", {"s": "aab"})
        assert yes["isError"] is False, yes
    assert called(faulty, "lookahead_check") == [{"s": "aab"}]


async def test_ecma_named_groups_are_understood_not_left_unchecked(faulty):
    async with proxy_clients(settings(faulty.url)) as clients, bounded(10):
        refused = error_of(await read_call(clients[ALICE], "named_group_check", {"s": "NOT LOWER"}))
        assert refused["kind"] == "invalid_arguments", refused
        fits = await read_call(clients[ALICE], "named_group_check", {"s": "lower"})
        assert fits["isError"] is False, fits
    assert called(faulty, "named_group_check") == [{"s": "lower"}]


async def test_a_check_past_its_deadline_is_refused_never_forwarded(faulty):
    rows = [{f"k{BRANCHES - 1}": 1}] * 3000
    async with proxy_clients(settings(faulty.url, validation_timeout=0.3)) as clients, bounded(30):
        stalled = error_of(await read_call(clients[ALICE], "slow_check", {"rows": rows}))
        assert stalled["kind"] == "validation_timeout", stalled
        # In a batch, only that call is refused.
        batch = await tool_result(
            clients[ALICE],
            "call_read_tools",
            {
                "calls": [
                    {"name": "slow_check", "arguments": {"rows": rows}},
                    {"name": "notes_get", "arguments": {"id": 1}},
                ]
            },
        )
        texts = [block["text"] for block in batch["content"]]
        assert "[1] slow_check: failed" in texts and "[2] notes_get: ok" in texts, texts
    assert called(faulty, "slow_check") == []
    assert called(faulty, "notes_get") == [{"id": 1}]


async def test_another_callers_search_is_answered_while_a_long_check_runs(faulty):
    rows = [{f"k{BRANCHES - 1}": 1}] * 3000  # seconds of checking, far within the deadline below
    async with proxy_clients(settings(faulty.url, validation_timeout=120)) as clients:
        alice, bob = clients[ALICE], clients[BOB]
        async with bounded(30):
            await tool_result(alice, "search_tools", {"query": "slow"})  # alice's catalog is warm
        long_check = asyncio.create_task(read_call(alice, "slow_check", {"rows": rows}))
        async with bounded(30):
            # Bob's catalog is cold: listing it waits on the upstream, while alice's call (no I/O
            # left before its check) starts checking; a check on the event loop would hold bob up.
            found = await tool_result(bob, "search_tools", {"query": "notes"})
        assert found["isError"] is False, found
        assert not long_check.done(), "bob was answered only after alice's check had finished"
        long_check.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await long_check
        async with bounded(30):  # the proxy still answers alice too
            fits = await read_call(alice, "notes_get", {"id": 2})
        assert fits["isError"] is False, fits
    assert called(faulty, "slow_check") == []


# -- item 4: deep schemas and deep arguments


@pytest.mark.parametrize("levels", [33, 100, 1000, 3000])
async def test_a_tool_nested_too_deep_is_dropped_and_the_rest_of_the_catalog_works(levels):
    deep = tool("deep_tool", schema=nested_schema(levels))  # 2 levels of JSON a level of properties
    at_limit = tool("at_limit_tool", schema=nested_schema((MAX_DEPTH - 2) // 2))
    with running_faulty(users=dict(USERS), extra_tools=[deep, at_limit]) as server:
        async with proxy_clients(settings(server.url)) as clients, bounded(20):
            alice = clients[ALICE]
            found = await tool_result(alice, "search_tools", {"query": "notes"})
            assert found["isError"] is False, found
            described = (
                await tool_result(alice, "describe_tool", {"names": ["deep_tool", "at_limit_tool"]})
            )["structuredContent"]
            assert described["unknown"] == ["deep_tool"]
            assert [t["name"] for t in described["tools"]] == ["at_limit_tool"]
            assert error_of(await read_call(alice, "deep_tool", {}))["kind"] == "unknown_tool"
            # The tool at the limit is kept, and its arguments are checked at every level.
            leaf_levels = (MAX_DEPTH - 2) // 2
            wrong = error_of(await read_call(alice, "at_limit_tool", nested_value(leaf_levels, 5)))
            assert wrong["kind"] == "invalid_arguments", wrong
            right = await read_call(alice, "at_limit_tool", nested_value(leaf_levels, "x"))
            assert right["isError"] is False, right
        assert len(called(server, "at_limit_tool")) == 1


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 250, 1000, 5000])
async def test_arguments_nested_too_deep_are_refused_not_forwarded(faulty, levels):
    breaks_schema = nested_value(levels, {"n": "not an integer"})
    async with proxy_clients(settings(faulty.url)) as clients, bounded(20):
        alice = clients[ALICE]
        # Deeper than the proxy relays at all, the call_read_tool arguments around them are refused.
        limit = MAX_DEPTH if levels < MAX_RELAYED_DEPTH else MAX_RELAYED_DEPTH
        for name in ("tree_check", "open_check"):
            refused = error_of(await read_call(alice, name, breaks_schema))
            assert refused["kind"] == "invalid_arguments", refused
            assert f"more than {limit} levels deep" in refused["message"], refused
        # Write calls and batches are refused alike; a batch's other calls still run.
        write = error_of(
            await tool_result(alice, "call_write_tool", {"name": "open_check", "arguments": breaks_schema})
        )
        assert write["kind"] == "invalid_arguments", write
        if levels < MAX_RELAYED_DEPTH:
            batch = await tool_result(
                alice,
                "call_read_tools",
                {
                    "calls": [
                        {"name": "open_check", "arguments": breaks_schema},
                        {"name": "notes_get", "arguments": {"id": 3}},
                    ]
                },
            )
            texts = [block["text"] for block in batch["content"]]
            assert "[2] notes_get: ok" in texts, texts
        # The same tree, within the bound, is checked at every level.
        shallow = error_of(await read_call(alice, "tree_check", nested_value(30, {"n": "not an integer"})))
        assert shallow["kind"] == "invalid_arguments" and "is not of type 'integer'" in shallow["problems"][0]
    assert called(faulty, "tree_check") == [] and called(faulty, "open_check") == []


# -- deep answers from the upstream


class DeepAnswers(FaultyUpstream):
    """Answers `notes_search` with a result, or `notes_get` with a JSON-RPC error whose data,
    nests `levels` deep: written as raw bytes, deeper than Python's own JSON writer could."""

    levels = 10

    def _answer(self, token: str, message: dict, method: str, params: dict, fault: Any) -> dict:
        if method == "tools/call" and params.get("name") == "notes_get":
            error = {"code": -32000, "message": "failed", "data": "__DEEP__"}
            return {"jsonrpc": "2.0", "id": message["id"], "error": error}
        answer = super()._answer(token, message, method, params, fault)
        if method == "tools/call" and params.get("name") == "notes_search":
            answer["result"]["structuredContent"] = "__DEEP__"
        return answer

    async def _respond(self, send: Any, response: dict, fault: Any) -> None:
        deep = "[" * self.levels + "]" * self.levels
        body = json.dumps(response).replace('"__DEEP__"', deep).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


async def test_results_and_errors_nested_near_the_json_limit_are_errors_not_500s():
    upstream = DeepAnswers(users=dict(USERS))
    server = start_server(upstream)
    try:
        # Twenty calls of one caller in a row: no per-caller rate here.
        async with proxy_clients(settings(server.base_url + "/mcp", caller_rate=0)) as clients, bounded(60):
            alice = clients[ALICE]
            # Python reads and writes JSON to about 10,000 levels, less the stack it runs on: somewhere
            # in this range the upstream's answer could be read but the proxy's could not be written.
            for levels in range(9960, 10000, 2):
                upstream.levels = levels
                result = error_of(await read_call(alice, "notes_search", {}))
                assert result["kind"] == "bad_response", result
                failed = error_of(await read_call(alice, "notes_get", {"id": 1}))
                assert failed["kind"] in ("rpc_error", "bad_response"), failed  # bad: too deep to read
            upstream.levels = 20
            fits = await read_call(alice, "notes_search", {})
            assert fits["structuredContent"] == json.loads("[" * 20 + "]" * 20)
    finally:
        server.stop()
