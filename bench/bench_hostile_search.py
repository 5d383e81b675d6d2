"""A hostile caller's huge search queries against another caller's small ones, on one server.

    .venv/bin/python bench/bench_hostile_search.py [--tools 10000] [--query-chars 190000]
        [--attacks 5] [--embedder none|auto] [--json PATH]

Three processes on loopback: an upstream (tests/fixtures/faulty_upstream.py)
listing `--tools` demo-style tools (bench/benchlib.py) to every token, the proxy
(`toolsearch serve`), and this client. Two callers with their own tokens: both
catalogs are listed and indexed first. Then:
- alone: the other caller sends search_tools (one short query from the
  evaluation set) 30 times, one after another;
- attacked: the hostile caller sends `--attacks` search_tools calls one after
  another, each with five queries of `--query-chars` characters of made-up words
  (a body just under the 1 MB limit at the default), while the other caller
  keeps sending its short searches.
Printed: the other caller's latency alone and under attack (p50, max), and the
hostile calls' own latency, HTTP status, response size and outcome.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import string
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from bench_load import PYTHON, TOOLSEARCH, free_port, process, wait_listening
from benchlib import add_tests_to_path, evaluation_queries, method_line, scaled_definitions, write_json

HOSTILE, OTHER = "Bearer hostile-caller", "Bearer other-caller"


def run_upstream(port: int, tools: int) -> None:
    import uvicorn

    add_tests_to_path()
    from fixtures.faulty_upstream import FaultyUpstream

    upstream = FaultyUpstream(
        users={HOSTILE.split()[1]: "hostile", OTHER.split()[1]: "other"},
        extra_tools=scaled_definitions(tools),
        page_size=1000,
    )
    upstream.requests = _Discard()
    uvicorn.run(upstream, host="127.0.0.1", port=port, log_level="warning", lifespan="off")


class _Discard(list):
    def append(self, item: Any) -> None:
        pass


def hostile_queries(chars: int, seed: int) -> list[str]:
    """Five queries of `chars` characters of made-up words: each word new to the stemmer's cache."""
    rng = random.Random(seed)
    queries = []
    for _ in range(5):
        words, size = [], 0
        while size < chars:
            word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9)))
            words.append(word)
            size += len(word) + 1
        queries.append(" ".join(words)[:chars])
    return queries


def search(arguments: dict[str, Any], request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "search_tools", "arguments": arguments},
    }


async def timed(client: httpx.AsyncClient, token: str, arguments: dict[str, Any] | bytes) -> dict[str, Any]:
    body = arguments if isinstance(arguments, bytes) else json.dumps(search(arguments, 1)).encode()
    headers = {"Authorization": token, "Content-Type": "application/json"}
    started = time.perf_counter()
    reply = await client.post("/mcp", content=body, headers=headers)
    ms = (time.perf_counter() - started) * 1000
    outcome = "http error"
    if reply.status_code == 200:
        result = reply.json().get("result", {})
        error = (result.get("structuredContent") or {}).get("error") or {}
        outcome = f"refused ({error.get('kind')})" if result.get("isError") else "ranked"
    return {"ms": ms, "status": reply.status_code, "bytes": len(reply.content), "outcome": outcome}


async def drive(base: str, args: argparse.Namespace) -> dict[str, Any]:
    queries = evaluation_queries()
    limits = httpx.Limits(max_connections=4)
    async with (
        httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as other,
        httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as hostile,
    ):
        for token, client in ((HOSTILE, hostile), (OTHER, other)):  # list and index both catalogs
            warm = await timed(client, token, {"query": "warm up"})
            assert warm["status"] == 200, warm
        alone = [(await timed(other, OTHER, {"query": queries[i % len(queries)]}))["ms"] for i in range(30)]

        # Built before the clock starts: this client's own work must not delay the other caller.
        bodies = [
            json.dumps(search({"queries": hostile_queries(args.query_chars, seed)}, seed)).encode()
            for seed in range(args.attacks)
        ]
        attacking = True
        during: list[float] = []

        async def keep_searching() -> None:
            n = 0
            while attacking:
                during.append((await timed(other, OTHER, {"query": queries[n % len(queries)]}))["ms"])
                n += 1

        background = asyncio.create_task(keep_searching())
        attacks = []
        for body in bodies:
            attacks.append(await timed(hostile, HOSTILE, body))
        attacking = False
        await background
    return {"alone": alone, "during": during, "attacks": attacks}


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50_ms": round(statistics.median(samples), 1),
        "max_ms": round(max(samples), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command")
    upstream = commands.add_parser("upstream", help="(internal) run the bench upstream")
    upstream.add_argument("--port", type=int, required=True)
    upstream.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--query-chars", type=int, default=190_000)
    parser.add_argument("--attacks", type=int, default=5)
    parser.add_argument("--embedder", default="none", choices=("none", "auto", "model2vec"))
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    if args.command == "upstream":
        run_upstream(args.port, args.tools)
        return 0
    method = method_line(
        sizes=[args.tools], query_chars=args.query_chars, attacks=args.attacks, embedder=args.embedder
    )
    up_port, proxy_port = free_port(), free_port()
    upstream_cmd = [PYTHON, __file__, "upstream", "--port", str(up_port), "--tools", str(args.tools)]
    with process(upstream_cmd):
        wait_listening(f"http://127.0.0.1:{up_port}/")
        serve = [
            TOOLSEARCH,
            "serve",
            "--port",
            str(proxy_port),
            "--upstream",
            f"http://127.0.0.1:{up_port}/mcp",
        ]
        serve += ["--embedder", args.embedder, "--log-level", "WARNING"]
        with process(serve):
            wait_listening(f"http://127.0.0.1:{proxy_port}/healthz")
            figures = asyncio.run(drive(f"http://127.0.0.1:{proxy_port}", args))
    result = {
        "other_alone": summary(figures["alone"]),
        "other_under_attack": summary(figures["during"]),
        "hostile": summary([attack["ms"] for attack in figures["attacks"]]),
        "hostile_outcomes": sorted({a["outcome"] for a in figures["attacks"]}),
        "hostile_response_bytes": max(a["bytes"] for a in figures["attacks"]),
    }
    print(f"other caller alone:        {result['other_alone']}")
    print(f"other caller under attack: {result['other_under_attack']}")
    print(
        f"hostile calls:             {result['hostile']}, outcomes {result['hostile_outcomes']},"
        f" largest response {result['hostile_response_bytes']:,} bytes"
    )
    write_json(args.json, method, {"figures": result, "samples": figures})
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
