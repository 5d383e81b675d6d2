"""Put/get round trip of the DynamoDB catalog tier against dynalite on loopback, zlib vs lzma.

    .venv/bin/python bench/bench_dynamo.py [--repeat 5]

For 500, 1,490 and 5,000 generated tools, prints the catalog's JSON size, compressed size,
items written, the largest item, and the median put and get times (compression and
decompression included). dynalite is a local stand-in: real DynamoDB adds network time per
request (one GetItem plus one BatchGetItem per ~1.4 MB for a get).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from benchlib import add_tests_to_path

add_tests_to_path()

from fixtures.catalogs import tool_definitions  # noqa: E402
from fixtures.dynalite import DUMMY_ENV, Dynalite  # noqa: E402
from toolsearch.catalogs.cache.dynamo import DynamoSharedTier  # noqa: E402
from toolsearch.catalogs.catalog import Catalog  # noqa: E402

SIZES = (500, 1490, 5000)


def item_bytes(item: dict) -> int:
    """Approximate DynamoDB item size: attribute names plus values."""
    total = 0
    for name, value in item.items():
        (kind, raw), *_ = value.items()
        total += len(name) + (len(raw) if kind == "B" else len(str(raw).encode()))
    return total


async def measure(server: Dynalite, tools: int, codec: str, repeat: int) -> dict[str, float]:
    table = server.create_table()
    store = DynamoSharedTier(table, client=server.client(), ttl_seconds=3600, codec=codec)
    data = Catalog.from_definitions(tool_definitions(tools), fetched_at=1.0).to_json()
    puts, gets = [], []
    for n in range(repeat):
        started = time.perf_counter()
        await store.put(f"bench{tools}", data, fetched_at=float(n + 1))
        puts.append(time.perf_counter() - started)
        started = time.perf_counter()
        stored = await store.get(f"bench{tools}")
        gets.append(time.perf_counter() - started)
        assert stored is not None and stored.data == data, "round trip failed"
    items = server.scan(table)
    head = next(item for item in items if item["pk"]["S"] == f"bench{tools}")
    chunks = int(head["chunks"]["N"])
    latest = [item for item in items if item["pk"]["S"].startswith(f"bench{tools}#v#{head['version']['S']}#")]
    compressed = len(head.get("data", {}).get("B", b"")) + sum(len(item["data"]["B"]) for item in latest)
    return {
        "json": len(data),
        "compressed": compressed,
        "items": 1 + chunks,
        "largest": max(item_bytes(item) for item in [head, *latest]),
        "put_ms": statistics.median(puts) * 1000,
        "get_ms": statistics.median(gets) * 1000,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="round trips per case (median reported)")
    args = parser.parse_args()
    os.environ.update(DUMMY_ENV)
    server = Dynalite().start()
    try:
        print(f"{'tools':>6} {'codec':>5} {'json':>10} {'compressed':>10} {'items':>5} {'largest':>8} "
              f"{'put ms':>7} {'get ms':>7}")  # fmt: skip
        for tools in SIZES:
            for codec in ("zlib", "lzma"):
                r = await measure(server, tools, codec, args.repeat)
                print(
                    f"{tools:>6} {codec:>5} {r['json']:>10,} {r['compressed']:>10,} {r['items']:>5} "
                    f"{r['largest']:>8,} {r['put_ms']:>7.0f} {r['get_ms']:>7.0f}"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
