"""Made-up tokens: what a flood of them costs the upstream, memory and the DynamoDB table.

The official SDK upstream (tests/fixtures/sdk_upstream.py) refuses every `made-up-` token with a
401; dynalite holds the table, through a real boto3 client whose every call is counted. A
thousand distinct tokens, some sent twice, must cost a bounded number of upstream listings
(`stranger_refusals`), keep every per-key map of the proxy bounded, and write no catalog or
tombstone: a stranger never had a catalog to revoke. A caller listed before the flood is
served throughout, and the refusals answered from memory carry the same challenge.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import boto3
import httpx
import pytest

from fixtures.dynalite import REGION
from fixtures.mcp_wire import call
from toolsearch.app import Proxy, build_proxy
from toolsearch.catalogs.cache.dynamo import DynamoSharedTier
from toolsearch.settings import Settings

pytestmark = pytest.mark.npm

TOKENS = 1000
STRANGERS = 20  # stranger_refusals
GUARD = 180  # seconds: a hang fails the test instead of stalling the suite (not a speed claim)


class CountedTable:
    """A boto3 DynamoDB client on dynalite, noting each operation and the kind of item it writes."""

    def __init__(self, endpoint_url: str) -> None:
        self.calls: list[tuple[str, str]] = []
        self.client = boto3.session.Session().client(
            "dynamodb", endpoint_url=endpoint_url, region_name=REGION
        )
        self.client.meta.events.register("before-parameter-build.dynamodb", self._note)

    def _note(self, model: Any, params: dict, **_: Any) -> None:
        kind = params.get("Item", {}).get("kind", {}).get("S", "")
        self.calls.append((model.name, kind))

    def writes(self, *kinds: str) -> list[tuple[str, str]]:
        writing = {"PutItem", "BatchWriteItem", "UpdateItem"}
        return [(op, kind) for op, kind in self.calls if op in writing and (not kinds or kind in kinds)]


@contextlib.asynccontextmanager
async def client_of(proxy: Proxy) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app), base_url="http://proxy", timeout=60
    ) as client:
        yield client


def search_as(client: httpx.AsyncClient, token: str) -> Any:
    request = call("search_tools", {"query": "list contacts"})
    return client.post(
        "/mcp", json=request["json"], headers={**request["headers"], "Authorization": f"Bearer {token}"}
    )


def listings(upstream: Any) -> int:
    return sum(1 for record in upstream.requests if record.rpc_method == "tools/list")


async def test_a_thousand_made_up_tokens_cost_bounded_listings_bounded_memory_and_no_catalog_write(
    sdk_upstream, dynalite, dynamo_table
):
    table = CountedTable(dynalite.endpoint_url)
    shared = DynamoSharedTier(dynamo_table, client=table.client, ttl_seconds=600)
    settings = Settings(
        upstream=sdk_upstream.url,
        embedder="none",
        upstream_timeout=10.0,
        list_retries=0,
        catalog_memory_entries=16,
        stranger_refusals=STRANGERS,
        caller_rate=0,
    )
    proxy = build_proxy(settings, shared=shared)
    async with client_of(proxy) as client, asyncio.timeout(GUARD):
        known = await search_as(client, "alice")  # listed before the flood
        assert known.status_code == 200
        before = listings(sdk_upstream)

        made_up = [f"made-up-{n:04d}" for n in range(TOKENS)]
        replies = []
        for batch in range(0, TOKENS, 10):
            chunk = made_up[batch : batch + 10]
            replies += await asyncio.gather(*(search_as(client, token) for token in chunk))
        replies += await asyncio.gather(*(search_as(client, token) for token in made_up[:100]))  # twice
        assert {reply.status_code for reply in replies} == {401}
        # Answered from the remembered refusal or not, a client is told the same way to sign in.
        assert len({reply.headers["www-authenticate"] for reply in replies}) == 1

        # The upstream was asked for at most `stranger_refusals` of them (plus those in flight
        # when the gate closed: one batch of ten at most).
        assert listings(sdk_upstream) - before <= STRANGERS + 10

        # The caller listed before is still served, from its catalog, during the flood.
        assert (await search_as(client, "alice")).status_code == 200

    store = proxy.catalogs
    assert len(store) == 1
    for marks in (store._forced, store._due, store._forgotten_at, store._refused):
        assert len(marks) == 0
    assert len(store._known) == 1
    # No catalog or tombstone written for a stranger (leases only, one per listing, at most).
    assert table.writes("head", "forgotten", "chunk") == [("PutItem", "head")]  # alice's catalog
    assert len(table.writes("lease")) <= listings(sdk_upstream) - before + 1
    assert dynalite.scan(dynamo_table) and all(
        item["kind"]["S"] == "head" for item in dynalite.scan(dynamo_table)
    )
    await proxy.upstream.aclose()
