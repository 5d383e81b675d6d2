"""Exchange mode against a hostile authorization server and hostile callers: every answer bounded.

The authorization server is whatever a test makes it (`HostileIssuer`): a key set that never ends,
trickles, or is huge; introspection that calls a token active without saying whom it is for; a
token endpoint whose error text carries quotes and line breaks, or whose answer is megabytes long.
Callers send huge tokens and tokens naming made-up keys. The proxy answers each with a clear status
or tool error, within `oauth_timeout`, having read a bounded number of bytes, and logs no token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
import pytest

from fixtures.aws_endpoint import AwsRefusal, aws_environment, silent_endpoint
from fixtures.logs import capture_logs
from fixtures.mcp_wire import call, modern
from fixtures.oauth_world import IssuerServer, authorization_server, resource_server, served_late
from fixtures.servers import read_asgi_body, serve_in_thread
from toolsearch.app import build_proxy
from toolsearch.server.oauth import parse_challenge
from toolsearch.settings import Settings

GUARD = 60.0  # seconds: keeps a broken test from hanging, no speed claim
JSON = (b"content-type", b"application/json")


@dataclass
class HostileIssuer:
    """An authorization server whose /jwks, /introspect and /token do what `mode` says.

    Modes per path: ok (a good answer from `real`), endless (a 200 that never ends), trickle (a
    byte every 0.2 s), huge (a 200 of 10 MB declared), json (the `document` given, with `status`).
    """

    real: IssuerServer
    modes: dict[str, str] = field(default_factory=dict)
    documents: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    hits: dict[str, int] = field(default_factory=dict)
    sent: int = 0
    disconnected: bool = False

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await read_asgi_body(receive)
        path = scope["path"]
        self.hits[path] = self.hits.get(path, 0) + 1
        mode = self.modes.get(path, "ok")
        if mode == "json":
            await self._send(send, self.status, json.dumps(self.documents[path]).encode())
        elif mode == "huge":
            await self._send(send, 200, b" " * (10 * 1024 * 1024))
        elif mode in ("endless", "trickle"):
            gone = asyncio.ensure_future(receive())  # http.disconnect when the proxy hangs up
            await send({"type": "http.response.start", "status": 200, "headers": [JSON]})
            chunk, pause = (b" " * 65536, 0.0) if mode == "endless" else (b" ", 0.2)
            try:
                for _ in range(int(GUARD / 0.2) if mode == "trickle" else 2048):
                    if gone.done():
                        self.disconnected = True
                        return
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    self.sent += len(chunk)
                    await asyncio.sleep(pause)
                await send({"type": "http.response.body", "body": b"{}"})
            finally:
                gone.cancel()
        else:
            await self._send(send, 200, json.dumps(self.real.jwks()).encode())

    @staticmethod
    async def _send(send: Any, status: int, body: bytes) -> None:
        await send({"type": "http.response.start", "status": status, "headers": [JSON]})
        await send({"type": "http.response.body", "body": body})


@dataclass
class Setup:
    issuer: IssuerServer
    hostile: HostileIssuer
    http: httpx.AsyncClient
    resource: str

    def token(self, **claims: Any) -> str:
        return self.issuer.issue("alice", "c", claims.pop("resource", self.resource), ["read"], **claims)


@contextlib.contextmanager
def exchange_proxy(*, introspect: bool = False, **settings: Any) -> Iterator[Setup]:
    with authorization_server() as issuer, resource_server(issuer, strict=True) as upstream:
        issuer.allowed_targets.add(upstream.url)
        hostile = HostileIssuer(issuer)
        with serve_in_thread(hostile) as hostile_base, served_late() as (holder, base):
            validation = (
                {"oauth_introspection_url": hostile_base + "/introspect", "introspection_cache_ttl": 0.0}
                if introspect
                else {"oauth_jwks_url": hostile_base + "/jwks"}
            )
            options = {
                "upstream": upstream.url,
                "embedder": "none",
                "auth_mode": "exchange",
                "public_url": base,
                "oauth_issuer": issuer.issuer,
                "oauth_token_url": hostile_base + "/token",
                "oauth_client_id": "toolsearch-proxy",
                "oauth_client_secret": "s3cret-of-the-proxy",
                "oauth_timeout": 1.0,
                **validation,
                **settings,
            }
            proxy = build_proxy(Settings(**options))
            holder.app = proxy.app
            # The test closes the client (`async with setup.http`), in its own event loop.
            yield Setup(issuer, hostile, httpx.AsyncClient(base_url=base, timeout=GUARD), base + "/mcp")


async def _hung_up(hostile: HostileIssuer) -> None:
    async with asyncio.timeout(GUARD):
        while not hostile.disconnected:
            await asyncio.sleep(0.05)


async def post(setup: Setup, token: str, request: dict[str, Any] | None = None) -> httpx.Response:
    request = request or modern("tools/list")
    headers = {**request["headers"], "Authorization": f"Bearer {token}"}
    return await setup.http.post("/mcp", headers=headers, json=request["json"])


@pytest.mark.parametrize("mode", ["endless", "trickle", "huge"])
async def test_a_key_set_that_never_ends_or_is_huge_is_a_503_within_the_timeout(mode):
    with exchange_proxy() as setup:
        setup.hostile.modes["/jwks"] = mode
        async with setup.http, asyncio.timeout(GUARD):
            reply = await post(setup, setup.token())
        assert reply.status_code == 503
        assert reply.headers["retry-after"] == "5"
        assert "could not be checked just now" in reply.json()["error"]["message"]
        if mode != "huge":
            await _hung_up(setup.hostile)  # the proxy stopped reading: the stream did not run its course


async def test_concurrent_callers_fetch_the_key_set_once_and_made_up_key_ids_refetch_it_at_most_once():
    with exchange_proxy() as setup:
        async with setup.http, asyncio.timeout(GUARD):
            replies = await asyncio.gather(*(post(setup, setup.token()) for _ in range(20)))
            assert {reply.status_code for reply in replies} == {200}
            assert setup.hostile.hits["/jwks"] == 1
            forged = [
                jwt.encode(
                    {"aud": setup.resource}, setup.issuer.key, algorithm="ES256", headers={"kid": f"k{n}"}
                )
                for n in range(2, 30)
            ]
            refused = await asyncio.gather(*(post(setup, token) for token in forged))
        assert {reply.status_code for reply in refused} == {401}
        assert setup.hostile.hits["/jwks"] <= 2  # one look for rotated keys per interval, not one per token


async def test_an_issuer_whose_key_set_is_down_is_asked_once_not_once_per_request():
    with exchange_proxy() as setup:
        setup.hostile.modes["/jwks"] = "json"
        setup.hostile.status = 503
        setup.hostile.documents["/jwks"] = {"error": "down"}
        async with setup.http, asyncio.timeout(GUARD):
            replies = [await post(setup, setup.token()) for _ in range(10)]
        assert {reply.status_code for reply in replies} == {503}
        assert setup.hostile.hits["/jwks"] == 1  # tried again after FAILURE_RETRY, not per request


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "HS256", "kid": "k1"},  # a shared-secret algorithm: the public key would be the secret
        {"alg": "none"},
    ],
    ids=["hs256", "none"],
)
async def test_tokens_with_algorithms_a_public_key_cannot_vouch_for_are_refused(header):
    with exchange_proxy() as setup:
        async with setup.http:
            payload = jwt.api_jws.base64url_encode(json.dumps({"aud": setup.resource, "exp": 2**40}).encode())
            head = jwt.api_jws.base64url_encode(json.dumps(header).encode())
            token = f"{head.decode()}.{payload.decode()}.c2lnbmF0dXJl"
            reply = await post(setup, token)
        assert reply.status_code == 401
        assert "algorithm" in parse_challenge(reply.headers["www-authenticate"])["error_description"]
        assert setup.issuer.exchanges == 0


async def test_a_huge_token_is_refused_without_asking_anybody():
    with exchange_proxy(introspect=True) as setup:
        async with setup.http:
            reply = await post(setup, "a" * 20_000)
        assert reply.status_code == 401
        assert "longer than" in parse_challenge(reply.headers["www-authenticate"])["error_description"]
        assert setup.hostile.hits == {}


@pytest.mark.parametrize(
    "answer",
    [
        {"active": True},  # active, but for whom?
        {"active": True, "aud": "https://api.example.com"},
        {"active": True, "aud": ["https://api.example.com"], "iss": "https://other.example"},
        {"active": "yes", "aud": "PLACEHOLDER"},  # not the boolean true
        {"active": False, "aud": "PLACEHOLDER"},
    ],
)
async def test_introspection_that_does_not_name_the_proxy_as_audience_refuses_the_token(answer):
    with exchange_proxy(introspect=True) as setup:
        answer = {k: (setup.resource if v == "PLACEHOLDER" else v) for k, v in answer.items()}
        setup.hostile.modes["/introspect"] = "json"
        setup.hostile.documents["/introspect"] = answer
        async with setup.http:
            reply = await post(setup, "opaque-token")
        assert reply.status_code == 401
        assert parse_challenge(reply.headers["www-authenticate"])["error"] == "invalid_token"


@pytest.mark.parametrize("mode", ["endless", "huge", "status"])
async def test_introspection_that_fails_is_a_503_not_an_admission(mode):
    with exchange_proxy(introspect=True) as setup:
        setup.hostile.modes["/introspect"] = "json" if mode == "status" else mode
        setup.hostile.documents["/introspect"] = {"error": "server_error"}
        setup.hostile.status = 500
        async with setup.http, asyncio.timeout(GUARD):
            reply = await post(setup, "opaque-token")
        assert reply.status_code == 503


async def test_an_error_description_with_quotes_and_line_breaks_cannot_break_the_challenge():
    with exchange_proxy() as setup:
        setup.hostile.modes["/token"] = "json"
        setup.hostile.status = 400
        evil = 'nope"\r\nSet-Cookie: owned=1\r\n, error="x' + "A" * 5000
        setup.hostile.documents["/token"] = {"error": "invalid_grant", "error_description": evil}
        async with setup.http:
            reply = await post(setup, setup.token())
        assert reply.status_code == 401
        assert "set-cookie" not in reply.headers
        challenge = reply.headers["www-authenticate"]
        assert "\r" not in challenge and "\n" not in challenge and len(challenge) < 2000
        assert parse_challenge(challenge)["error"] == "invalid_token"
        assert "invalid_grant" in reply.json()["error"]["message"]


@pytest.mark.parametrize("mode", ["huge", "endless", "no_token", "server_error"])
async def test_a_token_endpoint_that_misbehaves_is_a_tool_error_not_a_500(mode):
    with exchange_proxy() as setup:
        documents = {
            "no_token": (200, {"token_type": "Bearer"}),
            "server_error": (400, {"error": "invalid_client", "error_description": "bad secret"}),
        }
        if mode in documents:
            setup.hostile.status, setup.hostile.documents["/token"] = documents[mode]
            setup.hostile.modes["/token"] = "json"
        else:
            setup.hostile.modes["/token"] = mode
        async with setup.http, asyncio.timeout(GUARD):
            reply = await post(setup, setup.token(), call("search_tools", {"query": "tickets"}))
        assert reply.status_code == 200
        error = reply.json()["result"]["structuredContent"]["error"]
        assert error["kind"] == "exchange_failed"
        if mode == "endless":
            await _hung_up(setup.hostile)


async def test_exchange_mode_logs_no_token_and_no_secret():
    with authorization_server() as issuer, resource_server(issuer, strict=True) as upstream:
        issuer.allowed_targets.add(upstream.url)
        with served_late() as (holder, base), capture_logs() as logs:
            proxy = build_proxy(
                Settings(
                    upstream=upstream.url,
                    embedder="none",
                    auth_mode="exchange",
                    public_url=base,
                    oauth_issuer=issuer.issuer,
                    oauth_jwks_url=issuer.base + "/jwks",
                    oauth_token_url=issuer.base + "/token",
                    oauth_client_id="toolsearch-proxy",
                    oauth_client_secret="proxy-secret-for-tests",
                    log_level="DEBUG",
                )
            )
            holder.app = proxy.app
            token = issuer.issue("alice", "c", base + "/mcp", ["read"])
            async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
                assert (
                    await http.post("/mcp", **call("search_tools", {"query": "tickets"}))
                ).status_code == 200
                issuer.tokens = {t: i for t, i in issuer.tokens.items() if not i.exchanged}
                await http.post("/mcp", **call("call_read_tool", {"name": "echo", "arguments": {}}))
            exchanged = [t for t, i in issuer.tokens.items() if i.exchanged]
        assert "token exchanged" in logs.text(), "the proxy logged no exchange: the check would prove nothing"
        for secret in [token, *exchanged, "proxy-secret-for-tests", token.split(".")[2]]:
            assert secret not in logs.text()


def test_the_client_secret_stays_out_of_the_settings_repr():
    settings = Settings(oauth_client_secret="hunter2-" + secrets.token_hex(4))
    assert settings.oauth_client_secret not in repr(settings)


SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:toolsearch-client-AbCdEf"


@contextlib.contextmanager
def unreadable_secret(monkeypatch: pytest.MonkeyPatch, aws_mode: str) -> Iterator[Any]:
    """AWS as the proxy's real botocore client meets it: refusing the read (400) or never answering."""
    if aws_mode == "refuses":
        aws = AwsRefusal()
        with serve_in_thread(aws) as url:
            aws_environment(monkeypatch, url)
            yield lambda: aws.hits
    else:
        with silent_endpoint() as silent:
            aws_environment(monkeypatch, silent.url)
            yield lambda: silent.accepted


