"""CPU per request of search_tools and tools/list in process, by component: the ASGI app called directly.

    .venv/bin/python bench/bench_http_search.py upstream 18777 1879 &   # the upstream, left running
    PYTHONPATH=shared .venv/bin/python bench/profile_request_path.py --upstream http://127.0.0.1:18777/mcp
    /tmp/old-72b8995/.venv/bin/python bench/profile_request_path.py --upstream ... --ranker none

Whichever toolsearch the interpreter imports builds its proxy (`embedder none`), warms it, and is
called as an ASGI app (no server, no socket: HTTP parsing and writes are left out, the same for
every release) with the requests bench_http_search.py sends: one search_tools per evaluation
question, then tools/list. Printed per method: CPU time per request (`time.process_time`, the least
of three passes after a warm one) and, from one pass under cProfile, that time split by component
(each function's own time, shared out in proportion) and the calls per request: call counts do not
depend on the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import json
import logging
import re
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import evaluation_queries

MODERN = "2026-07-28"
COMPONENTS = (
    ("ranking (search/)", r"toolsearch/search/|numpy|scipy"),
    ("JSON parse and serialise", r"json/|response_size"),
    ("argument checks", r"jsonschema|referencing|validation|schema_keywords|patterns|nesting"),
    ("caller identity", r"callers|credentials|authenticators|http_edge|aws_iam|bounded"),
    ("MCP edge", r"starlette|endpoint|negotiation|jsonrpc|param_headers|protocol|asyncio|deadline"),
    ("the tool", r"service|finding|results|catalog|tooldefs|calling|telemetry|logs|fairness"),
)
Headers = list[tuple[bytes, bytes]]


def request(method: str, params: dict[str, Any], n: int) -> tuple[Headers, bytes]:
    params = {
        **params,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "profile", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }
    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).encode()
    headers = [
        (b"host", b"127.0.0.1:8080"),
        (b"authorization", b"Bearer bench-http-search"),
        (b"mcp-protocol-version", MODERN.encode()),
        (b"mcp-method", method.encode()),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if method == "tools/call":
        headers.append((b"mcp-name", str(params["name"]).encode()))
    return headers, body


async def call(app: Any, headers: Headers, body: bytes) -> None:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.sleep(3600)  # the client stays: nothing more comes
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    if status != [200]:
        raise SystemExit(f"answered {status}")


def components(profile: cProfile.Profile, cpu_us: float) -> tuple[dict[str, float], int]:
    """Own time by component and all calls, per code object (pstats would merge two of one label)."""
    own: collections.Counter[str] = collections.Counter()
    calls = 0
    for entry in profile.getstats():  # type: ignore[attr-defined]
        calls += entry.callcount
        code = entry.code
        path, name = (code.co_filename, code.co_name) if hasattr(code, "co_filename") else ("~", str(code))
        if path == __file__ and name in ("call", "receive", "send"):
            continue
        where = f"{path}:{name}"
        component = next((c for c, rx in COMPONENTS if re.search(rx, where)), "other (builtins, event loop)")
        own[component] += entry.inlinetime
    total = sum(own.values()) or 1.0
    return {c: cpu_us * t / total for c, t in own.items()}, calls


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from toolsearch.app import build_proxy
    from toolsearch.settings import Settings

    logging.disable(logging.INFO)
    options: dict[str, Any] = {"upstream": args.upstream, "embedder": "none"}
    if args.ranker != "none":
        options["ranker"] = args.ranker
    app = build_proxy(Settings(**options)).app
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    receive: Callable[[], Awaitable[dict[str, Any]]] = inbox.get
    await inbox.put({"type": "lifespan.startup"})
    lifespan = asyncio.create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, outbox.put)
    )
    await outbox.get()
    searches = [
        request("tools/call", {"name": "search_tools", "arguments": {"query": q}}, n)
        for n, q in enumerate(evaluation_queries())
    ]
    listings = [request("tools/list", {}, n) for n in range(args.lists)]
    results: dict[str, Any] = {}
    for method, requests in (("search_tools", searches), ("tools/list", listings)):
        passes = []
        for _ in range(4):  # the first warms (catalog listed and indexed, caches filled)
            start = time.process_time()
            for headers, body in requests:
                await call(app, headers, body)
            passes.append((time.process_time() - start) / len(requests) * 1e6)
        cpu_us = min(passes[1:])
        profile = cProfile.Profile()
        profile.enable()
        for headers, body in requests:
            await call(app, headers, body)
        profile.disable()
        shares, calls = components(profile, cpu_us)
        results[method] = {
            "requests": len(requests),
            "cpu_us": round(cpu_us, 1),
            "calls_per_request": round(calls / len(requests)),
            "components_us": {c: round(us, 1) for c, us in sorted(shares.items(), key=lambda i: -i[1])},
        }
    await inbox.put({"type": "lifespan.shutdown"})
    await outbox.get()
    await lifespan
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--upstream", required=True, help="an upstream serving the bench's tools")
    parser.add_argument("--ranker", default="fusion", help="fusion, learned, or none (a release without it)")
    parser.add_argument("--lists", type=int, default=300, help="tools/list requests a pass")
    arguments = parser.parse_args()
    figures = asyncio.run(main(arguments))
    for method, figure in figures.items():
        print(f"{method}: {figure['cpu_us']} us CPU a request, {figure['calls_per_request']} calls")
        for component, us in figure["components_us"].items():
            print(f"  {component:32s} {us:7.1f}")
    print(json.dumps(figures))
