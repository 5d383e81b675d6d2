"""The MCP endpoint on the wire: both eras, header checks, and every refusal as JSON-RPC."""

from __future__ import annotations

import httpx
import pytest

from fixtures.mcp_wire import b64_sentinel, call, legacy, modern
from toolsearch.app import build_proxy
from toolsearch.settings import Settings

FIVE = ["search_tools", "describe_tool", "call_read_tool", "call_read_tools", "call_write_tool"]


@pytest.fixture
async def client():
    proxy = build_proxy(Settings(allowed_origins=["https://allowed.example"], max_body_bytes=50_000))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app), base_url="http://testserver"
    ) as c:
        yield c


async def test_discover_answers_modern_with_versions_instructions_and_cache_hints(client):
    reply = await client.post("/mcp", **modern("server/discover"))
    assert reply.status_code == 200
    result = reply.json()["result"]
    assert result["resultType"] == "complete"
    assert "2026-07-28" in result["supportedVersions"] and "2025-11-25" in result["supportedVersions"]
    assert result["capabilities"] == {"tools": {}, "prompts": {}, "resources": {}}
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-toolsearch-proxy"
    assert result["instructions"].startswith("This server gives access to many tools")
    assert "Demo upstream" in result["instructions"]  # the upstream's own, passed on
    assert result["cacheScope"] == "private" and result["ttlMs"] > 0


async def test_tools_list_shows_the_five_tools_in_a_fixed_order(client):
    first = (await client.post("/mcp", **modern("tools/list"))).json()["result"]
    second = (await client.post("/mcp", **modern("tools/list"))).json()["result"]
    assert [tool["name"] for tool in first["tools"]] == FIVE
    assert first["tools"] == second["tools"]
    assert first["cacheScope"] == "private" and first["ttlMs"] > 0
    by_name = {tool["name"]: tool for tool in first["tools"]}
    assert by_name["call_read_tool"]["annotations"]["readOnlyHint"] is True
    assert by_name["call_read_tools"]["annotations"]["readOnlyHint"] is True
    assert by_name["call_write_tool"]["annotations"]["destructiveHint"] is True
    assert by_name["search_tools"]["inputSchema"]["properties"]["limit"]["maximum"] == 25
    assert by_name["describe_tool"]["inputSchema"]["properties"]["names"]["maxItems"] == 10


async def test_legacy_handshake_then_calls_without_a_session(client):
    init = await client.post(
        "/mcp",
        **legacy(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
            version=None,
        ),
    )
    assert init.status_code == 200
    assert "mcp-session-id" not in init.headers
    result = init.json()["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["serverInfo"]["name"] == "mcp-toolsearch-proxy"
    notified = await client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={"MCP-Protocol-Version": "2025-06-18"},
    )
    assert notified.status_code == 202 and notified.content == b""
    assert (await client.post("/mcp", **legacy("ping"))).json()["result"] == {}
    listed = (await client.post("/mcp", **legacy("tools/list"))).json()["result"]
    assert [tool["name"] for tool in listed["tools"]] == FIVE


async def test_initialize_asking_an_unknown_legacy_version_gets_the_newest_legacy_one(client):
    init = await client.post("/mcp", **legacy("initialize", {"protocolVersion": "2024-01-01"}, version=None))
    assert init.json()["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_get_and_delete_answer_405(client, method):
    reply = await client.request(method, "/mcp")
    assert reply.status_code == 405
    assert reply.headers["allow"] == "POST"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, -32700),
        (b"\xff\xfe", 400, -32700),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', 400, -32600),
        (b'{"jsonrpc":"2.0","id":1}', 400, -32600),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":{},"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', 400, -32602),
        (b'"just a string"', 400, -32600),
    ],
)
async def test_malformed_messages_get_jsonrpc_errors(client, body, status, code):
    reply = await client.post("/mcp", content=body, headers={"Content-Type": "application/json"})
    assert reply.status_code == status
    assert reply.json()["error"]["code"] == code


