"""Isolation and secrets: many callers with their own catalogs, in memory and through DynamoDB.

Sixty callers with distinct tokens run at once; the upstream shows each one a
private tool and answers each call with the user it ran for. No caller ever
gets another's tool, search hit or result, whether the catalog comes from warm
memory or, in a second cold proxy, from DynamoDB (dynalite on loopback). The
token appears in no log line, metric, DynamoDB item or error message. A failed
listing is never cached; random tokens grow neither memory nor the table. When
DynamoDB is stopped, throttles or holds a corrupt item, requests still succeed
from memory or the upstream, and a corrupt item is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from fixtures.dynalite import REGION, Dynalite
from fixtures.faulty_upstream import Fault, RunningFaulty, running_faulty
from fixtures.logs import LogCapture, capture_logs
from fixtures.mcp_wire import call
from fixtures.servers import serve_in_thread
from toolsearch.app import Proxy, build_proxy
from toolsearch.callers.identity import caller_key
from toolsearch.catalogs.cache.dynamo import DynamoSharedTier
from toolsearch.settings import Settings

CALLERS = 60
TOKENS = {f"iso-{secrets.token_hex(8)}-{n:02d}": f"user{n:02d}" for n in range(CALLERS)}
GUARD = 120  # seconds: a hang fails the test instead of stalling the suite (not a speed claim)


class Metrics(list):
    """A telemetry sink keeping every metric event."""

    def __call__(self, name: str, value: float, dimensions: dict[str, str]) -> None:
        self.append((name, value, dict(dimensions)))


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningFaulty]:
    with running_faulty(users=dict(TOKENS)) as server:
        yield server


@pytest.fixture
def captured() -> Iterator[LogCapture]:
    with capture_logs() as handler:
        yield handler


def settings(url: str, **changes: Any) -> Settings:
    return Settings(upstream=url, embedder="none", upstream_timeout=10.0).replace(**changes)


def store(table: str, endpoint_url: str, events: list[str] | None = None) -> DynamoSharedTier:
    return DynamoSharedTier(
        table,
        ttl_seconds=600,
        endpoint_url=endpoint_url,
        region_name=REGION,
        on_event=(events.append if events is not None else None),
    )


@contextlib.asynccontextmanager
async def client_of(proxy: Proxy) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app), base_url="http://proxy", timeout=60
    ) as client:
        yield client


def post_as(client: httpx.AsyncClient, token: str, name: str, arguments: dict) -> Any:
    request = call(name, arguments)
    headers = {**request["headers"], "Authorization": f"Bearer {token}"}
    return client.post("/mcp", json=request["json"], headers=headers)


async def tool(client: httpx.AsyncClient, token: str, name: str, arguments: dict) -> tuple[dict, str]:
    reply = await post_as(client, token, name, arguments)
    assert reply.status_code == 200, reply.text
    return reply.json()["result"], reply.text


async def session(client: httpx.AsyncClient, token: str) -> list[str]:
    """One caller's work; asserts they see only their own tools and results. Returns the raw replies."""
    user = TOKENS[token]
    mine = f"private_{user}_report"
    other = f"private_user{(int(user[4:]) + 1) % CALLERS:02d}_report"
    texts = []

    found, text = await tool(client, token, "search_tools", {"query": "private report", "limit": 25})
    texts.append(text)
    names = {hit["name"] for hit in found["structuredContent"]["tools"]}
    assert mine in names
    assert not {n for n in names if n.startswith("private_") and n != mine}

    described, text = await tool(client, token, "describe_tool", {"names": [mine, other]})
    texts.append(text)
    assert [t["name"] for t in described["structuredContent"]["tools"]] == [mine]
    assert described["structuredContent"]["unknown"] == [other]
    assert other not in json.dumps(list(described["structuredContent"]["similar"].values()))

    own, text = await tool(client, token, "call_read_tool", {"name": mine})
    texts.append(text)
    assert own["structuredContent"]["user"] == user

    foreign, text = await tool(client, token, "call_read_tool", {"name": other})
    texts.append(text)
    assert foreign["structuredContent"]["error"]["kind"] == "unknown_tool"

    batch, text = await tool(
        client,
        token,
        "call_read_tools",
        {"calls": [{"name": "notes_get", "arguments": {"id": 1}}, {"name": mine}]},
    )
    texts.append(text)
    results = [json.loads(b["text"]) for b in batch["content"] if b["text"].startswith("{")]
    assert [r["user"] for r in results] == [user, user]
    return texts


async def all_sessions(proxy: Proxy) -> list[str]:
    async with client_of(proxy) as client, asyncio.timeout(GUARD):
        replies = await asyncio.gather(*(session(client, token) for token in TOKENS))
    return [text for texts in replies for text in texts]


