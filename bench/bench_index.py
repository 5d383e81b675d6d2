"""Indexing a freshly listed catalog, and the memory one catalog holds, against catalog size.

    .venv/bin/python bench/bench_index.py [--sizes 500,1490,5000,10000] [--model DIR] [--json PATH]
                                           [--repeats 3]

A catalog starts as the upstream's tools/list JSON (demo-style tools,
bench/benchlib.py). Timed, each step on its own (median of --repeats):
- parse: json.loads and `Catalog.from_definitions` (read-only classification);
- lexical: the BM25 index (`build_lexical_index`: tokenizing, stemming, postings);
- embed: every tool's text embedded into an empty vector cache, as for the
  first caller with these tools (the model at shared/toolsearch/data/model, or
  --model DIR);
- embed_shared: the same tools again through the now warm cache, as for a
  second caller who sees the same tools;
- total: the proxy's own indexer (`make_indexer`), parse included, fresh cache.
Memory (tracemalloc, which sees numpy's buffers), in a separate pass: what one
catalog keeps (parsed definitions, Tool objects, its index), and what the shared
vector cache keeps on top of it for that catalog's tools.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

from benchlib import (
    MODEL_DIR,
    growth,
    load_bench_embedder,
    method_line,
    print_growth,
    scaled_definitions,
    write_json,
)

from toolsearch.catalogs.catalog import Catalog
from toolsearch.search.embedding import VectorCache, build_embedding_index
from toolsearch.search.index import make_indexer
from toolsearch.search.lexical import build_lexical_index

SIZES = (500, 1490, 5000, 10000)
MIB = 2**20


def seconds(action: Any, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds (CPU of all this process's threads: the tokenizer uses several)."""
    wall, cpu = [], []
    for _ in range(repeats):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        action()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def timings(listing: bytes, embedder: Any, repeats: int) -> dict[str, float]:
    def parse() -> Catalog:
        return Catalog.from_definitions(json.loads(listing)["tools"])

    catalog = parse()
    steps = {"parse": parse, "lexical": lambda: build_lexical_index(catalog.tools)}
    if embedder is not None:
        warm = VectorCache()
        build_embedding_index(catalog.tools, embedder, warm)
        steps["embed"] = lambda: build_embedding_index(catalog.tools, embedder, VectorCache())
        steps["embed_shared"] = lambda: build_embedding_index(catalog.tools, embedder, warm)
    steps["total"] = lambda: make_indexer(embedder)(parse())
    row = {}
    for name, action in steps.items():
        row[f"{name}_s"], row[f"{name}_cpu_s"] = seconds(action, repeats)
    return row


def memory(listing: bytes, embedder: Any) -> dict[str, float]:
    """MiB one catalog keeps, and MiB the vector cache keeps for its tools, at peak and after."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = VectorCache()
        catalog = Catalog.from_definitions(json.loads(listing)["tools"])
        index = make_indexer(embedder, cache=cache)(catalog)
        gc.collect()
        with_cache, peak = tracemalloc.get_traced_memory()
        del cache
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
        assert index is not None and catalog is not None  # both held until here
    finally:
        tracemalloc.stop()
    return {
        "catalog_mib": (kept - before) / MIB,
        "vector_cache_mib": (with_cache - kept) / MIB,
        "peak_mib": (peak - before) / MIB,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--model", type=Path, help=f"model2vec folder (default {MODEL_DIR})")
    parser.add_argument("--lexical-only", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    embedder, model = load_bench_embedder(args.model or MODEL_DIR, args.lexical_only)
    method = method_line(sizes, model=model, repeats=args.repeats)
    print("seconds as wall (CPU); memory in MiB")
    print(
        "  size listing_KiB          parse        lexical          embed   embed_shared          total"
        "  catalog vector_cache   peak"
    )
    rows = []
    for size in sizes:
        listing = json.dumps({"tools": scaled_definitions(size)}).encode()
        row: dict[str, Any] = {"size": size, "listing_kib": len(listing) / 1024}
        row |= timings(listing, embedder, args.repeats)
        row |= memory(listing, embedder)
        rows.append(row)
        cells = "".join(
            f" {row[f'{step}_s']:>6.3f} ({row[f'{step}_cpu_s']:.3f})" if f"{step}_s" in row else f"{'-':>15}"
            for step in ("parse", "lexical", "embed", "embed_shared", "total")
        )
        print(
            f"{size:>6} {row['listing_kib']:>11,.0f}{cells} {row['catalog_mib']:>8.1f}"
            f" {row['vector_cache_mib']:>12.1f} {row['peak_mib']:>6.1f}"
        )
    grown = {key: growth(rows, key) for key in ("total_s", "total_cpu_s", "catalog_mib")}
    print_growth("indexing time (total, wall)", grown["total_s"])
    print_growth("indexing time (total, CPU)", grown["total_cpu_s"])
    print_growth("memory per catalog", grown["catalog_mib"])
    write_json(args.json, method, {"rows": rows, "growth": grown})


if __name__ == "__main__":
    main()
