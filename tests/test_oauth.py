"""OAuth discovery through the proxy: its own protected-resource metadata, the upstream's servers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from fixtures.clock import Clock
from fixtures.mcp_wire import legacy, modern
from fixtures.servers import read_asgi_body, serve_in_thread
from toolsearch.app import build_proxy
from toolsearch.auth.metadata_relay import FAILURE_TTL, TTL, MetadataRelay
from toolsearch.server.oauth import parse_challenge
from toolsearch.settings import Settings


@pytest.fixture(scope="module")
def proxy_base(sdk_upstream):
    proxy = build_proxy(Settings(upstream=sdk_upstream.url, embedder="none"))
    with serve_in_thread(proxy.app) as base:
        yield base


async def test_unauthenticated_request_gets_a_challenge_naming_the_proxys_metadata(proxy_base):
    async with httpx.AsyncClient() as http:
        for request in (
            legacy("initialize", {"protocolVersion": "2025-11-25"}),
            modern("server/discover"),
            modern("tools/list"),
        ):
            reply = await http.post(proxy_base + "/mcp", **request)
            assert reply.status_code == 401
            challenge = parse_challenge(reply.headers["www-authenticate"])
            assert challenge["resource_metadata"] == proxy_base + "/.well-known/oauth-protected-resource/mcp"
            assert challenge["error"] == "invalid_token"  # the upstream's, passed on


async def test_metadata_names_the_proxy_as_resource_and_the_upstreams_authorization_server(
    proxy_base,
    sdk_upstream,
):
    async with httpx.AsyncClient() as http:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            reply = await http.get(proxy_base + path)
            assert reply.status_code == 200
            metadata = reply.json()
            assert metadata["resource"] == proxy_base + "/mcp"
            assert metadata["authorization_servers"] == [sdk_upstream.base_url + "/auth"]
            assert metadata["bearer_methods_supported"] == ["header"]


async def test_operator_settings_override_servers_and_public_url(sdk_upstream):
    settings = Settings(
        upstream=sdk_upstream.url,
        embedder="none",
        authorization_servers=["https://login.example.com"],
        public_url="https://proxy.example.com/mcp",
    )
    proxy = build_proxy(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=proxy.app), base_url="http://t") as http:
        metadata = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
        assert metadata == {
            "resource": "https://proxy.example.com/mcp",
            "authorization_servers": ["https://login.example.com"],
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-toolsearch-proxy",
        }
        reply = await http.post("/mcp", **modern("server/discover"))
        assert reply.status_code == 401
        assert (
            'resource_metadata="https://proxy.example.com/.well-known/oauth-protected-resource/mcp"'
            in (reply.headers["www-authenticate"])
        )


async def test_with_a_token_the_same_requests_succeed(proxy_base):
    async with httpx.AsyncClient(headers={"Authorization": "Bearer alice"}) as http:
        reply = await http.post(proxy_base + "/mcp", **modern("server/discover"))
        assert reply.status_code == 200


def test_challenge_parsing():
    header = 'Bearer realm="x", error="invalid_token", scope="read write", resource_metadata="https://a/b"'
    assert parse_challenge(header) == {
        "realm": "x",
        "error": "invalid_token",
        "scope": "read write",
        "resource_metadata": "https://a/b",
    }
    assert parse_challenge("Basic realm=x") == {}
    assert parse_challenge(None) == {}


# -- a hostile upstream: its metadata and its challenges are whatever a test sets


@dataclass
class HostileResourceServer:
    """An upstream whose /mcp answers 401 with `challenge` and whose metadata does `mode`.

    Modes: ok (a good document), status (`status`, no document), json (the `document` given),
    endless (a 200 whose body never ends), trickle (one byte every 0.2 s), held (ok once `release`
    is set). `metadata_hits` counts metadata requests; `sent` the metadata bytes written.
    """

    mode: str = "ok"
    status: int = 503
    document: Any = None
    challenge: bytes = b'Bearer error="invalid_token"'
    metadata_hits: int = 0
    sent: int = 0
    disconnected: bool = False
    release: threading.Event = field(default_factory=threading.Event)
    base_url: str = ""

    def good(self) -> dict[str, Any]:
        return {
            "resource": self.base_url + "/mcp",
            "authorization_servers": [self.base_url + "/auth"],
            "scopes_supported": ["tools.read", "tools.write"],
        }

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await read_asgi_body(receive)
        if not scope["path"].startswith("/.well-known/oauth-protected-resource"):
            await self._send(send, 401, b"{}", [(b"www-authenticate", self.challenge)])
            return
        self.metadata_hits += 1
        if self.mode == "status":
            await self._send(send, self.status, b'{"error": "unavailable"}')
        elif self.mode == "json":
            await self._send(send, 200, json.dumps(self.document).encode())
        elif self.mode == "held":
            await asyncio.to_thread(self.release.wait, GUARD)
            await self._send(send, 200, json.dumps(self.good()).encode())
        elif self.mode in ("endless", "trickle"):
            await self._stream(send, receive)
        else:
            await self._send(send, 200, json.dumps(self.good()).encode())

    async def _stream(self, send: Any, receive: Any) -> None:
        gone = asyncio.ensure_future(receive())  # http.disconnect when the proxy hangs up
        await send({"type": "http.response.start", "status": 200, "headers": [JSON]})
        chunk, pause = (b" " * 65536, 0.0) if self.mode == "endless" else (b" ", 0.2)
        try:
            for _ in range(ENDLESS_BYTES // len(chunk) if self.mode == "endless" else int(GUARD / pause)):
                if gone.done():
                    self.disconnected = True
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                self.sent += len(chunk)
                await asyncio.sleep(pause)
            await send({"type": "http.response.body", "body": b"{}"})
        finally:
            gone.cancel()

    @staticmethod
    async def _send(send: Any, status: int, body: bytes, headers: list | None = None) -> None:
        await send({"type": "http.response.start", "status": status, "headers": [JSON, *(headers or [])]})
        await send({"type": "http.response.body", "body": body})


JSON = (b"content-type", b"application/json")
GUARD = 60.0  # seconds: keeps a broken test from hanging, no speed claim
ENDLESS_BYTES = 32 * 1024 * 1024


@contextlib.contextmanager
def hostile(**settings: Any) -> Iterator[tuple[HostileResourceServer, httpx.AsyncClient, Clock]]:
    """The hostile upstream on loopback, and an HTTP client to a proxy in front of it (in process)."""
    server = HostileResourceServer()
    with serve_in_thread(server) as base:
        server.base_url = base
        proxy = build_proxy(Settings(upstream=base + "/mcp", embedder="none", **settings))
        clock = Clock(1000.0)
        oauth = proxy.oauth
        oauth.relay = MetadataRelay(
            proxy.upstream.http,
            oauth.candidate_urls,
            deadline=settings.get("oauth_metadata_timeout", 5.0),
            clock=clock,
        )
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=proxy.app), base_url="https://proxy.test", timeout=GUARD
        )
        yield server, client, clock


async def metadata(http: httpx.AsyncClient) -> tuple[dict[str, Any], str]:
    reply = await http.get("/.well-known/oauth-protected-resource/mcp")
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/json", reply.text
    return reply.json(), reply.headers["cache-control"]


async def test_a_failed_metadata_read_is_remembered_seconds_not_minutes():
    with hostile() as (server, http, clock):
        server.mode = "status"
        document, cache = await metadata(http)
        assert document["authorization_servers"] == [] and cache == "no-store"
        assert (await metadata(http))[0]["authorization_servers"] == []  # within FAILURE_TTL: not asked
        assert server.metadata_hits == 2  # the path-suffixed URL, then the bare one: one read

        server.mode = "ok"  # the upstream recovers
        clock.now += FAILURE_TTL + 0.1
        document, cache = await metadata(http)

        assert document["authorization_servers"] == [server.base_url + "/auth"]
        assert document["scopes_supported"] == ["tools.read", "tools.write"]
        assert cache.startswith("private")


async def test_a_good_copy_is_never_replaced_by_an_empty_one():
    with hostile() as (server, http, clock):
        assert (await metadata(http))[0]["authorization_servers"] == [server.base_url + "/auth"]
        server.mode, server.status = "status", 500
        clock.now += TTL + 1

        document, cache = await metadata(http)

        assert document["authorization_servers"] == [server.base_url + "/auth"]  # the last good one
        assert cache == "no-store"  # but nobody keeps it: the upstream could not confirm it


async def test_an_endless_metadata_body_is_cut_off_not_read_whole():
    with hostile() as (server, http, _):
        server.mode = "endless"
        document, cache = await metadata(http)

        assert document["authorization_servers"] == [] and cache == "no-store"
        for _ in range(int(GUARD / 0.05)):  # the upstream notices the proxy hung up
            if server.disconnected:
                break
            await asyncio.sleep(0.05)
        assert server.disconnected and server.sent < ENDLESS_BYTES


async def test_a_trickled_metadata_body_is_cut_off_at_the_deadline():
    with hostile(oauth_metadata_timeout=1.0) as (server, http, _):
        server.mode = "trickle"
        document, cache = await metadata(http)

        assert document["authorization_servers"] == [] and cache == "no-store"
        assert server.sent < GUARD / 0.2  # the proxy stopped waiting long before the body ended


async def test_concurrent_askers_share_one_upstream_read():
    with hostile() as (server, http, _):
        server.mode = "held"
        askers = [asyncio.create_task(metadata(http)) for _ in range(8)]
        for _ in range(int(GUARD / 0.01)):  # every asker has started once the upstream is asked
            if server.metadata_hits:
                break
            await asyncio.sleep(0.01)
        server.release.set()
        answers = await asyncio.gather(*askers)

        assert server.metadata_hits == 1
        assert all(doc["authorization_servers"] == [server.base_url + "/auth"] for doc, _ in answers)


@pytest.mark.parametrize(
    ("document", "servers", "scopes"),
    [
        ({"authorization_servers": 5, "scopes_supported": "read"}, [], None),
        ({"authorization_servers": "https://as.example"}, [], None),
        ({"authorization_servers": {"a": 1}, "scopes_supported": {"read": True}}, [], None),
        (
            {
                "authorization_servers": [
                    "https://as.example",
                    5,
                    None,
                    "javascript:alert(1)",
                    "ftp://x/",
                    "https://",
                    "https://a b/",
                    "http://as.example:99999/",
                ],
                "scopes_supported": ["read", 1, 'a"b', "", "x\\y", ["nested"]],
            },
            ["https://as.example"],
            ["read"],
        ),
        ([1, 2, 3], [], None),
        ("just a string", [], None),
    ],
)
async def test_metadata_fields_of_the_wrong_type_are_dropped_never_a_500(document, servers, scopes):
    with hostile() as (server, http, _):
        server.mode, server.document = "json", document
        relayed, _ = await metadata(http)

        assert relayed["authorization_servers"] == servers
        assert relayed.get("scopes_supported") == scopes


# -- X-Forwarded-* and challenges: what a client or the upstream writes is checked, then quoted


@pytest.mark.parametrize(
    ("forwarded", "origin"),
    [
        (
            {"X-Forwarded-Host": "proxy.example.com", "X-Forwarded-Proto": "https"},
            "https://proxy.example.com",
        ),
        ({"X-Forwarded-Host": "proxy.example.com:8443, inner:80"}, "https://proxy.example.com:8443"),
        (
            {"X-Forwarded-Host": "[2001:db8::1]:8080", "X-Forwarded-Proto": "HTTP"},
            "http://[2001:db8::1]:8080",
        ),
        ({"X-Forwarded-Host": 'evil.example", error="forged'}, "https://proxy.test"),
        ({"X-Forwarded-Host": "evil.example/path"}, "https://proxy.test"),
        ({"X-Forwarded-Host": "user@evil.example"}, "https://proxy.test"),
        ({"X-Forwarded-Host": "a\\b"}, "https://proxy.test"),
        ({"X-Forwarded-Host": "evil.example:99999"}, "https://proxy.test"),
        ({"X-Forwarded-Proto": "javascript"}, "https://proxy.test"),
        ({"X-Forwarded-Proto": 'https"'}, "https://proxy.test"),
    ],
)
async def test_forwarded_headers_are_used_only_when_well_formed(forwarded, origin):
    with hostile() as (_, http, _):
        request = _discover()
        request["headers"].update(forwarded)
        reply = await http.post("/mcp", **request)
        document = (await http.get("/.well-known/oauth-protected-resource/mcp", headers=forwarded)).json()

        assert reply.status_code == 401
        challenge = parse_challenge(reply.headers["www-authenticate"])
        assert challenge["resource_metadata"] == origin + "/.well-known/oauth-protected-resource/mcp"
        assert set(challenge) == {"resource_metadata", "error"}
        assert document["resource"] == origin + "/mcp"


@pytest.mark.parametrize(
    ("upstream_challenge", "kept"),
    [
        (b'Bearer error=bad"token, scope=a\\b', {"error": 'bad"token', "scope": "a\\b"}),
        (
            b'Bearer error="invalid_token", scope="read \\"all\\""',
            {"error": "invalid_token", "scope": 'read "all"'},
        ),
        (b'Bearer error="invalid_token", error_description="caf\xc3\xa9"', {"error": "invalid_token"}),
        (b'Bearer error="invalid_token", error_description="\xe9t\xe9"', {"error": "invalid_token"}),
    ],
)
async def test_the_upstreams_challenge_values_are_escaped_or_dropped(upstream_challenge, kept):
    with hostile() as (server, http, _):
        server.challenge = upstream_challenge
        reply = await http.post("/mcp", **_discover())

        assert reply.status_code == 401
        header = reply.headers["www-authenticate"]
        assert header.isascii()
        params = parse_challenge(header)
        assert params.pop("resource_metadata").startswith("https://proxy.test/")
        assert params == kept


@pytest.mark.parametrize(
    ("public_url", "cache"),
    [("", "private, max-age=300"), ("https://proxy.example.com/mcp", "public, max-age=300")],
)
async def test_metadata_built_from_request_headers_is_not_for_shared_caches(public_url, cache):
    with hostile(public_url=public_url) as (_, http, _):
        assert (await metadata(http))[1] == cache


def _discover() -> dict[str, Any]:
    request = modern("server/discover")
    return {"json": request["json"], "headers": request["headers"]}
