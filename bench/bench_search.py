"""search_tools latency, warm and in process, against catalog size: lexical only and hybrid.

    .venv/bin/python bench/bench_search.py [--sizes 500,1490,5000,10000] [--model DIR] [--json PATH]
                                            [--plot PNG] [--rounds 3]

Two paths, both timed per call with perf_counter, after a warm-up pass:
- index: `index.search(queries, 8)` on the catalog's index as the proxy builds it
  (`make_indexer`), the ranking alone;
- tool: `ToolService.call(caller, "search_tools", {...})`, the whole tool as the
  endpoint runs it (arguments checked, catalog looked up in warm memory, ranked,
  hits with the best three input schemas, the structured result serialised),
  without HTTP.
Each with one query per call and five per call (`queries`). The queries are the
evaluation set's questions, English and Lithuanian (bench/benchlib.py), asked
`--rounds` times over; the catalogs are demo-style (bench/benchlib.py).
Hybrid needs a model: the development model at shared/toolsearch/data/model,
or --model DIR (any model2vec folder the proxy's loader reads); without one,
only lexical is measured. Targets: p50 under 1 ms at 1,490 tools and under
10 ms at 10,000.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchlib import (
    MODEL_DIR,
    evaluation_queries,
    growth,
    load_bench_embedder,
    method_line,
    p50_p99_ms,
    print_growth,
    scaled_definitions,
    write_json,
)

from toolsearch.app import catalog_store, tool_service
from toolsearch.callers.identity import Caller
from toolsearch.ops.telemetry import Telemetry
from toolsearch.search.index import make_indexer
from toolsearch.service.tool_service import ToolService
from toolsearch.service.tooldefs import DEFAULT_LIMIT
from toolsearch.settings import Settings

SIZES = (500, 1490, 5000, 10000)
TARGETS_MS = {1490: 1.0, 10000: 10.0}


def batches(queries: list[str], per_call: int) -> list[list[str]]:
    return [queries[i : i + per_call] for i in range(0, len(queries) - per_call + 1, per_call)]


def time_index(index: Any, calls: list[list[str]]) -> list[float]:
    for queries in calls[:20]:
        index.search(queries, DEFAULT_LIMIT)
    samples = []
    for queries in calls:
        start = time.perf_counter()
        index.search(queries, DEFAULT_LIMIT)
        samples.append(time.perf_counter() - start)
    return samples


async def time_tool(service: ToolService, caller: Caller, calls: list[list[str]]) -> list[float]:
    def arguments(queries: list[str]) -> dict[str, Any]:
        return {"query": queries[0]} if len(queries) == 1 else {"queries": queries}

    for queries in calls[:20]:
        await service.call(caller, "search_tools", arguments(queries))
    samples = []
    for queries in calls:
        start = time.perf_counter()
        result = await service.call(caller, "search_tools", arguments(queries))
        samples.append(time.perf_counter() - start)
        if result.get("isError"):
            raise SystemExit(f"search_tools failed: {result}")
    return samples


async def measure_size(size: int, embedder: Any, modes: list[str], rounds: int) -> list[dict[str, Any]]:
    definitions = scaled_definitions(size)
    queries = evaluation_queries() * rounds
    rows = []
    for mode in modes:
        indexer = make_indexer(embedder if mode == "hybrid" else None)
        settings = Settings(embedder="none")

        class Source:
            async def list_tools(self, authorization: str | None) -> Any:
                return SimpleNamespace(tools=definitions, instructions="")

        store = catalog_store(settings, Source(), indexer)
        service = tool_service(settings, store, upstream=None, telemetry=Telemetry())  # search calls nothing
        caller = Caller("Bearer bench", "bench")
        entry = await store.get(caller)  # listed and indexed once; every call after is warm
        for per_call in (1, 5):
            calls = batches(queries, per_call)
            index_p50, index_p99 = p50_p99_ms(time_index(entry.index, calls))
            tool_p50, tool_p99 = p50_p99_ms(await time_tool(service, caller, calls))
            rows.append(
                {
                    "size": size,
                    "mode": mode,
                    "queries_per_call": per_call,
                    "calls": len(calls),
                    "index_p50_ms": index_p50,
                    "index_p99_ms": index_p99,
                    "tool_p50_ms": tool_p50,
                    "tool_p99_ms": tool_p99,
                }
            )
            print(
                f"{size:>6} {mode:<8} {per_call:>7} {len(calls):>6} {index_p50:>10.3f} {index_p99:>10.3f}"
                f" {tool_p50:>10.3f} {tool_p99:>10.3f}"
            )
    return rows


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    verdicts = []
    for row in rows:
        limit = TARGETS_MS.get(row["size"])
        if limit is None or row["queries_per_call"] != 1:
            continue
        verdicts.append(
            {
                "size": row["size"],
                "mode": row["mode"],
                "target_ms": limit,
                "tool_p50_ms": row["tool_p50_ms"],
                "met": row["tool_p50_ms"] < limit,
            }
        )
        print(
            f"target p50 < {limit:g} ms at {row['size']:,} ({row['mode']}, one query, whole tool):"
            f" {row['tool_p50_ms']:.3f} ms, {'met' if row['tool_p50_ms'] < limit else 'MISSED'}"
        )
    return verdicts


def plot(rows: list[dict[str, Any]], path: str, model_label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    styles = {"lexical": "o", "hybrid": "s"}
    for mode in ("lexical", "hybrid"):
        for per_call, line in ((1, "-"), (5, "--")):
            chosen = [r for r in rows if r["mode"] == mode and r["queries_per_call"] == per_call]
            if not chosen:
                continue
            label = f"{mode}, {per_call} quer{'y' if per_call == 1 else 'ies'} per call"
            ax.plot(
                [r["size"] for r in chosen],
                [r["tool_p50_ms"] for r in chosen],
                styles[mode] + line,
                label=label + " (p50)",
            )
    for size, limit in TARGETS_MS.items():
        ax.plot([size], [limit], "rx", markersize=10)
    ax.plot([], [], "rx", label="target p50 (one query)")
    sizes = sorted({r["size"] for r in rows})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
    ax.set_xlabel("tools in the caller's catalog")
    ax.set_ylabel("search_tools latency, ms (in process, warm)")
    ax.set_title(f"search_tools p50 against catalog size{model_label}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    print(f"# plot {path}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--model", type=Path, help=f"model2vec folder for hybrid (default {MODEL_DIR})")
    parser.add_argument("--label", help="the model's name in the plot's title")
    parser.add_argument("--lexical-only", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="times the question set is asked per size")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    folder = args.model or MODEL_DIR
    embedder, model = load_bench_embedder(folder, args.lexical_only)
    modes = ["lexical"] + (["hybrid"] if embedder is not None else [])
    method = method_line(
        sizes,
        model=model,
        queries=f"{len(evaluation_queries())} evaluation questions (en + lt) x {args.rounds}",
        path="index = index.search(); tool = ToolService.call('search_tools'), in process, warm",
    )
    print("  size mode     queries  calls  index_p50  index_p99   tool_p50   tool_p99   (ms)")
    rows: list[dict[str, Any]] = []
    for size in sizes:
        rows += asyncio.run(measure_size(size, embedder, modes, args.rounds))
    verdicts = targets(rows)
    grown = {}
    for mode in modes:
        for per_call in (1, 5):
            chosen = [r for r in rows if r["mode"] == mode and r["queries_per_call"] == per_call]
            grown[f"{mode}_{per_call}"] = steps = growth(chosen, "tool_p50_ms")
            print_growth(f"tool p50, {mode}, {per_call} per call", steps)
    if args.plot:
        plot(rows, args.plot, "" if embedder is None else f" (hybrid: {args.label or folder.name})")
    write_json(args.json, method, {"rows": rows, "targets": verdicts, "growth": grown})


if __name__ == "__main__":
    main()
