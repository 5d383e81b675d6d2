"""CPU per query of the ranking alone, in process: the learned ranker against fusion, same catalog.

    PYTHONPATH=shared .venv/bin/python bench/profile_ranker.py [--tools 1879] [--model DIR]
        [--rankers learned,fusion] [--passes 5] [--evict MB] [--profile] [--dump PATH]

One catalog of `--tools` demo-style tools (bench/benchlib.py), indexed as the proxy does
(`make_indexer`, `embedder none` unless `--model`), then per query what search_tools does with
it (`service.finding._find`: the ranked hits, then the weak-match check), for every evaluation
question (en + lt). Printed per ranker: CPU time per query (`time.process_time`, the least of
`--passes` passes after a warm one; with `--evict MB`, that much memory read before each query, not
timed: the caches as cold as on a server whose other requests, and other processes, evicted them,
which is how the HTTP bench meets each request) and its calls per query; with `--profile`, the
functions of most own time from one pass under cProfile. Calls per query, and instructions per query under
`valgrind --tool=callgrind` (run it with `--passes 1`), do not depend on the machine's load.

`--dump PATH` writes, for the learned ranker, each query's candidates, feature matrix and hits
(.npz) instead of timing: two trees' dumps compared with `--compare OLD.npz NEW.npz` show whether
a change left the features and the order as they were, bit for bit.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import evaluation_queries, load_bench_embedder, scaled_definitions


def build(ranker: str, tools: int, embedder: Any) -> Any:
    from toolsearch.catalogs.catalog import Catalog
    from toolsearch.search.index import make_indexer

    return make_indexer(embedder, ranker=ranker)(Catalog.from_definitions(scaled_definitions(tools)))


def one_pass(index: Any, queries: list[str], evict: np.ndarray | None = None) -> float:
    """Seconds of CPU for these queries; with `evict`, that buffer read before each (not timed)."""
    from toolsearch.search.weak import is_weak, strength

    spent = 0.0
    for query in queries:
        if evict is not None:
            evict.sum()
        start = time.process_time()
        hits = index.search([query], 8)[0]
        is_weak(strength(index, query, [hit.position for hit in hits]))
        spent += time.process_time() - start
    return spent


def timed(index: Any, queries: list[str], passes: int, evict: np.ndarray | None) -> float:
    one_pass(index, queries)  # warm: caches filled
    return min(one_pass(index, queries, evict) for _ in range(passes)) / len(queries) * 1e6


def calls_per_query(index: Any, queries: list[str], show: bool) -> int:
    profile = cProfile.Profile()
    profile.enable()
    one_pass(index, queries)
    profile.disable()
    stats = pstats.Stats(profile)
    if show:
        stats.sort_stats("tottime").print_stats(25)
    return round(sum(entry.callcount for entry in profile.getstats()) / len(queries))  # type: ignore[attr-defined]


def dump(index: Any, queries: list[str], path: str) -> None:
    arrays: dict[str, np.ndarray] = {}
    for i, query in enumerate(queries):
        found = index.find(query)
        hits = index.search([query], 8)[0]
        arrays[f"{i}.positions"] = found.positions
        arrays[f"{i}.matrix"] = found.matrix
        arrays[f"{i}.hits"] = np.array([(h.position, h.score) for h in hits]).reshape(-1, 2)
    np.savez(path, **arrays)
    print(f"{len(queries)} queries' candidates, features and hits in {path}")


def compare(old_path: str, new_path: str) -> int:
    old, new = np.load(old_path), np.load(new_path)
    differ = [key for key in old.files if key not in new.files or not np.array_equal(old[key], new[key])]
    differ += [key for key in new.files if key not in old.files]
    print(f"{len(old.files)} arrays compared, {len(differ)} differ" + (f": {differ[:10]}" if differ else ""))
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tools", type=int, default=1879)
    parser.add_argument("--model", default="", help="a model2vec folder: hybrid search (default: BM25 alone)")
    parser.add_argument("--rankers", default="learned,fusion")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print the functions of most own time")
    parser.add_argument(
        "--evict", type=int, default=0, help="MB read before each query: caches as cold as a busy server's"
    )
    parser.add_argument("--dump", help="write the learned ranker's features and hits here (.npz)")
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), help="two dumps: equal or not")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    embedder = load_bench_embedder(Path(args.model))[0] if args.model else None
    queries = evaluation_queries()
    if args.dump:
        dump(build("learned", args.tools, embedder), queries, args.dump)
        return 0
    for ranker in args.rankers.split(","):
        index = build(ranker, args.tools, embedder)
        evict = np.ones(args.evict << 17) if args.evict else None  # 8-byte floats
        cpu_us = timed(index, queries, args.passes, evict)
        calls = calls_per_query(index, queries, args.profile)
        print(f"{ranker:8s} {cpu_us:7.1f} us CPU a query, {calls} calls", end=" ")
        print(f"({len(queries)} queries, {args.tools} tools)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
