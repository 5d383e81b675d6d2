"""OAuth end to end with real parts: the SDK's authorization server, its strict resource server, its client.

The scenarios of docs/security.md ("Which mode for which upstream"): forwarding in front of a strict
upstream fails after one sign-in with a message that says why; token exchange in front of it works;
exchange mode refuses tokens not issued for the proxy; revocation ends access to the catalog; two
users stay apart. The authorization server, the upstream and the proxy each run on loopback
(`fixtures/oauth_world.py`); the SDK's `OAuthClientProvider` signs in on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from fixtures.mcp_wire import call, modern
from fixtures.oauth_world import (
    PROXY_CLIENT_ID,
    PROXY_CLIENT_SECRET,
    IssuerServer,
    ResourceServer,
    authorization_server,
    oauth_client,
    resource_server,
    sdk_http,
    served_late,
)
from toolsearch.app import Proxy, build_proxy
from toolsearch.server.oauth import parse_challenge
from toolsearch.settings import Settings

GUARD = 60.0  # seconds: keeps a broken test from hanging, no speed claim


@dataclass
class World:
    issuer: IssuerServer
    upstream: ResourceServer
    proxy: Proxy
    url: str  # the proxy's MCP endpoint

    @property
    def resource(self) -> str:
        return self.url


def exchange_settings(issuer: IssuerServer, base: str, *, introspect: bool = False) -> dict[str, Any]:
    validation = (
        {"oauth_introspection_url": issuer.base + "/introspect", "introspection_cache_ttl": 0.0}
        if introspect
        else {"oauth_jwks_url": issuer.base + "/jwks"}
    )
    return {
        "auth_mode": "exchange",
        "public_url": base,
        "oauth_issuer": issuer.issuer,
        "oauth_token_url": issuer.base + "/token",
        "oauth_client_id": PROXY_CLIENT_ID,
        "oauth_client_secret": PROXY_CLIENT_SECRET,
        **validation,
    }


@contextlib.contextmanager
def world(
    mode: str, *, strict: bool = True, opaque: bool = False, introspect: bool = False, **settings: Any
) -> Iterator[World]:
    with authorization_server(opaque=opaque) as issuer, resource_server(issuer, strict=strict) as upstream:
        issuer.allowed_targets.add(upstream.url)
        with served_late() as (holder, base):
            extra = exchange_settings(issuer, base, introspect=introspect) if mode == "exchange" else {}
            proxy = build_proxy(Settings(upstream=upstream.url, embedder="none", **{**extra, **settings}))
            holder.app = proxy.app
            yield World(issuer, upstream, proxy, base + "/mcp")


@contextlib.asynccontextmanager
async def signed_in(url: str, issuer: IssuerServer, user: str = "alice") -> AsyncIterator[Client]:
    """The SDK's client, signing in as `user` through the SDK's OAuth flow."""
    issuer.signs_in = user
    provider, _ = oauth_client(url)
    async with sdk_http(provider) as http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def mcp_error(exc: BaseException) -> str:
    """The MCPError's message inside what the SDK client raised (anyio wraps it in groups)."""
    seen: list[BaseException] = [exc]
    while seen:
        current = seen.pop()
        if isinstance(current, MCPError):
            return str(current)
        if isinstance(current, BaseExceptionGroup):
            seen.extend(current.exceptions)
        if current.__context__ is not None:
            seen.append(current.__context__)
    raise AssertionError(f"no MCPError in {exc!r}")


def text_of(result: Any) -> dict[str, Any]:
    return json.loads(result.content[0].text)


async def search(client: Client, query: str) -> list[str]:
    result = await client.call_tool("search_tools", {"query": query})
    assert not result.is_error, result
    return [tool["name"] for tool in result.structured_content["tools"]]


# -- forwarding in front of a strict upstream: one sign-in, then a refusal that says why


