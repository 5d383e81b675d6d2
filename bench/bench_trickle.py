"""Slow clients against `toolsearch serve`: how many trickling connections it still holds open.

    .venv/bin/python bench/bench_trickle.py [--connections 100] [--seconds 40] [--mode body]
        [--interval 1] [-- serve flags...]

Starts `toolsearch serve` (the built-in demo upstream, lexical search) on a free
loopback port, then opens `--connections` connections that each trickle one
byte every `--interval` seconds:
- body:    full headers of a POST /mcp announcing a 100 kB body, then the body byte by byte;
- headers: a request line, then the headers byte by byte (never finished);
- idle:    connect and send nothing.
After `--seconds` it counts the connections the server still holds open, and
says how the others ended (the status line the server sent, or a bare close)
and after how long. Meanwhile another caller sends tools/list once a second
on its own connection; its latencies show whether the slow clients hurt it.
Extra arguments after `--` go to `toolsearch serve` (for example
`-- --request-read-timeout 5`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from benchlib import method_line, write_json

ROOT = Path(__file__).resolve().parents[1]
BODY_BYTES = 100_000
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_server(port: int, extra: list[str]) -> subprocess.Popen[bytes]:
    command = [
        str(ROOT / ".venv" / "bin" / "toolsearch"),
        "serve",
        "--demo",
        "--embedder",
        "none",
        "--port",
        str(port),
        *extra,
    ]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("toolsearch serve did not start")


def _first_bytes(mode: str, port: int) -> tuple[bytes, bytes]:
    """What a connection sends at once, and what it then trickles."""
    host = f"127.0.0.1:{port}".encode()
    if mode == "body":
        head = (
            b"POST /mcp HTTP/1.1\r\nHost: " + host + b"\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(BODY_BYTES).encode() + b"\r\n\r\n"
        )
        return head, b"x" * BODY_BYTES
    if mode == "headers":
        return b"POST /mcp HTTP/1.1\r\n", b"X-Slow: " + b"a" * 10_000 + b"\r\n"
    return b"", b""


async def _trickler(mode: str, port: int, interval: float, seconds: float) -> dict[str, object]:
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head, rest = _first_bytes(mode, port)
    if head:
        writer.write(head)
    answer = asyncio.ensure_future(reader.read(200))
    outcome: dict[str, object] = {"open": True}
    position = 0
    try:
        while time.monotonic() - started < seconds:
            done, _ = await asyncio.wait({answer}, timeout=interval)
            if done:
                data = answer.result() if not answer.exception() else b""
                status = data.split(b"\r\n", 1)[0].decode(errors="replace") if data else "closed"
                outcome = {"open": False, "ended": status, "after": time.monotonic() - started}
                break
            if rest and position < len(rest):
                try:
                    writer.write(rest[position : position + 1])
                    await writer.drain()
                except ConnectionError:
                    outcome = {"open": False, "ended": "reset", "after": time.monotonic() - started}
                    break
                position += 1
    finally:
        answer.cancel()
        writer.close()
    return outcome


async def _caller(port: int, seconds: float) -> list[float]:
    latencies = []
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=seconds) as client:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            sent = time.perf_counter()
            reply = await client.post("/mcp", json=LIST, headers={"Authorization": "Bearer other-caller"})
            reply.raise_for_status()
            latencies.append((time.perf_counter() - sent) * 1000)
            await asyncio.sleep(1)
    return latencies


async def _attack(args: argparse.Namespace, port: int) -> tuple[list[dict[str, object]], list[float]]:
    tricklers = [_trickler(args.mode, port, args.interval, args.seconds) for _ in range(args.connections)]
    outcomes, latencies = await asyncio.gather(asyncio.gather(*tricklers), _caller(port, args.seconds))
    return list(outcomes), latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--interval", type=float, default=1.0, help="Seconds between two trickled bytes.")
    parser.add_argument("--mode", choices=("body", "headers", "idle"), default="body")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("serve_flags", nargs=argparse.REMAINDER, help="after --: flags of toolsearch serve")
    args = parser.parse_args()
    extra = [flag for flag in args.serve_flags if flag != "--"]
    method = method_line(
        connections=args.connections, mode=args.mode, seconds=args.seconds, serve_flags=" ".join(extra)
    )
    port = _free_port()
    server = _start_server(port, extra)
    try:
        outcomes, latencies = asyncio.run(_attack(args, port))
    finally:
        server.terminate()
        server.wait(timeout=10)
    still_open = sum(1 for o in outcomes if o["open"])
    ended: dict[str, int] = {}
    for outcome in outcomes:
        if not outcome["open"]:
            ended[str(outcome["ended"])] = ended.get(str(outcome["ended"]), 0) + 1
    afters = sorted(float(o["after"]) for o in outcomes if not o["open"])  # type: ignore[arg-type]
    result = {
        "still_open": still_open,
        "connections": args.connections,
        "ended": ended,
        "closed_after_s": {
            "min": round(afters[0], 1) if afters else None,
            "median": round(statistics.median(afters), 1) if afters else None,
            "max": round(afters[-1], 1) if afters else None,
        },
        "other_caller_ms": {
            "requests": len(latencies),
            "median": round(statistics.median(latencies), 1) if latencies else None,
            "max": round(max(latencies), 1) if latencies else None,
        },
    }
    print(f"{still_open} of {args.connections} {args.mode} tricklers still open after {args.seconds:g} s")
    print(f"ended: {ended or 'none'}; closed after (s): {result['closed_after_s']}")
    print(f"another caller meanwhile, tools/list once a second: {result['other_caller_ms']}")
    write_json(args.json, method, result)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    raise SystemExit(main())
