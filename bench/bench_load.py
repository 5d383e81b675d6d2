"""Load on loopback: the local server under many concurrent callers, then the Lambda handler
under a stream of events. A benchmark, not a test: it prints figures.

    .venv/bin/python bench/bench_load.py [--seconds 30] [--callers 50] [--tokens 300]
                                         [--tools 500] [--events 3000] [--embedder none|auto]

Three processes for the local part, so the figures are the proxy's own: the upstream (this
script's `upstream` command: the reliability fixture upstream, each token a user seeing
`--tools` shared tools plus a private one), the proxy (`toolsearch serve`), and this load
generator. Each of `--callers` workers loops for `--seconds`, as a random one of `--tokens`
callers, over a mix of requests: search_tools (60%), describe_tool (10%), call_read_tool (20%),
call_read_tools with three calls (10%). More tokens than `catalog_memory_entries` (256) makes
the proxy evict and list again, which is what memory must survive.

The Lambda part loads functions/proxy/app.py in this process (as a cold start does) and calls
`handler` with `--events` HTTP API events, one at a time as Lambda does, over the same mix.

Prints throughput, p50/p99 latency, errors (must be 0) and the proxy's RSS after each quarter
of the requests (it must level off). Exit status 1 when any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import importlib.util
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
PYTHON = sys.executable
TOOLSEARCH = str(Path(PYTHON).with_name("toolsearch"))
HANDLER_PATH = ROOT / "functions" / "proxy" / "app.py"
QUERIES = [
    "list open invoices for a customer",
    "send a message to a channel",
    "private report",
    "find a user by email",
    "create a calendar event tomorrow",
    "restart a deployment",
    "notes search",
    "rapport privé des ventes",
]


PRIVATE = re.compile(r"private_user\d+_report")


def token_of(n: int) -> str:
    return f"bench-token-{n:04d}"


# -- the upstream process


def run_upstream(port: int, tokens: int, tools: int) -> None:
    import uvicorn

    from fixtures.catalogs import tool_definitions
    from fixtures.faulty_upstream import FaultyUpstream

    upstream = FaultyUpstream(
        users={token_of(n): f"user{n:04d}" for n in range(tokens)}, extra_tools=tool_definitions(tools)
    )
    upstream.requests = _Discard()  # a long run must not remember every request
    uvicorn.run(upstream, host="127.0.0.1", port=port, log_level="warning", lifespan="off")


class _Discard(list):
    def append(self, item: Any) -> None:
        pass


# -- helpers


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_listening(url: str, seconds: float = 120) -> None:
    import httpx

    deadline = time.monotonic() + seconds
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not come up") from None
            time.sleep(0.2)


@contextlib.contextmanager
def process(args: list[str], env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    child = subprocess.Popen(args, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    try:
        yield child
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def request_for(rng: random.Random, user: str, request_id: int) -> tuple[str, dict[str, Any]]:
    """A tools/call of one of the five, in the mix's proportions: (tool name, its arguments)."""
    roll = rng.random()
    if roll < 0.6:
        return "search_tools", {"query": rng.choice(QUERIES), "limit": 8}
    if roll < 0.7:
        return "describe_tool", {"names": ["notes_get", f"private_{user}_report"]}
    if roll < 0.9:
        return "call_read_tool", {"name": "notes_get", "arguments": {"id": request_id}}
    calls = [
        {"name": "notes_get", "arguments": {"id": 1}},
        {"name": "notes_search", "arguments": {"text": "x"}},
        {"name": f"private_{user}_report"},
    ]
    return "call_read_tools", {"calls": calls}


def message(tool: str, arguments: dict, request_id: int) -> tuple[dict[str, str], bytes]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta},
    }
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    return headers, json.dumps(body).encode()


