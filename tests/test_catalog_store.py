"""Catalog caching: fresh, stale-while-refreshing, expired, single-flight, bounded, failures never kept."""

from __future__ import annotations

import asyncio
import contextlib
import gc

import httpx
import pytest

from fixtures.clock import Clock
from fixtures.demo_upstream import DemoUpstream, caller
from toolsearch.app import catalog_store
from toolsearch.callers.identity import Caller, caller_key
from toolsearch.catalogs.store import CatalogStore
from toolsearch.search.index import make_indexer
from toolsearch.server.demo import DEMO_URL
from toolsearch.settings import Settings
from toolsearch.upstream import Upstream, UpstreamError


def make_store(transport: DemoUpstream, clock: Clock, **settings) -> CatalogStore:
    config = Settings(catalog_ttl=600, catalog_max_age=3600, list_retries=0, **settings)
    upstream = Upstream(DEMO_URL, config.upstream, http=httpx.AsyncClient(transport=transport))
    return catalog_store(config, upstream, make_indexer(None), clock=clock)


async def test_key_is_a_hash_never_the_token():
    key = caller_key("https://up.example/mcp", "Bearer secret-token")
    assert "secret" not in key and len(key) == 64
    assert key != caller_key("https://other.example/mcp", "Bearer secret-token")
    assert key != caller_key("https://up.example/mcp", "Bearer secret-token2")


async def test_fresh_catalog_is_served_from_memory():
    transport, clock = DemoUpstream(), Clock()
    store = make_store(transport, clock)
    first = await store.get(caller("a"))
    clock.now += 599
    assert await store.get(caller("a")) is first
    assert transport.lists == 1


async def test_stale_catalog_is_served_while_one_refresh_runs():
    transport, clock = DemoUpstream(), Clock()
    store = make_store(transport, clock)
    first = await store.get(caller("a"))
    clock.now += 601
    transport.gate = asyncio.Event()
    stale = await asyncio.gather(*(store.get(caller("a")) for _ in range(5)))
    assert all(entry is first for entry in stale)  # answered at once, from the old catalog
    transport.gate.set()
    for _ in range(100):
        await asyncio.sleep(0.01)
        if (await store.get(caller("a"))) is not first:
            break
    assert (await store.get(caller("a"))) is not first
    assert transport.lists == 2  # five stale reads started one refresh


async def test_expired_catalog_is_listed_again_before_answering():
    transport, clock = DemoUpstream(), Clock()
    store = make_store(transport, clock)
    first = await store.get(caller("a"))
    clock.now += 3601
    assert await store.get(caller("a")) is not first
    assert transport.lists == 2


async def test_concurrent_first_requests_list_once():
    transport, clock = DemoUpstream(), Clock()
    store = make_store(transport, clock)
    entries = await asyncio.gather(*(store.get(caller("a")) for _ in range(10)))
    assert len({id(entry) for entry in entries}) == 1
    assert transport.lists == 1


async def test_a_failed_listing_is_not_cached():
    transport, clock = DemoUpstream(), Clock()
    store = make_store(transport, clock)
    transport.fail_with = 503
    with pytest.raises(UpstreamError):
        await store.get(caller("a"))
    assert len(store) == 0
    transport.fail_with = None
    assert len((await store.get(caller("a"))).catalog) > 300


async def test_a_failed_background_refresh_keeps_the_stale_catalog():
    transport, clock = DemoUpstream(), Clock()
    store = make_store(transport, clock)
    first = await store.get(caller("a"))
    clock.now += 601
    transport.fail_with = 500
    assert await store.get(caller("a")) is first
    await asyncio.sleep(0.05)
    assert await store.get(caller("a")) is first


async def test_memory_holds_at_most_the_configured_catalogs():
    transport, clock = DemoUpstream(), Clock()
    store = make_store(transport, clock, catalog_memory_entries=3)
    for token in "abcde":
        await store.get(caller(token))
    assert len(store) == 3
    lists = transport.lists
    await store.get(caller("e"))  # recent: still there
    assert transport.lists == lists
    await store.get(caller("a"))  # evicted first: listed again
    assert transport.lists == lists + 1


async def test_a_load_whose_only_waiter_was_cancelled_fails_without_an_unretrieved_exception():
    gate = asyncio.Event()

    class FailingSource:
        async def list_tools(self, authorization):
            await gate.wait()
            raise UpstreamError("unavailable", "the upstream failed with HTTP 503", status=503)

    store = catalog_store(Settings(list_retries=0), FailingSource(), make_indexer(None))
    loop = asyncio.get_running_loop()
    reported: list[dict] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        waiter = asyncio.create_task(store.get(caller("a")))
        while not store._loading:
            await asyncio.sleep(0)
        load = next(iter(store._loading.values()))
        waiter.cancel()
        await asyncio.wait([waiter])
        gate.set()
        await asyncio.wait([load], timeout=10)
        assert load.done()
        del load, waiter
        for _ in range(3):
            gc.collect()
            await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert not [c for c in reported if "never retrieved" in str(c.get("message"))]


