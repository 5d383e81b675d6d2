"""What the proxy adds to a call: call_read_tool through it against the same call made directly.

    .venv/bin/python bench/bench_call_overhead.py [--calls 1000] [--json PATH]

Three processes on loopback (127.0.0.1): the fixture upstream built with the
official MCP SDK (tests/fixtures/sdk_upstream.py, stateless, answers over SSE),
the proxy (`build_proxy`, lexical search, served by uvicorn) in front of it,
and this client (httpx, one kept-alive connection to each). Both paths use MCP
2026-07-28, as the proxy does upstream, with the same bearer token:
- direct: tools/call `echo` {"message": ...} to the upstream;
- proxy:  tools/call `call_read_tool` {"name": "echo", "arguments": {...}} to the
  proxy, which checks the arguments, finds the tool in the caller's warm catalog
  and makes the direct call itself.
Calls alternate (direct, proxy, direct, ...) after a warm-up that lists the
catalog, so both see the same machine load; the figures are each path's p50
and p99, and the p50 and p99 of the paired differences (proxy - direct).
Target: under 2 ms p50 added.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from benchlib import add_tests_to_path, method_line, percentile, write_json

TOKEN = "Bearer bench-overhead"
TARGET_MS = 2.0


def _serve_forever(app: Any, port: int) -> None:
    """uvicorn in this process's main thread: each server has a process (and a GIL) of its own."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    uvicorn.Server(config).run()


def _upstream_process(port: int) -> None:
    add_tests_to_path()
    from mcp.server.transport_security import TransportSecuritySettings

    from fixtures.sdk_upstream import _Gate, build_server  # the fixture upstream, bearer gate included

    sdk_app = build_server().streamable_http_app(
        stateless_http=True,
        json_response=False,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    gate = _Gate(sdk_app, legacy_only=False, base_url=f"http://127.0.0.1:{port}")
    _serve_forever(gate, port)


def _proxy_process(upstream_url: str, port: int) -> None:
    import logging

    from toolsearch.app import build_proxy
    from toolsearch.settings import Settings

    logging.disable(logging.INFO)  # a log line per call is the proxy's cost too, but not this one's
    # One caller makes every call: a rate no run reaches, so the bucket's own cost is still counted.
    proxy = build_proxy(Settings(upstream=upstream_url, embedder="none", caller_rate=1e9))
    _serve_forever(proxy.app, port)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used (Linux /proc), to the clock tick."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_until_serving(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not start")


def measure(calls: int) -> dict[str, Any]:
    add_tests_to_path()
    from fixtures.mcp_wire import modern
    from fixtures.servers import free_port

    context = multiprocessing.get_context("spawn")
    upstream_port, proxy_port = free_port(), free_port()
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    proxy_url = f"http://127.0.0.1:{proxy_port}/mcp"
    upstream = context.Process(target=_upstream_process, args=(upstream_port,), daemon=True)
    proxy = context.Process(target=_proxy_process, args=(upstream_url, proxy_port), daemon=True)
    upstream.start()
    proxy.start()
    try:
        _wait_until_serving(upstream_url)
        _wait_until_serving(proxy_url)
        headers = {"Authorization": TOKEN}
        with (
            httpx.Client(headers=headers, timeout=30) as to_upstream,
            httpx.Client(headers=headers, timeout=30) as to_proxy,
        ):

            def direct(n: int) -> float:
                request = modern("tools/call", {"name": "echo", "arguments": {"message": f"m{n}"}})
                start = time.perf_counter()
                answer = to_upstream.post(upstream_url, **request)
                elapsed = time.perf_counter() - start
                if answer.status_code != 200 or '"isError":true' in answer.text.replace(" ", ""):
                    raise SystemExit(f"direct call failed: {answer.status_code} {answer.text[:300]}")
                return elapsed

            def proxied(n: int) -> float:
                arguments = {"name": "echo", "arguments": {"message": f"m{n}"}}
                request = modern("tools/call", {"name": "call_read_tool", "arguments": arguments})
                start = time.perf_counter()
                answer = to_proxy.post(proxy_url, **request)
                elapsed = time.perf_counter() - start
                result = answer.json().get("result") or {}
                if answer.status_code != 200 or result.get("isError") or "result" not in answer.json():
                    raise SystemExit(f"proxied call failed: {answer.status_code} {answer.text[:300]}")
                return elapsed

            for n in range(50):  # the first proxied call lists and indexes the caller's catalog
                direct(n)
                proxied(n)
            direct_s, proxy_s = [], []
            cpu_before = {name: cpu_seconds(p.pid) for name, p in (("proxy", proxy), ("upstream", upstream))}
            for n in range(calls):
                direct_s.append(direct(n))
                proxy_s.append(proxied(n))
            cpu = {
                name: cpu_seconds(p.pid) - cpu_before[name]
                for name, p in (("proxy", proxy), ("upstream", upstream))
            }
    finally:
        for process in (proxy, upstream):
            process.terminate()  # only the two processes started here
            process.join(timeout=15)
    differences = [p - d for p, d in zip(proxy_s, direct_s, strict=True)]

    def ms(samples: list[float], q: float) -> float:
        return percentile(samples, q) * 1e3

    return {
        "calls": calls,
        "direct_p50_ms": statistics.median(direct_s) * 1e3,
        "direct_p99_ms": ms(direct_s, 99),
        "proxy_p50_ms": statistics.median(proxy_s) * 1e3,
        "proxy_p99_ms": ms(proxy_s, 99),
        "added_p50_ms": statistics.median(differences) * 1e3,
        "added_p99_ms": ms(differences, 99),
        "added_p50_of_p50s_ms": (statistics.median(proxy_s) - statistics.median(direct_s)) * 1e3,
        # Work, not waiting: what each server process spent on the CPU per call it served.
        "proxy_cpu_ms_per_call": cpu["proxy"] / calls * 1e3,
        "upstream_cpu_ms_per_call": cpu["upstream"] / (2 * calls) * 1e3,
    }


