"""End to end behind a real gateway: the proxy in front of IBM's ContextForge (1.1.0).

ContextForge runs as a deployer runs it (docs/gateways.md, whose commands this suite runs): SQLite,
two teams (finance: alice; support: bob), a user without a team (carol), server-everything and the
`office` server public, `finance` and `support` each visible to its team only, one virtual server
holding every tool, and team-scoped API tokens. The proxy is the real app (`build_proxy`, served by
uvicorn on loopback) with `--upstream` at the virtual server's `/servers/<id>/mcp`, as the guide's
`toolsearch serve` line sets it; the caller is the official SDK client in both protocol eras.

A test marked xfail(strict=True) would wait for a change to the core; none does now.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from fixtures.burst import two_users
from fixtures.contextforge import (
    ContextForge,
    GatewayProcess,
    another_gateway,
    guide_blocks,
)
from fixtures.doc_commands import toolsearch_argvs
from fixtures.servers import serve_in_thread
from toolsearch.app import build_proxy
from toolsearch.cli.main import build_parser
from toolsearch.settings import Settings, from_args

pytestmark = [pytest.mark.gateway, pytest.mark.npm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
MODES = ["2026-07-28", "legacy"]  # legacy: the 2025-11-25 initialize handshake
PUBLIC = {
    "everything-echo",
    "everything-get-sum",
    "office-send-email",
    "office-list-events",
    "office-read-email",
}
FINANCE = {
    "finance-get-invoice",
    "finance-list-invoices",
    "finance-create-payment",
    "finance-get-account-balance",
}
SUPPORT = {"support-get-ticket", "support-search-tickets", "support-reply-ticket", "support-close-ticket"}
POLL = 30.0  # seconds: the most a test waits for something that should happen within a second or two

# The gateway's own defaults for its MCP tier (docs/gateways.md's set-up raises them for a proxy).
GATEWAY_DEFAULT_LIMITS = {"RATE_LIMIT_MEDIUM_RPM": "100", "RATE_LIMIT_LOCKOUT_ENABLED": "true"}


# -- the proxy, as the guide starts it ------------------------------------------------------------


def guide_settings(forge: ContextForge, upstream: str | None = None, **overrides) -> Settings:
    """The settings of the guide's `toolsearch serve` line, with its variables filled in."""
    line = guide_blocks()["proxy"]
    line = line.replace("$GATEWAY", forge.gateway.url).replace("$SERVER_ID", forge.server_id)
    [argv] = toolsearch_argvs(line)
    settings = from_args(build_parser().parse_args(argv), environ={})
    if upstream is not None:
        settings = settings.replace(upstream=upstream)
    return settings.replace(embedder="none", **overrides)


@contextlib.contextmanager
def running_proxy(
    forge: ContextForge, upstream: str | None = None, *, source: str | None = None, **overrides
) -> Iterator[str]:
    """The proxy's base URL while it serves (its own catalog cache, so tests do not share one).

    `source`: the loopback address its upstream requests come from (127.0.0.2...), so the gateway,
    which limits and locks out per address, sees this proxy apart from the others."""
    http = None
    if source is not None:
        http = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(local_address=source), follow_redirects=False
        )
    proxy = build_proxy(guide_settings(forge, upstream, **overrides), http=http)
    with serve_in_thread(proxy.app) as base:
        yield base


def connect(base: str, token: str, mode: str = "2026-07-28") -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(base + "/mcp", http_client=http), mode=mode)


async def catalog_rows(base: str, token: str) -> dict[str, bool]:
    """Name -> readOnly of what the proxy's GET /catalog shows this token."""
    async with httpx.AsyncClient(timeout=60) as http:
        reply = await http.get(f"{base}/catalog?limit=500", headers={"Authorization": f"Bearer {token}"})
    reply.raise_for_status()
    return {row["name"]: row["readOnly"] for row in reply.json()["tools"]}


async def found_by_search(client: Client, query: str) -> set[str]:
    result = await client.call_tool("search_tools", {"query": query, "limit": 25})
    assert not result.is_error, result.content
    return {tool["name"] for tool in result.structured_content["tools"]}


async def refresh(base: str, token: str) -> dict:
    async with httpx.AsyncClient(timeout=60) as http:
        reply = await http.post(f"{base}/catalog/refresh", headers={"Authorization": f"Bearer {token}"})
    reply.raise_for_status()
    return reply.json()


def tokens(forge: ContextForge) -> dict[str, str]:
    return {
        "alice": forge.values["ALICE_TOKEN"],
        "bob": forge.values["BOB_TOKEN"],
        "carol": forge.values["CAROL_TOKEN"],
    }


