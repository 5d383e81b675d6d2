"""The Lambda handler, invoked directly with the events in events/: real Mangum, real app, demo upstream.

`sam local invoke` needs Docker, which our machines lack; these tests call the
same `handler` with the same event files instead. The handler module is loaded
by path, after the environment is set, as Lambda does on a cold start; loading
it again stands for another execution environment.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import io
import itertools
import json
import logging
import threading
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fixtures.faulty_upstream import Fault, running_faulty
from fixtures.lambda_events import (
    EVENTS,
    EXAMPLE_TOKEN,
    FakeContext,
    all_at_once,
    call_event,
    event,
    request_body,
)
from fixtures.result_upstream import ResultUpstream
from toolsearch.callers.identity import caller_key
from toolsearch.server.demo import DEMO_URL, demo_tools
from toolsearch.upstream.sse import SSEParser

ROOT = Path(__file__).resolve().parents[1]
HANDLER_PATH = ROOT / "functions" / "proxy" / "app.py"
EVENT_FILES = sorted(p.name for p in EVENTS.glob("*.json"))
SHAPES = ("http-api", "function-url", "rest-api")
REQUESTS = ("discover", "initialize", "tools-list", "search-tools")
FIVE = ["search_tools", "describe_tool", "call_read_tool", "call_read_tools", "call_write_tool"]
_module_numbers = itertools.count(1)


def invoke(module: Any, name_or_event: str | dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    evt = event(name_or_event) if isinstance(name_or_event, str) else name_or_event
    response = module.handler(evt, FakeContext())
    body = response["body"]
    if response.get("isBase64Encoded"):
        body = base64.b64decode(body)
    return response, json.loads(body)


@pytest.fixture(scope="module", autouse=True)
def restore_process_state():
    """Loading the handler configures logging and sets the event loop; undo both for other tests."""
    package_logger = logging.getLogger("toolsearch")
    saved_logger = (list(package_logger.handlers), package_logger.level, dict(package_logger.__dict__))
    root = logging.getLogger()
    saved_root = (list(root.handlers), root.level, {h: list(h.filters) for h in root.handlers})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            saved_loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            saved_loop = None
    yield
    package_logger.__dict__.clear()
    package_logger.__dict__.update(saved_logger[2])
    package_logger.handlers[:] = saved_logger[0]
    package_logger.setLevel(saved_logger[1])
    root.handlers[:] = saved_root[0]
    root.setLevel(saved_root[1])
    for handler, filters in saved_root[2].items():
        handler.filters[:] = filters
    asyncio.set_event_loop(saved_loop)


@pytest.fixture
def load_handler(monkeypatch):
    """Load functions/proxy/app.py as a fresh module (a cold execution environment) with `env` set."""
    loaded = []

    def load(**env: str) -> Any:
        for name in [n for n in __import__("os").environ if n.startswith("TOOLSEARCH_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "ToolsearchTest")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        spec = importlib.util.spec_from_file_location(f"lambda_handler_{next(_module_numbers)}", HANDLER_PATH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        loaded.append(module)
        return module

    yield load
    for module in loaded:  # let refreshes finish, then close: no task is left to be destroyed
        assert module.loop.settle(timeout=30)
        module.loop.loop.close()


@pytest.fixture(scope="module")
def shared_handler():
    """One warm execution environment for the event-shape tests (loading costs a demo listing)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in __import__("os").environ if n.startswith("TOOLSEARCH_")]:
            patch.delenv(name)
        spec = importlib.util.spec_from_file_location("lambda_handler_shared", HANDLER_PATH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    yield module
    module.loop.settle(timeout=30)
    module.loop.loop.close()


def test_every_shape_and_request_has_an_event_file():
    assert sorted(f"{shape}-{req}.json" for shape in SHAPES for req in REQUESTS) == EVENT_FILES


@pytest.mark.parametrize("name", EVENT_FILES)
def test_each_event_file_gets_a_json_rpc_result(shared_handler, name):
    evt = event(name)
    response, reply = invoke(shared_handler, evt)

    assert response["statusCode"] == 200
    assert response["headers"]["content-type"] == "application/json"
    assert "error" not in reply
    assert reply["id"] == request_body(evt)["id"]
    result = reply["result"]
    if name.endswith("-discover.json"):
        assert "2026-07-28" in result["supportedVersions"]
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-toolsearch-proxy"
        assert "Demo upstream" in result["instructions"]
    elif name.endswith("-initialize.json"):
        assert result["protocolVersion"] == "2025-06-18"
        assert result["serverInfo"]["name"] == "mcp-toolsearch-proxy"
    elif name.endswith("-tools-list.json"):
        assert [tool["name"] for tool in result["tools"]] == FIVE
    else:
        assert result["isError"] is False
        found = result["structuredContent"]["tools"]
        demo_names = {tool["name"] for tool in demo_tools()}
        assert 0 < len(found) <= 5
        assert {tool["name"] for tool in found} <= demo_names
        assert result["structuredContent"]["total"] == len(demo_names)


def test_base64_body_from_a_function_url_is_decoded(shared_handler):
    evt = event("function-url-search-tools.json")
    assert evt["isBase64Encoded"] is True  # the file really is the base64 case
    assert evt["headers"]["host"].endswith(".lambda-url.us-east-1.on.aws")

    response, reply = invoke(shared_handler, evt)

    assert response["statusCode"] == 200
    assert reply["result"]["structuredContent"]["tools"]


def test_a_wrong_method_on_mcp_is_a_405_not_a_crash(shared_handler):
    evt = event("http-api-discover.json")
    evt["requestContext"]["http"]["method"] = "GET"
    evt["routeKey"] = "GET /mcp"
    evt.pop("body")
    evt["isBase64Encoded"] = False

    response, reply = invoke(shared_handler, evt)

    assert response["statusCode"] == 405
    assert reply["error"]["code"] == -32600


@pytest.mark.parametrize("evt", [{}, {"source": "aws.events", "detail-type": "Scheduled Event"}])
def test_an_event_that_is_not_http_gets_a_clear_error_not_a_crash(shared_handler, evt):
    response = shared_handler.handler(evt, FakeContext())

    assert response["statusCode"] == 400
    assert "not an HTTP event" in response["error"]


def test_warm_invocations_reuse_the_proxy_and_its_catalog(load_handler):
    module = load_handler()
    proxy = module.proxy
    key = caller_key(DEMO_URL, event("http-api-search-tools.json")["headers"]["authorization"])

    invoke(module, "http-api-search-tools.json")
    first = proxy.catalogs._memory.get(key).catalog
    invoke(module, "function-url-search-tools.json")
    invoke(module, "rest-api-search-tools.json")

    assert module.proxy is proxy
    assert proxy.catalogs._memory.get(key).catalog is first
    assert proxy.telemetry.total("catalog", event="catalog_list_upstream") == 1
    assert proxy.telemetry.total("catalog", event="catalog_hit_memory") == 2


def test_the_model_loads_once_per_environment_not_per_request(load_handler, monkeypatch):
    import toolsearch.search.embedder as embedder_module

    calls = []
    real = embedder_module.load_configured_embedder

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(embedder_module, "load_configured_embedder", counting)
    module = load_handler()
    for name in ("http-api-discover.json", "http-api-search-tools.json", "rest-api-search-tools.json"):
        invoke(module, name)

    assert len(calls) == 1


def test_metrics_are_emf_and_logs_carry_the_cold_start_but_no_query_or_token(load_handler, capsys):
    module = load_handler()
    records = io.StringIO()
    capture = logging.StreamHandler(records)
    capture.setFormatter(module.logger.registered_formatter)  # the Powertools JSON with Lambda context
    logging.getLogger("toolsearch").addHandler(capture)
    try:
        search = event("http-api-search-tools.json")
        invoke(module, search)
        invoke(module, "http-api-discover.json")
    finally:
        logging.getLogger("toolsearch").removeHandler(capture)

    lines = [json.loads(line) for line in records.getvalue().splitlines()]
    cold = [line for line in lines if line["message"] == "cold start"]
    assert len(cold) == 1 and cold[0]["init_ms"] > 0 and cold[0]["catalog_tier"] == "memory"
    assert all(line["function_request_id"] == FakeContext.aws_request_id for line in lines)
    assert all("cold_start" in line for line in lines)

    printed = capsys.readouterr()
    documents = [json.loads(line) for line in printed.out.splitlines() if line.startswith('{"_aws"')]
    by_metric = {name: doc for doc in documents for name in doc if name not in ("_aws", "service")}
    assert by_metric["tool_call"]["tool"] == "search_tools" and by_metric["tool_call"]["outcome"] == "ok"
    assert by_metric["tool_call"]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ToolsearchTest"
    assert by_metric["request_ms"]["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"] == "Milliseconds"
    assert "init_ms" in by_metric

    query = request_body(search)["params"]["arguments"]["query"]
    token = search["headers"]["authorization"].split()[-1]
    everything = records.getvalue() + printed.out + printed.err
    assert query not in everything and token not in everything


def test_a_background_refresh_left_pending_finishes_in_a_later_invocation(load_handler):
    # A TTL of zero makes every catalog stale at once: each request starts a background refresh.
    module = load_handler(TOOLSEARCH_CATALOG_TTL="0")
    key = caller_key(DEMO_URL, event("http-api-search-tools.json")["headers"]["authorization"])
    invoke(module, "http-api-search-tools.json")
    first = module.proxy.catalogs._memory.get(key).catalog

    response, _ = invoke(module, "http-api-search-tools.json")  # serves the stale one, refreshes behind
    left = module.loop.pending()
    assert left  # the refresh (a listing, then indexing in a thread) outlives the quick reply
    response_later, _ = invoke(module, "rest-api-tools-list.json")  # the loop runs again, frozen work goes on

    assert response["statusCode"] == 200 and response_later["statusCode"] == 200
    assert module.loop.settle(timeout=30)
    assert all(task.done() and task.exception() is None for task in left)
    assert module.proxy.catalogs._memory.get(key).catalog is not first
    assert module.proxy.telemetry.total("catalog", event="catalog_list_upstream") >= 2


@pytest.mark.npm
def test_a_second_cold_environment_reads_the_catalog_from_dynamodb(load_handler, dynalite, dynamo_table):
    env = {"TOOLSEARCH_DYNAMODB_TABLE": dynamo_table, "AWS_ENDPOINT_URL_DYNAMODB": dynalite.endpoint_url}
    first = load_handler(**env)
    response, _ = invoke(first, "http-api-search-tools.json")
    assert response["statusCode"] == 200
    assert first.proxy.telemetry.total("catalog", event="catalog_list_upstream") == 1
    assert first.proxy.telemetry.total("catalog", event="dynamo_put") == 1
    assert any(item["kind"]["S"] == "head" for item in dynalite.scan(dynamo_table))

    second = load_handler(**env)
    response, reply = invoke(second, "function-url-search-tools.json")

    assert response["statusCode"] == 200 and reply["result"]["structuredContent"]["tools"]
    assert second.proxy is not first.proxy
    assert second.proxy.telemetry.total("catalog", event="catalog_hit_shared") == 1
    assert second.proxy.telemetry.total("catalog", event="catalog_list_upstream") == 0


# -- three execution environments, one table: one upstream listing per refresh

REFRESH_TTL = 1.0  # seconds, waited out for real; catalog_max_age stays an hour


def search_in_each(modules: list[Any]) -> None:
    """One caller's same search, sent to every environment at once; each answers with tools."""

    def search(module: Any) -> dict[str, Any]:
        return module.handler(call_event("http-api", "search_tools", {"query": "notes"}), FakeContext())

    for response in all_at_once([lambda m=m: search(m) for m in modules]):
        assert response["statusCode"] == 200
        result = json.loads(response["body"])["result"]
        assert result["isError"] is False and result["structuredContent"]["tools"]


def settle_each(modules: list[Any]) -> None:
    """Run what each invocation left pending (a refresh), as each environment's next invocation would."""
    assert all(all_at_once([lambda m=m: m.loop.settle(timeout=20) for m in modules]))


@pytest.mark.npm
def test_three_handler_environments_on_one_table_make_one_listing_per_refresh(
    load_handler, dynalite, dynamo_table, faulty
):
    env = {
        "TOOLSEARCH_UPSTREAM": faulty.url,
        "TOOLSEARCH_DYNAMODB_TABLE": dynamo_table,
        "AWS_ENDPOINT_URL_DYNAMODB": dynalite.endpoint_url,
        "TOOLSEARCH_CATALOG_TTL": f"{REFRESH_TTL:g}",
        "TOOLSEARCH_CATALOG_MAX_AGE": "3600",
    }
    modules = [load_handler(**env) for _ in range(3)]  # three cold execution environments
    key = caller_key(faulty.url, f"Bearer {EXAMPLE_TOKEN}")

    def listings() -> int:
        return len(faulty.upstream.seen("tools/list"))

    def listed_at() -> set[float]:
        return {module.proxy.catalogs.cached(key).catalog.fetched_at for module in modules}

    # Cold, all at once: the lease holder lists (slowly, so the others find its lease taken), the
    # other two wait for its copy in the table instead of listing too.
    faulty.upstream.fault("tools/list", Fault.delay(0.5), times=1)
    search_in_each(modules)
    assert listings() == 1
    assert len(listed_at()) == 1
    waited = [m.proxy.telemetry.total("catalog", event="catalog_wait_shared") for m in modules]
    assert sum(1 for n in waited if n) == 2

    for refresh in (1, 2):
        (previous,) = listed_at()
        time.sleep(max(0.0, previous + REFRESH_TTL - time.time()) + 0.05)  # every copy is stale now
        faulty.upstream.fault("tools/list", Fault.delay(0.5), times=1)
        search_in_each(modules)  # each serves its stale copy at once and leaves a refresh pending
        settle_each(modules)  # one holds the lease and lists; the others keep serving the stale copy
        search_in_each(modules)  # the others' next requests pick the new copy up from the table
        settle_each(modules)
        assert listings() == 1 + refresh
        (latest,) = listed_at()  # all three serve the one new listing
        assert latest > previous
    per_environment = [m.proxy.telemetry.total("catalog", event="catalog_list_upstream") for m in modules]
    assert sum(per_environment) == 3


# -- every request answers inside the budget of the path it came in on


def invoke_bounded(module: Any, evt: dict[str, Any], context: FakeContext, seconds: float = 20.0):
    """Invoke in a thread; fail when no answer came within `seconds` (a bound, not a speed claim)."""
    answer: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: answer.update(response=module.handler(evt, context)), daemon=True
    )
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the handler did not answer within {seconds} s"
    response = answer["response"]
    body = base64.b64decode(response["body"]) if response.get("isBase64Encoded") else response["body"]
    return response, json.loads(body)