@pytest.mark.parametrize("aws_mode", ["refuses", "silent"])
@pytest.mark.parametrize("introspect", [True, False], ids=["introspection", "jwt"])
async def test_an_unreadable_client_secret_is_a_503_naming_no_arn_read_once_not_per_request(
    monkeypatch, aws_mode, introspect
):
    no_secret = {"oauth_client_secret": "", "oauth_client_secret_arn": SECRET_ARN}
    with (
        unreadable_secret(monkeypatch, aws_mode) as reads,
        exchange_proxy(introspect=introspect, **no_secret) as setup,
        capture_logs() as logs,
    ):
        # Introspection: made-up tokens, which need the secret to be checked at all; JWT: a good token,
        # which needs it to be exchanged.
        tokens = [f"made-up-{n}" if introspect else setup.token() for n in range(12)]
        async with setup.http, asyncio.timeout(GUARD):
            replies = await asyncio.gather(*(post(setup, token) for token in tokens))
            replies.append(await post(setup, tokens[0], call("search_tools", {"query": "tickets"})))
        for reply in replies:
            assert reply.status_code == 503, reply.text
            assert reply.headers["retry-after"].isdigit()
            assert "client secret could not be read" in reply.json()["error"]["message"]
            for part in ("123456789012", "toolsearch-client", "eu-west-1", "arn:"):
                assert part not in reply.text and part not in str(reply.headers)
        assert reads() < len(replies) / 2, "the secret was read again for each request"
        assert setup.issuer.exchanges == 0 and setup.hostile.hits.get("/introspect", 0) == 0
        # A silent endpoint's read may outlive the answers (they wait at most oauth_timeout): wait,
        # bounded, for it to end and be logged.
        async with asyncio.timeout(GUARD):
            while SECRET_ARN not in logs.text():
                await asyncio.sleep(0.05)
    assert SECRET_ARN in logs.text(), "the operator's log does not say which secret failed"
