"""OAuth discovery through the proxy: its own protected-resource metadata, the upstream's servers."""

from __future__ import annotations

import httpx
import pytest

from fixtures.sdk_upstream import sdk_upstream  # noqa: F401  (pytest fixture)
from fixtures.servers import serve_in_thread
from mcp_wire import legacy, modern
from toolsearch.app import build_proxy
from toolsearch.oauth import parse_challenge
from toolsearch.settings import Settings


@pytest.fixture(scope="module")
def proxy_base(sdk_upstream):  # noqa: F811
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
    sdk_upstream,  # noqa: F811
):
    async with httpx.AsyncClient() as http:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            reply = await http.get(proxy_base + path)
            assert reply.status_code == 200
            metadata = reply.json()
            assert metadata["resource"] == proxy_base + "/mcp"
            assert metadata["authorization_servers"] == [sdk_upstream.base_url + "/auth"]
            assert metadata["bearer_methods_supported"] == ["header"]


async def test_operator_settings_override_servers_and_public_url(sdk_upstream):  # noqa: F811
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