@pytest.fixture
def faulty():
    with running_faulty(users={EXAMPLE_TOKEN: "alice"}) as server:
        yield server


@pytest.mark.parametrize(
    ("shape", "remaining_ms"),
    [("http-api", 60_000), ("rest-api", 60_000), ("function-url", 3_000)],
)
def test_a_hung_upstream_call_is_a_timeout_result_before_the_entry_point_gives_up(
    load_handler, faulty, shape, remaining_ms
):
    # The upstream deadline (60 s) is longer than what the entry point allows: API Gateway's
    # budget (2 s here, 29 s by default) or the function's remaining time (3 s, less a margin).
    module = load_handler(
        TOOLSEARCH_UPSTREAM=faulty.url, TOOLSEARCH_UPSTREAM_TIMEOUT="60", TOOLSEARCH_API_GATEWAY_TIMEOUT="2"
    )
    invoke_bounded(module, call_event(shape, "search_tools", {"query": "notes"}), FakeContext())  # warm
    faulty.upstream.fault("tools/call", Fault.hang())

    context = replace(FakeContext(), remaining_ms=remaining_ms)
    response, reply = invoke_bounded(
        module, call_event(shape, "call_read_tool", {"name": "notes_get", "arguments": {"id": 1}}), context
    )

    assert response["statusCode"] == 200
    result = reply["result"]
    assert result["isError"] is True and result["structuredContent"]["error"]["kind"] == "timeout"
    assert len(faulty.upstream.seen("tools/call")) == 1


