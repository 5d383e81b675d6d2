"""A listing that began before a revocation and ends after it never brings the catalog back.

Three execution environments share one table (dynalite) and the official SDK upstream. One
renews a caller's stale catalog with a slow listing; while it runs the upstream revokes the
token and another environment records the refusal (a tombstone). The slow listing, stamped
when it began, can neither replace the tombstone nor be served, and a cold environment lists
and is refused instead of serving the revoked token's search.
"""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from fixtures.clock import Clock
from fixtures.sdk_upstream import running_upstream
from toolsearch.app import catalog_store
from toolsearch.aws.lambda_support import catalog_tier
from toolsearch.callers.identity import Caller
from toolsearch.ops.telemetry import Telemetry
from toolsearch.search.index import make_indexer
from toolsearch.settings import Settings
from toolsearch.upstream import Upstream, UpstreamError

pytestmark = pytest.mark.npm

TTL = 600.0


async def until(condition, seconds: float = 20.0) -> None:
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.01)


@pytest.fixture
def sdk_upstream():
    """The SDK fixture listing every tool in one page: the slow listing is one admitted request."""
    with running_upstream(page_size=1000) as upstream:
        yield upstream


async def test_a_slow_listing_that_straddles_a_revocation_is_neither_stored_nor_served(
    sdk_upstream, dynalite, dynamo_table, monkeypatch
):
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynalite.endpoint_url)
    settings = Settings(
        upstream=sdk_upstream.url,
        catalog_ttl=TTL,
        list_retries=0,
        dynamodb_table=dynamo_table,
        upstream_timeout=20,
    )
    clock = Clock()
    clients, stores = [], []
    for _ in range(3):
        http = httpx.AsyncClient()
        clients.append(http)
        upstream = Upstream(sdk_upstream.url, settings.upstream, http=http)
        shared = catalog_tier(settings, Telemetry(), clock=clock)
        stores.append(catalog_store(settings, upstream, make_indexer(None), shared=shared, clock=clock))
    renewing, refusing, cold = stores
    token = "straddled"
    who = Caller.from_header(sdk_upstream.url, f"Bearer {token}")
    try:
        await renewing.get(who)  # listed and shared
        await refusing.get(who)  # read from the table: this environment holds it too

        clock.now += TTL + 1
        sdk_upstream.gate.held_lists = threading.Event()
        lists_before = sum(1 for r in sdk_upstream.requests if r.rpc_method == "tools/list")
        await renewing.get(who)  # stale: served, and a refresh begins (admitted, then held)
        await until(
            lambda: sum(1 for r in sdk_upstream.requests if r.rpc_method == "tools/list") > lists_before
        )

        clock.now += 10
        sdk_upstream.gate.revoked.add(token)
        await refusing.forget(who.key)  # what a call the upstream refused with 401 does
        clock.now += 10
        sdk_upstream.gate.held_lists.set()  # the slow listing ends after the refusal
        await until(lambda: not renewing._loading)

        assert renewing.cached(who.key) is None
        heads = [item for item in dynalite.scan(dynamo_table) if item["pk"]["S"] == who.key]
        assert [item["kind"]["S"] for item in heads] == ["forgotten"]
        with pytest.raises(UpstreamError) as refused:
            await cold.get(who)  # lists, is refused: the revoked catalog is not served
        assert refused.value.kind == "unauthorized"
    finally:
        sdk_upstream.gate.held_lists = None
        sdk_upstream.gate.revoked.discard(token)
        for http in clients:
            await http.aclose()
