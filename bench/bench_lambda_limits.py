"""What AWS enforces on the Lambda handler, measured through the real handler (functions/proxy/app.py).

    .venv/bin/python bench/bench_lambda_limits.py [--only size,deadline,refresh] [--scale 1.0] [--json PATH]

size      The largest results that get through: an upstream on loopback answers one tool call
          with results of each kind (plain text, quotes and backslashes, non-ASCII, a base64
          image) at the default max_result_bytes, and at the edge with max_result_bytes raised so
          that only Lambda's limit binds. Printed: the body the handler returns and the response
          as the python3.13 runtime serialises it (awslambdaric's to_json, what Lambda limits to
          6,291,456 bytes), and whether the result was cut.
deadline  When each entry point answers a hung upstream, with the stack's defaults
          (upstream_timeout 30 s, api_gateway_timeout 29 s, a 60 s function): the handler is
          invoked with each event shape and a context whose remaining time starts at 60 s.
          --scale 0.1 divides every duration by ten (a quick run).
refresh   Upstream listings per catalog refresh with three execution environments: the handler
          loaded three times (each with its own event loop, invoked side by side in threads)
          against one DynamoDB table (dynalite) and one upstream on loopback that counts its
          tools/list requests; catalog_ttl 1 s, waited out before each refresh, catalog_max_age
          an hour. Then three cold environments (three more handlers, a new table) at once.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import importlib.util
import itertools
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from benchlib import add_tests_to_path, method_line, write_json

ROOT = Path(__file__).resolve().parents[1]
HANDLER = ROOT / "functions" / "proxy" / "app.py"
PY313 = "AWS_Lambda_python3.13"
_numbers = itertools.count(1)


def load_handler(**env: str) -> Any:
    """functions/proxy/app.py as a fresh module (a cold execution environment) with `env` set."""
    for name in [n for n in os.environ if n.startswith("TOOLSEARCH_")]:
        del os.environ[name]
    os.environ.update({"TOOLSEARCH_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true", **env})
    spec = importlib.util.spec_from_file_location(f"bench_handler_{next(_numbers)}", HANDLER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def serialised(response: dict[str, Any]) -> int:
    from awslambdaric.lambda_runtime_marshaller import to_json

    os.environ["AWS_EXECUTION_ENV"] = PY313
    return len(to_json(response).encode())


# -- size


def results() -> dict[str, dict[str, Any]]:
    image = base64.b64encode(bytes(range(256)) * (3_300_000 // 256)).decode()
    return {
        "plain text": {"content": [{"type": "text", "text": "plain words " * 520_000}]},
        "quotes and backslashes": {"content": [{"type": "text", "text": 'a "quoted" C:\\dir\\ ' * 250_000}]},
        "non-ASCII (UTF-8)": {"content": [{"type": "text", "text": "žėų 日本語 😀 " * 250_000}]},
        "base64 image": {"content": [{"type": "image", "data": image, "mimeType": "image/png"}]},
    }


def measure_sizes() -> list[dict[str, Any]]:
    from fixtures.lambda_events import FakeContext, call_event
    from fixtures.result_upstream import ResultUpstream
    from fixtures.servers import serve_in_thread

    rows = []
    upstream = ResultUpstream()
    with serve_in_thread(upstream) as base:
        module = load_handler(TOOLSEARCH_UPSTREAM=base + "/mcp", AWS_EXECUTION_ENV=PY313)
        request = call_event("function-url", "call_read_tool", {"name": "blob_get"})
        for kind, result in results().items():
            upstream.result = result
            response = module.handler(request, FakeContext())
            rows.append(_size_row(kind, "default", result, response))

        try:
            from toolsearch.server.response_size import ResponseSize
        except ImportError:  # a version of the proxy that does not count the serialised response
            return rows
        # The edge: only Lambda's own limit binds (max_result_bytes far above it).
        module = load_handler(
            TOOLSEARCH_UPSTREAM=base + "/mcp", AWS_EXECUTION_ENV=PY313, TOOLSEARCH_MAX_RESULT_BYTES="50000000"
        )
        size = ResponseSize.lambda_runtime(PY313)
        upstream.result = {"content": [{"type": "text", "text": ""}]}
        room = size.limit - size.of(json.loads(module.handler(request, FakeContext())["body"]))
        for kind, unit, cost in (("plain text at the edge", "a", 1), ('quotes (") at the edge', '"', 4)):
            result = {"content": [{"type": "text", "text": unit * (room // cost)}]}
            upstream.result = result
            rows.append(_size_row(kind, "50,000,000", result, module.handler(request, FakeContext())))
    return rows


def _size_row(kind: str, setting: str, sent: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    result = json.loads(response["body"])["result"]
    content = result.get("content") or []
    cut = bool(content) and "it was cut" in str(content[-1].get("text", ""))
    row = {
        "result": kind,
        "max_result_bytes": setting,
        "upstream_result_json": len(json.dumps(sent, ensure_ascii=False).encode()),
        "body_bytes": len(response["body"].encode()),
        "serialised_response_bytes": serialised(response),
        "cut": cut,
    }
    print(
        f"{kind:28} max_result_bytes={setting:10}  upstream JSON {row['upstream_result_json']:>10,}"
        f"  body {row['body_bytes']:>10,}  serialised {row['serialised_response_bytes']:>10,}"
        f"  {'cut' if cut else 'whole'}"
    )
    return row


# -- deadline


def measure_deadlines(scale: float) -> list[dict[str, Any]]:
    from fixtures.faulty_upstream import Fault, running_faulty
    from fixtures.lambda_events import EXAMPLE_TOKEN, FakeContext, call_event

    rows = []
    env = {
        "TOOLSEARCH_UPSTREAM_TIMEOUT": f"{30 * scale:g}",
        "TOOLSEARCH_API_GATEWAY_TIMEOUT": f"{29 * scale:g}",
    }
    remaining = int(60_000 * scale)
    scenarios = [
        ("http-api", "hung call", None),
        ("rest-api", "hung call", None),
        ("function-url", "hung call", None),
        ("http-api", f"cold listing of {25 * scale:g} s, then a hung call", 25 * scale),
        ("function-url", f"cold listing of {25 * scale:g} s, then a hung call", 25 * scale),
        ("function-url", f"cold listing of {29 * scale:g} s, then a hung call", 29 * scale),
    ]
    for shape, what, listing_delay in scenarios:
        with running_faulty(users={EXAMPLE_TOKEN: "alice"}) as server:
            module = load_handler(TOOLSEARCH_UPSTREAM=server.url, **env)
            if listing_delay is None:  # warm: the catalog is listed first
                module.handler(call_event(shape, "search_tools", {"query": "notes"}), FakeContext())
            else:
                server.upstream.fault("tools/list", Fault.delay(listing_delay), times=1)
            server.upstream.fault("tools/call", Fault.hang())
            request = call_event(shape, "call_read_tool", {"name": "notes_get", "arguments": {"id": 1}})
            answer: dict[str, Any] = {}
            started = time.monotonic()
            context = _Remaining(FakeContext(), remaining, started)

            def run(request=request, context=context, module=module, answer=answer) -> None:
                answer["response"] = module.handler(request, context)

            worker = threading.Thread(target=run, daemon=True)
            worker.start()
            worker.join(180 * max(scale, 0.1))
            seconds = time.monotonic() - started
            response = answer.get("response")
            if response is None:
                outcome = "no answer"
            else:
                reply = json.loads(response["body"])
                error = reply.get("result", {}).get("structuredContent", {}).get("error", {})
                outcome = f"HTTP {response['statusCode']}, {error.get('kind', 'ok')} result"
            row = {"entry": shape, "upstream": what, "answered_s": round(seconds, 2), "answer": outcome}
            print(f"{shape:13} {what:40} answered after {seconds:6.2f} s: {outcome}")
            rows.append(row)
            module.loop.settle(timeout=5)
    return rows


class _Remaining:
    """A Lambda context whose remaining time runs down from `remaining_ms` at `started`."""

    def __init__(self, base: Any, remaining_ms: int, started: float) -> None:
        self._base, self._remaining_ms, self._started = base, remaining_ms, started

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)

    def get_remaining_time_in_millis(self) -> int:
        return int(self._remaining_ms - (time.monotonic() - self._started) * 1000)


# -- refresh

REFRESH_TTL = 1.0  # seconds: catalog_ttl, waited out for real between refreshes; catalog_max_age an hour


def measure_refreshes(refreshes: int = 3) -> dict[str, Any]:
    from fixtures.dynalite import DUMMY_ENV, Dynalite
    from fixtures.faulty_upstream import Fault, running_faulty
    from fixtures.lambda_events import EXAMPLE_TOKEN, FakeContext, all_at_once, call_event

    def environments(table: str, upstream_url: str) -> list[Any]:
        """Three cold execution environments: the handler module loaded three times, one table."""
        env = {
            "TOOLSEARCH_UPSTREAM": upstream_url,
            "TOOLSEARCH_DYNAMODB_TABLE": table,
            "TOOLSEARCH_CATALOG_TTL": f"{REFRESH_TTL:g}",
            "TOOLSEARCH_CATALOG_MAX_AGE": "3600",
        }
        return [load_handler(**env) for _ in range(3)]

    def search(module: Any) -> None:
        response = module.handler(call_event("http-api", "search_tools", {"query": "notes"}), FakeContext())
        result = json.loads(response["body"])["result"]
        assert response["statusCode"] == 200 and not result["isError"], response

    def at_once(job: Any, modules: list[Any]) -> list[Any]:
        """`job` in each environment at the same time: each in a thread, on its own event loop."""
        return all_at_once([lambda m=m: job(m) for m in modules], seconds=120)

    def settle(module: Any) -> bool:  # what the invocation left pending, as its next invocation would
        return module.loop.settle(timeout=60)

    def close(modules: list[Any]) -> None:
        for module in modules:
            module.loop.settle(timeout=60)
            module.loop.loop.close()

    os.environ.update(DUMMY_ENV)
    server = Dynalite().start()
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = server.endpoint_url
    try:
        with running_faulty(users={EXAMPLE_TOKEN: "alice"}) as upstream:

            def listings() -> int:
                return len(upstream.upstream.seen("tools/list"))

            modules = environments(server.create_table(), upstream.url)
            for module in modules:  # one after another: the first lists, the others read its copy
                search(module)
            first = listings()
            per_refresh = []
            for _ in range(refreshes):
                time.sleep(REFRESH_TTL + 0.05)  # every environment's copy is stale now
                before = listings()
                # The lease holder's listing takes a while: the others try to refresh meanwhile.
                upstream.upstream.fault("tools/list", Fault.delay(0.5), times=1)
                at_once(search, modules)  # each serves its stale copy and leaves a refresh pending
                assert all(at_once(settle, modules))
                at_once(search, modules)  # the others pick the new copy up from the table
                assert all(at_once(settle, modules))
                per_refresh.append(listings() - before)
            close(modules)

        with running_faulty(users={EXAMPLE_TOKEN: "alice"}) as upstream:
            cold = environments(server.create_table(), upstream.url)
            upstream.upstream.fault("tools/list", Fault.delay(0.5), times=1)
            at_once(search, cold)
            three_cold = len(upstream.upstream.seen("tools/list"))
            close(cold)
    finally:
        server.stop()
    figures = {"first_load": first, "per_refresh": per_refresh, "three_cold": three_cold}
    print(
        f"3 handler environments, one table: first load {first} listing(s);"
        f" listings per refresh {per_refresh}; 3 cold handler environments at once: {three_cold} listing(s)"
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="size,deadline,refresh")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every duration of `deadline`")
    parser.add_argument("--json")
    args = parser.parse_args()
    add_tests_to_path()
    parts = set(args.only.split(","))
    method = method_line(scale=args.scale, parts=sorted(parts))
    figures: dict[str, Any] = {}
    with contextlib.suppress(KeyboardInterrupt):
        if "size" in parts:
            figures["size"] = measure_sizes()
        if "deadline" in parts:
            figures["deadline"] = measure_deadlines(args.scale)
        if "refresh" in parts:
            figures["refresh"] = measure_refreshes()
    write_json(args.json, method, figures)


if __name__ == "__main__":
    main()