async def test_version_header_must_match_the_body(client):
    request = modern("tools/list")
    request["headers"]["MCP-Protocol-Version"] = "2025-11-25"
    reply = await client.post("/mcp", **request)
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == -32020


async def test_missing_method_header_is_a_mismatch(client):
    request = modern("tools/list")
    del request["headers"]["Mcp-Method"]
    reply = await client.post("/mcp", **request)
    assert (reply.status_code, reply.json()["error"]["code"]) == (400, -32020)


async def test_method_header_must_match_the_body(client):
    request = modern("tools/list")
    request["headers"]["Mcp-Method"] = "tools/call"
    reply = await client.post("/mcp", **request)
    assert (reply.status_code, reply.json()["error"]["code"]) == (400, -32020)


async def test_name_header_must_match_and_may_be_base64(client):
    ok = await client.post(
        "/mcp",
        **modern(
            "tools/call",
            {"name": "search_tools", "arguments": {"query": "x"}},
            name_header=b64_sentinel("search_tools"),
        ),
    )
    assert ok.status_code == 200 and "result" in ok.json()
    bad = await client.post(
        "/mcp",
        **modern(
            "tools/call", {"name": "search_tools", "arguments": {"query": "x"}}, name_header="describe_tool"
        ),
    )
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, -32020)
    garbled = await client.post(
        "/mcp",
        **modern(
            "tools/call", {"name": "search_tools", "arguments": {"query": "x"}}, name_header="=?base64?***?="
        ),
    )
    assert (garbled.status_code, garbled.json()["error"]["code"]) == (400, -32020)


@pytest.mark.parametrize("ows", [("  ", "  "), ("\t", ""), ("", " \t"), (" ", "")])
@pytest.mark.parametrize("header", ["Mcp-Name", "Mcp-Method", "MCP-Protocol-Version"])
async def test_whitespace_around_a_header_value_is_not_part_of_it(client, header, ows):
    # RFC 9110 §5.5: a field value excludes the optional whitespace around it; the conformance
    # suite's http-header-validation sends "  search_tools  " as Mcp-Name.
    request = call("search_tools", {"query": "weather"})
    request["headers"][header] = ows[0] + request["headers"][header] + ows[1]
    reply = await client.post("/mcp", **request)
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"]["isError"] is False


async def test_whitespace_is_stripped_around_a_base64_name_but_kept_inside_it(client):
    request = call("search_tools", {"query": "weather"})
    request["headers"]["Mcp-Name"] = " " + b64_sentinel("search_tools") + "\t"
    assert (await client.post("/mcp", **request)).status_code == 200
    request = call("search_tools", {"query": "weather"})
    request["headers"]["Mcp-Name"] = b64_sentinel(" search_tools ")  # encoded blanks are the name's
    reply = await client.post("/mcp", **request)
    assert (reply.status_code, reply.json()["error"]["code"]) == (400, -32020)


async def test_unknown_version_lists_the_supported_ones(client):
    reply = await client.post("/mcp", **legacy("tools/list", version="1900-01-01"))
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == -32022
    assert "2026-07-28" in error["data"]["supported"] and error["data"]["requested"] == "1900-01-01"


async def test_modern_request_needs_client_capabilities(client):
    request = modern("tools/list")
    del request["json"]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    reply = await client.post("/mcp", **request)
    assert (reply.status_code, reply.json()["error"]["code"]) == (400, -32602)


async def test_unknown_method_is_404_in_the_modern_era(client):
    for method in (
        "resources/subscribe",
        "completion/complete",
        "logging/setLevel",
        "sampling/createMessage",
    ):
        reply = await client.post("/mcp", **modern(method))
        assert reply.status_code == 404
        assert reply.json()["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("method", "field"),
    [
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    ],
)
async def test_prompts_and_resources_are_declared_and_empty(client, method, field):
    reply = await client.post("/mcp", **modern(method))
    result = reply.json()["result"]
    assert result[field] == [] and result["ttlMs"] > 0 and result["cacheScope"] == "private"
    old = await client.post("/mcp", **legacy(method))
    assert old.json()["result"] == {field: []}
    discovered = (await client.post("/mcp", **modern("server/discover"))).json()["result"]
    assert {"prompts", "resources"} <= set(discovered["capabilities"])


