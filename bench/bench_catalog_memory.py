"""Memory one caller's catalog costs the proxy, against the bytes of its tools/list JSON.

    .venv/bin/python bench/bench_catalog_memory.py [--tools 10000] [--tool-bytes 4600]
        [--page-size 1000] [--embedder none] [--set max_catalog_bytes=16000000 ...] [--json PATH]

An upstream in a child process (its memory is not counted) lists --tools tools
of about --tool-bytes bytes of JSON each, --page-size a page, over MCP
2026-07-28 on loopback. This process builds the proxy (`build_proxy`, the
settings given with --set, the bundled model with --embedder model2vec) and
asks `search_tools` once, as one caller, as a model would. Printed: the JSON
bytes listed, the resident memory before, the peak during the request (VmHWM,
reset just before it), the resident memory after (what the catalog keeps), and
both per MB of JSON listed; or the error the caller got when a limit refused
the catalog.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import httpx
from benchlib import add_tests_to_path, method_line, write_json

TOKEN = "Bearer bench-catalog-memory"
MIB = 2**20


def _status(field: str) -> int:
    """A VmRSS/VmHWM line of /proc/self/status, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM starts again from VmRSS


def _tool(n: int, size: int) -> dict[str, Any]:
    base = {
        "name": f"tool_{n:05d}",
        "description": f"Tool number {n}. ",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
        "annotations": {"readOnlyHint": n % 2 == 0},
    }
    pad = max(0, size - len(json.dumps(base)))
    words = " ".join(f"word{(n * 7 + i) % 5000}" for i in range(pad // 9 + 1))
    base["description"] += words[:pad]
    return base


def _upstream_app(tools: int, size: int, page_size: int) -> Any:
    pages = [
        [_tool(n, size) for n in range(start, min(tools, start + page_size))]
        for start in range(0, tools, page_size)
    ]

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                done = "startup" if message["type"] == "lifespan.startup" else "shutdown"
                await send({"type": f"lifespan.{done}.complete"})
                if done == "shutdown":
                    return
        from fixtures.servers import read_asgi_body

        raw = await read_asgi_body(receive)
        request = json.loads(raw) if scope["method"] == "POST" else {}
        method, params = request.get("method"), request.get("params") or {}
        if method == "server/discover":
            result: dict[str, Any] = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
        elif method == "tools/list":
            page = int(params.get("cursor") or 0)
            result = {"tools": pages[page]}
            if page + 1 < len(pages):
                result["nextCursor"] = str(page + 1)
        else:
            result = {"content": [], "isError": False}
        body = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": result}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app, sum(len(json.dumps({"tools": page})) for page in pages)


def _upstream_process(tools: int, size: int, page_size: int, port: int, ready: Any) -> None:
    add_tests_to_path()
    import uvicorn

    app, listed = _upstream_app(tools, size, page_size)
    ready.put(listed)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    uvicorn.Server(config).run()


def _setting(text: str) -> tuple[str, Any]:
    name, _, raw = text.partition("=")
    try:
        return name, json.loads(raw)
    except ValueError:
        return name, raw


async def _measure(url: str, embedder: str, changes: dict[str, Any]) -> dict[str, Any]:
    from fixtures.mcp_wire import call
    from toolsearch.app import build_proxy
    from toolsearch.search.embedder import load_configured_embedder
    from toolsearch.settings import Settings

    settings = Settings(upstream=url, embedder=embedder, upstream_timeout=120).replace(**changes)
    proxy = build_proxy(settings, embedder=load_configured_embedder(settings.embedder, settings.model_dir))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app),
        base_url="http://proxy",
        headers={"Authorization": TOKEN},
        timeout=300,
    ) as client:
        await client.get("/healthz")  # the app is up; nothing of the caller's is listed yet
        gc.collect()
        before = _status("VmRSS")
        _reset_peak()
        started = time.perf_counter()
        reply = await client.post("/mcp", **call("search_tools", {"query": "word42"}))
        seconds = time.perf_counter() - started
        peak = _status("VmHWM")
        gc.collect()
        after = _status("VmRSS")
    await proxy.upstream.aclose()
    result = reply.json().get("result", {})
    error = result.get("structuredContent", {}).get("error") if result.get("isError") else None
    return {"before": before, "peak": peak, "after": after, "seconds": seconds, "error": error}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--tool-bytes", type=int, default=4_600)
    parser.add_argument("--page-size", type=int, default=1_000)
    parser.add_argument("--embedder", default="none", choices=("none", "auto", "model2vec"))
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    add_tests_to_path()
    from fixtures.servers import free_port

    method = method_line(
        sizes=[args.tools], tool_bytes=args.tool_bytes, embedder=args.embedder, settings=args.set
    )
    print(json.dumps(method))
    port = free_port()
    context = multiprocessing.get_context("spawn")
    ready = context.Queue()
    child = context.Process(
        target=_upstream_process, args=(args.tools, args.tool_bytes, args.page_size, port, ready), daemon=True
    )
    child.start()
    try:
        listed = ready.get(timeout=120)
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        figures = asyncio.run(
            _measure(f"http://127.0.0.1:{port}/mcp", args.embedder, dict(map(_setting, args.set)))
        )
    finally:
        child.terminate()
        child.join(10)
    mb = listed / 1e6
    print(f"catalog: {args.tools} tools, {listed:,} bytes of tools/list JSON ({mb:.1f} MB)")
    print(f"settings: {args.set or 'defaults'}, embedder {args.embedder}")
    if figures["error"]:
        print(f"the caller got: {figures['error']['kind']}: {figures['error']['message']}")
    print(
        f"RSS before {figures['before'] / MIB:.0f} MiB, peak {figures['peak'] / MIB:.0f} MiB, "
        f"after {figures['after'] / MIB:.0f} MiB; {figures['seconds']:.1f} s"
    )
    if not figures["error"]:
        print(
            f"per MB of JSON: peak +{(figures['peak'] - figures['before']) / MIB / mb:.1f} MiB, "
            f"kept +{(figures['after'] - figures['before']) / MIB / mb:.1f} MiB"
        )
    write_json(args.json, method, {"listed_bytes": listed, **figures})


if __name__ == "__main__":
    main()