def test_a_cold_listing_too_slow_for_the_request_is_a_timeout_result_and_goes_on(load_handler, faulty):
    module = load_handler(TOOLSEARCH_UPSTREAM=faulty.url, TOOLSEARCH_UPSTREAM_TIMEOUT="20")
    faulty.upstream.fault("tools/list", Fault.delay(4), times=1)
    context = replace(FakeContext(), remaining_ms=2_500)

    response, reply = invoke_bounded(
        module, call_event("function-url", "search_tools", {"query": "notes"}), context
    )

    assert response["statusCode"] == 200
    assert reply["result"]["structuredContent"]["error"]["kind"] == "timeout"
    assert module.loop.settle(timeout=30)  # the listing was not abandoned: it finishes and is kept
    response, reply = invoke_bounded(
        module, call_event("function-url", "search_tools", {"query": "notes"}), FakeContext()
    )
    assert reply["result"]["isError"] is False
    assert len(faulty.upstream.seen("tools/list")) == 1


# -- a result the proxy accepts fits the response Lambda serialises (6 MB)

LAMBDA_RESPONSE_BYTES = 6_291_456
PY313 = "AWS_Lambda_python3.13"


@pytest.fixture
def result_upstream():
    from fixtures.servers import serve_in_thread

    upstream = ResultUpstream()
    with serve_in_thread(upstream) as base_url:
        yield upstream, base_url + "/mcp"