def assert_no_token_in(texts: list[str], what: str) -> None:
    for text in texts:
        for token in TOKENS:
            assert token not in text, f"a token appears in {what}"


# -- many callers at once


async def test_sixty_concurrent_callers_each_see_only_their_own_catalog_in_memory(upstream, captured):
    proxy = build_proxy(settings(upstream.url))
    metrics = Metrics()
    proxy.telemetry.add_sink(metrics)
    replies = await all_sessions(proxy)
    assert len(proxy.catalogs) == CALLERS  # one catalog each, listed once each
    again = await all_sessions(proxy)  # now all from warm memory
    assert_no_token_in(replies + again, "a reply")
    assert captured.lines and metrics, "nothing was logged or counted: the check below would prove nothing"
    assert_no_token_in(captured.lines, "a log line")
    assert_no_token_in([repr(metrics), repr(proxy.telemetry.counts)], "a metric")
    await proxy.upstream.aclose()


@pytest.mark.npm
async def test_sixty_concurrent_callers_each_see_only_their_own_catalog_through_dynamodb(
    upstream, dynalite, dynamo_table, captured
):
    warm = build_proxy(settings(upstream.url), shared=store(dynamo_table, dynalite.endpoint_url))
    replies = await all_sessions(warm)
    heads = [item for item in dynalite.scan(dynamo_table) if item["kind"]["S"] == "head"]
    assert len(heads) == CALLERS

    # A second execution environment, cold: every catalog comes from DynamoDB, none from the upstream.
    listed_before = len(upstream.upstream.seen("tools/list"))
    events: list[str] = []
    cold = build_proxy(settings(upstream.url), shared=store(dynamo_table, dynalite.endpoint_url, events))
    replies += await all_sessions(cold)
    assert len(upstream.upstream.seen("tools/list")) == listed_before
    assert events.count("dynamo_hit") == CALLERS

    assert_no_token_in(replies, "a reply")
    assert_no_token_in(dynalite.texts(dynamo_table), "a DynamoDB item")
    assert_no_token_in(captured.lines, "a log line")
    assert_no_token_in([repr(warm.telemetry.counts), repr(cold.telemetry.counts)], "a metric")
    for proxy in (warm, cold):
        await proxy.upstream.aclose()


# -- failures are not remembered


@pytest.mark.npm
@pytest.mark.parametrize("failure", ["401", "403", "503"])
async def test_a_failed_listing_is_not_cached(dynalite, dynamo_table, captured, failure):
    token = f"late-{secrets.token_hex(8)}"
    with running_faulty(users={}) as server:
        if failure == "403":
            server.upstream.users[token] = "late"
            server.upstream.forbidden.add(token)
        elif failure == "503":
            server.upstream.users[token] = "late"
            server.upstream.fault("tools/list", Fault.status_code(503), times=10)
        proxy = build_proxy(
            settings(server.url, list_retries=0), shared=store(dynamo_table, dynalite.endpoint_url)
        )
        async with client_of(proxy) as client:
            refused = await post_as(client, token, "search_tools", {"query": "notes"})
            if failure == "503":
                assert refused.json()["result"]["structuredContent"]["error"]["kind"] == "unavailable"
            else:
                assert refused.status_code == int(failure)
            assert token not in refused.text and token not in repr(refused.headers)
            assert len(proxy.catalogs) == 0
            assert dynalite.scan(dynamo_table) == []

            # The upstream now lets the caller in: the next request lists again and succeeds.
            server.upstream.users[token] = "late"
            server.upstream.forbidden.clear()
            server.upstream.clear()
            found, _text = await tool(client, token, "search_tools", {"query": "private report"})
            assert "private_late_report" in {hit["name"] for hit in found["structuredContent"]["tools"]}
            assert len(server.upstream.seen("tools/list")) == 1
        await proxy.upstream.aclose()
    assert_no_token_in_line = [line for line in captured.lines if token in line]
    assert assert_no_token_in_line == []


@pytest.mark.npm
async def test_random_tokens_grow_neither_memory_nor_the_table(upstream, dynalite, dynamo_table):
    proxy = build_proxy(
        settings(upstream.url, catalog_memory_entries=16), shared=store(dynamo_table, dynalite.endpoint_url)
    )
    async with client_of(proxy) as client, asyncio.timeout(GUARD):
        # Real callers, more than memory holds: memory stays at its bound (the table at its TTL).
        await asyncio.gather(*(session(client, token) for token in TOKENS))
        assert len(proxy.catalogs) == 16
        listed = dynalite.scan(dynamo_table)
        # Tokens the upstream refuses: nothing is kept anywhere.
        bogus = [f"random-{secrets.token_hex(12)}" for _ in range(200)]
        replies = await asyncio.gather(*(post_as(client, t, "search_tools", {"query": "x"}) for t in bogus))
        assert {reply.status_code for reply in replies} == {401}
        assert len(proxy.catalogs) == 16
        assert dynalite.scan(dynamo_table) == listed
        # Callers listed before are never held back by the strangers' refusals, in memory or not.
        await asyncio.gather(*(session(client, token) for token in TOKENS))
    assert len(proxy.catalogs) == 16
    assert proxy.catalogs._loading == {}  # no load left behind
    await proxy.upstream.aclose()


