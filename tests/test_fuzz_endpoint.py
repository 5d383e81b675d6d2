"""Property-based fuzzing of the MCP endpoint, over real HTTP on loopback.

Whatever a client sends (arbitrary bytes, deep nesting, huge strings, wrong
types in any field, invalid UTF-8, oversize bodies, headers that disagree with
the body, unknown methods and versions) the answer is a well-formed JSON-RPC
message, with HTTP 2xx or 4xx: never a 500, a traceback or a hang. Arguments
that do not fit a tool's schema never reach the upstream, and nothing a model
writes (tool names, arguments) reaches a header, a log line, a cache key or a
URL unescaped.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fixtures.faulty_upstream import RunningFaulty, running_faulty, shared_tools
from fixtures.logs import LogCapture, capture_logs
from fixtures.mcp_wire import b64_sentinel, modern
from fixtures.servers import serve_in_thread
from toolsearch.app import Proxy, build_proxy
from toolsearch.mcp import protocol as P
from toolsearch.settings import Settings

TOKEN = "tok-fuzz-7c1e"
MAX_BODY = 20_000
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FEW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SCHEMAS = {t["name"]: t["inputSchema"] for t in shared_tools()}
MARKER = "Zq9marker"  # woven into what the model "writes", then looked for where it must not be


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningFaulty]:
    with running_faulty(users={TOKEN: "fuzzer"}) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(upstream: RunningFaulty) -> Proxy:
    # One caller makes every fuzzed call: no per-caller rate (test_fairness.py tests it).
    return build_proxy(
        Settings(
            upstream=upstream.url,
            embedder="none",
            max_body_bytes=MAX_BODY,
            upstream_timeout=5.0,
            caller_rate=0,
        )
    )


@pytest.fixture(scope="module")
def logs() -> Iterator[LogCapture]:
    with capture_logs() as handler:
        yield handler


@pytest.fixture(scope="module")
def http(proxy: Proxy, logs: LogCapture) -> Iterator[httpx.Client]:
    with (
        serve_in_thread(proxy.app) as base,
        httpx.Client(base_url=base, timeout=15, headers={"Authorization": f"Bearer {TOKEN}"}) as client,
    ):
        # One good request first, so the catalog is listed and later examples stay fast.
        assert client.post("/mcp", **modern("tools/list")).status_code == 200
        yield client


def check_answer(reply: httpx.Response) -> Any:
    """The reply is 2xx or 4xx and a well-formed JSON-RPC message (or empty for a notification)."""
    assert reply.status_code < 500, (reply.status_code, reply.text[:300])
    assert "Traceback" not in reply.text
    if reply.status_code == 202:
        assert reply.content == b""
        return None
    if reply.content == b"Invalid HTTP request received.":
        # Refused by the HTTP server's parser before the app (a header byte RFC 9110 forbids, such as
        # DEL): a plain 400, which is all HTTP lets it say.
        assert reply.status_code == 400
        return None
    assert reply.headers["content-type"].startswith("application/json"), reply.text[:300]
    message = reply.json()
    assert message["jsonrpc"] == "2.0"
    assert ("result" in message) != ("error" in message)
    if "error" in message:
        error = message["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str)
        assert reply.status_code >= 400 or "id" in message
    else:
        assert reply.status_code == 200 and isinstance(message["result"], dict)
    return message


def post(http: httpx.Client, content: bytes, headers: dict[str, Any] | None = None) -> httpx.Response:
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    return http.post("/mcp", content=content, headers={**base, **(headers or {})})


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
# What HTTP lets a header value hold (h11 refuses surrounding blanks on the sending side).
HEADER_TEXT = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=40).map(
    lambda text: text.strip(" \t")
)


# -- raw bodies


@FUZZ
@given(body=st.binary(max_size=2_000))
def test_arbitrary_bytes(http, body):
    check_answer(post(http, body))


@FUZZ
@given(value=JSON_VALUES)
def test_arbitrary_json(http, value):
    check_answer(post(http, json.dumps(value).encode()))


@FUZZ
@given(prefix=st.binary(max_size=50), suffix=st.binary(max_size=50))
def test_invalid_utf8_inside_a_request(http, prefix, suffix):
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"'
        + prefix
        + b"\xff\xfe"
        + suffix
        + b'"}}'
    )
    message = check_answer(post(http, body))
    assert message["error"]["code"] in (P.PARSE_ERROR, P.INVALID_REQUEST, P.INVALID_PARAMS, P.HEADER_MISMATCH)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(http, upstream, constant):
    since = len(upstream.upstream.requests)
    request = valid_request("call_read_tool", {"name": "notes_search", "arguments": {"x": 0}})
    body = json.dumps(request["json"]).replace('"x": 0', f'"x": {constant}').encode()
    reply = post(http, body, request["headers"])
    assert reply.status_code == 400
    assert check_answer(reply)["error"]["code"] == P.PARSE_ERROR
    assert new_calls(upstream, since) == []


@pytest.mark.parametrize("depth", [50, 1_000, 100_000])
@pytest.mark.parametrize("where", ["body", "arguments"])
def test_deep_nesting(http, depth, where):
    nested = "[" * depth + "]" * depth
    if where == "body":
        body = nested.encode()
    else:
        request = modern("tools/call", {"name": "call_read_tool", "arguments": {"name": "notes_search"}})
        text = json.dumps(request["json"])
        body = text.replace(
            '"notes_search"}', '"notes_search", "arguments": {"text": ' + nested + "}}"
        ).encode()
    if len(body) > MAX_BODY:
        assert post(http, body).status_code == 413
        return
    headers = {} if where == "body" else request["headers"]
    check_answer(post(http, body, headers))


@pytest.mark.parametrize("size", [MAX_BODY + 1, 5 * MAX_BODY, 10_000_000])
@pytest.mark.parametrize("chunked", [False, True])
def test_oversize_bodies_are_413(http, size, chunked):
    request = modern("tools/call", {"name": "search_tools", "arguments": {"query": "x" * size}})
    body = json.dumps(request["json"]).encode()
    content: Any = body
    if chunked:  # no Content-Length: the limit must hold while reading
        content = (body[i : i + 65_536] for i in range(0, len(body), 65_536))
    reply = http.post(
        "/mcp", content=content, headers={**request["headers"], "Content-Type": "application/json"}
    )
    assert reply.status_code == 413
    check_answer(reply)


@FEW
@given(text=st.text(min_size=1_000, max_size=15_000))
def test_huge_strings_in_a_query(http, text):
    request = modern("tools/call", {"name": "search_tools", "arguments": {"query": text}})
    message = check_answer(http.post("/mcp", json=request["json"], headers=request["headers"]))
    if "result" in message:
        assert isinstance(message["result"]["content"], list)


# -- well-shaped requests with one field wrong


def valid_request(tool: str = "search_tools", arguments: dict | None = None) -> dict[str, Any]:
    return modern("tools/call", {"name": tool, "arguments": arguments or {"query": "notes"}})


PATHS = [
    ("jsonrpc",),
    ("id",),
    ("method",),
    ("params",),
    ("params", "_meta"),
    ("params", "_meta", P.META_PROTOCOL_VERSION),
    ("params", "_meta", P.META_CLIENT_CAPABILITIES),
    ("params", "_meta", P.META_CLIENT_INFO),
    ("params", "name"),
    ("params", "arguments"),
    ("params", "arguments", "query"),
    ("params", "arguments", "queries"),
    ("params", "arguments", "limit"),
    ("params", "arguments", "schemas"),
]


def replaced(message: dict, path: tuple[str, ...], value: Any) -> dict:
    message = json.loads(json.dumps(message))
    target = message
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return message


@FUZZ
@given(path=st.sampled_from(PATHS), value=JSON_VALUES, keep_headers_in_step=st.booleans())
def test_wrong_type_in_any_field(http, path, value, keep_headers_in_step):
    request = valid_request()
    body = replaced(request["json"], path, value)
    headers = dict(request["headers"])
    if keep_headers_in_step:  # headers that agree with the body reach deeper checks
        params = body.get("params") if isinstance(body.get("params"), dict) else {}
        if isinstance(body.get("method"), str) and body["method"].isascii() and body["method"].isprintable():
            headers["Mcp-Method"] = body["method"]
        if isinstance(params.get("name"), str):
            headers["Mcp-Name"] = b64_sentinel(params["name"])
    check_answer(post(http, json.dumps(body).encode(), headers))


@FUZZ
@given(
    version=st.one_of(st.none(), HEADER_TEXT, st.sampled_from(P.SUPPORTED_VERSIONS)),
    meta_version=st.one_of(st.none(), JSON_VALUES, st.sampled_from(P.SUPPORTED_VERSIONS)),
    method_header=st.one_of(st.none(), HEADER_TEXT, st.sampled_from(["tools/call", "tools/list"])),
    name_header=st.one_of(
        st.none(), HEADER_TEXT, st.just("=?base64?!!?="), st.just(b64_sentinel("search_tools"))
    ),
    method=st.one_of(
        st.text(max_size=20),
        st.sampled_from(
            [
                "tools/call",
                "tools/list",
                "server/discover",
                "initialize",
                "ping",
                "resources/read",
                "notifications/initialized",
            ]
        ),
    ),
    notification=st.booleans(),
)
def test_headers_that_disagree_with_the_body_and_unknown_methods_or_versions(
    http, version, meta_version, method_header, name_header, method, notification
):
    params: dict[str, Any] = {"name": "search_tools", "arguments": {"query": "notes"}}
    if meta_version is not None:
        params["_meta"] = {P.META_PROTOCOL_VERSION: meta_version, P.META_CLIENT_CAPABILITIES: {}}
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if not notification:
        body["id"] = 7
    headers = {}
    for name, value in (
        ("MCP-Protocol-Version", version),
        ("Mcp-Method", method_header),
        ("Mcp-Name", name_header),
    ):
        if value is not None:
            headers[name] = value.encode("latin-1")
    check_answer(post(http, json.dumps(body).encode(), headers))


# -- arguments for upstream tools


def new_calls(upstream: RunningFaulty, since: int) -> list[Any]:
    return [seen for seen in upstream.upstream.requests[since:] if seen.method == "tools/call"]


@FUZZ
@given(tool=st.sampled_from(["notes_get", "notes_search", "routed_get"]), arguments=JSON_VALUES)
def test_arguments_that_do_not_fit_never_reach_the_upstream(http, upstream, tool, arguments):
    since = len(upstream.upstream.requests)
    request = valid_request("call_read_tool", {"name": tool, "arguments": arguments})
    message = check_answer(post(http, json.dumps(request["json"]).encode(), request["headers"]))
    calls = new_calls(upstream, since)
    if "error" in message:  # refused before any tool ran (NaN and Infinity are not JSON)
        assert calls == []
        return
    fits = isinstance(arguments, dict) and jsonschema.Draft202012Validator(SCHEMAS[tool]).is_valid(arguments)
    if not fits:
        assert calls == [], f"{arguments!r} reached the upstream"
        assert message["result"]["isError"] is True
    else:
        assert len(calls) == 1
        assert upstream.upstream.arguments_of(calls[0]) == arguments


@FEW
@given(
    calls=st.lists(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["notes_get", "notes_search", "notes_delete", "nope"])},
            optional={"arguments": JSON_VALUES},
        ),
        min_size=1,
        max_size=4,
    )
)
def test_batch_arguments_that_do_not_fit_never_reach_the_upstream(http, upstream, calls):
    since = len(upstream.upstream.requests)
    request = valid_request("call_read_tools", {"calls": calls})
    check_answer(post(http, json.dumps(request["json"]).encode(), request["headers"]))
    for seen in new_calls(upstream, since):
        assert seen.tool in ("notes_get", "notes_search")  # never the write, never an unknown name
        jsonschema.validate(upstream.upstream.arguments_of(seen), SCHEMAS[seen.tool])


# -- what a model writes stays data


MODEL_TEXT = st.text(
    alphabet=st.characters(codec="utf-8")
    | st.sampled_from(list("\r\n\t\x00:;=?/%#") + list(string.printable)),
    max_size=40,
).map(lambda text: MARKER + text)


@FUZZ
@given(region=MODEL_TEXT)
def test_header_mirrored_arguments_are_encoded_never_injected(http, upstream, region):
    since = len(upstream.upstream.requests)
    request = valid_request("call_read_tool", {"name": "routed_get", "arguments": {"region": region}})
    message = check_answer(post(http, json.dumps(request["json"]).encode(), request["headers"]))
    assert message["result"]["isError"] is False, message
    (seen,) = new_calls(upstream, since)
    names = [name for name, _ in seen.raw_headers]
    assert names.count("mcp-param-region") == 1 and len(names) == len(set(names))
    assert all(
        name.startswith(("mcp-", "content-", "accept", "authorization", "host", "user-agent", "connection"))
        for name in names
    )
    sent = seen.headers["mcp-param-region"]
    assert P.decode_header_value(sent) == region
    assert all(0x20 <= ord(ch) <= 0x7E or ch == "\t" for ch in sent)
    assert seen.path == "/mcp"


@FUZZ
@given(name=MODEL_TEXT, argument=MODEL_TEXT, query=MODEL_TEXT)
def test_names_and_arguments_stay_out_of_logs_keys_and_urls(
    http, upstream, proxy, logs, name, argument, query
):
    assume(name.strip() not in {t["name"] for t in shared_tools()})
    start_lines, since = len(logs.lines), len(upstream.upstream.requests)
    for tool, arguments in [
        ("call_read_tool", {"name": name, "arguments": {"text": argument}}),
        ("call_read_tool", {"name": "notes_search", "arguments": {"text": argument}}),
        ("call_write_tool", {"name": name}),
        ("describe_tool", {"names": [name]}),
        ("search_tools", {"query": query}),
        (
            "call_read_tools",
            {"calls": [{"name": name}, {"name": "notes_get", "arguments": {"id": argument}}]},
        ),
    ]:
        request = valid_request(tool, arguments)
        check_answer(post(http, json.dumps(request["json"]).encode(), request["headers"]))
    for line in logs.lines[start_lines:]:
        assert MARKER not in line, line
    assert all(re.fullmatch(r"[0-9a-f]{64}", key) for key in proxy.catalogs._memory)
    for seen in upstream.upstream.requests[since:]:
        assert seen.path == "/mcp"
        for header, value in seen.raw_headers:
            assert MARKER not in header and MARKER not in value
    assert MARKER not in repr(proxy.telemetry.counts)


# -- text that is not Unicode, from the caller

LONE_SURROGATE = st.builds(
    lambda before, surrogate, after: before + surrogate + after,
    st.text(max_size=4),  # hypothesis writes no surrogates itself: the one below stays lone
    st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"]),
    st.text(max_size=4),
)
# Where in a write, asked with progress, the caller's lone surrogate sits: ("value", path) replaces
# the value there, ("key", path) adds a key holding one to the object there.
SURROGATE_PLACES = [
    ("value", ("id",)),
    ("value", ("method",)),
    ("key", ("params",)),
    ("value", ("params", "name")),
    ("key", ("params", "_meta")),
    ("value", ("params", "_meta", "progressToken")),
    ("value", ("params", "_meta", P.META_CLIENT_INFO, "name")),
    ("key", ("params", "_meta", P.META_CLIENT_CAPABILITIES)),
    ("value", ("params", "arguments", "name")),  # the upstream tool's name
    ("key", ("params", "arguments", "arguments")),  # its arguments: a key...
    ("value", ("params", "arguments", "arguments", "id")),  # ...or a value
    ("value", ("params", "arguments", "arguments", "nested", "deep")),
]


def write_with_progress() -> dict[str, Any]:
    request = valid_request("call_write_tool", {"name": "notes_delete", "arguments": {"id": 7}})
    request["json"]["params"]["_meta"]["progressToken"] = "progress-1"
    request["json"]["params"]["arguments"]["arguments"]["nested"] = {"deep": "x"}
    return request


def with_surrogate(message: dict, place: tuple[str, tuple[str, ...]], text: str) -> dict:
    how, path = place
    if how == "value":
        return replaced(message, path, text)
    target = json.loads(json.dumps(message))
    for key in path:
        target = target[key]
    target[text] = "x"
    return replaced(message, path, target)


def test_the_write_the_surrogate_fuzz_starts_from_reaches_the_upstream(http, upstream):
    since = len(upstream.upstream.requests)
    request = write_with_progress()
    check_answer(post(http, json.dumps(request["json"]).encode(), request["headers"]))
    assert len(new_calls(upstream, since)) == 1  # so a refusal below is the surrogate's doing


@FUZZ
@given(place=st.sampled_from(SURROGATE_PLACES), text=LONE_SURROGATE, modern_era=st.booleans())
def test_a_callers_lone_surrogate_is_refused_before_anything_is_sent(
    http, upstream, logs, place, text, modern_era
):
    request = write_with_progress()
    if not modern_era:  # the handshake era: no _meta version, no request-metadata headers
        del request["json"]["params"]["_meta"][P.META_PROTOCOL_VERSION]
        request["headers"] = {"Accept": "application/json, text/event-stream"}
    message = with_surrogate(request["json"], place, text)
    body = json.dumps(message).encode()  # ASCII: the surrogate travels as its JSON escape
    since, logged = len(upstream.upstream.requests), len(logs.lines)
    reply = post(http, body, request["headers"])
    answer = check_answer(reply)
    assert reply.status_code == 400 and answer["error"]["code"] == -32600, reply.text[:300]
    assert "not Unicode" in answer["error"]["message"]
    assert answer.get("id") == (message["id"] if place != ("value", ("id",)) else None)
    assert upstream.upstream.requests[since:] == []  # nothing sent: not the call, not a listing
    assert not [line for line in logs.lines[logged:] if "ERROR" in line or "Traceback" in line]