async def test_strict_upstream_in_forwarding_mode_refuses_after_one_sign_in_saying_why():
    with world("forward", strict=True) as w:
        with pytest.raises(BaseException) as refused:
            async with asyncio.timeout(GUARD), signed_in(w.url, w.issuer):
                pass
        message = mcp_error(refused.value)
        assert "issued for this proxy" in message and "TOOLSEARCH_AUTH_MODE=exchange" in message, message
        assert w.issuer.sign_ins == ["alice"], "signing in again could not help: the client was sent once"


async def test_the_strict_refusal_is_a_403_naming_the_setting_and_the_upstreams_reason():
    with world("forward", strict=True) as w:
        token = w.issuer.issue("alice", "some-client", w.resource, ["read"])
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=GUARD) as http:
            reply = await http.post(w.url, **modern("tools/list"))
        assert reply.status_code == 403
        message = reply.json()["error"]["message"]
        assert "TOOLSEARCH_AUTH_MODE=exchange" in message
        assert "Authentication required" in message  # the SDK resource server's own words, passed on
        challenge = parse_challenge(reply.headers["www-authenticate"])
        assert challenge["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
        assert "issued for this proxy" in challenge["error_description"]


async def test_a_lenient_upstream_works_in_forwarding_mode_and_a_revoked_token_is_told_to_sign_in():
    with world("forward", strict=False) as w:
        token = w.issuer.issue("alice", "some-client", w.resource, ["read"])
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=GUARD) as http:
            assert (await http.post(w.url, **modern("tools/list"))).status_code == 200
            w.issuer.revoke("alice")
            reply = await http.post(w.url, **call("call_read_tool", {"name": "echo", "arguments": {}}))
            # The upstream has taken the proxy's tokens, so this refusal is the token's: sign in again.
            assert reply.status_code == 401
            assert "Authentication required" in reply.json()["error"]["message"]
            # The refused call dropped the catalog too: no more searching it within catalog_ttl.
            searched = await http.post(w.url, **call("search_tools", {"query": "tickets"}))
            assert searched.status_code == 401


async def test_an_opaque_token_refused_by_an_oauth_upstream_gets_its_reason_and_the_hint():
    with world("forward", strict=True, opaque=True) as w:
        token = w.issuer.issue("alice", "some-client", w.resource, ["read"])
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=GUARD) as http:
            reply = await http.post(w.url, **modern("tools/list"))
        # The proxy cannot read an opaque token's audience: a 401 (it may have expired), with both reasons.
        assert reply.status_code == 401
        message = reply.json()["error"]["message"]
        assert "Authentication required" in message and "TOOLSEARCH_AUTH_MODE=exchange" in message


# -- token exchange in front of the strict upstream


async def test_strict_upstream_works_in_exchange_mode_with_one_sign_in_and_one_exchange():
    with world("exchange", strict=True) as w:
        async with asyncio.timeout(GUARD), signed_in(w.url, w.issuer) as client:
            assert "alice_only_tool" in await search(client, "only alice")
            result = await client.call_tool("call_read_tool", {"name": "echo", "arguments": {"x": 1}})
            assert not result.is_error, result
            assert text_of(result) == {"tool": "echo", "user": "alice", "arguments": {"x": 1}}
        assert w.issuer.sign_ins == ["alice"]
        assert w.issuer.exchanges == 1  # held in memory for the listing and the call
        assert w.upstream.calls == 1


async def test_exchange_mode_with_introspection_and_opaque_tokens_works_too():
    with world("exchange", strict=True, opaque=True, introspect=True) as w:
        async with asyncio.timeout(GUARD), signed_in(w.url, w.issuer) as client:
            assert "alice_only_tool" in await search(client, "only alice")
        assert w.issuer.introspections >= 1


