"""Reviewing and refreshing a caller's catalog: GET /catalog, POST /catalog/refresh, stale tools.

Upstreams are real servers on loopback built with the official SDK: the fixture
upstream (per-token catalogs, 401/403), an `MCPServer` whose tools a test adds
and removes (it reports an unknown tool as a tool error), and a low-level
`Server` with a changeable list (it answers an unknown tool with -32602 in the
TypeScript SDK's words).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator

import httpx
import mcp_types as types
import pytest
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError

from fixtures.mcp_wire import call
from fixtures.servers import serve_in_thread
from fixtures.servers import start_server as serve_with_lifespan
from toolsearch.app import build_proxy
from toolsearch.cli.catalog import MAX_PAGES, authorization, base_url
from toolsearch.cli.main import main
from toolsearch.server.catalog_routes import RefreshLimiter, decode_cursor, encode_cursor
from toolsearch.settings import Settings


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@contextlib.contextmanager
def proxy_for(upstream_url: str, **settings) -> Iterator[str]:
    settings.setdefault("catalog_ttl", 3600.0)  # nothing refreshes by itself during a test
    proxy = build_proxy(Settings(upstream=upstream_url, embedder="none", **settings))
    with serve_in_thread(proxy.app) as base:
        yield base


@pytest.fixture(scope="module")
def proxy_base(sdk_upstream):
    with proxy_for(sdk_upstream.url) as base:
        yield base


async def all_pages(http: httpx.AsyncClient, base: str, token: str, limit: int) -> tuple[list[dict], int]:
    rows, cursor, pages = [], None, 0
    while True:
        params = {"limit": str(limit)} | ({"cursor": cursor} if cursor else {})
        reply = await http.get(base + "/catalog", params=params, headers=bearer(token))
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert len(body["tools"]) <= limit
        rows += body["tools"]
        pages += 1
        cursor = body.get("nextCursor")
        if cursor is None:
            return rows, body["total"]
        assert pages < 100, "paging never ended"


# -- GET /catalog


async def test_pages_cover_the_whole_catalog_once_in_name_order(proxy_base):
    async with httpx.AsyncClient(timeout=30) as http:
        rows, total = await all_pages(http, proxy_base, "alice", limit=40)
    names = [row["name"] for row in rows]
    assert len(names) == total > 300
    assert names == sorted(set(names))
    by_name = {row["name"]: row for row in rows}
    assert by_name["crm_list_contacts"]["readOnly"] is True
    assert by_name["crm_delete_contact"]["readOnly"] is False
    assert by_name["echo"]["title"] == "Echo"
    assert by_name["crm_list_contacts"]["description"] == "Lists contacts in crm, newest first."
    assert set(by_name["echo"]) == {"name", "readOnly", "title", "description"}


async def test_each_token_reviews_its_own_catalog(proxy_base):
    async with httpx.AsyncClient(timeout=30) as http:
        alice, alice_total = await all_pages(http, proxy_base, "alice", limit=500)
        bob, _ = await all_pages(http, proxy_base, "bob", limit=500)
        _carol, carol_total = await all_pages(http, proxy_base, "carol", limit=500)
    alice_names, bob_names = {r["name"] for r in alice}, {r["name"] for r in bob}
    assert "alice_only_tool" in alice_names and "bob_only_tool" not in alice_names
    assert "bob_only_tool" in bob_names and "alice_only_tool" not in bob_names
    assert alice_total == carol_total + 1


async def test_missing_token_gets_the_same_401_challenge_as_mcp(proxy_base):
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.get(proxy_base + "/catalog")
        refresh = await http.post(proxy_base + "/catalog/refresh")
        denied = await http.get(proxy_base + "/catalog", headers=bearer("denied"))
    assert reply.status_code == 401
    assert reply.json()["error"]["kind"] == "unauthorized"
    challenge = reply.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{proxy_base}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert refresh.status_code == 401 and "resource_metadata" in refresh.headers["www-authenticate"]
    assert denied.status_code == 403
    assert 'scope="tools"' in denied.headers["www-authenticate"]
    assert reply.headers["cache-control"] == "private, no-store"


@pytest.mark.parametrize(
    "params", [{"limit": "0"}, {"limit": "501"}, {"limit": "ten"}, {"cursor": "%%%"}, {"cursor": "/w"}]
)
async def test_bad_paging_parameters_are_400_with_a_reason(proxy_base, params):
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.get(proxy_base + "/catalog", params=params, headers=bearer("alice"))
    assert reply.status_code == 400
    assert reply.json()["error"]["kind"] == "invalid_arguments"


async def test_origin_not_allowed_is_refused(proxy_base):
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.get(
            proxy_base + "/catalog", headers={**bearer("alice"), "Origin": "https://evil.example"}
        )
    assert reply.status_code == 403


@pytest.mark.parametrize(
    ("origin_of", "status"),
    [
        (lambda port: f"http://127.0.0.1:{port}", 200),  # a page of this very server
        (lambda port: f"http://127.0.0.1:{port + 1}", 403),  # another local port is another origin
        (lambda port: f"http://localhost:{port}", 403),
        (lambda port: "null", 403),
    ],
)
async def test_catalog_takes_the_same_origin_rule_as_mcp(proxy_base, origin_of, status):
    port = httpx.URL(proxy_base).port
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.get(
            proxy_base + "/catalog", headers={**bearer("alice"), "Origin": origin_of(port)}
        )
    assert reply.status_code == status


def test_cursor_round_trips_any_name():
    for name in ("a", "crm_list_contacts", "įvykis-ž", "x" * 200):
        assert decode_cursor(encode_cursor(name)) == name


# -- POST /catalog/refresh with an upstream whose tools change


@contextlib.contextmanager
def changing_upstream() -> Iterator[tuple[MCPServer, str]]:
    """An official-SDK MCPServer on loopback; the test adds and removes its tools."""
    server = MCPServer("changing-upstream")

    def report(topic: str) -> str:
        return f"report on {topic}"

    server.add_tool(report, name="weekly_report", annotations=types.ToolAnnotations(read_only_hint=True))
    app = server.streamable_http_app(
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    thread = serve_with_lifespan(app)
    try:
        yield server, thread.base_url + "/mcp"
    finally:
        thread.stop()


def added_tool(server: MCPServer, name: str) -> None:
    def lookup(city: str) -> str:
        return f"sunny in {city}"

    server.add_tool(lookup, name=name, annotations=types.ToolAnnotations(read_only_hint=True))


async def names(http: httpx.AsyncClient, base: str, token: str) -> set[str]:
    reply = await http.get(base + "/catalog", headers=bearer(token))
    assert reply.status_code == 200, reply.text
    return {row["name"] for row in reply.json()["tools"]}


async def test_refresh_shows_a_new_upstream_tool_at_once():
    with changing_upstream() as (server, url), proxy_for(url) as base:
        async with httpx.AsyncClient(timeout=30) as http:
            assert await names(http, base, "alice") == {"weekly_report"}
            added_tool(server, "weather_today")
            assert "weather_today" not in await names(http, base, "alice")  # cached for catalog_ttl

            reply = await http.post(base + "/catalog/refresh", headers=bearer("alice"))
            assert reply.status_code == 200, reply.text
            body = reply.json()
            assert body["refreshed"] is True and body["total"] == 2
            assert body["added"] == ["weather_today"] and body["removed"] == []
            assert await names(http, base, "alice") == {"weekly_report", "weather_today"}

            called = await http.post(
                base + "/mcp",
                **_with(
                    bearer("alice"),
                    call("call_read_tool", {"name": "weather_today", "arguments": {"city": "Vilnius"}}),
                ),
            )
            result = called.json()["result"]
            assert not result.get("isError"), result
            assert "sunny in Vilnius" in result["content"][0]["text"]


def _with(headers: dict[str, str], request: dict) -> dict:
    return {"json": request["json"], "headers": {**request["headers"], **headers}}


async def test_refresh_is_rate_limited_per_caller():
    with changing_upstream() as (_server, url), proxy_for(url, catalog_refresh_interval=600.0) as base:
        async with httpx.AsyncClient(timeout=30) as http:
            first = await http.post(base + "/catalog/refresh", headers=bearer("alice"))
            again = await http.post(base + "/catalog/refresh", headers=bearer("alice"))
            other = await http.post(base + "/catalog/refresh", headers=bearer("bob"))
    assert first.status_code == 200
    assert "added" not in first.json()  # nothing was cached before: no difference to report
    assert again.status_code == 429
    assert again.json()["error"]["kind"] == "rate_limited"
    assert 590 <= int(again.headers["retry-after"]) <= 600
    assert other.status_code == 200


async def test_limiter_lets_a_caller_refresh_again_after_the_interval():
    now = [1000.0]
    limiter = RefreshLimiter(5.0, clock=lambda: now[0])
    assert await limiter.wait_for("k") == 0
    now[0] += 4.0
    assert await limiter.wait_for("k") == pytest.approx(1.0)
    assert await limiter.wait_for("other") == 0
    now[0] += 1.0
    assert await limiter.wait_for("k") == 0
    assert await RefreshLimiter(0.0).wait_for("k") == 0  # 0 turns the limit off


# -- an upstream that no longer knows a tool the catalog lists


async def test_tool_error_saying_unknown_tool_makes_the_catalog_list_again():
    with changing_upstream() as (server, url), proxy_for(url) as base:
        async with httpx.AsyncClient(timeout=30) as http:
            added_tool(server, "weather_today")
            assert await names(http, base, "alice") == {"weekly_report", "weather_today"}
            server.remove_tool("weather_today")

            called = await http.post(
                base + "/mcp",
                **_with(
                    bearer("alice"),
                    call("call_read_tool", {"name": "weather_today", "arguments": {"city": "Oslo"}}),
                ),
            )
            result = called.json()["result"]
            assert result["isError"] is True  # the upstream's own "Unknown tool" passes through
            assert await names(http, base, "alice") == {"weekly_report"}  # listed again, no refresh


@contextlib.contextmanager
def listed_upstream(tools: list[str]) -> Iterator[str]:
    """A low-level SDK server listing `tools` (the test changes the list); unknown names are -32602."""
    schema = {"type": "object", "properties": {}}

    async def list_tools(ctx, params) -> types.ListToolsResult:
        listed = [{"name": n, "inputSchema": schema, "annotations": {"readOnlyHint": True}} for n in tools]
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in listed])

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in tools:
            raise MCPError(-32602, f"Tool {params.name} not found")
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])

    server = Server(
        "listed-upstream",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=lambda name: schema if name in tools else None,
    )
    app = server.streamable_http_app(
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    thread = serve_with_lifespan(app)
    try:
        yield thread.base_url + "/mcp"
    finally:
        thread.stop()


async def test_invalid_params_saying_unknown_tool_is_reported_as_unknown_and_relisted():
    tools = ["billing_get_invoice", "billing_list_invoices"]
    with listed_upstream(tools) as url, proxy_for(url) as base:
        async with httpx.AsyncClient(timeout=30) as http:
            assert await names(http, base, "alice") == set(tools)
            tools.remove("billing_get_invoice")
            called = await http.post(
                base + "/mcp",
                **_with(bearer("alice"), call("call_read_tool", {"name": "billing_get_invoice"})),
            )
            error = called.json()["result"]["structuredContent"]["error"]
            assert error["kind"] == "unknown_tool"
            assert "search_tools" in error["message"]
            assert await names(http, base, "alice") == {"billing_list_invoices"}


# -- with the shared (DynamoDB) tier: what one environment refreshes, the others see


@pytest.mark.npm
async def test_refresh_lists_the_upstream_not_the_shared_tier(dynalite, dynamo_table):
    from toolsearch.catalogs.cache.dynamo import DynamoSharedTier

    def shared():
        return DynamoSharedTier(dynamo_table, ttl_seconds=3600, client=dynalite.client())

    with changing_upstream() as (server, url):
        settings = Settings(upstream=url, embedder="none", catalog_ttl=3600.0)
        first = build_proxy(settings, shared=shared())
        second = build_proxy(settings, shared=shared())
        with serve_in_thread(first.app) as one, serve_in_thread(second.app) as two:
            async with httpx.AsyncClient(timeout=30) as http:
                assert await names(http, one, "alice") == {"weekly_report"}
                added_tool(server, "weather_today")
                refreshed = await http.post(two + "/catalog/refresh", headers=bearer("alice"))
                assert refreshed.status_code == 200 and refreshed.json()["total"] == 2
                # Another environment's warm memory keeps its list until catalog_ttl; a new one reads
                # what the refresh stored in the table.
                assert await names(http, one, "alice") == {"weekly_report"}
                third = build_proxy(settings, shared=shared())
                with serve_in_thread(third.app) as three:
                    assert await names(http, three, "alice") == {"weekly_report", "weather_today"}
                    # The limit holds across environments: the table's lease says "just refreshed".
                    again = await http.post(three + "/catalog/refresh", headers=bearer("alice"))
                    assert again.status_code == 429


# -- toolsearch catalog


def test_cli_prints_the_callers_catalog_as_a_table(proxy_base, monkeypatch, capsys):
    monkeypatch.setenv("REVIEW_TOKEN", "alice")
    assert main(["catalog", "--url", proxy_base + "/mcp", "--token-env", "REVIEW_TOKEN"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "MODE", "TITLE", "DESCRIPTION"]
    rows = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert rows["alice_only_tool"] == "read" and rows["crm_delete_contact"] == "WRITE"
    assert "bob_only_tool" not in rows
    assert f"{len(rows)} tools (" in err
    assert "alice" not in err.replace("alice_only_tool", "")  # the token is never printed


def test_cli_without_a_token_reports_the_401(proxy_base, monkeypatch, capsys):
    monkeypatch.delenv("TOOLSEARCH_TOKEN", raising=False)
    assert main(["catalog", "--url", proxy_base]) == 1
    assert "requires authorization" in capsys.readouterr().err
    monkeypatch.delenv("UNSET_TOKEN_VAR", raising=False)
    assert main(["catalog", "--url", proxy_base, "--token-env", "UNSET_TOKEN_VAR"]) == 1
    assert "$UNSET_TOKEN_VAR is empty or unset" in capsys.readouterr().err


def test_cli_refresh_reports_what_changed(monkeypatch, capsys):
    monkeypatch.setenv("TOOLSEARCH_TOKEN", "Bearer alice")
    with changing_upstream() as (server, url), proxy_for(url) as base:
        assert main(["catalog", "--url", base, "--json"]) == 0
        listed = [json.loads(line)["name"] for line in capsys.readouterr().out.splitlines()]
        assert listed == ["weekly_report"]
        added_tool(server, "weather_today")
        assert main(["catalog", "--url", base, "--refresh", "--json"]) == 0
        out, err = capsys.readouterr()
        assert "1 added, 0 removed\n  + weather_today" in err
        assert {json.loads(line)["name"] for line in out.splitlines()} == {"weekly_report", "weather_today"}
        assert main(["catalog", "--url", base, "--refresh"]) == 0  # rate-limited: lists anyway
        assert "refreshed moments ago" in capsys.readouterr().err


def test_token_header_keeps_a_scheme_it_already_has():
    assert authorization(None, {"TOOLSEARCH_TOKEN": "abc"}) == "Bearer abc"
    assert authorization(None, {"TOOLSEARCH_TOKEN": "Bearer abc"}) == "Bearer abc"
    assert authorization(None, {}) is None
    assert base_url("http://127.0.0.1:8080/mcp/") == "http://127.0.0.1:8080"


async def test_review_logs_and_metrics_hold_no_token(proxy_base, caplog):
    secret = "s3cr3t-review-T0KEN"
    with caplog.at_level(logging.DEBUG):
        async with httpx.AsyncClient(timeout=30) as http:
            await http.get(proxy_base + "/catalog", headers=bearer(secret))
            await http.post(proxy_base + "/catalog/refresh", headers=bearer(secret))
    lines = [record.getMessage() + repr(record.__dict__) for record in caplog.records]
    assert any("catalog_review" in line for line in lines), "nothing logged: the test would prove nothing"
    assert not [line for line in lines if secret in line]


# Upstream text a terminal would obey: cursor moves, a line erased, bidi overrides, C1, separators.
HOSTILE_TEXT = [
    "\x1b[2K\r",  # erase the line, back to its start: what follows would overwrite WRITE
    "\x1b]8;;https://evil.example\x07link\x1b]8;;\x07",  # an OSC hyperlink
    "\u202eetirw\u202c",  # right-to-left override
    "\u2066isolate\u2069",
    "\x9b31m",  # C1 CSI
    "\x85next line\u2028separator\u2029",
    "\x00\x08\x7f",
]
FORBIDDEN = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} | set(
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u2028\u2029"
)


@contextlib.contextmanager
def hostile_text_upstream() -> Iterator[str]:
    """An official-SDK upstream whose one write tool's title and description hold terminal controls."""
    server = MCPServer("hostile-text")

    def erase(target: str) -> str:
        return f"erased {target}"

    server.add_tool(
        erase,
        name="erase_everything",
        title="".join(HOSTILE_TEXT),
        description="".join(HOSTILE_TEXT) + "erase_everything  read   harmless lookup",
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
    )
    app = server.streamable_http_app(
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    thread = serve_with_lifespan(app)
    try:
        yield thread.base_url + "/mcp"
    finally:
        thread.stop()


@pytest.mark.parametrize("as_json", [False, True])
def test_cli_prints_no_upstream_control_character_raw(monkeypatch, capsys, as_json):
    monkeypatch.setenv("TOOLSEARCH_TOKEN", "alice")
    with hostile_text_upstream() as url, proxy_for(url) as base:
        assert main(["catalog", "--url", base, *(["--json"] if as_json else [])]) == 0
    out, err = capsys.readouterr()
    printed = out + err
    assert not FORBIDDEN & (set(printed) - {"\n"}), sorted(FORBIDDEN & set(printed))
    lines = out.splitlines()
    if as_json:
        (row,) = [json.loads(line) for line in lines]  # still one valid JSON object per tool
        assert row["title"] == "".join(HOSTILE_TEXT) and row["readOnly"] is False
    else:
        assert len(lines) == 2 and lines[1].split()[:2] == ["erase_everything", "WRITE"]
        assert "\\u001b[2K\\u000d" in lines[1]  # shown as escapes, not obeyed


@contextlib.contextmanager
def endless_catalog(cursor_for) -> Iterator[tuple[str, list[str]]]:
    """A server at --url whose GET /catalog always offers a next page (`cursor_for(n)` names it)."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    asked: list[str] = []

    async def page(request):
        asked.append(request.query_params.get("cursor", ""))
        n = len(asked)
        tool = {"name": f"tool_{n}", "title": "", "description": "", "readOnly": True}
        return JSONResponse({"tools": [tool], "nextCursor": cursor_for(n), "fetchedAt": "now"})

    with serve_in_thread(Starlette(routes=[Route("/catalog", page)])) as base:
        yield base, asked


@pytest.mark.parametrize(
    ("cursor_for", "pages", "why"),
    [
        (lambda n: f"c{n}", MAX_PAGES, f"after {MAX_PAGES} pages"),  # always a new cursor
        (lambda n: "same", 2, "repeated a page cursor"),
        (lambda n: f"c{n % 3}", 4, "repeated a page cursor"),  # a longer loop
    ],
)
def test_cli_asks_for_a_bounded_number_of_pages(monkeypatch, capsys, cursor_for, pages, why):
    monkeypatch.setenv("TOOLSEARCH_TOKEN", "alice")
    with endless_catalog(cursor_for) as (base, asked):
        assert main(["catalog", "--url", base, "--json"]) == 1
    out, err = capsys.readouterr()
    assert len(asked) == pages
    assert len(out.splitlines()) == pages  # what was listed is still printed
    assert why in err and "may be incomplete" in err