async def test_an_anonymous_401_is_answered_again_briefly_without_the_upstream():
    transport, clock = DemoUpstream(), Clock()
    store = make_store(transport, clock, unauthorized_ttl=5)
    anonymous = Caller(None, caller_key(DEMO_URL, None))
    transport.fail_with = 401

    for _ in range(3):
        with pytest.raises(UpstreamError) as refused:
            await store.get(anonymous)
        assert refused.value.kind == "unauthorized"
        assert refused.value.www_authenticate == 'Bearer error="invalid_token"'  # the same challenge
    assert transport.requests == 1  # anonymous traffic reached the upstream once

    for _ in range(2):  # a refused token is asked every time: the upstream may admit it any moment
        with pytest.raises(UpstreamError):
            await store.get(caller("not-yet-valid"))
    assert transport.requests == 3

    transport.fail_with = None
    assert len((await store.get(caller("signed-in"))).catalog) > 300  # signing in is asked at once
    assert len((await store.get(caller("not-yet-valid"))).catalog) > 300
    clock.now += 5.1
    assert len((await store.get(anonymous)).catalog) > 300  # and the refusal is brief


async def test_a_rate_limited_listing_is_answered_again_until_its_retry_after_without_the_upstream():
    # A gateway counts each early retry as one more violation towards locking out the proxy's one
    # address, and with it every caller: the caller is told to wait, and the upstream is not asked.
    transport, clock = DemoUpstream(), Clock()
    store = make_store(transport, clock)
    transport.fail_with, transport.retry_after = 429, 30

    with pytest.raises(UpstreamError) as first:
        await store.get(caller("busy"))
    assert (first.value.kind, first.value.retry_after) == ("rate_limited", 30)
    asked = transport.requests
    clock.now += 10
    with pytest.raises(UpstreamError) as again:
        await store.get(caller("busy"))
    assert again.value.kind == "rate_limited" and again.value.retry_after == pytest.approx(20)
    assert transport.requests == asked  # not asked again before its Retry-After

    transport.fail_with = None
    assert len((await store.get(caller("other"))).catalog) > 300  # another caller is not held
    clock.now += 20.1
    assert len((await store.get(caller("busy"))).catalog) > 300  # asked again once the time is up


async def test_remembering_anonymous_refusals_can_be_turned_off():
    transport, clock = DemoUpstream(), Clock()
    transport.fail_with = 401
    store = make_store(transport, clock, unauthorized_ttl=0)
    for _ in range(2):
        with pytest.raises(UpstreamError):
            await store.get(Caller(None, caller_key(DEMO_URL, None)))
    assert transport.requests == 2


async def _refresh(store, who):
    with contextlib.suppress(UpstreamError):
        await store.refresh(who)


async def _told_outdated(store, who):
    store.invalidate(who.key)  # what a call answered -32602 or "unknown tool" does


@pytest.mark.parametrize("drop", [_refresh, _told_outdated], ids=["refresh", "upstream_said_outdated"])
@pytest.mark.parametrize("status", [503, 500, 429])
async def test_a_catalog_said_outdated_during_an_outage_is_served_until_a_listing_succeeds(drop, status):
    transport, clock = DemoUpstream(), Clock()
    store = make_store(transport, clock)
    held = await store.get(caller("a"))
    transport.fail_with = status
    await drop(store, caller("a"))
    for _ in range(3):  # the first lists (and fails), the next are served and renew in the background
        assert await store.get(caller("a")) is held
    transport.fail_with = None
    for _ in range(100):
        await asyncio.sleep(0.01)
        if await store.get(caller("a")) is not held:
            break
    assert (await store.get(caller("a"))) is not held  # listed again once the upstream could


@pytest.mark.parametrize("drop", [_refresh, _told_outdated], ids=["refresh", "upstream_said_outdated"])
@pytest.mark.parametrize("status", [401, 403])
async def test_a_catalog_said_outdated_is_dropped_when_the_upstream_refuses_the_caller(drop, status):
    transport, clock = DemoUpstream(), Clock()
    store = make_store(transport, clock)
    await store.get(caller("a"))
    transport.fail_with = status
    await drop(store, caller("a"))
    with pytest.raises(UpstreamError) as refused:
        await store.get(caller("a"))
    assert refused.value.status == status
    assert store.cached(caller("a").key) is None