# -- the guide itself ------------------------------------------------------------------------------


def test_the_guide_holds_every_block_the_suite_runs():
    blocks = guide_blocks()
    needed = {"install", "environment", "start", "admin-session", "users-and-teams", "register-servers"}
    needed |= {"virtual-server", "tokens", "list-directly", "proxy", "deactivate-tool", "revoke-token"}
    assert needed <= set(blocks)
    # The install script installs what the guide's install block installs.
    script = (ROOT / "scripts" / "install-contextforge.sh").read_text()
    [package] = [w for w in shlex.split(blocks["install"].splitlines()[1]) if w.startswith("mcp-")]
    assert f'PACKAGE="{package}"' in script
    # The guide's proxy line is a `toolsearch serve` at a virtual server's /servers/<id>/mcp.
    [argv] = toolsearch_argvs(blocks["proxy"])
    assert argv[0] == "serve" and argv[argv.index("--upstream") + 1].endswith("/servers/$SERVER_ID/mcp")


# -- per-user catalogs -----------------------------------------------------------------------------


def test_the_gateway_lists_each_token_its_teams_tools(contextforge):
    seen = {user: set(contextforge.list_directly(token)) for user, token in tokens(contextforge).items()}
    assert seen["alice"] >= PUBLIC | FINANCE and not SUPPORT & seen["alice"]
    assert seen["bob"] >= PUBLIC | SUPPORT and not FINANCE & seen["bob"]
    assert seen["carol"] >= PUBLIC and not (FINANCE | SUPPORT) & seen["carol"]
    # Beyond its team's server, each sees exactly the public tools.
    assert {n for n in seen["alice"] if not n.startswith("finance-")} == seen["carol"]
    assert {n for n in seen["bob"] if not n.startswith("support-")} == seen["carol"]
    # The counts docs/gateways.md gives after its listing command.
    assert {user: len(names) for user, names in seen.items()} == {"alice": 22, "bob": 21, "carol": 16}


async def test_each_callers_catalog_through_the_proxy_is_what_the_gateway_lists_for_its_token(
    contextforge,
):
    with running_proxy(contextforge) as base:
        for user, token in tokens(contextforge).items():
            direct = set(contextforge.list_directly(token))
            rows = await catalog_rows(base, token)
            assert set(rows) == direct, user
            # An unannotated tool arrives as `annotations: {}`: a write.
            assert rows["office-send-email"] is False
            assert rows["office-read-email"] is True


@pytest.mark.parametrize("mode", MODES)
async def test_search_and_describe_see_only_the_callers_team_tools_in_both_eras(contextforge, mode):
    with running_proxy(contextforge) as base:
        async with connect(base, contextforge.values["ALICE_TOKEN"], mode) as alice:
            assert "finance-get-invoice" in await found_by_search(alice, "get an invoice")
            assert not SUPPORT & await found_by_search(alice, "support ticket reply close")
        async with connect(base, contextforge.values["BOB_TOKEN"], mode) as bob:
            assert "support-close-ticket" in await found_by_search(bob, "close a support ticket")
            described = await bob.call_tool("describe_tool", {"names": ["finance-get-invoice"]})
            assert described.structured_content["unknown"] == ["finance-get-invoice"]


# -- calls -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_read_write_and_batched_calls_reach_the_right_servers(contextforge, mode):
    finance, office = contextforge.backends["finance"], contextforge.backends["office"]
    with running_proxy(contextforge) as base:
        async with connect(base, contextforge.values["ALICE_TOKEN"], mode) as alice:
            read = await alice.call_tool(
                "call_read_tool", {"name": "finance-get-invoice", "arguments": {"invoice_id": "INV-7"}}
            )
            assert not read.is_error, read.content
            assert '"invoice_id": "INV-7"' in read.content[0].text

            payments = finance.calls["create_payment"]
            write = await alice.call_tool(
                "call_write_tool",
                {"name": "finance-create-payment", "arguments": {"supplier": "ACME", "amount": 12.5}},
            )
            assert not write.is_error, write.content
            assert finance.calls["create_payment"] == payments + 1  # once, not retried

            batch = await alice.call_tool(
                "call_read_tools",
                {
                    "calls": [
                        {"name": "finance-get-exchange-rate", "arguments": {"base": "EUR", "quote": "USD"}},
                        {"name": "office-list-events", "arguments": {}},
                        {"name": "everything-get-sum", "arguments": {"a": 2, "b": 3}},
                    ]
                },
            )
            assert not batch.is_error, batch.content
            text = " ".join(getattr(block, "text", "") for block in batch.content)
            assert "1.08" in text and "standup" in text and "5" in text

            # office-send-email has no readOnlyHint: the read tools refuse it before the gateway.
            sent = office.calls["send_email"]
            refused = await alice.call_tool(
                "call_read_tool",
                {
                    "name": "office-send-email",
                    "arguments": {"to": "x@example.com", "subject": "s", "body": "b"},
                },
            )
            assert refused.is_error
            assert office.calls["send_email"] == sent
            mailed = await alice.call_tool(
                "call_write_tool",
                {
                    "name": "office-send-email",
                    "arguments": {"to": "x@example.com", "subject": "s", "body": "b"},
                },
            )
            assert not mailed.is_error, mailed.content
            assert office.calls["send_email"] == sent + 1

        async with connect(base, contextforge.values["BOB_TOKEN"], mode) as bob:
            calls = finance.calls["get_invoice"]
            denied = await bob.call_tool(
                "call_read_tool", {"name": "finance-get-invoice", "arguments": {"invoice_id": "INV-7"}}
            )
            assert denied.is_error
            assert finance.calls["get_invoice"] == calls