async def _cpu_per_call(action: Any, calls: int) -> float:
    for _ in range(30):
        await action()
    start = time.process_time()
    for _ in range(calls):
        await action()
    return (time.process_time() - start) / calls * 1e3


async def _breakdown_layers(upstream_url: str, calls: int) -> dict[str, float]:
    """CPU milliseconds per call of each layer, in this process, against the upstream process."""
    import json
    import logging

    import httpcore

    from fixtures.mcp_wire import legacy, modern
    from toolsearch.app import build_proxy
    from toolsearch.callers.identity import Caller, caller_key
    from toolsearch.settings import Settings

    logging.disable(logging.INFO)
    # One caller makes every call: a rate no run reaches, so the bucket's own cost is still counted.
    proxy = build_proxy(Settings(upstream=upstream_url, embedder="none", caller_rate=1e9))
    caller = Caller(TOKEN, caller_key(upstream_url, TOKEN))
    arguments = {"name": "echo", "arguments": {"message": "hi"}}
    echo = modern("tools/call", {"name": "echo", "arguments": {"message": "hi"}})
    raw_headers = [(k.encode(), v.encode()) for k, v in echo["headers"].items()]
    raw_headers += [(b"Authorization", TOKEN.encode()), (b"Content-Type", b"application/json")]
    raw_body = json.dumps(echo["json"]).encode()
    transport = httpx.ASGITransport(app=proxy.app)
    async with (
        httpx.AsyncClient(
            transport=transport, base_url="http://proxy", headers={"Authorization": TOKEN}
        ) as app,
        httpx.AsyncClient(headers={"Authorization": TOKEN}) as client,
        httpcore.AsyncConnectionPool() as pool,
    ):

        async def whole() -> None:
            reply = await app.post(
                "/mcp", **modern("tools/call", {"name": "call_read_tool", "arguments": arguments})
            )
            if reply.status_code != 200 or reply.json()["result"].get("isError"):
                raise SystemExit(f"call_read_tool failed: {reply.text[:300]}")

        async def ping() -> None:
            await app.post("/mcp", **legacy("ping"))

        async def service() -> None:
            await proxy.service.call(caller, "call_read_tool", arguments)

        async def upstream_client() -> None:
            await proxy.upstream.call_tool(TOKEN, {"name": "echo", "inputSchema": {}}, {"message": "hi"})

        async def bare_httpx() -> None:
            await client.post(upstream_url, **echo)

        async def bare_httpcore() -> None:
            await pool.request("POST", upstream_url, headers=raw_headers, content=raw_body)

        return {
            "app_whole_call_read_tool": await _cpu_per_call(whole, calls),
            "app_ping_no_upstream": await _cpu_per_call(ping, calls),
            "service_call_read_tool": await _cpu_per_call(service, calls),
            "upstream_client_call_tool": await _cpu_per_call(upstream_client, calls),
            "bare_httpx_post": await _cpu_per_call(bare_httpx, calls),
            "bare_httpcore_request": await _cpu_per_call(bare_httpcore, calls),
        }


def breakdown(calls: int) -> dict[str, float]:
    """Where the proxy's CPU goes: each layer timed alone, in process, the upstream in its own."""
    add_tests_to_path()
    import asyncio

    from fixtures.servers import free_port

    port = free_port()
    upstream_url = f"http://127.0.0.1:{port}/mcp"
    upstream = multiprocessing.get_context("spawn").Process(
        target=_upstream_process, args=(port,), daemon=True
    )
    upstream.start()
    try:
        _wait_until_serving(upstream_url)
        return asyncio.run(_breakdown_layers(upstream_url, calls))
    finally:
        upstream.terminate()
        upstream.join(timeout=15)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000, help="calls on each path")
    parser.add_argument("--json")
    parser.add_argument(
        "--breakdown", action="store_true", help="also time each layer's CPU per call, in process"
    )
    args = parser.parse_args()
    method = method_line(
        (),
        setup="fixture upstream (official SDK, stateless, SSE) <- proxy (uvicorn) <- httpx; 127.0.0.1",
        calls=args.calls,
    )
    result = measure(args.calls)
    print("path     p50_ms  p99_ms")
    print(f"direct {result['direct_p50_ms']:>8.3f} {result['direct_p99_ms']:>7.3f}")
    print(f"proxy  {result['proxy_p50_ms']:>8.3f} {result['proxy_p99_ms']:>7.3f}")
    print(
        f"added (paired proxy - direct): p50 {result['added_p50_ms']:.3f} ms,"
        f" p99 {result['added_p99_ms']:.3f} ms;"
        f" difference of the p50s {result['added_p50_of_p50s_ms']:.3f} ms"
    )
    print(
        f"CPU per call: proxy {result['proxy_cpu_ms_per_call']:.2f} ms,"
        f" upstream {result['upstream_cpu_ms_per_call']:.2f} ms (each call it answered)"
    )
    met = result["added_p50_ms"] < TARGET_MS
    print(f"target: under {TARGET_MS:g} ms p50 added: {'met' if met else 'MISSED'}")
    result["target_met"] = met
    if args.breakdown:
        result["cpu_ms_per_call"] = layers = breakdown(min(args.calls, 400))
        print("CPU per call, each layer alone (in process; the upstream in its own process):")
        for name, ms in layers.items():
            print(f"  {name:<28} {ms:6.3f} ms")
    write_json(args.json, method, result)


if __name__ == "__main__":
    main()
