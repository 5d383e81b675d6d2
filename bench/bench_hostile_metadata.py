"""What a hostile upstream's protected-resource metadata costs the proxy: time, memory, fetches.

    .venv/bin/python bench/bench_hostile_metadata.py [--json PATH]

Per scenario, two fresh processes on loopback: an upstream whose
`/.well-known/oauth-protected-resource*` misbehaves one way, and the proxy
(`build_proxy`, served by uvicorn) in front of it. This client asks the proxy
for its metadata, anonymously, and reports the seconds until the answer, the
proxy process's peak RSS growth (VmHWM, before and after), and how many
metadata requests reached the upstream. Scenarios:
- huge:        a 200 MB body (one 64 KiB chunk sent again and again), 1 asker;
- huge x8:     the same, 8 askers at once;
- trickle:     one byte every 0.5 s, for up to 120 s;
- recovery:    503 first; then the upstream recovers: seconds until an asker sees its servers;
- wrong type:  `authorization_servers: 5`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import httpx
from benchlib import add_tests_to_path, method_line, write_json

HUGE = 200 * 1024 * 1024
CHUNK = b" " * 65536
METADATA = "/.well-known/oauth-protected-resource/mcp"


def _serve(app: Any, port: int) -> None:
    import uvicorn

    uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")).run()


def _upstream_process(port: int, mode: str) -> None:
    state = {"hits": 0, "mode": mode}
    base = f"http://127.0.0.1:{port}"
    good = json.dumps({"resource": base + "/mcp", "authorization_servers": [base + "/auth"]}).encode()

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):  # the (empty) request body, so the next is a disconnect
            pass
        path = scope["path"]
        if path == "/hits":
            await _answer(send, 200, json.dumps(state).encode())
            return
        if path == "/recover":
            state["mode"] = "ok"
            await _answer(send, 200, b"{}")
            return
        if not path.startswith("/.well-known/oauth-protected-resource"):
            await _answer(send, 401, b"{}")
            return
        state["hits"] += 1
        current = state["mode"]
        if current == "status":
            await _answer(send, 503, b"{}")
        elif current == "wrong_type":
            await _answer(send, 200, b'{"authorization_servers": 5}')
        elif current in ("huge", "trickle"):
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            gone = asyncio.ensure_future(receive())
            chunk, pause, total = (CHUNK, 0.0, HUGE) if current == "huge" else (b" ", 0.5, 240)
            sent = 0
            while sent < total and not gone.done():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                sent += len(chunk)
                await asyncio.sleep(pause)
            gone.cancel()
            await send({"type": "http.response.body", "body": good})
        else:
            await _answer(send, 200, good)

    _serve(app, port)


async def _answer(send: Any, status: int, body: bytes) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": body})


def _proxy_process(upstream_url: str, port: int) -> None:
    import logging

    from toolsearch.app import build_proxy
    from toolsearch.settings import Settings

    logging.disable(logging.WARNING)
    _serve(build_proxy(Settings(upstream=upstream_url, embedder="none")).app, port)


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _wait(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not start")


async def _ask(base: str, askers: int) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=300) as http:
        replies = await asyncio.gather(*(http.get(base + METADATA) for _ in range(askers)))
    for reply in replies:
        if reply.status_code != 200:
            raise SystemExit(f"metadata answered {reply.status_code}: {reply.text[:200]}")
    return [reply.json() | {"_cache": reply.headers.get("cache-control")} for reply in replies]


def scenario(name: str, mode: str, askers: int = 1) -> dict[str, Any]:
    add_tests_to_path()
    from fixtures.servers import free_port

    context = multiprocessing.get_context("spawn")
    up_port, proxy_port = free_port(), free_port()
    up_base, proxy_base = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{proxy_port}"
    upstream = context.Process(target=_upstream_process, args=(up_port, mode), daemon=True)
    proxy = context.Process(target=_proxy_process, args=(up_base + "/mcp", proxy_port), daemon=True)
    upstream.start()
    proxy.start()
    try:
        _wait(up_base + "/hits")
        _wait(proxy_base + "/healthz")
        before = _peak_rss_mib(proxy.pid)
        started = time.perf_counter()
        documents = asyncio.run(_ask(proxy_base, askers))
        seconds = time.perf_counter() - started
        result: dict[str, Any] = {
            "scenario": name,
            "askers": askers,
            "seconds": round(seconds, 2),
            "proxy_peak_rss_growth_mib": round(_peak_rss_mib(proxy.pid) - before, 1),
            "upstream_fetches": httpx.get(up_base + "/hits").json()["hits"],
            "authorization_servers": documents[0]["authorization_servers"],
            "cache_control": documents[0]["_cache"],
        }
        if mode == "status":
            httpx.get(up_base + "/recover")
            recovered = time.perf_counter()
            while not asyncio.run(_ask(proxy_base, 1))[0]["authorization_servers"]:
                time.sleep(0.1)
            result["seconds_to_see_recovery"] = round(time.perf_counter() - recovered, 2)
        return result
    finally:
        for process in (proxy, upstream):
            process.terminate()  # only the two processes started here
            process.join(timeout=15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    method = method_line(scenario_bytes=HUGE)
    results = [
        scenario("huge", "huge"),
        scenario("huge x8", "huge", askers=8),
        scenario("trickle", "trickle"),
        scenario("recovery", "status"),
        scenario("wrong type", "wrong_type"),
    ]
    print(f"{'scenario':<12} {'askers':>6} {'seconds':>8} {'RSS +MiB':>9} {'fetches':>8}  answer")
    for r in results:
        extra = (
            f", recovery seen after {r['seconds_to_see_recovery']} s"
            if "seconds_to_see_recovery" in r
            else ""
        )
        answer = f"servers={r['authorization_servers']} cache={r['cache_control']}{extra}"
        print(
            f"{r['scenario']:<12} {r['askers']:>6} {r['seconds']:>8} {r['proxy_peak_rss_growth_mib']:>9} "
            f"{r['upstream_fetches']:>8}  {answer}"
        )
    write_json(args.json, method, results)


if __name__ == "__main__":
    main()