async def test_binary_and_structured_content_pass_through(contextforge):
    with running_proxy(contextforge) as base:
        async with connect(base, contextforge.values["BOB_TOKEN"]) as bob:
            image = await bob.call_tool("call_read_tool", {"name": "everything-get-tiny-image"})
            assert not image.is_error, image.content
            assert any(getattr(block, "type", "") == "image" and block.data for block in image.content)
            structured = await bob.call_tool(
                "call_read_tool",
                {"name": "everything-get-structured-content", "arguments": {"location": "New York"}},
            )
            assert not structured.is_error, structured.content
            assert set(structured.structured_content) == {"temperature", "conditions", "humidity"}


async def test_a_token_without_a_team_lists_public_tools_but_may_call_none(contextforge):
    # ContextForge 1.1.0: a token scoped to the user's personal team grants no tools.execute, so
    # the gateway refuses every call (JSON-RPC "Access denied" in the handshake era, -32603
    # "Internal server error" in 2026-07-28); the proxy passes that on as that call's error.
    with running_proxy(contextforge) as base:
        async with connect(base, contextforge.values["CAROL_TOKEN"]) as carol:
            assert "everything-echo" in await found_by_search(carol, "echo a message")
            echoed = await carol.call_tool(
                "call_read_tool", {"name": "everything-echo", "arguments": {"message": "hi"}}
            )
            assert echoed.is_error
            assert echoed.structured_content["error"]["kind"] == "rpc_error"


# -- the gateway changes its mind ------------------------------------------------------------------


async def test_a_tool_deactivated_in_the_gateway_leaves_search_on_refresh_and_after_catalog_ttl(
    contextforge,
):
    carol = contextforge.values["CAROL_TOKEN"]
    with running_proxy(contextforge) as slow, running_proxy(contextforge, catalog_ttl=1.0) as fast:
        async with connect(slow, carol) as on_refresh, connect(fast, carol) as on_ttl:
            assert "everything-get-resource-links" in await found_by_search(on_refresh, "resource links")
            assert "everything-get-annotated-message" in await found_by_search(on_ttl, "annotated message")

            for name in ("everything-get-resource-links", "everything-get-annotated-message"):
                contextforge.run_block("deactivate-tool", TOOL_ID=contextforge.tool_id(name))
            assert "everything-get-resource-links" not in contextforge.list_directly(carol)

            # On demand: POST /catalog/refresh lists again at once and says what went.
            body = await refresh(slow, carol)
            assert "everything-get-resource-links" in body["removed"]
            assert "everything-get-resource-links" not in await found_by_search(on_refresh, "resource links")

            # On its own: past catalog_ttl a search is answered from the old catalog while it is
            # listed again, so the tool is gone within a search or two.
            deadline = time.monotonic() + POLL
            while "everything-get-annotated-message" in await found_by_search(on_ttl, "annotated message"):
                assert time.monotonic() < deadline, "still found long after catalog_ttl"
                await asyncio.sleep(0.5)


