"""What running a search in a worker thread costs: the same ranking on the event loop and off it.

    .venv/bin/python bench/bench_search_thread.py [--sizes 1490,10000] [--rounds 3] [--model DIR]

search_tools ranks a long search (over `service.THREAD_ABOVE_CHARS` characters in
all) in a worker thread (`asyncio.to_thread`), so that it does not hold up other
callers, and a short one on the event loop. For each catalog size (demo-style, bench/benchlib.py)
and each index (lexical; hybrid when a model is found), the evaluation set's
questions are ranked one query per call, fifty on the loop (`index.search(...)`),
then the same fifty in a thread (`await asyncio.to_thread(index.search, ...)`), and
so on, after a warm-up; printed are each way's p50 and p99, and the difference of
the p50s: the price of the hop per query.
Then the cost of the longest query allowed (`max_query_chars` of made-up words,
five per call, which the stemmer has never seen), timed on the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import string
import time
from pathlib import Path
from typing import Any

from benchlib import (
    MODEL_DIR,
    evaluation_queries,
    load_bench_embedder,
    method_line,
    p50_p99_ms,
    scaled_definitions,
    write_json,
)

from toolsearch.catalogs.catalog import Catalog
from toolsearch.search.index import make_indexer
from toolsearch.service.tooldefs import DEFAULT_LIMIT
from toolsearch.settings import Settings


def longest_queries(chars: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    queries = []
    for _ in range(5):
        words = []
        while sum(len(w) + 1 for w in words) < chars:
            words.append("".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9))))
        queries.append(" ".join(words)[:chars])
    return queries


BLOCK = 50
_seeds = itertools.count()  # fresh words for every batch: the stemmer's cache never helps


async def measure(index: Any, queries: list[str], chars: int) -> dict[str, Any]:
    for query in queries[:20]:
        index.search([query], DEFAULT_LIMIT)
        await asyncio.to_thread(index.search, [query], DEFAULT_LIMIT)
    # In blocks of BLOCK queries, alternately: a thread moved to another core for every query would
    # reload the tool matrix (10 MB at 10,000 tools) into that core's cache each time, which
    # production's searches, one after another on a worker, mostly do not.
    loop_s, thread_s = [], []
    for start in range(0, len(queries), BLOCK):
        block = queries[start : start + BLOCK]
        for query in block:
            started = time.perf_counter()
            index.search([query], DEFAULT_LIMIT)
            loop_s.append(time.perf_counter() - started)
        for query in block:
            started = time.perf_counter()
            await asyncio.to_thread(index.search, [query], DEFAULT_LIMIT)
            thread_s.append(time.perf_counter() - started)
    longest = []
    for _ in range(5):
        batch = longest_queries(chars, next(_seeds))
        started = time.perf_counter()
        index.search(batch, DEFAULT_LIMIT)
        longest.append(time.perf_counter() - started)
    loop_p50, loop_p99 = p50_p99_ms(loop_s)
    thread_p50, thread_p99 = p50_p99_ms(thread_s)
    long_p50, long_max = p50_p99_ms(longest)[0], max(longest) * 1000
    return {
        "loop_p50_ms": loop_p50,
        "loop_p99_ms": loop_p99,
        "thread_p50_ms": thread_p50,
        "thread_p99_ms": thread_p99,
        "hop_p50_ms": thread_p50 - loop_p50,
        "longest_p50_ms": long_p50,
        "longest_max_ms": long_max,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1490,10000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", type=Path, default=MODEL_DIR)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    chars = Settings().max_query_chars
    embedder, model = load_bench_embedder(args.model)
    method = method_line(sizes, rounds=args.rounds, model=model, max_query_chars=chars)
    queries = evaluation_queries() * args.rounds
    rows = []
    print(
        f"{'size':>6} {'index':<8} {'loop p50':>9} {'p99':>7} {'thread p50':>11} {'p99':>7}"
        f" {'p50 +':>8} {f'5x{chars} chars p50':>18} {'max':>7}   (ms)"
    )
    for size in sizes:
        catalog = Catalog.from_definitions(scaled_definitions(size))
        modes = {"lexical": None} | ({"hybrid": embedder} if embedder is not None else {})
        for mode, used in modes.items():
            index = make_indexer(used)(catalog)
            row = {"size": size, "mode": mode, **asyncio.run(measure(index, queries, chars))}
            rows.append(row)
            print(
                f"{size:>6} {mode:<8} {row['loop_p50_ms']:>9.3f} {row['loop_p99_ms']:>7.3f}"
                f" {row['thread_p50_ms']:>11.3f} {row['thread_p99_ms']:>7.3f} {row['hop_p50_ms']:>8.3f}"
                f" {row['longest_p50_ms']:>18.1f} {row['longest_max_ms']:>7.1f}"
            )
    write_json(args.json, method, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