async def test_a_prompt_or_resource_by_name_is_unknown_not_a_missing_method(client):
    uri = "test://nothing-here"
    error = (await client.post("/mcp", **modern("resources/read", {"uri": uri}))).json()["error"]
    assert (error["code"], error.get("data")) == (-32602, {"uri": uri}), error
    huge = "test://" + "x" * 5000  # not sent back
    error = (await client.post("/mcp", **legacy("resources/read", {"uri": huge}))).json()["error"]
    assert error["code"] == -32602 and "data" not in error
    error = (await client.post("/mcp", **legacy("prompts/get", {"name": "greeting"}))).json()["error"]
    assert error["code"] == -32602


async def test_unknown_tool_is_invalid_params(client):
    reply = await client.post("/mcp", **call("no_such_tool", {}))
    assert reply.json()["error"]["code"] == -32602


async def test_origin_is_checked(client):
    request = modern("tools/list")
    request["headers"]["Origin"] = "https://evil.example"
    assert (await client.post("/mcp", **request)).status_code == 403
    request["headers"]["Origin"] = "https://allowed.example"
    assert (await client.post("/mcp", **request)).status_code == 200


async def test_oversize_body_is_refused(client):
    request = call("search_tools", {"query": "x" * 60_000})
    reply = await client.post("/mcp", **request)
    assert reply.status_code == 413
    assert reply.json()["error"]["code"] == -32600


async def test_instructions_are_cut_with_a_note():
    from toolsearch.service.tool_service import compose_instructions

    text = compose_instructions("a" * 50, limit=20)
    assert "a" * 20 in text and "a" * 21 not in text
    assert "cut here, at 20 of 50 characters" in text
    assert compose_instructions("short", limit=20).endswith("short")


@pytest.mark.parametrize(
    ("host", "origin", "status"),
    [
        ("127.0.0.1:8931", "http://127.0.0.1:8931", 200),
        ("localhost:8931", "http://localhost:8931", 200),
        ("[::1]:8931", "http://[::1]:8931", 200),
        ("127.0.0.1:8931", "http://127.0.0.1:9999", 403),  # another local port is another origin
        ("127.0.0.1:8931", "http://localhost:8931", 403),
        ("evil.example:8931", "http://evil.example:8931", 403),  # DNS rebinding: same-host, not loopback
        ("127.0.0.1:8931", "null", 403),
    ],
)
async def test_a_loopback_server_accepts_its_own_origin_only(client, host, origin, status):
    for request in (modern("server/discover"), legacy("ping")):
        request["headers"].update({"Host": host, "Origin": origin})
        reply = await client.post("/mcp", **request)
        assert reply.status_code == status
        if status == 403:
            assert reply.json()["error"]["code"] == -32600


@pytest.fixture
async def pinned_route_query(sdk_upstream):
    """The proxy with the upstream's `route_query` pinned: x-mcp-header on region and shard."""
    settings = Settings(upstream=sdk_upstream.url, embedder="none", pinned_tools=["route_query"])
    proxy = build_proxy(settings)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app),
        base_url="http://testserver",
        headers={"Authorization": "Bearer frank"},
    ) as c:
        yield c


def _route_query(arguments, param_headers):
    request = call("route_query", {"query": "q", **arguments})
    request["headers"].update(param_headers)
    return request


@pytest.mark.parametrize(
    ("arguments", "param_headers"),
    [
        ({"region": "eu-north", "shard": 3}, {"Mcp-Param-Region": "eu-north", "mcp-param-shard": "3"}),
        ({"region": "eu-north", "shard": 3}, {"Mcp-Param-Region": " eu-north ", "Mcp-Param-Shard": "3.0"}),
        ({"region": "Vilnius ąž"}, {"Mcp-Param-Region": b64_sentinel("Vilnius ąž")}),
        ({"region": "=?base64?eu"}, {"Mcp-Param-Region": "=?base64?eu"}),  # no suffix: a literal
        ({"region": "Vilnius ąž"}, {"Mcp-Param-Region": "\t" + b64_sentinel("Vilnius ąž") + "  "}),
    ],
)
async def test_pinned_tool_param_headers_that_match_the_body_are_accepted(
    pinned_route_query, arguments, param_headers
):
    reply = await pinned_route_query.post("/mcp", **_route_query(arguments, param_headers))
    assert reply.status_code == 200
    assert reply.json()["result"]["isError"] is False


