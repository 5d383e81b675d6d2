"""search_tools and tools/list over HTTP: this tree's proxy against an older release's, same run.

    .venv/bin/python bench/bench_http_search.py [--old-python /tmp/old-72b8995/.venv/bin/python]
        [--tools 1879] [--rounds 2] [--lists 300] [--era modern|legacy] [--json PATH]

The older release is installed into a venv of its own, from the commit's own files:

    git archive 72b8995 | tar -x -C /tmp/old-72b8995
    python3.13 -m venv /tmp/old-72b8995/.venv
    /tmp/old-72b8995/.venv/bin/pip install /tmp/old-72b8995 uvicorn

Processes on loopback (127.0.0.1), each with its own GIL: one upstream (the official MCP SDK,
stateless, JSON answers: tests/fixtures/catalog_upstream.py) serving `--tools` generated tools in
the demo catalog's style (bench/benchlib.py), and in front of it, each served by uvicorn with
lexical search (`embedder none`, no model):
- `old`: the older release's `build_proxy`, run by `--old-python` (its own installed package);
- `fusion`: this tree's, `ranker fusion` (the older release's ranking: like for like);
- `learned`: this tree's, `ranker learned` (the default).
This client (httpx, one kept-alive connection to each proxy, one caller) warms each proxy (its
catalog listed and indexed), then asks every proxy the same request in turn, the order rotating,
so all of them see the same machine load: `search_tools` with one query each (the evaluation
set's questions, en + lt, `--rounds` times), then `tools/list` `--lists` times. Printed per
proxy and method: p50 and p90 of the wall time, the ratio of the p50 to the old one's, and the
proxy process's CPU time per request (work, not waiting: less noisy on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "Bearer bench-http-search"
OLD_PYTHON = "/tmp/old-72b8995/.venv/bin/python"


# -- the server processes (run as this script's subcommands)


def _serve(app: Any, port: int) -> None:
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    uvicorn.Server(config).run()


def serve_upstream(port: int, tools: int) -> None:
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]
    from benchlib import scaled_definitions
    from mcp.server.transport_security import TransportSecuritySettings

    from fixtures.catalog_upstream import build_server

    app = build_server(scaled_definitions(tools), []).streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    _serve(app, port)


def serve_proxy(port: int, upstream: str, ranker: str | None) -> None:
    """A proxy of whichever toolsearch this interpreter imports (the older release has no ranker)."""
    import logging

    from toolsearch.app import build_proxy
    from toolsearch.settings import Settings

    logging.disable(logging.INFO)  # a log line per request would be timed too, differently per release
    options: dict[str, Any] = {"upstream": upstream, "embedder": "none"}
    if ranker is not None:
        options["ranker"] = ranker
    _serve(build_proxy(Settings(**options)).app, port)


# -- the client


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_until_serving(url: str, process: subprocess.Popen[bytes]) -> None:
    """Until the port takes a connection (a GET to the SDK's /mcp would open an event stream)."""
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(url)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server for {url} exited ({process.returncode})")
        try:
            socket.create_connection((address.hostname, address.port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not start")


def _request(era: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests"))
    from fixtures.mcp_wire import legacy, modern

    return modern(method, params) if era == "modern" else legacy(method, params)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]
    from benchlib import evaluation_queries

    from fixtures.servers import free_port

    script = str(Path(__file__).resolve())
    new_env = {**os.environ, "PYTHONPATH": f"{ROOT / 'shared'}:{ROOT}"}
    old_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    upstream_port = free_port()
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    processes: dict[str, subprocess.Popen[bytes]] = {}
    urls: dict[str, str] = {}
    try:
        processes["upstream"] = subprocess.Popen(
            [sys.executable, script, "upstream", str(upstream_port), str(args.tools)], env=new_env
        )
        _wait_until_serving(upstream_url, processes["upstream"])
        for name, python, env, ranker in (
            ("old", args.old_python, old_env, None),
            ("fusion", sys.executable, new_env, "fusion"),
            ("learned", sys.executable, new_env, "learned"),
        ):
            port = free_port()
            command = [python, script, "proxy", str(port), upstream_url] + ([ranker] if ranker else [])
            processes[name] = subprocess.Popen(command, env=env, cwd="/")  # cwd: no tree on sys.path
            urls[name] = f"http://127.0.0.1:{port}/mcp"
        for name, url in urls.items():
            _wait_until_serving(url, processes[name])
        names = list(urls)
        clients = {name: httpx.Client(headers={"Authorization": TOKEN}, timeout=60) for name in names}
        queries = evaluation_queries() * args.rounds

        def ask(name: str, request: dict[str, Any]) -> float:
            start = time.perf_counter()
            answer = clients[name].post(urls[name], **request)
            elapsed = time.perf_counter() - start
            body = answer.json()
            if answer.status_code != 200 or "result" not in body or body["result"].get("isError"):
                raise SystemExit(f"{name}: {answer.status_code} {answer.text[:300]}")
            return elapsed

        def search(query: str) -> dict[str, Any]:
            arguments = {"query": query}
            return _request(args.era, "tools/call", {"name": "search_tools", "arguments": arguments})

        def listing() -> dict[str, Any]:
            return _request(args.era, "tools/list")

        for query in queries[:30]:  # the first request lists and indexes the caller's catalog
            for name in names:
                ask(name, search(query))
                ask(name, listing())
        results: dict[str, Any] = {}
        for method, requests in (
            ("search_tools", [search(q) for q in queries]),
            ("tools/list", [listing() for _ in range(args.lists)]),
        ):
            samples: dict[str, list[float]] = {name: [] for name in names}
            cpu_before = {name: cpu_seconds(processes[name].pid) for name in names}
            for n, request in enumerate(requests):
                for name in names[n % len(names) :] + names[: n % len(names)]:  # the order rotates
                    samples[name].append(ask(name, request))
            cpu = {name: cpu_seconds(processes[name].pid) - cpu_before[name] for name in names}
            results[method] = {
                name: {
                    "requests": len(requests),
                    "p50_ms": statistics.median(samples[name]) * 1e3,
                    "p90_ms": _percentile(samples[name], 90) * 1e3,
                    "cpu_ms_per_request": cpu[name] / len(requests) * 1e3,
                }
                for name in names
            }
        for client in clients.values():
            client.close()
        return results
    finally:
        for process in processes.values():  # only the processes started here, each by its own handle
            process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def _old_version(python: str) -> str:
    code = (
        "from importlib import metadata as m; print(' '.join(f'{n}={m.version(n)}' for n in"
        " ('mcp-toolsearch-proxy', 'starlette', 'uvicorn', 'httpx', 'numpy')))"
    )
    try:
        return subprocess.run([python, "-c", code], capture_output=True, text=True, cwd="/").stdout.strip()
    except OSError:
        return "?"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "upstream":
        serve_upstream(int(sys.argv[2]), int(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "proxy":
        serve_proxy(int(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--old-python", default=OLD_PYTHON, help="the older release's venv python")
    parser.add_argument("--tools", type=int, default=1879, help="tools the upstream lists")
    parser.add_argument("--rounds", type=int, default=2, help="times the question set is asked")
    parser.add_argument("--lists", type=int, default=300, help="tools/list requests per proxy")
    parser.add_argument("--era", choices=("modern", "legacy"), default="modern")
    parser.add_argument("--json")
    args = parser.parse_args()
    if not Path(args.old_python).exists():
        raise SystemExit(f"{args.old_python} not found: install the older release (see --help)")
    sys.path.insert(0, str(ROOT / "bench"))
    from benchlib import method_line, write_json

    method = method_line(
        (args.tools,),
        setup="SDK upstream (stateless, JSON) <- proxies (uvicorn, embedder none) <- httpx; 127.0.0.1",
        old=f"{args.old_python} ({_old_version(args.old_python) or '?'})",
        era=args.era,
        requests=f"search_tools: evaluation questions x {args.rounds}; tools/list x {args.lists}",
    )
    results = measure(args)
    print(f"{'method':<13} {'proxy':<8} {'p50_ms':>7} {'p90_ms':>7} {'x old':>6} {'cpu_ms':>7}")
    for method_name, rows in results.items():
        old = rows["old"]["p50_ms"]
        for name, row in rows.items():
            row["p50_ratio_to_old"] = row["p50_ms"] / old
            print(
                f"{method_name:<13} {name:<8} {row['p50_ms']:>7.3f} {row['p90_ms']:>7.3f}"
                f" {row['p50_ratio_to_old']:>6.2f} {row['cpu_ms_per_request']:>7.3f}"
            )
    write_json(args.json, method, results)
    print(json.dumps({m: {n: round(r["p50_ms"], 3) for n, r in rows.items()} for m, rows in results.items()}))


if __name__ == "__main__":
    main()