def _other_tokens(w: World) -> dict[str, str]:
    other = IssuerServer(issuer="https://elsewhere.example")
    return {
        "for the upstream": w.issuer.issue("alice", "c", w.upstream.url, ["read"]),
        "for another API": w.issuer.issue("alice", "c", "https://api.example.com/", ["read"]),
        "with no audience": w.issuer.issue("alice", "c", None, ["read"]),
        "from another issuer": other.issue("alice", "c", w.resource, ["read"]),
        "expired": w.issuer.issue("alice", "c", w.resource, ["read"], expires_at=int(time.time()) - 600),
        "not a JWT": "abc.def",
    }


@pytest.mark.parametrize("introspect", [False, True], ids=["jwt", "introspection"])
async def test_exchange_mode_refuses_tokens_not_issued_for_the_proxy(introspect):
    with world("exchange", strict=False, introspect=introspect) as w:
        async with httpx.AsyncClient(timeout=GUARD) as http:
            for what, token in _other_tokens(w).items():
                if introspect and what == "from another issuer":
                    continue  # its issuer does not know it: inactive, below
                headers = {"Authorization": f"Bearer {token}"}
                for request in (modern("tools/list"), modern("server/discover")):
                    reply = await http.post(
                        w.url, headers={**request["headers"], **headers}, json=request["json"]
                    )
                    assert reply.status_code == 401, what
                    challenge = parse_challenge(reply.headers["www-authenticate"])
                    assert challenge["error"] == "invalid_token", what
                    assert challenge["resource_metadata"] == w.url.removesuffix("/mcp") + (
                        "/.well-known/oauth-protected-resource/mcp"
                    )
                page = await http.get(w.url.removesuffix("/mcp") + "/catalog", headers=headers)
                assert page.status_code == 401, what
            reply = await http.post(w.url, **modern("tools/list"))  # no token at all
            assert reply.status_code == 401
        assert w.issuer.exchanges == 0 and w.upstream.calls == 0  # nothing reached past the proxy


async def test_the_refusals_say_why():
    with world("exchange", strict=True) as w:
        tokens = _other_tokens(w)
        async with httpx.AsyncClient(timeout=GUARD) as http:

            async def description(token: str) -> str:
                request = modern("tools/list")
                headers = {**request["headers"], "Authorization": f"Bearer {token}"}
                reply = await http.post(w.url, headers=headers, json=request["json"])
                return parse_challenge(reply.headers["www-authenticate"])["error_description"]

            assert "audience must be " + w.resource in await description(tokens["for the upstream"])
            assert "audience must be" in await description(tokens["with no audience"])
            assert "has expired" in await description(tokens["expired"])
            assert "signature does not verify" in await description(tokens["from another issuer"])


async def test_an_exchange_the_authorization_server_refuses_is_a_401_or_403_saying_why():
    with world("exchange", strict=True) as w:
        async with httpx.AsyncClient(timeout=GUARD) as http:
            token = w.issuer.issue("alice", "c", w.resource, ["read"])
            headers = {"Authorization": f"Bearer {token}"}
            w.issuer.allowed_targets.clear()  # the upstream is not a resource it issues tokens for
            reply = await http.post(
                w.url,
                headers={**headers, **modern("tools/list")["headers"]},
                json=modern("tools/list")["json"],
            )
            assert reply.status_code == 403
            assert "invalid_target" in reply.json()["error"]["message"]
            assert "will not issue a token for the upstream" in reply.json()["error"]["message"]
            w.issuer.allowed_targets.add(w.upstream.url)
            w.issuer.revoke("alice")  # the JWT still verifies; the authorization server knows better
            request = modern("tools/list")
            reply = await http.post(w.url, headers={**headers, **request["headers"]}, json=request["json"])
            assert reply.status_code == 401
            assert "invalid_grant" in reply.json()["error"]["message"]
            assert (
                "would not exchange your token"
                in parse_challenge(reply.headers["www-authenticate"])["error_description"]
            )