@pytest.mark.parametrize(
    ("arguments", "param_headers"),
    [
        ({"region": "eu-north"}, {}),  # the value is in the body, the header is missing
        ({"region": "eu-north"}, {"Mcp-Param-Region": "us-east"}),
        ({"region": "eu-north", "shard": 3}, {"Mcp-Param-Region": "eu-north", "Mcp-Param-Shard": "4"}),
        ({"region": "Hello"}, {"Mcp-Param-Region": "=?base64?SGVsbG8?="}),  # bad Base64 padding
        ({"region": "Hello"}, {"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?="}),
        ({"region": "eu-north"}, {"Mcp-Param-Region": "eu-north", "Mcp-Param-Shard": "3"}),  # no shard
    ],
)
async def test_pinned_tool_param_headers_that_differ_from_the_body_are_a_mismatch(
    pinned_route_query, arguments, param_headers
):
    reply = await pinned_route_query.post("/mcp", **_route_query(arguments, param_headers))
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == -32020


async def test_param_headers_are_checked_only_where_a_listed_tool_declares_them(pinned_route_query):
    # A legacy-era call has no request-metadata headers to check.
    legacy_call = legacy("tools/call", {"name": "route_query", "arguments": {"region": "eu", "query": "q"}})
    assert (await pinned_route_query.post("/mcp", **legacy_call)).json()["result"]["isError"] is False
    # The proxy's own tools declare no x-mcp-header: a stray Mcp-Param header is not ours to judge.
    request = call("search_tools", {"query": "route a query"})
    request["headers"]["Mcp-Param-Region"] = "anything"
    assert (await pinned_route_query.post("/mcp", **request)).status_code == 200


async def test_a_bug_of_ours_is_a_json_rpc_error_without_details(caplog):
    proxy = build_proxy(Settings())

    async def broken(*args, **kwargs):
        raise RuntimeError("secret-argument-value")

    proxy.service.call = broken  # the one way to reach this path: our own code failing
    transport = httpx.ASGITransport(app=proxy.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        reply = await c.post("/mcp", **call("search_tools", {"query": "x"}))
    assert reply.status_code == 500
    assert reply.json()["error"] == {"code": -32603, "message": "Internal error in the proxy"}
    logged = [record for record in caplog.records if record.getMessage() == "internal error"]
    assert [record.error for record in logged] == ["RuntimeError"]
    assert all("secret-argument-value" not in str(vars(record)) for record in caplog.records)


async def test_serve_answers_a_browsers_preflight_for_an_allowed_origin_only():
    # What `toolsearch serve` runs: the app behind the CORS layer (on Lambda the URL and API do it).
    from toolsearch.server.local_server import with_cors

    proxy = build_proxy(Settings(allowed_origins=["https://inspector.example"]))
    app = with_cors(proxy.app, proxy.settings.allowed_origins)
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-method, mcp-name",
    }
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        allowed = await http.options("/mcp", headers={"Origin": "https://inspector.example", **preflight})
        refused = await http.options("/mcp", headers={"Origin": "https://evil.example", **preflight})
        request = modern("tools/list")
        request["headers"] = {**request["headers"], "Origin": "https://inspector.example"}
        called = await http.post("/mcp", **request)

    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "https://inspector.example"
    assert "mcp-name" in allowed.headers["access-control-allow-headers"].lower()
    assert "access-control-allow-credentials" not in allowed.headers
    assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers
    assert called.status_code == 200
    assert called.headers["access-control-allow-origin"] == "https://inspector.example"
    assert "www-authenticate" in called.headers["access-control-expose-headers"].lower()


