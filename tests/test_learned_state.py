"""What the proxy learns while it runs, from callers' requests, never changes what another caller is told.

The one such state on the caller's side is forwarding mode's `AcceptedAudiences` (`auth/audience.py`):
whether the upstream accepts tokens issued for the proxy, which decides whether a refused JWT naming
the proxy is a 401 ("sign in again") or a 403 ("the proxy must run in exchange mode"). Mallory, a
user of the same authorization server, sends whatever tokens and `X-Forwarded-Host` they like; then
alice's answer must be what the upstream alone makes it: 403 in front of an upstream that takes
tokens for itself only, 401 for her revoked token in front of one that takes the proxy's.
Run with and without `public_url` (without it the proxy's resource is each request's own).
(The upstream's era, the other learnt state, is learnt from discovery only: `tests/test_upstream.py`.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.mcp_wire import call, modern
from fixtures.oauth_world import IssuerServer, authorization_server, resource_server, served_late
from toolsearch.app import build_proxy
from toolsearch.settings import Settings

HISTORIES = settings(max_examples=20, deadline=None)


@dataclass(repr=False)
class Forwarding:
    issuer: IssuerServer
    http: httpx.Client
    resource: str  # the proxy's, as its metadata names it
    upstream: str
    strict: bool
    sent: list[int] = field(default_factory=list)

    def mallory(self, audience: Any, host: str | None = None) -> int:
        """One of mallory's tokens, listed through the proxy; the upstream takes it as a real one would:
        a strict upstream only when its own URL is in the audience, a lenient one always."""
        names = audience if isinstance(audience, list) else [audience]
        taken = not self.strict or self.upstream in names
        resource = self.upstream if taken else "https://not-the-upstream.example/mcp"
        token = self.issuer.issue("mallory", "c", resource, ["read"], audience=audience)
        headers = {"X-Forwarded-Host": host} if host else {}
        status = self.post(token, modern("tools/list"), headers)
        assert status in (200, 401, 403)
        return status

    def alice(self, audience: Any = None) -> int:
        """Alice's answer: her token (for the proxy, unless `audience`) listed; when the upstream takes
        it, then revoked and used for a call."""
        audience = audience or self.resource
        names = audience if isinstance(audience, list) else [audience]
        resource = self.upstream if self.upstream in names else self.resource
        token = self.issuer.issue("alice", "c", resource, ["read"], audience=audience)
        first = self.post(token, modern("tools/list"))
        if first != 200:
            return first
        self.issuer.revoke("alice")
        return self.post(token, call("call_read_tool", {"name": "echo", "arguments": {}}))

    def post(self, token: str, request: dict[str, Any], headers: dict[str, str] | None = None) -> int:
        sent = {**request["headers"], **(headers or {}), "Authorization": f"Bearer {token}"}
        return self.http.post("/mcp", headers=sent, json=request["json"]).status_code


@contextlib.contextmanager
def forwarding(*, strict: bool, public: bool) -> Iterator[Forwarding]:
    with (
        authorization_server() as issuer,
        resource_server(issuer, strict=strict) as upstream,
        served_late() as (holder, base),
    ):
        options = {"public_url": base} if public else {}
        holder.app = build_proxy(Settings(upstream=upstream.url, embedder="none", **options)).app
        with httpx.Client(base_url=base, timeout=30) as http:
            yield Forwarding(issuer, http, base + "/mcp", upstream.url, strict)


PUBLIC = pytest.mark.parametrize("public", [True, False], ids=["public_url", "derived_url"])


@PUBLIC
def test_made_up_audiences_a_lenient_upstream_took_do_not_turn_a_revoked_users_401_into_403(public):
    with forwarding(strict=False, public=public) as proxy:
        for n in range(40):  # was: 16 filled the learned set, which then stopped learning
            assert proxy.mallory(f"https://made-up-{n}.example/mcp") == 200
        assert proxy.alice() == 401


@PUBLIC
def test_a_token_naming_the_upstream_and_the_proxy_teaches_nothing_about_the_proxys_audience(public):
    with forwarding(strict=True, public=public) as proxy:
        # The strict upstream takes it for its own audience: that says nothing about the proxy's.
        assert proxy.mallory([proxy.upstream, proxy.resource]) == 200
        assert proxy.mallory(proxy.upstream) == 200
        assert proxy.alice() == 403  # was: 401, sign in again (forever, for everybody)


@PUBLIC
def test_a_revoked_token_naming_the_proxy_and_the_upstream_is_told_to_sign_in(public):
    # docs/security.md's first way to forward to a strict upstream: tokens naming both audiences.
    with forwarding(strict=True, public=public) as proxy:
        assert proxy.alice([proxy.resource, proxy.upstream]) == 401


def test_a_revoked_token_naming_the_proxy_and_another_api_at_an_upstream_taking_the_proxys_is_a_401():
    # A Keycloak-like `aud: [proxy, "account"]`, which an upstream listing the proxy's URL accepts.
    with forwarding(strict=False, public=True) as proxy:
        assert proxy.mallory(["account", "https://made-up.example/mcp"]) == 200
        assert proxy.alice([proxy.resource, "account"]) == 401


AUDIENCES = st.sampled_from(["upstream", "proxy", "made-up", "other"]).flatmap(
    lambda kind: (
        st.just(kind) | st.lists(st.sampled_from(["upstream", "proxy", "made-up", "other"]), max_size=4)
    )
)
HOSTS = st.none() | st.sampled_from(["evil.example", "127.0.0.1:1", "made-up.example:8443"])


def _spelled(proxy: Forwarding, audience: Any, number: int) -> Any:
    if isinstance(audience, list):
        return [_spelled(proxy, item, number) for item in audience]
    return {
        "upstream": proxy.upstream,
        "proxy": proxy.resource,
        "made-up": f"https://made-up-{number}.example/mcp",
    }.get(audience, 42)


@pytest.fixture(scope="module", params=[True, False], ids=["public_url", "derived_url"])
def strict_proxy(request: pytest.FixtureRequest) -> Iterator[Forwarding]:
    with forwarding(strict=True, public=request.param) as proxy:
        yield proxy


@pytest.fixture(scope="module", params=[True, False], ids=["public_url", "derived_url"])
def lenient_proxy(request: pytest.FixtureRequest) -> Iterator[Forwarding]:
    with forwarding(strict=False, public=request.param) as proxy:
        yield proxy


def _send(proxy: Forwarding, history: list[tuple[Any, str | None]]) -> None:
    for audience, host in history:
        proxy.sent.append(1)
        audience = _spelled(proxy, audience, len(proxy.sent))
        proxy.mallory(audience, host)


@HISTORIES
@given(history=st.lists(st.tuples(AUDIENCES, HOSTS), max_size=12))
def test_nothing_mallory_sends_makes_a_strict_upstreams_403_a_401(strict_proxy, history):
    _send(strict_proxy, history)
    assert strict_proxy.alice() == 403


@HISTORIES
@given(history=st.lists(st.tuples(AUDIENCES, HOSTS), max_size=12))
def test_nothing_mallory_sends_makes_a_lenient_upstreams_401_a_403(lenient_proxy, history):
    _send(lenient_proxy, history)
    assert lenient_proxy.alice() == 401
