"""Several execution environments sharing one DynamoDB table (dynalite): listings per refresh.

Each environment is what one Lambda execution environment builds: its own upstream
client and CatalogStore, and the DynamoDB tier as the handler makes it
(`lambda_support.catalog_tier`). They share one table and one counting upstream.
Time is a clock the test moves, for the stores and the table's expiry alike.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from fixtures.clock import Clock
from fixtures.demo_upstream import DemoUpstream, caller
from toolsearch.app import catalog_store
from toolsearch.aws.lambda_support import catalog_tier
from toolsearch.catalogs.store import CatalogStore
from toolsearch.ops.telemetry import Telemetry
from toolsearch.search.index import make_indexer
from toolsearch.server.demo import DEMO_URL
from toolsearch.settings import Settings
from toolsearch.upstream import Upstream

pytestmark = pytest.mark.npm

TTL, MAX_AGE = 600.0, 3600.0


@pytest.fixture(autouse=True)
def table_endpoint(dynalite, monkeypatch):
    """The handler's tier finds its table through the usual AWS variable, here dynalite's."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynalite.endpoint_url)


@dataclass
class Environment:
    store: CatalogStore
    telemetry: Telemetry
    http: httpx.AsyncClient

    def busy(self) -> bool:
        return bool(self.store._loading)


@contextlib.asynccontextmanager
async def environments(
    count: int, table: str, transport: DemoUpstream, clock: Clock
) -> AsyncIterator[list[Environment]]:
    config = Settings(
        catalog_ttl=TTL, catalog_max_age=MAX_AGE, list_retries=0, dynamodb_table=table, upstream_timeout=10
    )
    made = []
    for _ in range(count):
        telemetry = Telemetry()
        http = httpx.AsyncClient(transport=transport)
        upstream = Upstream(DEMO_URL, config.upstream, http=http)
        shared = catalog_tier(config, telemetry, clock=clock)
        store = catalog_store(
            config,
            upstream,
            make_indexer(None),
            shared=shared,
            clock=clock,
            on_event=lambda name, t=telemetry: t.count("catalog", event=name),
        )
        made.append(Environment(store, telemetry, http))
    try:
        yield made
    finally:
        for env in made:
            await env.http.aclose()


async def until(condition, seconds: float = 20.0) -> None:
    """Wait (bounded) for `condition()`; fail the test if it never holds."""
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.01)


async def refresh_round(envs: list[Environment], transport: DemoUpstream) -> None:
    """Every environment serves a stale catalog at once; one of them lists while the others go on."""
    transport.gate = asyncio.Event()
    served = await asyncio.gather(*(env.store.get(caller("alice")) for env in envs))
    assert all(entry is not None for entry in served)  # answered from the stale copy, at once
    # The lease holder is held in its listing: every other environment must be done by then.
    await until(lambda: sum(env.busy() for env in envs) <= 1)
    transport.gate.set()
    await until(lambda: not any(env.busy() for env in envs))
    # The next request in each environment picks the new copy up from the table.
    await asyncio.gather(*(env.store.get(caller("alice")) for env in envs))
    await until(lambda: not any(env.busy() for env in envs))


async def test_three_warm_environments_make_one_listing_per_refresh(dynalite, dynamo_table):
    transport, clock = DemoUpstream(), Clock()
    async with environments(3, dynamo_table, transport, clock) as envs:
        for env in envs:
            await env.store.get(caller("alice"))
        assert transport.lists == 1  # the other two read the first one's copy

        for refresh in (1, 2):
            clock.now += TTL + 1
            await refresh_round(envs, transport)
            assert transport.lists == 1 + refresh
            fetched = {env.store.cached(caller("alice").key).catalog.fetched_at for env in envs}
            assert fetched == {clock.now}  # all three serve the one new listing


async def test_three_cold_environments_make_one_listing(dynalite, dynamo_table):
    transport, clock = DemoUpstream(), Clock()
    transport.gate = asyncio.Event()
    async with environments(3, dynamo_table, transport, clock) as envs:
        loads = [asyncio.create_task(env.store.get(caller("alice"))) for env in envs]
        await until(lambda: transport.lists >= 1)
        await asyncio.sleep(0.3)  # the other two look at the table, find nothing, and wait
        transport.gate.set()
        async with asyncio.timeout(30):
            entries = await asyncio.gather(*loads)
    assert transport.lists == 1
    assert len({entry.catalog.fetched_at for entry in entries}) == 1
    waited = sum(env.telemetry.total("catalog", event="catalog_wait_shared") for env in envs)
    assert waited >= 2


async def test_a_stale_shared_copy_is_served_to_a_cold_environment_and_renewed_once(dynalite, dynamo_table):
    transport, clock = DemoUpstream(), Clock()
    async with environments(2, dynamo_table, transport, clock) as (first, second):
        listed = await first.store.get(caller("alice"))
        clock.now += TTL + 1
        served = await second.store.get(caller("alice"))  # cold: the stale copy, not a listing
        assert served.catalog.fetched_at == listed.catalog.fetched_at
        await until(lambda: not second.busy())
        assert transport.lists == 2  # and one refresh behind it
        assert second.store.cached(caller("alice").key).catalog.fetched_at == clock.now


class ReadTooEarly:
    """The real tier, but this environment's next read comes back empty: it was made just before
    another environment saved its copy."""

    def __init__(self, tier) -> None:
        self._tier = tier
        self.early = True

    async def get(self, key):
        if self.early:
            self.early = False
            return None
        return await self._tier.get(key)

    def __getattr__(self, name):
        return getattr(self._tier, name)


async def test_an_environment_that_gets_the_lease_after_another_saved_a_copy_takes_it_and_lists_nothing(
    dynalite, dynamo_table
):
    transport, clock = DemoUpstream(), Clock()
    async with environments(2, dynamo_table, transport, clock) as (first, second):
        await first.store.get(caller("alice"))  # listed, saved, lease released
        assert transport.lists == 1
        second.store._shared = ReadTooEarly(second.store._shared)
        entry = await second.store.get(caller("alice"))
        assert transport.lists == 1
        assert entry is not None and len(entry.catalog) > 0
        clock.now += TTL + 1  # and a refresh whose read was too early alike
        served = await first.store.get(caller("alice"))  # stale: served, and first renews it
        await until(lambda: not first.busy())
        assert served is not None and transport.lists == 2
        second.store._shared = ReadTooEarly(second.store._shared._tier)
        await second.store.get(caller("alice"))
        await until(lambda: not second.busy())
        assert transport.lists == 2