def test_without_allowed_origins_serve_adds_no_cors_layer():
    from toolsearch.server.local_server import with_cors

    proxy = build_proxy(Settings())
    assert with_cors(proxy.app, proxy.settings.allowed_origins) is proxy.app


def _twice(request, name, second):
    """The request with `name` sent twice: its own value first (matching the body), then `second`."""
    headers = list(request["headers"].items())
    first = dict(headers)[name]
    return {**request, "headers": [*headers, (name, second if second is not None else first)]}


# Every header the proxy compares with the body, sent twice: the first value matches the body, the
# second differs (a gateway reading the last routes elsewhere) or repeats it (one value is the rule).
TWICE = [
    (modern("tools/list"), "MCP-Protocol-Version", "2025-11-25"),
    (modern("tools/list"), "MCP-Protocol-Version", None),
    (legacy("ping"), "MCP-Protocol-Version", "2025-06-18"),
    (modern("tools/list"), "Mcp-Method", "tools/call"),
    (modern("tools/list"), "Mcp-Method", None),
    (call("search_tools", {"query": "x"}), "Mcp-Name", "call_write_tool"),
    (call("search_tools", {"query": "x"}), "Mcp-Name", None),
    (modern("resources/read", {"uri": "file:///a"}), "Mcp-Name", "file:///b"),
]


@pytest.mark.parametrize(("request_", "name", "second"), TWICE)
async def test_a_header_compared_with_the_body_that_comes_twice_is_a_mismatch(client, request_, name, second):
    reply = await client.post("/mcp", **_twice(request_, name, second))
    assert (reply.status_code, reply.json()["error"]["code"]) == (400, -32020)
    assert f"{name} header comes more than once" in reply.json()["error"]["message"]


@pytest.mark.parametrize("second", ["us-east", "eu-north"])
async def test_a_param_header_that_comes_twice_is_a_mismatch_and_no_call_is_sent(
    pinned_route_query, sdk_upstream, second
):
    request = _route_query({"region": "eu-north"}, {"Mcp-Param-Region": "eu-north"})
    before = len(sdk_upstream.requests)
    reply = await pinned_route_query.post("/mcp", **_twice(request, "Mcp-Param-Region", second))
    assert (reply.status_code, reply.json()["error"]["code"]) == (400, -32020)
    sent = [r for r in sdk_upstream.requests[before:] if r.rpc_method == "tools/call"]
    assert sent == []


async def test_the_method_table_is_what_each_era_answers_and_declares(client):
    """One table: a method answers in the eras it lists, is unknown in the others, and what the
    server declares in each era is the capabilities its methods there are under."""
    from toolsearch.server import endpoint as E

    named = {
        "tools/call": {"name": "search_tools", "arguments": {"query": "x"}},
        "prompts/get": {"name": "greeting"},
        "resources/read": {"uri": "test://nothing-here"},
    }
    for name, method in E.METHODS.items():
        params = named.get(name, {})
        for era, request in ((E.MODERN, modern), (E.HANDSHAKE, legacy)):
            reply = await client.post("/mcp", **request(name, params))
            missing = reply.json().get("error", {}).get("code") == -32601
            assert missing == (era not in method.eras), (name, era, reply.json())
    assert {n for n, m in E.METHODS.items() if E.MODERN in m.eras} == E.MODERN_METHODS
    assert {n for n, m in E.METHODS.items() if E.HANDSHAKE in m.eras} == E.LEGACY_METHODS
    discovered = (await client.post("/mcp", **modern("server/discover"))).json()["result"]
    assert discovered["capabilities"] == E.capabilities(E.ERAS[True])
    asked = {"protocolVersion": "2025-11-25"}
    initialized = (await client.post("/mcp", **legacy("initialize", asked))).json()
    assert initialized["result"]["capabilities"] == E.capabilities(E.ERAS[False])
    assert initialized["result"]["capabilities"] == {
        "tools": {"listChanged": False},
        "prompts": {"listChanged": False},
        "resources": {"listChanged": False, "subscribe": False},
    }
