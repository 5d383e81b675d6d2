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

from benchlib import MODEL_DIR, growth, method_line, print_growth, scaled_definitions, write_json

from toolsearch.catalog import Catalog
from toolsearch.search.embedding import VectorCache, build_embedding_index
from toolsearch.search.index import make_indexer
from toolsearch.search.lexical import build_lexical_index

SIZES = (500, 1490, 5000, 10000)
MIB = 2**20


def seconds(action: Any, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def timings(listing: bytes, embedder: Any, repeats: int) -> dict[str, float]:
    def parse() -> Catalog:
        return Catalog.from_definitions(json.loads(listing)["tools"])

    catalog = parse()
    row = {
        "parse_s": seconds(parse, repeats),
        "lexical_s": seconds(lambda: build_lexical_index(catalog.tools), repeats),
    }
    if embedder is not None:
        fresh = lambda: build_embedding_index(catalog.tools, embedder, VectorCache())  # noqa: E731
        row["embed_s"] = seconds(fresh, repeats)
        warm = VectorCache()
        build_embedding_index(catalog.tools, embedder, warm)
        row["embed_shared_s"] = seconds(lambda: build_embedding_index(catalog.tools, embedder, warm), repeats)
    row["total_s"] = seconds(lambda: make_indexer(embedder)(parse()), repeats)
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
    embedder, model = None, "none (lexical only)"
    folder = args.model or MODEL_DIR
    if not args.lexical_only and (folder / "model.safetensors").exists():
        from toolsearch.model.load import load_embedder

        embedder = load_embedder(folder)
        model = f"{folder} (dim {embedder.dim})"
    method = method_line(sizes, model=model, repeats=args.repeats)
    print(
        "  size  listing_KiB  parse_s  lexical_s   embed_s  embed_shared_s  total_s"
        "  catalog_MiB  vector_cache_MiB  peak_MiB"
    )
    rows = []
    for size in sizes:
        listing = json.dumps({"tools": scaled_definitions(size)}).encode()
        row: dict[str, Any] = {"size": size, "listing_kib": len(listing) / 1024}
        row |= timings(listing, embedder, args.repeats)
        row |= memory(listing, embedder)
        rows.append(row)
        print(
            f"{size:>6} {row['listing_kib']:>12,.0f} {row['parse_s']:>8.3f} {row['lexical_s']:>10.3f}"
            f" {row.get('embed_s', float('nan')):>9.3f} {row.get('embed_shared_s', float('nan')):>15.3f}"
            f" {row['total_s']:>8.3f} {row['catalog_mib']:>12.1f} {row['vector_cache_mib']:>17.1f}"
            f" {row['peak_mib']:>9.1f}"
        )
    grown = {key: growth(rows, key) for key in ("total_s", "catalog_mib")}
    print_growth("indexing time (total)", grown["total_s"])
    print_growth("memory per catalog", grown["catalog_mib"])
    write_json(args.json, method, {"rows": rows, "growth": grown})


if __name__ == "__main__":
    main()
