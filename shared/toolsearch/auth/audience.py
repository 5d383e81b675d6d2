"""Whether a token the upstream refused was issued for the proxy: read, never trusted, to explain.

In forwarding mode the proxy's metadata names the proxy as the resource, so a
client that follows the MCP authorization spec asks for a token whose audience
is the proxy. An upstream that checks audiences refuses every such token, and
signing in again gets the same kind of token. The unverified claims of a JWT say
whose it is and whether it has expired; `AcceptedAudiences` remembers whether
the upstream has accepted the proxy's audience since the proxy started, so a
revoked token at an upstream that does accept it is still told to sign in.
None of this admits anybody: it only chooses the words and status of a refusal.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from typing import Any

from toolsearch.service.progress import ProgressSink

from ..upstream import Listing, Upstream
from .tokens import LEEWAY, MAX_TOKEN_CHARS, seconds

MAX_REMEMBERED = 32  # different audiences an upstream that checks them is taken to accept, at most


def unverified_claims(authorization: str | None) -> dict[str, Any] | None:
    """The claims of a Bearer JWT, read without checking anything; None for anything else.

    Read by hand (base64url JSON): only to explain a refusal, and so forwarding mode needs no JWT library.
    """
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or len(token) > MAX_TOKEN_CHARS or token.count(".") != 2:
        return None
    payload = token.split(".")[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, RecursionError):  # binascii.Error and UnicodeDecodeError are ValueErrors
        return None
    return claims if isinstance(claims, dict) else None


def _audience_values(claims: Mapping[str, Any]) -> list[str]:
    claim = claims.get("aud")
    values = [claim] if isinstance(claim, str) else claim if isinstance(claim, list) else []
    return [value for value in values if isinstance(value, str)]


def _named(claims: Mapping[str, Any] | None) -> frozenset[str]:
    """The audiences a JWT's claims name, each without a trailing slash."""
    return frozenset(value.rstrip("/") for value in _audience_values(claims)) if claims else frozenset()


def issued_for_and_live(authorization: str | None, resource: str, upstream: str | None = None) -> bool:
    """Whether the Bearer JWT names `resource` in its audience, not `upstream` (the upstream's own
    resource: a token naming both is one the upstream takes), and has not expired (unverified)."""
    claims = unverified_claims(authorization)
    if claims is None:
        return False
    expires = seconds(claims.get("exp"))
    if expires is not None and expires + LEEWAY < time.time():
        return False
    named = _named(claims)
    return resource.rstrip("/") in named and (upstream is None or upstream.rstrip("/") not in named)


class AcceptedAudiences:
    """What the upstream has shown, since the proxy started, about the audiences it accepts.

    Callers feed it (their tokens, their Host), so nothing one caller sends may make it wrong for
    another, nor stop it learning; it learns only from tokens the upstream accepted.

    With the proxy's `resource` known (`public_url`), the one question is whether the upstream
    accepts tokens for the proxy that do not also name the upstream itself. What is kept is the
    intersection of the other audiences of every accepted token naming the proxy: the upstream took
    one without its own resource exactly when that resource is not in it. It only ever shrinks, by
    the upstream's acceptances, so nothing can fill it; a strict upstream accepts no token without its
    own resource, so no caller can shrink it past that.

    Without `public_url` the proxy's resource is each request's own, so single-audience tokens are
    kept by audience (a token naming several proves nothing about each: the upstream may have taken
    it for its own); once the upstream has accepted more than `MAX_REMEMBERED` different ones it
    evidently does not check audiences, and is taken to accept any (a strict upstream accepts tokens
    for itself only, so no caller can get it there). Tokens naming the proxy and another audience
    teach nothing then: set `public_url`.
    """

    def __init__(self, resource: str | None = None) -> None:
        self._resource = resource.rstrip("/") if resource else None
        self._others: frozenset[str] | None = None  # (public_url) of the accepted tokens naming it
        self._seen: set[str] = set()
        self._any = False

    def note(self, authorization: str | None) -> None:
        """Note the audiences of a token the upstream has just accepted."""
        named = _named(unverified_claims(authorization))
        if self._resource is not None:
            if self._resource in named:
                others = named - {self._resource}
                self._others = others if self._others is None else self._others & others
            return
        if len(named) != 1 or self._any:
            return
        (audience,) = named
        if audience not in self._seen and len(self._seen) >= MAX_REMEMBERED:
            self._any = True
            self._seen.clear()
            return
        self._seen.add(audience)

    def accepted(self, resource: str, upstream: str | None = None) -> bool:
        """Whether the upstream has accepted a token for `resource` (not naming `upstream` too)."""
        if self._resource is not None:
            return self._others is not None and (upstream is None or upstream.rstrip("/") not in self._others)
        return self._any or resource.rstrip("/") in self._seen


class WitnessingUpstream:
    """The upstream in forwarding mode, noting the audiences of the tokens it accepts."""

    def __init__(self, upstream: Upstream, seen: AcceptedAudiences) -> None:
        self._upstream = upstream
        self._seen = seen

    async def list_tools(self, authorization: str | None) -> Listing:
        listing = await self._upstream.list_tools(authorization)
        self._seen.note(authorization)
        return listing

    async def call_tool(
        self,
        authorization: str | None,
        tool: Mapping[str, Any],
        arguments: dict[str, Any],
        *,
        progress: ProgressSink | None = None,
    ) -> dict[str, Any]:
        result = await self._upstream.call_tool(authorization, tool, arguments, progress=progress)
        self._seen.note(authorization)
        return result
