"""The DynamoDB catalog tier against a real dynalite on loopback."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import os
import subprocess
import sys
import threading

import pytest

from fixtures.catalogs import tool_definitions
from fixtures.clock import Clock
from fixtures.dynalite import Dynalite
from toolsearch.catalogs.cache.dynamo import DynamoSharedTier, StoredCatalog
from toolsearch.catalogs.catalog import Catalog

pytestmark = pytest.mark.npm

TTL = 3600.0
NOW = 1_800_000_000.0  # unix seconds: the moved clock starts in the present decade
TOKEN = "Bearer sk-live-0123456789abcdef-secret"
KEY = hashlib.sha256(f"{TOKEN}\nhttps://upstream.example/mcp".encode()).hexdigest()


class Events(list):
    def __call__(self, name: str) -> None:
        self.append(name)


@functools.cache
def catalog_bytes(count: int, seed: int = 0, fetched_at: float = 1.0) -> bytes:
    return Catalog.from_definitions(tool_definitions(count, seed), fetched_at=fetched_at).to_json()


def make_store(server, table: str, **kwargs) -> DynamoSharedTier:
    kwargs.setdefault("ttl_seconds", TTL)
    kwargs.setdefault("client", server.client())
    return DynamoSharedTier(table, **kwargs)


def heads(server, table: str) -> list[dict]:
    return [item for item in server.scan(table) if item["kind"]["S"] == "head"]


async def test_small_catalog_round_trips_inline_in_one_item(dynalite, dynamo_table):
    events = Events()
    store = make_store(dynalite, dynamo_table, on_event=events)
    data = catalog_bytes(20)

    assert await store.get(KEY) is None
    await store.put(KEY, data, fetched_at=123.5)

    assert await store.get(KEY) == StoredCatalog(data=data, fetched_at=123.5)
    items = dynalite.scan(dynamo_table)
    assert [item["pk"]["S"] for item in items] == [KEY]
    assert items[0]["chunks"]["N"] == "0"
    assert events == ["dynamo_miss", "dynamo_put", "dynamo_hit"]


async def test_5000_tool_catalog_round_trips_in_chunks(dynalite, dynamo_table):
    store = make_store(dynalite, dynamo_table)
    data = catalog_bytes(5000)
    assert len(data) > 5_000_000

    await store.put(KEY, data, fetched_at=7.0)
    stored = await store.get(KEY)

    assert stored is not None and stored.data == data and stored.fetched_at == 7.0
    assert Catalog.from_json(stored.data).by_name.keys() == Catalog.from_json(data).by_name.keys()
    items = dynalite.scan(dynamo_table)
    (head,) = heads(dynalite, dynamo_table)
    assert int(head["chunks"]["N"]) == len(items) - 1 > 1
    assert all(len(item.get("data", {}).get("B", b"")) <= 350_000 for item in items)


@pytest.mark.parametrize(("writer", "reader"), [("lzma", "zlib"), ("zlib", "lzma")])
async def test_reader_of_either_codec_reads_what_the_other_wrote(dynalite, dynamo_table, writer, reader):
    data = catalog_bytes(1500)
    await make_store(dynalite, dynamo_table, codec=writer, chunk_bytes=100_000).put(KEY, data, fetched_at=1.0)
    assert (await make_store(dynalite, dynamo_table, codec=reader).get(KEY)).data == data
    assert heads(dynalite, dynamo_table)[0]["codec"]["S"] == writer
    assert int(heads(dynalite, dynamo_table)[0]["chunks"]["N"]) > 1


async def test_reads_follow_unprocessed_keys_and_batches_of_over_100_chunks(dynalite, dynamo_table):
    # Random bytes do not compress, so the chunks really are this many and this large;
    # dynalite answers at most ~1.4 MB per BatchGetItem, so large chunks come back unprocessed.
    big = os.urandom(3_000_000)
    await make_store(dynalite, dynamo_table).put(KEY, big, fetched_at=1.0)
    assert (await make_store(dynalite, dynamo_table).get(KEY)).data == big

    many = os.urandom(150 * 1000)
    small_chunks = make_store(dynalite, dynamo_table, chunk_bytes=1000, max_chunks=200)
    await small_chunks.put(KEY, many, fetched_at=2.0)
    assert int(heads(dynalite, dynamo_table)[0]["chunks"]["N"]) > 100
    assert (await small_chunks.get(KEY)).data == many


async def test_catalog_beyond_max_chunks_is_not_stored(dynalite, dynamo_table):
    events = Events()
    store = make_store(dynalite, dynamo_table, chunk_bytes=1000, max_chunks=3, on_event=events)
    await store.put(KEY, os.urandom(10_000), fetched_at=1.0)
    assert await store.get(KEY) is None
    assert dynalite.scan(dynamo_table) == []
    assert "dynamo_too_large" in events


class PausingClient:
    """A real boto3 client that stops before a head is written until the test lets it go on."""

    def __init__(self, client) -> None:
        self._client = client
        self.reached_head = threading.Event()
        self.go_on = threading.Event()

    def __getattr__(self, name):
        return getattr(self._client, name)

    def put_item(self, **kwargs):
        if kwargs["Item"]["kind"]["S"] == "head":
            self.reached_head.set()
            assert self.go_on.wait(30)
        return self._client.put_item(**kwargs)


async def test_reader_sees_old_version_until_head_flips_never_a_mix(dynalite, dynamo_table):
    old, new = catalog_bytes(2000, seed=1), catalog_bytes(2000, seed=2)
    reader = make_store(dynalite, dynamo_table, chunk_bytes=100_000)
    await reader.put(KEY, old, fetched_at=1.0)
    pausing = PausingClient(dynalite.client())
    writer = make_store(dynalite, dynamo_table, client=pausing, chunk_bytes=100_000)

    writing = asyncio.create_task(writer.put(KEY, new, fetched_at=2.0))
    assert await asyncio.to_thread(pausing.reached_head.wait, 30)
    # The new version's chunks are all in the table now; the head still names the old one.
    assert (
        len({item["pk"]["S"].split("#")[2] for item in dynalite.scan(dynamo_table) if "#" in item["pk"]["S"]})
        == 2
    )
    assert await reader.get(KEY) == StoredCatalog(old, 1.0)

    pausing.go_on.set()
    await writing
    assert await reader.get(KEY) == StoredCatalog(new, 2.0)


async def test_interleaved_writers_and_readers_see_whole_versions(dynalite, dynamo_table):
    # Writer A stores even fetched_at values, writer B odd ones; each reading must be one
    # whole catalog with the fetched_at its writer paired with it.
    catalogs = {0: catalog_bytes(1500, seed=10), 1: catalog_bytes(1500, seed=11)}
    stores = [make_store(dynalite, dynamo_table, chunk_bytes=60_000) for _ in range(4)]
    seen: list[StoredCatalog] = []
    writing = 2

    async def write(parity: int, store: DynamoSharedTier) -> None:
        nonlocal writing
        for step in range(4):
            await store.put(KEY, catalogs[parity], fetched_at=float(2 * step + parity))
        writing -= 1

    async def read(store: DynamoSharedTier) -> None:
        while writing:
            stored = await store.get(KEY)
            if stored is not None:
                seen.append(stored)

    await asyncio.gather(write(0, stores[0]), write(1, stores[1]), read(stores[2]), read(stores[3]))

    assert seen, "readers never saw a catalog"
    for stored in seen:
        assert stored.data == catalogs[int(stored.fetched_at) % 2]
    final = await stores[2].get(KEY)
    assert final == StoredCatalog(catalogs[1], 7.0)  # the newest fetch wins


async def test_older_catalog_does_not_replace_newer_one(dynalite, dynamo_table):
    events = Events()
    store = make_store(dynalite, dynamo_table, on_event=events)
    newer, older = catalog_bytes(10, seed=1), catalog_bytes(10, seed=2)
    await store.put(KEY, newer, fetched_at=200.0)
    await store.put(KEY, older, fetched_at=100.0)
    assert await store.get(KEY) == StoredCatalog(newer, 200.0)
    assert "dynamo_put_superseded" in events


async def test_expired_items_are_absent_and_replaceable(dynalite, dynamo_table):
    clock = Clock(NOW)
    events = Events()
    store = make_store(dynalite, dynamo_table, ttl_seconds=600, clock=clock, on_event=events)
    data = catalog_bytes(3000)
    await store.put(KEY, data, fetched_at=500.0)
    assert all(int(item["expires_at"]["N"]) >= clock.now + 600 for item in dynalite.scan(dynamo_table))

    clock.now += 599
    assert (await store.get(KEY)).data == data
    clock.now += 2
    assert await store.get(KEY) is None  # still in the table: dynalite never deletes by TTL
    assert events[-1] == "dynamo_miss"

    # An expired head gives way even to a catalog fetched earlier than the one it named.
    await store.put(KEY, b"{}", fetched_at=1.0)
    assert await store.get(KEY) == StoredCatalog(b"{}", 1.0)


def corrupt_head(head: dict, how: str) -> dict:
    head = dict(head)
    if how == "checksum":
        head["sha256"] = {"S": "0" * 64}
    elif how == "missing_field":
        del head["version"]
    elif how == "fetched_at_not_a_number":
        head["fetched_at"] = {"S": "yesterday"}
    elif how == "unknown_codec":
        head["codec"] = {"S": "brotli"}
    elif how == "size":
        head["size"] = {"N": str(int(head["size"]["N"]) + 1)}
    elif how == "too_many_chunks":
        head["chunks"] = {"N": "100000"}
    return head


@pytest.mark.parametrize(
    "how",
    ["checksum", "missing_field", "fetched_at_not_a_number", "unknown_codec", "size", "too_many_chunks"],
)
async def test_corrupt_head_reads_as_absent_and_next_put_replaces_it(dynalite, dynamo_table, caplog, how):
    events = Events()
    store = make_store(dynalite, dynamo_table, chunk_bytes=100_000, on_event=events)
    data = catalog_bytes(1000)
    await store.put(KEY, data, fetched_at=5.0)
    (head,) = heads(dynalite, dynamo_table)
    dynalite.client().put_item(TableName=dynamo_table, Item=corrupt_head(head, how))

    with caplog.at_level(logging.WARNING, logger="toolsearch.catalogs.cache.dynamo"):
        assert await store.get(KEY) is None
    assert events[-1] == "dynamo_corrupt"
    (warning,) = [r for r in caplog.records if "corrupt" in r.getMessage()]
    assert warning.key_prefix == KEY[:8] and KEY not in caplog.text and KEY not in str(vars(warning))

    await store.put(KEY, data, fetched_at=5.0)
    assert await store.get(KEY) == StoredCatalog(data, 5.0)


@pytest.mark.parametrize("how", ["flipped_byte", "deleted", "not_binary", "expired"])
async def test_corrupt_or_missing_chunk_reads_as_absent_and_next_put_replaces_it(dynalite, dynamo_table, how):
    events = Events()
    store = make_store(dynalite, dynamo_table, chunk_bytes=100_000, on_event=events)
    data = catalog_bytes(1000)
    await store.put(KEY, data, fetched_at=5.0)
    chunk = next(item for item in dynalite.scan(dynamo_table) if item["kind"]["S"] == "chunk")
    client = dynalite.client()
    if how == "deleted":
        client.delete_item(TableName=dynamo_table, Key={"pk": chunk["pk"]})
    else:
        if how == "flipped_byte":
            blob = bytearray(chunk["data"]["B"])
            blob[len(blob) // 2] ^= 0xFF
            chunk["data"] = {"B": bytes(blob)}
        elif how == "not_binary":
            chunk["data"] = {"S": "text"}
        elif how == "expired":
            chunk["expires_at"] = {"N": "1"}
        client.put_item(TableName=dynamo_table, Item=chunk)

    assert await store.get(KEY) is None
    assert events[-1] == "dynamo_corrupt"
    await store.put(KEY, data, fetched_at=5.0)
    assert (await store.get(KEY)).data == data


async def test_unreachable_table_gets_none_and_puts_nothing_with_a_warning(dummy_aws_env, caplog):
    server = Dynalite().start()
    table = server.create_table()
    # The store makes its own client (bounded timeouts, two attempts), as in production.
    events = Events()
    store = DynamoSharedTier(table, ttl_seconds=TTL, endpoint_url=server.endpoint_url, on_event=events)
    data = catalog_bytes(50)
    await store.put(KEY, data, fetched_at=1.0)
    assert (await store.get(KEY)).data == data
    server.stop()

    with caplog.at_level(logging.WARNING, logger="toolsearch.catalogs.cache.dynamo"):
        # A generous guard against hanging, not a speed check (bench/bench_dynamo.py measures).
        assert await asyncio.wait_for(store.get(KEY), 30) is None
        await asyncio.wait_for(store.put(KEY, data, fetched_at=2.0), 30)
        assert await asyncio.wait_for(store.try_lease(KEY, "env-1", 10), 30) is True  # fails open
        await asyncio.wait_for(store.release_lease(KEY, "env-1"), 30)

    assert events[-4:] == ["dynamo_error"] * 4
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4
    assert all(r.key_prefix == KEY[:8] and KEY not in str(vars(r)) for r in warnings)
    assert "EndpointConnectionError" in {r.error for r in warnings}


async def test_throttling_counts_as_throttled_and_reads_as_absent(dynalite, dynamo_table):
    # dynalite never throttles; botocore's Stubber answers as DynamoDB does when it throttles.
    from botocore.stub import Stubber

    client = dynalite.client()
    events = Events()
    store = make_store(dynalite, dynamo_table, client=client, on_event=events)
    with Stubber(client) as stub:
        stub.add_client_error("get_item", "ProvisionedThroughputExceededException", http_status_code=400)
        stub.add_client_error("batch_write_item", "ThrottlingException", http_status_code=400)
        assert await store.get(KEY) is None
        await store.put(KEY, os.urandom(400_000), fetched_at=1.0)
    assert events == ["dynamo_throttled", "dynamo_throttled"]
    assert dynalite.scan(dynamo_table) == []


async def test_lease_is_exclusive_reentrant_releasable_and_expires(dynalite, dynamo_table):
    clock = Clock(NOW)
    store = make_store(dynalite, dynamo_table, clock=clock)

    assert await store.try_lease(KEY, "env-a", 30) is True
    assert await store.try_lease(KEY, "env-b", 30) is False
    assert await store.try_lease(KEY, "env-a", 30) is True  # the holder may renew

    await store.release_lease(KEY, "env-b")  # not the holder: nothing happens
    assert await store.try_lease(KEY, "env-b", 30) is False
    await store.release_lease(KEY, "env-a")
    assert await store.try_lease(KEY, "env-b", 30) is True

    clock.now += 29
    assert await store.try_lease(KEY, "env-c", 30) is False
    clock.now += 2
    assert await store.try_lease(KEY, "env-c", 30) is True
    assert await store.try_lease("other" + KEY[5:], "env-a", 30) is True  # leases are per key


async def test_concurrent_lease_attempts_have_one_winner(dynalite, dynamo_table):
    stores = [make_store(dynalite, dynamo_table) for _ in range(4)]
    results = await asyncio.gather(*(stores[i % 4].try_lease(KEY, f"env-{i}", 30) for i in range(16)))
    assert results.count(True) == 1


async def test_items_hold_the_key_only_as_given_and_never_the_token(dynalite, dynamo_table):
    store = make_store(dynalite, dynamo_table, chunk_bytes=100_000)
    await store.put(KEY, catalog_bytes(1000), fetched_at=1.0)
    await store.try_lease(KEY, "env-a", 30)

    items = dynalite.scan(dynamo_table)
    assert len(items) > 3
    for item in items:
        pk = item["pk"]["S"]
        assert pk == KEY or pk.startswith(KEY + "#")
        others = {name: value for name, value in item.items() if name != "pk"}
        text = json.dumps(others, default=repr)
        assert KEY not in text and TOKEN not in text and "sk-live" not in text


async def test_failing_event_hook_does_not_break_the_store(dynalite, dynamo_table):
    def broken(name: str) -> None:
        raise RuntimeError("metrics are down")

    store = make_store(dynalite, dynamo_table, on_event=broken)
    await store.put(KEY, b"{}", fetched_at=1.0)
    assert await store.get(KEY) == StoredCatalog(b"{}", 1.0)


@pytest.mark.parametrize("bad", ["", "a#lease", "x" * 2000])
async def test_keys_that_could_reach_other_items_are_refused(dynalite, dynamo_table, bad):
    store = make_store(dynalite, dynamo_table)
    with pytest.raises(ValueError):
        await store.get(bad)


def test_importing_the_cache_does_not_import_boto3():
    code = "import sys, toolsearch.catalogs.cache.dynamo; assert not {'boto3', 'botocore'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_a_forgotten_catalog_is_not_served_and_no_listing_older_than_the_refusal_brings_it_back(
    dynalite, dynamo_table
):
    events = Events()
    clock = Clock(NOW)
    store = make_store(dynalite, dynamo_table, on_event=events, clock=clock)
    data = catalog_bytes(20)
    await store.put(KEY, data, fetched_at=NOW - 100)
    await store.forget(KEY, at=NOW)
    assert await store.get(KEY) is None
    assert "dynamo_forgotten" in events
    # A listing that started before the refusal and finished late must not bring the catalog back.
    await store.put(KEY, data, fetched_at=NOW - 10)
    assert await store.get(KEY) is None
    # One that started after it (the upstream admitted the token again) is served.
    await store.put(KEY, data, fetched_at=NOW + 10)
    assert await store.get(KEY) == StoredCatalog(data=data, fetched_at=NOW + 10)


async def test_forgetting_leaves_a_copy_listed_after_the_refusal_in_place(dynalite, dynamo_table):
    events = Events()
    store = make_store(dynalite, dynamo_table, on_event=events, clock=Clock(NOW))
    data = catalog_bytes(20)
    await store.put(KEY, data, fetched_at=NOW + 5)
    await store.forget(KEY, at=NOW)  # a refusal older than the copy
    assert await store.get(KEY) == StoredCatalog(data=data, fetched_at=NOW + 5)
    assert "dynamo_forgotten" not in events
