"""A JWT's header and claims are the caller's JSON: any shape gets a 401 (or the upstream's refusal).

Property tests over the shapes of every header field (`alg`, `kid`, `typ`, `crit`, `jku`, `x5u`,
`jwk`, `b64`, `cty`, `x5c`) and of the claims the proxy reads (`aud`, `exp`, `iss`, `sub`, `nbf`,
`iat`): lists, objects, numbers (huge ones too), null, NaN, or a segment that is no object at all;
signed with the issuer's real key or not. Two places read them: exchange mode's validator
(`auth/jwt_validation.py`), and forwarding mode's explanation of a refused JWT (`auth/audience.py`,
read without verifying), against the SDK's strict resource server as upstream.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.mcp_wire import modern
from fixtures.oauth_world import IssuerServer, authorization_server, resource_server, served_late
from toolsearch.app import build_proxy
from toolsearch.auth.tokens import seconds
from toolsearch.server.oauth import parse_challenge
from toolsearch.settings import Settings

SHAPES = settings(max_examples=150, deadline=None)
RESOURCE, ISSUER, FUTURE = "$resource", "$issuer", "$future"  # filled in per proxy

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**400, -(10**400), 2**63, 0])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
JSON = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
HEADER_FIELDS = ("typ", "crit", "jku", "x5u", "jwk", "b64", "cty", "x5c")
HEADERS = st.fixed_dictionaries(
    {},
    optional={
        "alg": JSON | st.sampled_from(["ES256", "RS256", "HS256", "none", "es256"]),
        "kid": JSON | st.just("k1"),
        **{name: JSON | st.just(["exp"]) | st.just(["b64"]) for name in HEADER_FIELDS},
    },
)
CLAIMS = st.fixed_dictionaries(
    {},
    optional={
        "aud": JSON | st.just(RESOURCE) | st.lists(st.just(RESOURCE) | JSON, max_size=3),
        "exp": st.sampled_from([FUTURE, 10**400, -(10**400), float("nan"), True]) | JSON,
        "iss": JSON | st.just(ISSUER),
        "sub": JSON,
        "nbf": JSON,
        "iat": JSON,
    },
)


@dataclass(repr=False)
class Proxy:
    issuer: IssuerServer
    http: httpx.Client
    resource: str

    def token(self, header: Any, claims: Any, signed: bool) -> str:
        def fill(value: Any) -> Any:
            if isinstance(value, list):
                return [fill(item) for item in value]
            if isinstance(value, dict):
                return {key: fill(item) for key, item in value.items()}
            return {RESOURCE: self.resource, ISSUER: self.issuer.issuer, FUTURE: 2**40}.get(value, value)

        head, body = (_segment(fill(part)) for part in (header, claims))
        signing_input = f"{head}.{body}".encode()
        if signed:
            signature = jwt.algorithms.ECAlgorithm(jwt.algorithms.ECAlgorithm.SHA256).sign(
                signing_input, self.issuer.key
            )
        else:
            signature = b"not a signature"
        return f"{head}.{body}.{base64.urlsafe_b64encode(signature).decode().rstrip('=')}"

    def post(self, token: str) -> httpx.Response:
        request = modern("tools/list")  # it lists the caller's catalog: the upstream sees the token
        headers = {**request["headers"], "Authorization": f"Bearer {token}"}
        return self.http.post("/mcp", headers=headers, json=request["json"])


def _segment(value: Any) -> str:
    text = json.dumps(value)  # NaN and Infinity as Python writes them: JSON readers may take them
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@contextlib.contextmanager
def proxy(mode: str) -> Iterator[Proxy]:
    with authorization_server() as issuer, resource_server(issuer, strict=True) as upstream:
        issuer.allowed_targets.add(upstream.url)
        with served_late() as (holder, base):
            options: dict[str, Any] = {"upstream": upstream.url, "embedder": "none"}
            if mode == "exchange":
                options |= {
                    "auth_mode": "exchange",
                    "public_url": base,
                    "oauth_issuer": issuer.issuer,
                    "oauth_jwks_url": issuer.base + "/jwks",
                    "oauth_token_url": issuer.base + "/token",
                    "oauth_client_id": "toolsearch-proxy",
                    "oauth_client_secret": "proxy-secret-for-tests",
                }
            holder.app = build_proxy(Settings(**options)).app
            with httpx.Client(base_url=base, timeout=30) as http:
                yield Proxy(issuer, http, base + "/mcp")


@pytest.fixture(scope="module")
def exchanging() -> Iterator[Proxy]:
    with proxy("exchange") as running:
        yield running


@pytest.fixture(scope="module")
def forwarding() -> Iterator[Proxy]:
    with proxy("forward") as running:
        yield running


@SHAPES
@given(header=HEADERS | JSON, claims=CLAIMS | JSON, signed=st.booleans())
def test_exchange_mode_answers_any_header_or_claims_with_401_invalid_token(
    exchanging, header, claims, signed
):
    reply = exchanging.post(exchanging.token(header, claims, signed))
    well_formed = (
        isinstance(header, dict) and header.get("alg") == "ES256" and header.get("kid", "k1") == "k1"
    )
    if reply.status_code == 200:
        # Only a token the issuer's key signed, naming the proxy, unexpired, can pass.
        assert signed and well_formed, reply.text
        return
    assert reply.status_code == 401, reply.text
    assert parse_challenge(reply.headers["www-authenticate"])["error"] == "invalid_token"
    assert reply.json()["error"]["code"] == -32000


@SHAPES
@given(header=HEADERS | JSON, claims=CLAIMS | JSON, signed=st.booleans())
def test_forwarding_mode_explains_any_refused_jwt_with_401_or_403(forwarding, header, claims, signed):
    reply = forwarding.post(forwarding.token(header, claims, signed))
    assert reply.status_code in (401, 403), reply.text
    assert parse_challenge(reply.headers["www-authenticate"])["error"] == "invalid_token"


@pytest.mark.parametrize(
    "alg",
    [["ES256"], {"ES256": 1}, 256, None, ["RS256", "ES256"]],
    ids=["list", "object", "number", "null", "two"],
)
def test_a_header_alg_that_is_a_list_an_object_a_number_or_null_is_a_401(exchanging, alg):
    reply = exchanging.post(exchanging.token({"alg": alg, "kid": "k1"}, {"aud": RESOURCE}, True))
    assert reply.status_code == 401
    assert "algorithm" in parse_challenge(reply.headers["www-authenticate"])["error_description"]


@pytest.mark.parametrize(
    "exp",
    [10**400, -(10**400), float("nan"), float("inf"), True, "soon", None],
    ids=["huge", "huge-negative", "nan", "inf", "bool", "text", "null"],
)
def test_a_refused_jwt_whose_expiry_is_no_usable_number_is_explained_not_a_500(forwarding, exp):
    reply = forwarding.post(forwarding.token({"alg": "ES256"}, {"aud": RESOURCE, "exp": exp}, False))
    assert reply.status_code in (401, 403), reply.text


def test_a_time_claim_is_seconds_or_none_whatever_its_json():
    assert seconds(1.5) == 1.5 and seconds(10**400) == math.inf and seconds(-(10**400)) == -math.inf
    assert [seconds(value) for value in (True, float("nan"), "1", None, [1])] == [None] * 5