def failed(status: int, body: bytes, user: str) -> str | None:
    """Why an answer counts as an error, or None. A tool result must be ours and not an error."""
    if status != 200:
        return f"HTTP {status}"
    answer = json.loads(body)
    if "error" in answer:
        return f"JSON-RPC {answer['error'].get('code')}"
    result = answer["result"]
    if result.get("isError"):
        return "tool error: " + result["content"][0]["text"][:80]
    if set(PRIVATE.findall(json.dumps(result))) - {f"private_{user}_report"}:
        return "another caller's tool"
    return None


def summary(label: str, latencies: list[float], errors: dict[str, int], elapsed: float) -> None:
    count = len(latencies)
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000 if ordered else float("nan")
    p99 = ordered[min(count - 1, int(count * 0.99))] * 1000 if ordered else float("nan")
    print(
        f"{label}: {count} requests in {elapsed:.1f} s = {count / elapsed:.0f} req/s; "
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms; errors {sum(errors.values())}"
        + (f" {dict(errors)}" if errors else "")
    )


# -- the local server


async def drive_local(base: str, args: argparse.Namespace, proxy_pid: int) -> int:
    import httpx

    rng = random.Random(1)
    latencies: list[float] = []
    errors: dict[str, int] = {}
    rss: list[tuple[int, float]] = []
    limits = httpx.Limits(max_connections=args.callers, max_keepalive_connections=args.callers)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:

        async def one(n: int, record: bool, user_n: int | None = None) -> None:
            user_n = rng.randrange(args.tokens) if user_n is None else user_n
            user = f"user{user_n:04d}"
            tool, arguments = request_for(rng, user, n)
            headers, body = message(tool, arguments, n)
            headers["authorization"] = f"Bearer {token_of(user_n)}"
            started = time.perf_counter()
            try:
                reply = await client.post("/mcp", content=body, headers=headers)
                why = failed(reply.status_code, reply.content, user)
            except httpx.HTTPError as exc:
                why = type(exc).__name__
            if record:
                latencies.append(time.perf_counter() - started)
                if why:
                    errors[why] = errors.get(why, 0) + 1

        # Warm-up, not counted: every caller's catalog listed once.
        started = time.perf_counter()
        for first in range(0, args.tokens, args.callers):
            batch = range(first, min(first + args.callers, args.tokens))
            await asyncio.gather(*(one(0, False, user_n) for user_n in batch))
        print(f"warm-up: {time.perf_counter() - started:.1f} s; proxy RSS {rss_mib(proxy_pid):.0f} MiB")

        counter = iter(range(10**9))
        stop_at = time.monotonic() + args.seconds
        marks = [args.seconds * q / 4 for q in (1, 2, 3, 4)]

        async def worker() -> None:
            while time.monotonic() < stop_at:
                await one(next(counter), True)

        async def sampler() -> None:
            begun = time.monotonic()
            for mark in marks:
                await asyncio.sleep(max(0.0, begun + mark - time.monotonic()))
                rss.append((len(latencies), rss_mib(proxy_pid)))

        started = time.perf_counter()
        await asyncio.gather(sampler(), *(worker() for _ in range(args.callers)))
        elapsed = time.perf_counter() - started
    summary(f"local server, {args.callers} callers, {args.tokens} tokens", latencies, errors, elapsed)
    print("  proxy RSS after N requests: " + ", ".join(f"{n}: {mib:.0f} MiB" for n, mib in rss))
    return sum(errors.values())


def local_part(args: argparse.Namespace) -> int:
    up_port, proxy_port = free_port(), free_port()
    upstream_cmd = [
        PYTHON,
        __file__,
        "upstream",
        "--port",
        str(up_port),
        "--tokens",
        str(args.tokens),
        "--tools",
        str(args.tools),
    ]
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
        # Throughput of the whole: no per-caller rate (bench_gateway_burst.py measures that bound).
        serve += ["--caller-rate", "0"]
        with process(serve) as proxy:
            wait_listening(f"http://127.0.0.1:{proxy_port}/healthz")
            print(f"proxy pid {proxy.pid}, RSS at start {rss_mib(proxy.pid):.0f} MiB")
            errors = asyncio.run(drive_local(f"http://127.0.0.1:{proxy_port}", args, proxy.pid))
        return errors


