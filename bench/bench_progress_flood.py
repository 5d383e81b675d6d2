"""What an upstream flooding one call with progress notifications costs the proxy and the caller.

    .venv/bin/python bench/bench_progress_flood.py [--notifications 100000] [--message-chars 500]
        [--json PATH]

An upstream in a child process (its CPU and memory are not counted) answers
every tools/call over SSE, on loopback, with --notifications progress
notifications under the token it was sent (each increasing, with a message of
--message-chars characters), as many again under another token, then the
result. This process builds the proxy (`build_proxy`, defaults) and calls the
tool once through `call_read_tool` as a caller asking for progress (its token
and `Accept: text/event-stream`), and once as a caller that does not ask.
Printed for each: seconds (and the proxy's CPU seconds), resident memory before and at the peak (VmHWM, reset
just before the call), the bytes of the answer and the progress events in it.
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

TOKEN = "Bearer bench-progress-flood"
MIB = 2**20
BATCH = 500  # events per chunk the upstream writes


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM starts again from VmRSS


def _upstream_app(notifications: int, message_chars: int) -> Any:
    message = "m" * message_chars

    def note(token: Any, n: int) -> bytes:
        params = {"progressToken": token, "progress": n, "total": notifications, "message": message}
        body = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
        return b"event: message\ndata: " + json.dumps(body).encode() + b"\n\n"

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message_ = await receive()
                done = "startup" if message_["type"] == "lifespan.startup" else "shutdown"
                await send({"type": f"lifespan.{done}.complete"})
                if done == "shutdown":
                    return
        from fixtures.servers import read_asgi_body

        raw = await read_asgi_body(receive)
        request = json.loads(raw) if scope["method"] == "POST" else {}
        method, params = request.get("method"), request.get("params") or {}
        answer_id = request.get("id")
        if method == "tools/call":
            token = (params.get("_meta") or {}).get("progressToken", "none-asked")
            headers = [(b"content-type", b"text/event-stream")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            for start in range(1, notifications + 1, BATCH):
                numbers = range(start, min(notifications + 1, start + BATCH))
                chunk = b"".join(note(token, n) + note("someone-else", n) for n in numbers)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            result = {"content": [{"type": "text", "text": "done"}], "isError": False}
            final = {"jsonrpc": "2.0", "id": answer_id, "result": result}
            last = b"data: " + json.dumps(final).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": last})
            return
        if method == "server/discover":
            result: dict[str, Any] = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
        elif method == "tools/list":
            work = {"name": "work", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
            result = {"tools": [work]}
        else:
            result = {}
        body = json.dumps({"jsonrpc": "2.0", "id": answer_id, "result": result}).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def _upstream_process(notifications: int, message_chars: int, port: int) -> None:
    add_tests_to_path()
    import uvicorn

    config = uvicorn.Config(
        _upstream_app(notifications, message_chars), host="127.0.0.1", port=port, log_level="warning"
    )
    uvicorn.Server(config).run()


async def _measure(url: str) -> list[dict[str, Any]]:
    from fixtures.mcp_wire import call
    from toolsearch.app import build_proxy
    from toolsearch.settings import Settings
    from toolsearch.upstream.sse import SSEParser

    proxy = build_proxy(Settings(upstream=url, embedder="none", upstream_timeout=300))
    figures = []
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app),
        base_url="http://proxy",
        headers={"Authorization": TOKEN},
        timeout=600,
    ) as client:
        await client.post("/mcp", **call("search_tools", {"query": "work"}))  # the catalog, listed once
        for asks in (True, False):
            request = call("call_read_tool", {"name": "work", "arguments": {}})
            if asks:
                request["json"]["params"]["_meta"]["progressToken"] = "caller-1"
            gc.collect()
            before = _status("VmRSS")
            _reset_peak()
            started, cpu = time.perf_counter(), time.process_time()
            reply = await client.post("/mcp", **request)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            peak = _status("VmHWM")
            events = SSEParser(max_event_chars=10_000_000).feed(reply.text) if asks else []
            relayed = sum(1 for e in events if "notifications/progress" in e.data)
            figures.append(
                {
                    "asks_progress": asks,
                    "content_type": reply.headers["content-type"],
                    "answer_bytes": len(reply.content),
                    "progress_events": relayed,
                    "seconds": seconds,
                    "cpu_seconds": cpu,
                    "before": before,
                    "peak": peak,
                }
            )
    await proxy.upstream.aclose()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--notifications", type=int, default=100_000)
    parser.add_argument("--message-chars", type=int, default=500)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    add_tests_to_path()
    from fixtures.servers import free_port

    method = method_line(notifications=args.notifications, message_chars=args.message_chars)
    print(json.dumps(method))
    port = free_port()
    child = multiprocessing.get_context("spawn").Process(
        target=_upstream_process, args=(args.notifications, args.message_chars, port), daemon=True
    )
    child.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        figures = asyncio.run(_measure(f"http://127.0.0.1:{port}/mcp"))
    finally:
        child.terminate()
        child.join(10)
    streamed = 2 * args.notifications * (args.message_chars + 130)
    print(
        f"upstream: {args.notifications:,} progress notifications under the proxy's token and as many "
        f"under another, {args.message_chars}-character messages (~{streamed / 1e6:.0f} MB of SSE)"
    )
    for f in figures:
        who = "caller asks for progress" if f["asks_progress"] else "caller does not ask"
        print(
            f"{who}: {f['seconds']:.1f} s ({f['cpu_seconds']:.1f} s CPU in the proxy); "
            f"answer {f['answer_bytes']:,} bytes ({f['content_type']}), "
            f"{f['progress_events']} progress events; RSS {f['before'] / MIB:.0f} MiB, "
            f"peak {f['peak'] / MIB:.0f} MiB (+{(f['peak'] - f['before']) / MIB:.1f})"
        )
    write_json(args.json, method, {"figures": figures})


if __name__ == "__main__":
    main()