# -- DynamoDB faults


@pytest.mark.npm
async def test_dynamodb_stopped_mid_test_requests_still_succeed(upstream, dummy_aws_env):
    server = Dynalite().start()
    try:
        table = server.create_table()
        first = list(TOKENS)[:10]
        events: list[str] = []
        warm = build_proxy(settings(upstream.url), shared=store(table, server.endpoint_url, events))
        async with client_of(warm) as client, asyncio.timeout(GUARD):
            await asyncio.gather(*(session(client, token) for token in first))
            assert events.count("dynamo_put") == 10
            server.stop()
            # From memory, for callers already seen; from the upstream for new ones, while the table is down.
            await asyncio.gather(*(session(client, token) for token in list(TOKENS)[:20]))
        assert "dynamo_error" in events

        cold_events: list[str] = []
        cold = build_proxy(settings(upstream.url), shared=store(table, server.endpoint_url, cold_events))
        async with client_of(cold) as client, asyncio.timeout(GUARD):
            await asyncio.gather(*(session(client, token) for token in first))
        assert cold_events.count("dynamo_error") >= 10 and "dynamo_hit" not in cold_events
    finally:
        server.stop()
    for proxy in (warm, cold):
        await proxy.upstream.aclose()


async def _throttling_dynamodb(scope: dict, receive: Any, send: Any) -> None:
    """Answers every DynamoDB call as DynamoDB does when it throttles."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    body = json.dumps(
        {
            "__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException",
            "message": "Rate of requests exceeds",
        }
    ).encode()
    headers = [(b"content-type", b"application/x-amz-json-1.0"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.mark.npm
async def test_dynamodb_throttling_falls_back_to_the_upstream(upstream, dummy_aws_env):
    events: list[str] = []
    with serve_in_thread(_throttling_dynamodb) as endpoint:
        proxy = build_proxy(settings(upstream.url), shared=store("catalogs", endpoint, events))
        async with client_of(proxy) as client, asyncio.timeout(GUARD):
            await asyncio.gather(*(session(client, token) for token in list(TOKENS)[:10]))
    assert events.count("dynamo_throttled") >= 20  # a read and a write per caller, at least
    await proxy.upstream.aclose()


def _corrupt_checksum(item: dict) -> None:
    item["sha256"] = {"S": "0" * 64}


def _not_a_catalog(item: dict) -> None:
    import hashlib

    blob = zlib.compress(b'{"not": "a catalog"}')
    item.update(
        data={"B": blob}, chunks={"N": "0"}, size={"N": "20"}, sha256={"S": hashlib.sha256(blob).hexdigest()}
    )


@pytest.mark.npm
@pytest.mark.parametrize("corrupt", [_corrupt_checksum, _not_a_catalog])
async def test_a_corrupt_item_is_replaced_not_served(upstream, dynalite, dynamo_table, corrupt):
    token = next(iter(TOKENS))
    key = caller_key(upstream.url, f"Bearer {token}")
    first = build_proxy(settings(upstream.url), shared=store(dynamo_table, dynalite.endpoint_url))
    async with client_of(first) as client:
        await session(client, token)
    client_db = dynalite.client()
    head = client_db.get_item(TableName=dynamo_table, Key={"pk": {"S": key}})["Item"]
    corrupt(head)
    client_db.put_item(TableName=dynamo_table, Item=head)

    listed = len(upstream.upstream.seen("tools/list"))
    second = build_proxy(settings(upstream.url), shared=store(dynamo_table, dynalite.endpoint_url))
    async with client_of(second) as client:
        await session(client, token)  # served correctly, from the upstream
    assert len(upstream.upstream.seen("tools/list")) == listed + 1
    replaced = await store(dynamo_table, dynalite.endpoint_url).get(key)
    assert replaced is not None and b"private_user00_report" in replaced.data

    third = build_proxy(settings(upstream.url), shared=store(dynamo_table, dynalite.endpoint_url))
    async with client_of(third) as client:
        await session(client, token)  # from the replaced item
    assert len(upstream.upstream.seen("tools/list")) == listed + 1
    for proxy in (first, second, third):
        await proxy.upstream.aclose()