def serialised_bytes(response: dict[str, Any], monkeypatch) -> int:
    """The size of the handler's return value as the python3.13 runtime serialises it (what Lambda limits)."""
    from awslambdaric.lambda_runtime_marshaller import to_json

    monkeypatch.setenv("AWS_EXECUTION_ENV", PY313)
    return len(to_json(response).encode())


def blob_call(shape: str = "function-url") -> dict[str, Any]:
    return call_event(shape, "call_read_tool", {"name": "blob_get"})


def image(size: int) -> dict[str, Any]:
    data = base64.b64encode(bytes(range(256)) * (size // 256)).decode()
    return {"type": "image", "data": data, "mimeType": "image/png"}


HEAVY = {
    "quotes_and_backslashes": {"content": [{"type": "text", "text": 'a "quoted" C:\\dir\\ ' * 230_000}]},
    "non_ascii": {"content": [{"type": "text", "text": "žėų 日本語 😀 " * 230_000}]},
    "structured_with_quotes": {
        "content": [{"type": "text", "text": json.dumps({"rows": ['"x"\\'] * 150_000})}],
        "structuredContent": {"rows": ['"x"\\'] * 150_000},
    },
    "base64_image": {"content": [{"type": "text", "text": "a chart"}, image(3_300_000)]},
}


@pytest.mark.parametrize("kind", sorted(HEAVY))
def test_a_result_full_of_escapes_fits_the_response_lambda_serialises(
    load_handler, result_upstream, monkeypatch, kind
):
    upstream, url = result_upstream
    upstream.result = HEAVY[kind]
    module = load_handler(TOOLSEARCH_UPSTREAM=url, AWS_EXECUTION_ENV=PY313)  # max_result_bytes: 5,000,000

    response = module.handler(blob_call(), FakeContext())

    assert response["statusCode"] == 200
    assert serialised_bytes(response, monkeypatch) <= LAMBDA_RESPONSE_BYTES
    result = json.loads(response["body"])["result"]
    # A cut result has lost its structured part: an error, so schema-checking clients show the note.
    assert bool(result.get("isError")) is (kind == "structured_with_quotes")
    assert "structuredContent" not in result
    if kind == "base64_image":
        assert result["content"] == HEAVY[kind]["content"]  # base64 needs no escaping: passed whole
    else:
        assert "it was cut" in result["content"][-1]["text"]
        assert len(result["content"][0]["text"]) > 500_000  # what fits is still passed on


def test_at_the_edge_a_result_that_just_fits_passes_whole_and_one_more_byte_is_cut(
    load_handler, result_upstream, monkeypatch
):
    from toolsearch.server.response_size import ResponseSize

    upstream, url = result_upstream
    # Only Lambda's own limit binds here: the proxy's max_result_bytes is set far above it.
    module = load_handler(
        TOOLSEARCH_UPSTREAM=url, AWS_EXECUTION_ENV=PY313, TOOLSEARCH_MAX_RESULT_BYTES="50000000"
    )
    size = ResponseSize.lambda_runtime(PY313)
    upstream.result = {"content": [{"type": "text", "text": ""}]}
    empty = json.loads(module.handler(blob_call(), FakeContext())["body"])
    room = size.limit - size.of(empty)
    quotes = room // 4 - 10  # a quote in the text takes four bytes once serialised twice
    text = '"' * quotes + "a" * (room - 4 * quotes)

    upstream.result = {"content": [{"type": "text", "text": text}]}
    whole = module.handler(blob_call(), FakeContext())
    upstream.result = {"content": [{"type": "text", "text": text + "a"}]}
    over = module.handler(blob_call(), FakeContext())

    assert json.loads(whole["body"])["result"]["content"] == [{"type": "text", "text": text}]
    assert serialised_bytes(whole, monkeypatch) <= LAMBDA_RESPONSE_BYTES
    cut = json.loads(over["body"])["result"]
    assert "it was cut" in cut["content"][-1]["text"] and cut["isError"] is False
    assert serialised_bytes(over, monkeypatch) <= LAMBDA_RESPONSE_BYTES


def test_describing_a_tool_too_large_for_a_response_is_an_error_that_says_so(
    load_handler, result_upstream, monkeypatch
):
    upstream, url = result_upstream
    upstream.description = 'Returns "blobs". ' * 250_000  # 4.25 MB, a quote every eight characters
    module = load_handler(TOOLSEARCH_UPSTREAM=url, AWS_EXECUTION_ENV=PY313)

    response = module.handler(call_event("http-api", "describe_tool", {"names": ["blob_get"]}), FakeContext())

    assert response["statusCode"] == 200
    assert serialised_bytes(response, monkeypatch) <= LAMBDA_RESPONSE_BYTES
    result = json.loads(response["body"])["result"]
    # Cut, it would lose the structured part its output schema requires: an error that schema admits.
    assert result["isError"] is True and result["structuredContent"]["error"]["kind"] == "too_large"


# -- logs: the request id on every line


def test_every_log_line_of_a_request_carries_its_request_id_the_request_line_too(load_handler, capsys):
    module = load_handler()
    capsys.readouterr()
    context = replace(FakeContext(), aws_request_id="5e1b0c7d-0000-4000-8000-00000000abcd")

    invoke_bounded(module, event("http-api-search-tools.json"), context)

    printed = capsys.readouterr()
    lines = [
        json.loads(line) for line in (printed.out + printed.err).splitlines() if line.startswith('{"level"')
    ]
    assert any(line["message"] == "POST /mcp 200" for line in lines)  # Mangum's request line
    assert lines and all(line.get("function_request_id") == context.aws_request_id for line in lines)


# -- SnapStart: what a snapshot holds is renewed by the runtime's after-restore hooks


@pytest.fixture
def restore_hooks():
    """The runtime's own hook runner, with only the hooks of handlers loaded in this test."""
    import snapshot_restore_py
    from awslambdaric.lambda_runtime_hooks_runner import run_after_restore

    registry = snapshot_restore_py.get_after_restore()
    saved = list(registry)
    registry.clear()
    yield run_after_restore
    registry[:] = saved


def test_each_environment_restored_from_one_snapshot_draws_its_own_random_numbers(
    load_handler, restore_hooks
):
    import random

    load_handler()
    random.seed(20260728)
    snapshot = random.getstate()  # what every restored environment starts from

    draws = []
    for _ in range(2):
        random.setstate(snapshot)
        restore_hooks()
        draws.append([random.random() for _ in range(3)])

    assert draws[0] != draws[1]  # the retry jitter of two environments is not the same sequence


def test_a_restored_environment_logs_a_restore_not_the_snapshots_cold_start(
    load_handler, restore_hooks, capsys
):
    module = load_handler()
    restore_hooks()
    capsys.readouterr()

    invoke(module, "http-api-tools-list.json")
    invoke(module, "http-api-tools-list.json")

    printed = capsys.readouterr()
    lines = [
        json.loads(line)
        for line in printed.err.splitlines() + printed.out.splitlines()
        if line.startswith("{")
    ]
    messages = [line.get("message") for line in lines]
    assert "cold start" not in messages
    restored = [line for line in lines if line.get("message") == "restored from a snapshot"]
    assert len(restored) == 1 and "init_ms" not in restored[0]
    metrics = {name for line in lines if "_aws" in line for name in line if name not in ("_aws", "service")}
    assert "restore" in metrics and "init_ms" not in metrics


# -- the Authorization header on Lambda

SPELLINGS = ["Bearer tok-1", "bearer tok-1", "Bearer  tok-1", "Bearer\ttok-1", " Bearer tok-1 "]


def with_authorization(evt: dict[str, Any], value: str) -> dict[str, Any]:
    evt["headers"]["authorization"] = value
    if "multiValueHeaders" in evt:  # a REST API event: Mangum reads this one
        evt["multiValueHeaders"]["authorization"] = [value]
    return evt


def test_every_spelling_of_one_token_is_one_catalog_on_lambda(load_handler):
    module = load_handler()
    for shape, spelling in zip(itertools.cycle(SHAPES), SPELLINGS, strict=False):
        evt = with_authorization(event(f"{shape}-search-tools.json"), spelling)
        response, reply = invoke(module, evt)
        assert response["statusCode"] == 200, reply
        assert reply["result"]["isError"] is False

    assert len(module.proxy.catalogs) == 1
    assert module.proxy.telemetry.total("catalog", event="catalog_list_upstream") == 1


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "value", ["Bearer café", "Bearer a\x01b", "Bearer a\r\nX-Injected: 1", "Bearer \x7f"]
)
def test_an_authorization_the_proxy_cannot_forward_is_a_400_on_lambda_not_a_500(shared_handler, shape, value):
    # Mangum hands header values over as UTF-8 bytes; Starlette reads them as latin-1.
    evt = with_authorization(event(f"{shape}-search-tools.json"), value)
    calls = shared_handler.proxy.telemetry.total("catalog", event="catalog_list_upstream")

    response, reply = invoke(shared_handler, evt)

    assert response["statusCode"] == 400
    assert reply["error"]["code"] == -32600
    assert reply["error"]["message"].startswith("The Authorization header is malformed")
    assert 'error="invalid_request"' in response["headers"]["www-authenticate"]
    assert shared_handler.proxy.telemetry.total("catalog", event="catalog_list_upstream") == calls


@pytest.mark.parametrize("forwarded_host", ['evil.example", error="forged', "évil.example", "a b"])
def test_a_forged_forwarded_host_is_not_reflected_on_lambda(shared_handler, forwarded_host):
    evt = event("http-api-discover.json")
    evt["requestContext"]["http"]["method"] = "GET"
    evt["rawPath"] = evt["requestContext"]["http"]["path"] = "/.well-known/oauth-protected-resource/mcp"
    evt["routeKey"] = "GET /.well-known/oauth-protected-resource/mcp"
    evt.pop("body")
    evt["isBase64Encoded"] = False
    evt["headers"]["x-forwarded-host"] = forwarded_host

    response, document = invoke(shared_handler, evt)

    assert response["statusCode"] == 200
    assert document["resource"] == f"https://{evt['headers']['host']}/mcp"
    assert not response["headers"]["cache-control"].startswith("public")


# -- malformed events: API Gateway turns a raised exception into a 502 with no body; a 400 says why.


def _mutated(name: str, change: Any) -> dict[str, Any]:
    evt = event(name)
    change(evt)
    return evt


def _set(path: tuple[str, ...], value: Any) -> Any:
    def change(evt: dict[str, Any]) -> None:
        target = evt
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _drop(path: tuple[str, ...]) -> Any:
    def change(evt: dict[str, Any]) -> None:
        target = evt
        for key in path[:-1]:
            target = target[key]
        target.pop(path[-1], None)

    return change


MALFORMED = {
    "invalid base64 body": ("http-api-search-tools.json", _set(("isBase64Encoded",), True)),
    "base64 body with non-ASCII": (
        "function-url-search-tools.json",
        _set(("body",), "ey\u00e9J9"),
    ),
    "header value not a string": ("http-api-search-tools.json", _set(("headers", "x-count"), 5)),
    "header value null": ("function-url-search-tools.json", _set(("headers", "accept"), None)),
    "headers null (v2)": ("http-api-search-tools.json", _set(("headers",), None)),
    "headers a list": ("rest-api-search-tools.json", _set(("headers",), ["host"])),
    "unknown event version": ("http-api-search-tools.json", _set(("version",), "3.0")),
    "version 1.0 without path": ("http-api-search-tools.json", _set(("version",), "1.0")),
    "requestContext without http": ("http-api-search-tools.json", _drop(("requestContext", "http"))),
    "requestContext null": ("http-api-search-tools.json", _set(("requestContext",), None)),
    "requestContext a string": ("rest-api-search-tools.json", _set(("requestContext",), "context")),
    "rest event without httpMethod": ("rest-api-search-tools.json", _drop(("httpMethod",))),
    "body an object": ("http-api-search-tools.json", _set(("body",), {"jsonrpc": "2.0"})),
    "body a number": ("rest-api-search-tools.json", _set(("body",), 12)),
    "cookies not a list": ("http-api-search-tools.json", _set(("cookies",), 5)),
    "cookies holding a number": ("function-url-search-tools.json", _set(("cookies",), ["a=b", 7])),
    "multiValueHeaders holding a number": (
        "rest-api-search-tools.json",
        _set(("multiValueHeaders", "accept"), [1]),
    ),
    "multiValueHeaders a list": ("rest-api-search-tools.json", _set(("multiValueHeaders",), ["accept"])),
    "query parameters a number": ("rest-api-search-tools.json", _set(("queryStringParameters",), 5)),
    "rawQueryString a number": ("http-api-search-tools.json", _set(("rawQueryString",), 5)),
    "path a number": ("rest-api-search-tools.json", _set(("path",), 5)),
    "x-forwarded-port not a number": (
        "http-api-search-tools.json",
        _set(("headers", "x-forwarded-port"), "https"),
    ),
    "host with two colons": ("http-api-search-tools.json", _set(("headers", "host"), "a:1:2")),
    "method a list": ("http-api-search-tools.json", _set(("requestContext", "http", "method"), ["POST"])),
}


def _assert_http_400(response: dict[str, Any]) -> dict[str, Any]:
    """A proxy response every API Gateway shape passes on: status, JSON headers, a string body."""
    assert response["statusCode"] == 400
    assert set(response) <= {"statusCode", "headers", "multiValueHeaders", "body", "isBase64Encoded"}
    assert response["headers"]["content-type"] == "application/json"
    assert response["isBase64Encoded"] is False
    reply = json.loads(response["body"])
    assert reply["jsonrpc"] == "2.0" and reply["error"]["code"] == -32600
    return reply


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_http_event_gets_a_400_the_gateway_can_pass_on(shared_handler, case):
    name, change = MALFORMED[case]
    evt = _mutated(name, change)
    if case == "invalid base64 body":
        evt["body"] = "!!not base64"

    reply = _assert_http_400(shared_handler.handler(evt, FakeContext()))

    assert "event" in reply["error"]["message"]


@pytest.mark.parametrize("evt", [None, "requestContext", ["requestContext"], 12])
def test_an_event_that_is_not_even_an_object_gets_the_non_http_answer(shared_handler, evt):
    response = shared_handler.handler(evt, FakeContext())

    assert response["statusCode"] == 400
    assert "not an HTTP event" in response["error"]


def _mutations(value: Any) -> list[Any]:
    """Odd values of other types for one field of an event: what a hand-written event might hold."""
    odd = [None, 0, -1, True, "", "\u00e9\u0000", [], ["x", 1], {}, {"k": 1}]
    return [candidate for candidate in odd if type(candidate) is not type(value) or candidate != value]


def _paths(value: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            paths += _paths(inner, (*prefix, key))
    return paths


@pytest.mark.parametrize("name", EVENT_FILES)
def test_no_mutation_of_an_event_field_makes_the_handler_raise(shared_handler, name):
    """Each field of each event shape, replaced by values of other types: an answer, never a raise."""
    original = event(name)
    tried = 0
    # The Authorization header's own checks belong to the endpoint (tests/test_endpoint.py).
    for path in [p for p in _paths(original) if p != ("headers", "authorization")]:
        for value in _mutations(_get(original, path)):
            evt = _mutated(name, _set(path, value))
            response = shared_handler.handler(evt, FakeContext())  # must not raise
            tried += 1
            assert isinstance(response, dict) and isinstance(response.get("statusCode"), int), (path, value)
            assert response["statusCode"] < 500, (path, value)
            if "error" not in response:  # an HTTP answer: a proxy response the gateway understands
                assert isinstance(response.get("body", ""), str), (path, value)
    assert tried > 100


def _get(evt: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        evt = evt[key]
    return evt


async def _challenging_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An upstream that refuses everyone with a challenge whose scope is UTF-8, not Latin-1."""
    if scope["type"] != "http":
        return
    challenge = 'Bearer scope="r\u00e9sum\u00e9s:read", error="invalid_token"'.encode()
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", challenge)]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


def test_an_answer_mangum_cannot_convert_is_a_json_rpc_error_not_a_raise(load_handler):
    """Mangum decodes response headers as UTF-8; whatever it fails on, the gateway gets an answer."""
    from fixtures.servers import serve_in_thread

    with serve_in_thread(_challenging_upstream) as base:
        module = load_handler(TOOLSEARCH_UPSTREAM=f"{base}/mcp")
        response = module.handler(event("http-api-discover.json"), FakeContext())

    assert response["statusCode"] in (401, 500)
    assert isinstance(response["body"], str) and "error" in json.loads(response["body"])


def with_body(evt: dict[str, Any], body: dict[str, Any], **headers: str) -> dict[str, Any]:
    raw = json.dumps(body)
    evt["body"] = base64.b64encode(raw.encode()).decode() if evt["isBase64Encoded"] else raw
    evt["headers"]["content-length"] = str(len(raw.encode()))
    evt["headers"].update(headers)
    if "multiValueHeaders" in evt:  # a REST API event: Mangum reads this one
        evt["multiValueHeaders"]["content-length"] = [evt["headers"]["content-length"]]
        evt["multiValueHeaders"].update({name: [value] for name, value in headers.items()})
    return evt


def progress_call(shape: str, token: str | None) -> dict[str, Any]:
    """A 2026-07-28 call_read_tool of the fixture's report_progress, asking for progress when `token`."""
    evt = event(f"{shape}-search-tools.json")
    body = request_body(evt)
    body["params"]["name"] = "call_read_tool"
    body["params"]["arguments"] = {"name": "report_progress", "arguments": {"steps": 3}}
    if token is not None:
        body["params"]["_meta"]["progressToken"] = token
    return with_body(evt, body, **{"mcp-name": "call_read_tool"})


@pytest.mark.parametrize("shape", SHAPES)
def test_progress_is_one_buffered_event_stream_on_lambda(load_handler, sdk_upstream, shape):
    module = load_handler(TOOLSEARCH_UPSTREAM=sdk_upstream.url, TOOLSEARCH_EMBEDDER="none")

    response = module.handler(progress_call(shape, "lambda-1"), FakeContext())

    assert response["statusCode"] == 200
    assert response["headers"]["content-type"].startswith("text/event-stream")
    assert response["isBase64Encoded"] is False  # text: no base64 growth toward the 6 MB limit
    events = SSEParser(max_event_chars=1_000_000).feed(response["body"])
    *notes, final = [json.loads(e.data) for e in events]
    assert [note["params"] for note in notes] == [
        {"progressToken": "lambda-1", "progress": step, "total": 3, "message": f"step {step} of 3"}
        for step in (1, 2, 3)
    ]
    assert final["id"] == 3 and final["result"]["structuredContent"] == {"steps": 3}

    plain, reply = invoke(module, progress_call(shape, None))  # no token: the JSON answer as before
    assert plain["headers"]["content-type"] == "application/json"
    assert reply["result"]["structuredContent"] == {"steps": 3}


# -- AWS_IAM: a SigV4 Authorization is AWS's, checked by the entry point, never the upstream's

SIGV4 = (
    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20261201/eu-west-1/lambda/aws4_request, "
    "SignedHeaders=content-type;host;x-amz-date, Signature={}"
)
ALICE_ARN, BOB_ARN = "arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:role/bob"


def signed(shape: str, signature: str, arn: str | None) -> dict[str, Any]:
    """An event as an IAM-authorized entry point passes it on: the signature, and the principal it
    verified (a REST API writes it under identity, the others under authorizer.iam)."""
    evt = with_authorization(event(f"{shape}-search-tools.json"), SIGV4.format(signature))
    if arn is not None:
        if shape == "rest-api":
            evt["requestContext"].setdefault("identity", {})["userArn"] = arn
        else:
            iam = {"userArn": arn, "accessKey": "AKIAIOSFODNN7EXAMPLE"}
            evt["requestContext"]["authorizer"] = {"iam": iam}
    return evt


@pytest.mark.parametrize("shape", SHAPES)
def test_a_sigv4_request_is_keyed_by_the_verified_principal_and_its_signature_never_forwarded(
    load_handler, shape
):
    from fixtures.hostile_upstream import running_hostile

    with running_hostile() as hostile:
        module = load_handler(TOOLSEARCH_UPSTREAM=hostile.url)
        for signature, arn in [("a1", ALICE_ARN), ("a2", ALICE_ARN), ("b1", BOB_ARN)]:
            response, reply = invoke(module, signed(shape, signature, arn))
            assert response["statusCode"] == 200, reply
            assert reply["result"]["isError"] is False
        seen = list(hostile.upstream.authorizations)

    # Each request is signed anew, yet one principal is one caller: two catalogs, not three.
    assert len(module.proxy.catalogs) == 2
    assert module.proxy.telemetry.total("catalog", event="catalog_list_upstream") == 2
    assert seen and not any(value and "AWS4" in value for value in seen)  # the upstream saw none


ROLE = "arn:aws:sts::123456789012:assumed-role/deployer"


def unsigned(shape: str, arn: str | None) -> dict[str, Any]:
    """An event with no Authorization header at all, and the principal an entry point verified."""
    evt = signed(shape, "unused", arn)
    del evt["headers"]["authorization"]
    evt.get("multiValueHeaders", {}).pop("authorization", None)
    return evt


@pytest.mark.parametrize("shape", SHAPES)
def test_every_session_of_one_assumed_role_is_one_caller(load_handler, shape):
    from fixtures.hostile_upstream import running_hostile

    # The session name is the signer's free choice: four names, one role, one caller.
    sessions = [f"{ROLE}/{name}" for name in ("s1", "s2", "botocore-session-1764660000", "s1")]
    other = "arn:aws:sts::123456789012:assumed-role/auditor/s1"  # another role: another caller
    with running_hostile() as hostile:
        module = load_handler(TOOLSEARCH_UPSTREAM=hostile.url)
        outcomes = []
        for number, arn in enumerate([*sessions, other]):
            response, reply = invoke(module, signed(shape, f"sig{number}", arn))
            assert response["statusCode"] == 200, reply
            outcomes.append(reply["result"]["isError"])

    assert len(module.proxy.catalogs) == 2
    assert module.proxy.telemetry.total("catalog", event="catalog_list_upstream") == 2
    assert outcomes == [False] * 5


@pytest.mark.parametrize("shape", SHAPES)
def test_a_principal_verified_without_a_sigv4_header_keeps_its_own_key(load_handler, shape):
    from fixtures.hostile_upstream import running_hostile

    with running_hostile() as hostile:
        module = load_handler(TOOLSEARCH_UPSTREAM=hostile.url)
        for evt in (unsigned(shape, ALICE_ARN), unsigned(shape, BOB_ARN), unsigned(shape, None)):
            response, reply = invoke(module, evt)
            assert response["statusCode"] == 200, reply
        seen = list(hostile.upstream.authorizations)

    # Alice, Bob and the anonymous caller: three keys, not one anonymous bucket for all.
    assert len(module.proxy.catalogs) == 3
    assert seen and not any(seen)  # nothing was forwarded for any of them


@pytest.mark.parametrize(
    ("arn", "keyed"),
    [
        (
            "arn:aws:sts::123456789012:assumed-role/deployer/s1",
            "arn:aws:sts::123456789012:assumed-role/deployer",
        ),
        (
            "arn:aws-cn:sts::123456789012:assumed-role/ops/x@y.z",
            "arn:aws-cn:sts::123456789012:assumed-role/ops",
        ),
        ("arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/alice"),
        ("arn:aws:iam::123456789012:role/path/bob", "arn:aws:iam::123456789012:role/path/bob"),
        ("arn:aws:sts::123456789012:federated-user/carol", "arn:aws:sts::123456789012:federated-user/carol"),
        ("arn:aws:iam::123456789012:root", "arn:aws:iam::123456789012:root"),
        ("arn:aws:sts::123456789012:assumed-role/", "arn:aws:sts::123456789012:assumed-role/"),
    ],
)
def test_what_is_keyed_of_a_verified_arn(arn, keyed):
    from toolsearch.callers.aws_iam import principal_of

    assert principal_of(arn) == keyed


@pytest.mark.parametrize("shape", SHAPES)
def test_a_sigv4_request_no_entry_point_checked_is_refused(shared_handler, shape):
    # A stack with AuthType NONE (or a forged header): nobody verified the signature.
    response, reply = invoke(shared_handler, signed(shape, "forged", None))
    assert response["statusCode"] == 401
    assert "FunctionUrlAuthType=AWS_IAM" in reply["error"]["message"]


# -- a progress stream and its response fit the response Lambda serialises, whatever they carry

CONTROLS = "".join(chr(c) for c in range(1, 32) if chr(c) not in "\n\r") * 20  # \u00XX: 7 bytes each
STREAM_RESULTS = {
    "plain_text": {"content": [{"type": "text", "text": "a" * 6_000_000}]},
    "control_characters": {"content": [{"type": "text", "text": CONTROLS * 1_700}]},  # 5.9 MB as JSON
    "quotes": {"content": [{"type": "text", "text": '"\\' * 1_450_000}]},
    "an_error": {"content": [{"type": "text", "text": "failed: " + CONTROLS * 1_700}], "isError": True},
}


def streamed_blob_call(token: str) -> dict[str, Any]:
    evt = blob_call()
    body = request_body(evt)
    body["params"]["_meta"]["progressToken"] = token
    return with_body(evt, body, **{"mcp-name": "call_read_tool"})


@pytest.mark.parametrize("runtime", [PY313, "AWS_Lambda_python3.11"])
@pytest.mark.parametrize("kind", sorted(STREAM_RESULTS))
def test_progress_full_of_control_characters_and_a_result_at_the_limit_fit_the_lambda_response(
    load_handler, result_upstream, monkeypatch, runtime, kind
):
    from awslambdaric.lambda_runtime_marshaller import to_json

    from toolsearch.service.progress import MAX_MESSAGE_CHARS, MAX_RELAYED, MAX_TOKEN_CHARS

    upstream, url = result_upstream
    upstream.result = STREAM_RESULTS[kind]
    upstream.progress = [CONTROLS[:MAX_MESSAGE_CHARS]] * MAX_RELAYED  # the most a relay passes on
    token = ("\x1b" * MAX_TOKEN_CHARS)[:MAX_TOKEN_CHARS]  # the caller's token comes back in every event
    module = load_handler(
        TOOLSEARCH_UPSTREAM=url, AWS_EXECUTION_ENV=runtime, TOOLSEARCH_MAX_RESULT_BYTES="6000000"
    )

    response = module.handler(streamed_blob_call(token), FakeContext())

    assert response["statusCode"] == 200
    monkeypatch.setenv("AWS_EXECUTION_ENV", runtime)
    assert len(to_json(response).encode()) <= LAMBDA_RESPONSE_BYTES
    events = [json.loads(e.data) for e in SSEParser(max_event_chars=10_000_000).feed(response["body"])]
    *notes, final = events
    assert len(notes) == MAX_RELAYED and all(n["params"]["progressToken"] == token for n in notes)
    assert "it was cut" in final["result"]["content"][-1]["text"]