async def test_a_held_exchanged_token_the_upstream_refuses_is_dropped_a_call_is_not_sent_twice():
    with world("exchange", strict=True) as w:
        token = w.issuer.issue("alice", "c", w.resource, ["read"])
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=GUARD) as http:
            assert (await http.post(w.url, **modern("tools/list"))).status_code == 200
            assert w.issuer.exchanges == 1
            # The upstream token expires (or is revoked) at the authorization server; the caller's does not.
            w.issuer.tokens = {t: i for t, i in w.issuer.tokens.items() if not i.exchanged}
            reply = await http.post(w.url, **call("call_read_tool", {"name": "echo", "arguments": {}}))
            assert reply.status_code == 200
            result = reply.json()["result"]
            assert result["isError"] and result["structuredContent"]["error"]["kind"] == "token_expired"
            assert w.upstream.calls == 0  # refused at the upstream's door, and not sent again
            reply = await http.post(w.url, **call("call_read_tool", {"name": "echo", "arguments": {}}))
            assert not reply.json()["result"].get("isError"), reply.json()
            assert w.issuer.exchanges == 2 and w.upstream.calls == 1
            # A listing with a held token the upstream refuses is exchanged again and retried once.
            w.issuer.tokens = {t: i for t, i in w.issuer.tokens.items() if not i.exchanged}
            reply = await http.post(w.url.removesuffix("/mcp") + "/catalog/refresh")
            assert reply.status_code == 200, reply.text
            assert w.issuer.exchanges == 3


# -- revocation ends access to the catalog


@contextlib.asynccontextmanager
async def as_alice(w: World, asked: dict[str, Any] | None = None) -> AsyncIterator[Any]:
    """The status of one request (a search, unless `asked`) sent with a token of alice's."""
    token = w.issuer.issue("alice", "c", w.resource, ["read"])
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=GUARD) as http:

        async def status(url: str = w.url) -> int:
            reply = await http.post(url, **(asked or call("search_tools", {"query": "tickets"})))
            return reply.status_code

        yield status


async def refreshed(proxy: Proxy) -> None:
    """Wait (bounded) for the background refresh a stale catalog started."""
    async with asyncio.timeout(GUARD):
        while proxy.catalogs._loading:
            await asyncio.sleep(0.01)


async def test_revocation_ends_search_after_catalog_ttl_and_one_request_in_forwarding_mode():
    ttl = 0.5
    with world("forward", strict=False, catalog_ttl=ttl, catalog_max_age=3600.0) as w:
        async with as_alice(w) as search_status:
            assert await search_status() == 200
            await refreshed(w.proxy)  # a listing slower than the TTL is refreshed at once: let it end
            w.issuer.revoke("alice")
            assert await search_status() == 200  # within catalog_ttl the upstream is not asked
            await asyncio.sleep(ttl)
            assert await search_status() == 200  # the one request past catalog_ttl: stale, and it refreshes
            await refreshed(w.proxy)
            # The refresh was refused: the catalog is gone, the next requests list again and are refused.
            assert [await search_status(), await search_status()] == [401, 401]


async def test_revocation_ends_the_instructions_too():
    # The instructions are the upstream's, read from the caller's catalog: they go with it.
    ttl = 0.5
    with world("forward", strict=False, catalog_ttl=ttl, catalog_max_age=3600.0) as w:
        async with as_alice(w, modern("server/discover")) as discover_status:
            assert await discover_status() == 200
            await refreshed(w.proxy)  # a listing slower than the TTL is refreshed at once: let it end
            w.issuer.revoke("alice")
            await asyncio.sleep(ttl)
            assert await discover_status() == 200  # the one request past catalog_ttl: stale, and it refreshes
            await refreshed(w.proxy)
            assert await discover_status() == 401


async def test_revocation_ends_search_at_once_in_exchange_mode_with_introspection():
    with world("exchange", strict=True, introspect=True, catalog_ttl=3600.0) as w:
        async with as_alice(w) as search_status:
            assert await search_status() == 200
            w.issuer.revoke("alice")
            assert await search_status() == 401  # introspection_cache_ttl 0: the next request is refused


