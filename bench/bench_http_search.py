"""search_tools and tools/list over HTTP: this tree's proxy against an older release's, same run.

    .venv/bin/python bench/bench_http_search.py [--old-python /tmp/old-72b8995/.venv/bin/python]
        [--tools 1879] [--rounds 2] [--lists 300] [--era modern|legacy] [--client wire|httpx] [--json PATH]

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
Both releases are served alike: uvicorn's defaults, so httptools and uvloop in both venvs (the
method line names their versions).
This client (one kept-alive connection to each proxy, one caller) warms each proxy (its
catalog listed and indexed), then asks every proxy the same request in turn, the order rotating,
so all of them see the same machine load: `search_tools` with one query each (the evaluation
set's questions, en + lt, `--rounds` times), then `tools/list` `--lists` times. `--client wire`
(the default) writes each request as bytes made beforehand and reads the answer by its
Content-Length on a plain socket, so the timed span holds the proxy's work and the loopback, not a
client library's: httpx spends about 0.4-0.6 ms of CPU on each request here, more than some of
the answers take, and on 2 shared cores that lengthens every wall time alike and hides the gaps.
`--client httpx` times httpx's `post` as before. Printed per proxy and method: p50 and p90 of the
wall time, the ratio of the p50 to the old one's, the proxy process's CPU time per request (user
and system: work, not waiting, less noisy on a shared machine), and this client's CPU per request.
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


class WireClient:
    """One kept-alive HTTP/1.1 connection: requests written as bytes made beforehand (`prepare`),
    answers read by their Content-Length. Nothing but the socket's work in the timed span."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        import socket
        from urllib.parse import urlsplit

        address = urlsplit(url)
        self._host, self._path = address.netloc, address.path
        self._headers = headers
        self._sock = socket.create_connection((address.hostname, address.port), timeout=60)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def prepare(self, request: dict[str, Any]) -> bytes:
        body = json.dumps(request["json"]).encode()
        headers = {
            "Host": self._host,
            "Accept-Encoding": "gzip, deflate",
            "Connection": "keep-alive",
            "User-Agent": "bench-http-search",
            **self._headers,
            **request["headers"],
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
        }
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        return f"POST {self._path} HTTP/1.1\r\n{head}\r\n".encode() + body

    def post(self, raw: bytes) -> tuple[int, bytes]:
        self._sock.sendall(raw)
        data = b""
        while b"\r\n\r\n" not in data:
            data += self._receive()
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        fields = dict(line.split(b":", 1) for line in lines[1:])
        length = int(next(v for k, v in fields.items() if k.strip().lower() == b"content-length"))
        while len(body) < length:
            body += self._receive()
        return int(lines[0].split()[1]), body

    def _receive(self) -> bytes:
        chunk = self._sock.recv(262144)
        if not chunk:
            raise SystemExit("a proxy closed the connection")
        return chunk

    def close(self) -> None:
        self._sock.close()


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
        queries = evaluation_queries() * args.rounds
        wire = {name: WireClient(urls[name], {"Authorization": TOKEN}) for name in names}
        clients = {name: httpx.Client(headers={"Authorization": TOKEN}, timeout=60) for name in names}

        def prepared(request: dict[str, Any]) -> dict[str, Any]:
            """The request as each proxy's client sends it: bytes for the wire client, made now."""
            if args.client == "httpx":
                return {name: request for name in names}
            return {name: wire[name].prepare(request) for name in names}

        def ask(name: str, request: Any) -> float:
            start = time.perf_counter()
            if args.client == "httpx":
                answer = clients[name].post(urls[name], **request)
                elapsed = time.perf_counter() - start
                status, text = answer.status_code, answer.content
            else:
                status, text = wire[name].post(request)
                elapsed = time.perf_counter() - start
            body = json.loads(text)
            if status != 200 or "result" not in body or body["result"].get("isError"):
                raise SystemExit(f"{name}: {status} {text[:300]!r}")
            return elapsed

        def search(query: str) -> dict[str, Any]:
            arguments = {"query": query}
            return _request(args.era, "tools/call", {"name": "search_tools", "arguments": arguments})

        def listing() -> dict[str, Any]:
            return _request(args.era, "tools/list")

        for query in queries[:30]:  # the first request lists and indexes the caller's catalog
            for name in names:
                ask(name, prepared(search(query))[name])
                ask(name, prepared(listing())[name])
        results: dict[str, Any] = {}
        for method, requests in (
            ("search_tools", [prepared(search(q)) for q in queries]),
            ("tools/list", [prepared(listing()) for _ in range(args.lists)]),
        ):
            samples: dict[str, list[float]] = {name: [] for name in names}
            cpu_before = {name: cpu_seconds(processes[name].pid) for name in names}
            client_before = time.process_time()
            for n, request in enumerate(requests):
                for name in names[n % len(names) :] + names[: n % len(names)]:  # the order rotates
                    samples[name].append(ask(name, request[name]))
            client_cpu = (time.process_time() - client_before) / (len(requests) * len(names))
            cpu = {name: cpu_seconds(processes[name].pid) - cpu_before[name] for name in names}
            results[method] = {
                name: {
                    "requests": len(requests),
                    "p50_ms": statistics.median(samples[name]) * 1e3,
                    "p90_ms": _percentile(samples[name], 90) * 1e3,
                    "cpu_ms_per_request": cpu[name] / len(requests) * 1e3,
                    "client_cpu_ms_per_request": client_cpu * 1e3,
                }
                for name in names
            }
        for name in names:
            clients[name].close()
            wire[name].close()
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
        " ('mcp-toolsearch-proxy', 'starlette', 'uvicorn', 'httptools', 'uvloop', 'numpy')))"
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
    parser.add_argument(
        "--client", choices=("wire", "httpx"), default="wire", help="bytes on a socket, or httpx's post"
    )
    parser.add_argument("--json")
    args = parser.parse_args()
    if not Path(args.old_python).exists():
        raise SystemExit(f"{args.old_python} not found: install the older release (see --help)")
    sys.path.insert(0, str(ROOT / "bench"))
    from benchlib import method_line, write_json

    method = method_line(
        (args.tools,),
        setup=f"SDK upstream (stateless, JSON) <- proxies (uvicorn, no model) <- {args.client}; 127.0.0.1",
        old=f"{args.old_python} ({_old_version(args.old_python) or '?'})",
        this=f"{sys.executable} ({_old_version(sys.executable) or '?'})",
        era=args.era,
        requests=f"search_tools: evaluation questions x {args.rounds}; tools/list x {args.lists}",
    )
    results = measure(args)
    print(f"{'method':<13} {'proxy':<8} {'p50_ms':>7} {'p90_ms':>7} {'x old':>6} {'cpu_ms':>7} {'client':>7}")
    for method_name, rows in results.items():
        old = rows["old"]["p50_ms"]
        for name, row in rows.items():
            row["p50_ratio_to_old"] = row["p50_ms"] / old
            print(
                f"{method_name:<13} {name:<8} {row['p50_ms']:>7.3f} {row['p90_ms']:>7.3f}"
                f" {row['p50_ratio_to_old']:>6.2f} {row['cpu_ms_per_request']:>7.3f}"
                f" {row['client_cpu_ms_per_request']:>7.3f}"
            )
    write_json(args.json, method, results)
    print(json.dumps({m: {n: round(r["p50_ms"], 3) for n, r in rows.items()} for m, rows in results.items()}))


if __name__ == "__main__":
    main()
