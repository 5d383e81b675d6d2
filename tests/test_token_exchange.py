"""How long an exchanged token is held: until shortly before it expires, never past the caller's own.

The token endpoint is a small HTTP app served in process (it counts the exchanges
it is asked for); the clock is the test's.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from fixtures.clock import Clock
from toolsearch.auth.exchange import RENEW_BEFORE, ExchangeConfig, TokenExchanger
from toolsearch.auth.exchanging import ExchangingUpstream
from toolsearch.auth.tokens import InvalidToken, RememberedExpiries, ValidToken

TOKEN_URL = "https://auth.test/token"


class TokenEndpoint:
    """Answers each exchange with a new token living `expires_in` seconds."""

    def __init__(self, expires_in: float | None) -> None:
        self.expires_in = expires_in
        self.subjects: list[str] = []

    async def token(self, request: Request) -> JSONResponse:
        form = await request.form()
        self.subjects.append(str(form["subject_token"]))
        body: dict[str, Any] = {"access_token": f"upstream-{len(self.subjects)}", "token_type": "Bearer"}
        if self.expires_in is not None:
            body["expires_in"] = self.expires_in
        return JSONResponse(body)

    def client(self) -> httpx.AsyncClient:
        app = Starlette(routes=[Route("/token", self.token, methods=["POST"])])
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app))


async def no_client_auth() -> tuple[dict[str, str], dict[str, str]]:
    return {"client_id": "proxy"}, {}


def exchanger(endpoint: TokenEndpoint, http: httpx.AsyncClient, clock: Clock) -> TokenExchanger:
    config = ExchangeConfig(TOKEN_URL, "https://upstream.test/mcp")
    return TokenExchanger(config, http, no_client_auth, clock=clock)


@pytest.mark.parametrize("expires_in", [3600, 120])
async def test_an_exchanged_token_is_held_until_shortly_before_it_expires(expires_in):
    endpoint, clock = TokenEndpoint(expires_in), Clock()
    async with endpoint.client() as http:
        tokens = exchanger(endpoint, http, clock)
        first = await tokens.exchange("caller-token")
        renew = min(RENEW_BEFORE, expires_in / 10)
        clock.now += expires_in - renew - 1
        assert await tokens.exchange("caller-token") == first
        assert endpoint.subjects == ["caller-token"]
        clock.now += 2  # inside the renewal window: a new one, before the old one fails upstream
        second = await tokens.exchange("caller-token")
        assert second.authorization == "Bearer upstream-2"
        assert endpoint.subjects == ["caller-token", "caller-token"]


async def test_an_exchanged_token_is_never_held_past_the_callers_own():
    endpoint, clock = TokenEndpoint(3600), Clock()
    async with endpoint.client() as http:
        tokens = exchanger(endpoint, http, clock)
        caller_expires = clock.now + 100
        first = await tokens.exchange("caller-token", not_after=caller_expires)
        clock.now += 99
        assert await tokens.exchange("caller-token", not_after=caller_expires) == first
        clock.now += 2
        assert await tokens.exchange("caller-token", not_after=caller_expires) != first
        assert len(endpoint.subjects) == 2


async def test_an_answer_without_expires_in_is_held_a_bounded_while():
    endpoint, clock = TokenEndpoint(None), Clock()
    async with endpoint.client() as http:
        tokens = exchanger(endpoint, http, clock)
        first = await tokens.exchange("caller-token")
        assert first.renew_at - clock.now <= 300
        clock.now += 301
        assert await tokens.exchange("caller-token") != first


class ExpiringValidator:
    """Admits any token but "expired", saying it expires at `expires_at`."""

    def __init__(self, expires_at: float) -> None:
        self.expires_at = expires_at

    async def validate(self, token: str) -> ValidToken:
        if token == "expired":
            raise InvalidToken("the token has expired")
        return ValidToken("user", self.expires_at)


class CountingUpstream:
    url = "https://upstream.test/mcp"

    def __init__(self) -> None:
        self.authorizations: list[str | None] = []

    async def list_tools(self, authorization: str | None) -> Any:
        self.authorizations.append(authorization)
        return authorization


async def test_the_exchanging_upstream_caps_the_held_token_at_the_callers_expiry():
    endpoint, clock = TokenEndpoint(3600), Clock()
    validator = RememberedExpiries(ExpiringValidator(clock.now + 60))
    upstream = CountingUpstream()
    async with endpoint.client() as http:
        source = ExchangingUpstream(
            upstream,  # type: ignore[arg-type]  # only list_tools is used here
            exchanger(endpoint, http, clock),
            upstream.url,
            expires_at=validator.expires_at,
        )
        await validator.validate("caller-token")  # what the authenticator does for each request
        await source.list_tools("Bearer caller-token")
        clock.now += 59
        await source.list_tools("Bearer caller-token")
        clock.now += 2  # the caller's own token has expired: the held one is not used any more
        await source.list_tools("Bearer caller-token")
    assert upstream.authorizations == ["Bearer upstream-1", "Bearer upstream-1", "Bearer upstream-2"]
    assert len(endpoint.subjects) == 2


async def test_remembered_expiries_keep_only_admitted_tokens_and_are_bounded():
    validator = RememberedExpiries(ExpiringValidator(2_000_000.0), max_entries=2)
    with pytest.raises(InvalidToken):
        await validator.validate("expired")
    assert validator.expires_at("expired") is None
    for token in ("a", "b", "c"):
        await validator.validate(token)
    assert validator.expires_at("a") is None  # the oldest went first
    assert validator.expires_at("c") == 2_000_000.0