@pytest.mark.npm
async def test_a_refused_refresh_drops_the_shared_copy_so_another_environment_does_not_serve_it(
    dynamo_table: str, dynalite: Any
):
    from toolsearch.catalogs.cache.dynamo import DynamoSharedTier

    def tier() -> DynamoSharedTier:
        return DynamoSharedTier(dynamo_table, ttl_seconds=3600, client=dynalite.client())

    ttl = 0.5
    with world("forward", strict=False, catalog_ttl=ttl, catalog_max_age=3600.0) as w:
        settings = w.proxy.settings
        first = build_proxy(settings, shared=tier())
        second = build_proxy(settings, shared=tier())
        with served_late() as (one, base_one), served_late() as (two, base_two):
            one.app, two.app = first.app, second.app
            async with as_alice(w) as search_status:
                assert await search_status(base_one + "/mcp") == 200  # listed, and stored in the table
                # A listing slower than the TTL (a loaded machine) is stale at once, as it is stamped
                # when it began: let its refresh end before the revocation, or it is the one refused.
                await refreshed(first)
                w.issuer.revoke("alice")
                await asyncio.sleep(ttl)
                assert await search_status(base_one + "/mcp") == 200  # stale; its refresh is refused
                await refreshed(first)
                # A cold environment finds no shared copy to serve: it lists, and is refused.
                assert await search_status(base_two + "/mcp") == 401
                assert await search_status(base_one + "/mcp") == 401


@pytest.mark.npm
async def test_exchange_mode_writes_no_token_and_no_secret_to_dynamodb(dynamo_table: str, dynalite: Any):
    from toolsearch.catalogs.cache.dynamo import DynamoSharedTier

    with world("exchange", strict=True) as w:
        tier = DynamoSharedTier(dynamo_table, ttl_seconds=3600, client=dynalite.client())
        proxy = build_proxy(w.proxy.settings, shared=tier)
        with served_late() as (holder, base):
            holder.app = proxy.app
            token = w.issuer.issue("alice", "c", w.resource, ["read"])
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(headers=headers, timeout=GUARD) as http:
                searched = await http.post(base + "/mcp", **call("search_tools", {"query": "alice only"}))
                called = await http.post(base + "/mcp", **call("call_read_tool", {"name": "echo"}))
        assert searched.status_code == called.status_code == 200
        assert w.issuer.exchanges == 1
        texts = dynalite.texts(dynamo_table)
        assert any("alice_only_tool" in text for text in texts)  # the catalog itself is stored, readable
        secrets = [*w.issuer.tokens, PROXY_CLIENT_SECRET]  # the caller's token and the exchanged one
        assert len(secrets) == 3
        for text in texts:
            for secret in secrets:
                assert secret not in text


# -- two users


async def test_two_users_stay_apart_in_exchange_mode():
    with world("exchange", strict=True) as w:
        async with asyncio.timeout(GUARD):
            async with signed_in(w.url, w.issuer, "alice") as alice, signed_in(w.url, w.issuer, "bob") as bob:
                assert "alice_only_tool" in await search(alice, "alice_only_tool")
                assert "bob_only_tool" not in await search(alice, "bob_only_tool")
                assert "bob_only_tool" in await search(bob, "bob_only_tool")
                assert "alice_only_tool" not in await search(bob, "alice_only_tool")
                result = await bob.call_tool("call_read_tool", {"name": "alice_only_tool", "arguments": {}})
                assert result.is_error
                mine = await bob.call_tool("call_read_tool", {"name": "echo", "arguments": {}})
                assert text_of(mine)["user"] == "bob"
        assert sorted(w.issuer.sign_ins) == ["alice", "bob"]
        assert w.issuer.exchanges == 2