# -- the Lambda handler


def http_api_event(tool: str, arguments: dict, request_id: int, token: str) -> dict[str, Any]:
    event = json.loads((ROOT / "events" / "http-api-search-tools.json").read_text())
    headers, body = message(tool, arguments, request_id)
    event["headers"].update(headers)
    event["headers"]["authorization"] = f"Bearer {token}"
    event["headers"]["content-length"] = str(len(body))
    event["body"] = body.decode()
    return event


class Context:
    aws_request_id = "bench"
    function_name = "toolsearch-proxy"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:toolsearch-proxy"
    function_version = "$LATEST"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def lambda_part(args: argparse.Namespace) -> int:
    if not HANDLER_PATH.exists():
        print("Lambda handler: functions/proxy/app.py is missing; skipped")
        return 0
    up_port = free_port()
    upstream_cmd = [PYTHON, __file__, "upstream", "--port", str(up_port)]
    upstream_cmd += ["--tokens", str(args.tokens), "--tools", str(args.tools)]
    with process(upstream_cmd):
        wait_listening(f"http://127.0.0.1:{up_port}/")
        os.environ.update(
            TOOLSEARCH_UPSTREAM=f"http://127.0.0.1:{up_port}/mcp",
            TOOLSEARCH_EMBEDDER=args.embedder,
            TOOLSEARCH_LOG_LEVEL="WARNING",
            TOOLSEARCH_CALLER_RATE="0",
            POWERTOOLS_METRICS_NAMESPACE="Bench",
        )
        started = time.perf_counter()
        spec = importlib.util.spec_from_file_location("lambda_handler_bench", HANDLER_PATH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        with contextlib.redirect_stdout(open(os.devnull, "w")):
            spec.loader.exec_module(module)
        print(f"Lambda cold start (import): {(time.perf_counter() - started) * 1000:.0f} ms")
        rng = random.Random(2)
        latencies: list[float] = []
        errors: dict[str, int] = {}
        rss: list[tuple[int, float]] = []
        quarter = max(1, args.events // 4)
        begun = time.perf_counter()
        with contextlib.redirect_stdout(open(os.devnull, "w")):
            for n in range(args.events):
                user_n = rng.randrange(args.tokens)
                user = f"user{user_n:04d}"
                tool, arguments = request_for(rng, user, n)
                event = http_api_event(tool, arguments, n, token_of(user_n))
                started = time.perf_counter()
                response = module.handler(event, Context())
                latencies.append(time.perf_counter() - started)
                body = response["body"]
                raw = base64.b64decode(body) if response.get("isBase64Encoded") else body.encode()
                why = failed(response["statusCode"], raw, user)
                if why:
                    errors[why] = errors.get(why, 0) + 1
                if (n + 1) % quarter == 0:
                    rss.append((n + 1, rss_mib(os.getpid())))
        elapsed = time.perf_counter() - begun
        module.loop.settle(timeout=30)
    summary(f"Lambda handler, {args.events} events, {args.tokens} tokens", latencies, errors, elapsed)
    print("  process RSS after N events: " + ", ".join(f"{n}: {mib:.0f} MiB" for n, mib in rss))
    return sum(errors.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command")
    upstream = commands.add_parser("upstream", help="(internal) run the bench upstream")
    upstream.add_argument("--port", type=int, required=True)
    upstream.add_argument("--tokens", type=int, default=300)
    upstream.add_argument("--tools", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--tools", type=int, default=500, help="shared tools in every caller's catalog")
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--embedder", default="none", choices=("none", "auto", "model2vec"))
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-lambda", action="store_true")
    args = parser.parse_args()
    if args.command == "upstream":
        run_upstream(args.port, args.tokens, args.tools)
        return 0
    print(f"load average before the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    errors = 0
    if not args.skip_local:
        errors += local_part(args)
    if not args.skip_lambda:
        errors += lambda_part(args)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
