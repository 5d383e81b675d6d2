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
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures.sdk_upstream import sdk_upstream  # noqa: F401  (a pytest fixture)
from toolsearch.catalogs import caller_key
from toolsearch.demo import DEMO_URL, demo_tools
from toolsearch.upstream.sse import SSEParser

pytest_plugins = ("tests.fixtures.dynalite",)  # dynalite and dynamo_table, for the shared-tier test

ROOT = Path(__file__).resolve().parents[1]
HANDLER_PATH = ROOT / "functions" / "proxy" / "app.py"
EVENTS = ROOT / "events"
EVENT_FILES = sorted(p.name for p in EVENTS.glob("*.json"))
SHAPES = ("http-api", "function-url", "rest-api")
REQUESTS = ("discover", "initialize", "tools-list", "search-tools")
FIVE = ["search_tools", "describe_tool", "call_read_tool", "call_read_tools", "call_write_tool"]
_module_numbers = itertools.count(1)


@dataclass
class FakeContext:
    """The attributes of Lambda's context object that Powertools reads."""

    aws_request_id: str = "7f9c0e3a-0000-4000-8000-000000000001"
    function_name: str = "toolsearch-proxy"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:toolsearch-proxy"
    function_version: str = "$LATEST"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text(encoding="utf-8"))


def request_body(evt: dict[str, Any]) -> dict[str, Any]:
    raw = evt["body"]
    return json.loads(base64.b64decode(raw) if evt["isBase64Encoded"] else raw)


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
    first = proxy.catalogs._memory[key].catalog
    invoke(module, "function-url-search-tools.json")
    invoke(module, "rest-api-search-tools.json")

    assert module.proxy is proxy
    assert proxy.catalogs._memory[key].catalog is first
    assert proxy.telemetry.total("catalog", event="catalog_list_upstream") == 1
    assert proxy.telemetry.total("catalog", event="catalog_hit_memory") == 2


def test_the_model_loads_once_per_environment_not_per_request(load_handler, monkeypatch):
    import toolsearch.search.embedder as embedder_module

    calls = []
    real = embedder_module.load_configured_embedder

    def counting(settings):
        calls.append(settings)
        return real(settings)

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
    first = module.proxy.catalogs._memory[key].catalog

    response, _ = invoke(module, "http-api-search-tools.json")  # serves the stale one, refreshes behind
    left = module.loop.pending()
    assert left  # the refresh (a listing, then indexing in a thread) outlives the quick reply
    response_later, _ = invoke(module, "rest-api-tools-list.json")  # the loop runs again, frozen work goes on

    assert response["statusCode"] == 200 and response_later["statusCode"] == 200
    assert module.loop.settle(timeout=30)
    assert all(task.done() and task.exception() is None for task in left)
    assert module.proxy.catalogs._memory[key].catalog is not first
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


@pytest.mark.parametrize(
    "name", [n for n in EVENT_FILES if n.endswith(("-tools-list.json", "-search-tools.json"))]
)
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
def test_progress_is_one_buffered_event_stream_on_lambda(load_handler, sdk_upstream, shape):  # noqa: F811
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