async def test_a_token_revoked_in_the_gateway_loses_search_within_catalog_ttl(contextforge):
    # A token of alice's own for this test (the guide's api_token, another name), then revoked.
    fresh = contextforge.run_function(
        "tokens",
        'ALICE=$(api_token alice@example.com "$FINANCE_TEAM" toolsearch-revoked)\n'
        'ALICE_TOKEN=$(jq -r .access_token <<<"$ALICE") ALICE_TOKEN_ID=$(jq -r .token.id <<<"$ALICE")',
        ("ALICE_TOKEN", "ALICE_TOKEN_ID"),
    )
    token = fresh["ALICE_TOKEN"]
    with running_proxy(contextforge, catalog_ttl=1.0) as base:
        async with connect(base, token) as alice:
            assert "finance-get-invoice" in await found_by_search(alice, "get an invoice")
        contextforge.run_block("revoke-token", ALICE_TOKEN_ID=fresh["ALICE_TOKEN_ID"])
        with pytest.raises(subprocess.CalledProcessError):
            contextforge.list_directly(token)  # the gateway refuses it at once

        async with httpx.AsyncClient(timeout=60) as http:
            deadline = time.monotonic() + 6.0  # catalog_ttl is 1 s
            while True:
                reply = await http.post(
                    f"{base}/mcp",
                    headers={
                        "Authorization": f"Bearer {token}",
                        "Accept": "application/json, text/event-stream",
                    },
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "tools/call",
                        "params": {"name": "search_tools", "arguments": {"query": "invoice"}},
                    },
                )
                if reply.status_code == 401:
                    break
                assert time.monotonic() < deadline, (
                    f"still searching 6 s after catalog_ttl: {reply.text[:200]}"
                )
                await asyncio.sleep(0.5)


# -- a deployer's mistakes -------------------------------------------------------------------------


class RecordingProxy:
    """A pass-through in front of the gateway that records each request's path and each answer's
    `link` header, so a test sees where the proxy went."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.paths: list[str] = []
        self.links: list[str] = []

    async def __call__(self, scope, receive, send) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.paths.append(scope["path"])
        headers = [(k.decode(), v.decode()) for k, v in scope["headers"] if k.lower() not in (b"host",)]
        async with httpx.AsyncClient(timeout=60) as http:
            reply = await http.request(
                scope["method"], self.target + scope["path"], headers=headers, content=body
            )
        if "link" in reply.headers:
            self.links.append(reply.headers["link"])
        drop = {"content-length", "content-encoding", "transfer-encoding"}
        out = [(k.encode(), v.encode()) for k, v in reply.headers.items() if k.lower() not in drop]
        await send({"type": "http.response.start", "status": reply.status_code, "headers": out})
        await send({"type": "http.response.body", "body": reply.content})


async def test_the_proxy_never_follows_the_gateways_successor_link(contextforge):
    recorder = RecordingProxy(contextforge.gateway.url)
    path = f"/servers/{contextforge.server_id}/mcp"
    with serve_in_thread(recorder) as front, running_proxy(contextforge, upstream=front + path) as base:
        async with connect(base, contextforge.values["ALICE_TOKEN"]) as alice:
            assert "finance-get-invoice" in await found_by_search(alice, "get an invoice")
            read = await alice.call_tool(
                "call_read_tool", {"name": "finance-get-invoice", "arguments": {"invoice_id": "INV-1"}}
            )
            assert not read.is_error, read.content
    # The gateway named a successor on every answer; the proxy stayed where it was configured.
    assert recorder.links and all('rel="successor-version"' in link for link in recorder.links)
    assert set(recorder.paths) == {path}


async def test_a_token_sent_without_bearer_gets_told_the_header_form(contextforge):
    token = contextforge.values["ALICE_TOKEN"]
    with running_proxy(contextforge) as base:
        async with httpx.AsyncClient(timeout=60) as http:
            reply = await http.post(
                f"{base}/mcp",
                headers={"Authorization": token, "Accept": "application/json, text/event-stream"},
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "search_tools", "arguments": {"query": "invoice"}},
                },
            )
    assert reply.status_code == 403  # the gateway's answer, passed on
    message = reply.json()["error"]["message"]
    assert token not in message
    assert "Authorization: Bearer" in message


@pytest.mark.parametrize("shape", ["/servers/{id}", "/servers/{id}/sse", "/v1/servers/{id}/mcp"])
async def test_an_upstream_url_of_the_wrong_shape_gets_told_the_endpoint(contextforge, shape):
    gateway, server_id = contextforge.gateway.url, contextforge.server_id
    wrong = gateway + shape.format(id=server_id)
    with running_proxy(contextforge, upstream=wrong) as base:
        async with connect(base, contextforge.values["ALICE_TOKEN"]) as alice:
            result = await alice.call_tool("search_tools", {"query": "invoice"})
    assert result.is_error
    assert f"{gateway}/servers/{server_id}/mcp" in result.structured_content["error"]["message"]


# -- fair use of the upstream everyone shares --------------------------------------------------------
# A second gateway process on the same database, with ContextForge's default limits (100 a minute
# per address, user and team; lockout for 15 minutes after 5 refusals), which only these tests use.


BURST_SOURCE = "127.0.0.2"  # each test's own address: a lockout one test causes is not another's
LOCKOUT_SOURCE = "127.0.0.3"
FORWARDED_SOURCE = "127.0.0.4"


@pytest.fixture(scope="module")
def default_limits_gateway(contextforge) -> Iterator[GatewayProcess]:
    with another_gateway(contextforge, **GATEWAY_DEFAULT_LIMITS) as gateway:
        yield gateway


async def test_one_users_burst_leaves_another_users_calls_working(contextforge, default_limits_gateway):
    upstream = contextforge.upstream_url(default_limits_gateway)
    with running_proxy(contextforge, upstream=upstream, source=BURST_SOURCE) as base:
        run = await two_users(base, contextforge.values["ALICE_TOKEN"], contextforge.values["BOB_TOKEN"])
    summary = run.summary()
    assert {a.outcome for a in run.bob_during + run.bob_after} == {"ok"}, summary
    assert run.bob_after, summary
    assert {a.outcome for a in run.alice} <= {"ok", "rate_limited"}, summary
    assert any(a.outcome == "ok" for a in run.alice), summary
    assert any(a.outcome == "rate_limited" for a in run.alice), summary  # the proxy held alice back


async def test_the_gateways_retry_after_reaches_the_caller(contextforge, default_limits_gateway):
    upstream = contextforge.upstream_url(default_limits_gateway)
    bob_token = contextforge.values["BOB_TOKEN"]
    with running_proxy(contextforge, upstream=upstream, source=LOCKOUT_SOURCE) as base:
        async with connect(base, bob_token) as bob:
            assert "support-get-ticket" in await found_by_search(bob, "support ticket")
            # bob (directly, from the proxy's address) until the gateway locks that address out.
            told = await lock_out(upstream, bob_token, LOCKOUT_SOURCE)
            assert told == "900"  # the gateway's lockout: 15 minutes
            result = await bob.call_tool(
                "call_read_tool", {"name": "support-get-ticket", "arguments": {"ticket_id": "T-1"}}
            )
    assert result.is_error
    error = result.structured_content["error"]
    assert error["kind"] == "rate_limited"
    assert error["retryAfterSeconds"] == 900


async def test_the_gateway_takes_the_client_address_from_x_forwarded_for_whoever_sends_it(
    contextforge,
    default_limits_gateway,
):
    # What docs/gateways.md says of X-Forwarded-For: ContextForge 1.1.0 (TRUST_PROXY_AUTH unset)
    # limits and locks out the address a request's first X-Forwarded-For names, from any sender.
    upstream = contextforge.upstream_url(default_limits_gateway)
    named = "198.51.100.7"
    await lock_out(upstream, contextforge.values["CAROL_TOKEN"], FORWARDED_SOURCE, forwarded_for=named)
    alice = {"Authorization": f"Bearer {contextforge.values['ALICE_TOKEN']}", "Accept": ACCEPT}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    transport = httpx.AsyncHTTPTransport(local_address=FORWARDED_SOURCE)
    async with httpx.AsyncClient(timeout=60, transport=transport) as http:
        from_the_socket = await http.post(upstream, headers=alice, json=body)
        as_named = await http.post(upstream, headers={**alice, "X-Forwarded-For": named}, json=body)
    assert from_the_socket.status_code == 200  # the address it came from was never locked
    assert as_named.status_code == 429 and "lockout" in as_named.text.lower()


ACCEPT = "application/json, text/event-stream"


async def lock_out(
    upstream: str, token: str, source: str, most: int = 400, forwarded_for: str | None = None
) -> str:
    """Call the gateway directly from `source` until it locks that address out; its Retry-After."""
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
    if forwarded_for is not None:
        headers["X-Forwarded-For"] = forwarded_for
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    transport = httpx.AsyncHTTPTransport(local_address=source)
    async with httpx.AsyncClient(timeout=60, transport=transport) as http:
        for _ in range(most // 10):
            replies = await asyncio.gather(
                *(http.post(upstream, headers=headers, json=body) for _ in range(10))
            )
            for reply in replies:
                if reply.status_code == 429 and "lockout" in reply.text.lower():
                    return reply.headers["retry-after"]
    raise AssertionError(f"the gateway did not lock this address out after {most} requests")
