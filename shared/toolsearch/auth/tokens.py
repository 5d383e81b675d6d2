"""Whether a caller's token was issued for the proxy: the verdicts, and asking the issuer (RFC 7662).

Exchange mode accepts a token only when its issuer is the configured one, it has
not expired, and its audience names the proxy's resource (its public URL). A
token issued for the upstream, for another API, or with no audience at all is
refused: the MCP authorization spec asks a server to accept only tokens issued
for it. Each refusal says why, in words fit for a `WWW-Authenticate`
error_description; nothing here logs or keeps a token (introspection answers are
kept under the token's hash). JWTs are checked by `jwt_validation.py`, imported only
in exchange mode (PyJWT and cryptography take a while to import).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from toolsearch.ops.bounded import BoundedMap

from ..errors import ToolsearchError
from .client_credentials import SecretUnavailable
from .http_json import AuthServerError, request_json

logger = logging.getLogger(__name__)

LEEWAY = 30.0  # seconds of clock difference tolerated between the issuer and the proxy
MAX_TOKEN_CHARS = 16 * 1024  # a JWT with many claims is a few KB
MAX_CACHED = 4096


class InvalidToken(ToolsearchError):
    """The token is not one the proxy accepts; `str()` says why (no token in it)."""


class ValidationUnavailable(ToolsearchError):
    """The token could not be checked just now (the issuer's keys or introspection did not answer)."""


@dataclass(frozen=True, slots=True)
class ValidToken:
    subject: str | None
    expires_at: float | None  # unix seconds; None when the issuer gave no expiry


class TokenValidator(Protocol):
    async def validate(self, token: str) -> ValidToken: ...


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def audiences(resource: str) -> list[str]:
    """The spellings of the proxy's resource a token's audience may carry (a trailing slash aside)."""
    bare = resource.rstrip("/")
    return [bare, bare + "/"]


def seconds(value: Any) -> float | None:
    """A time claim (`exp`) as unix seconds; None when it is no number (a bool, NaN, a string...).

    Claims are JSON someone else wrote: an integer of hundreds of digits cannot become a float (it is
    taken as never), and arithmetic on it must not raise.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
    return None if math.isnan(number) else number


def _names_audience(claim: Any, accepted: Iterable[str]) -> bool:
    values = [claim] if isinstance(claim, str) else claim if isinstance(claim, list) else []
    return any(isinstance(value, str) and value in accepted for value in values)


class IntrospectionValidator:
    """An opaque or JWT token, checked by asking the issuer (RFC 7662); answers kept a short while."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        *,
        issuer: str,
        resource: str,
        client_auth: Callable[[], Any],
        timeout: float,
        cache_ttl: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._http = http
        self._url = url
        self._issuer = issuer
        self._audiences = audiences(resource)
        self._resource = resource
        self._client_auth = client_auth
        self._timeout = timeout
        self._cache_ttl = cache_ttl
        self._clock = clock
        self._cache: BoundedMap[str, ValidToken | str] = BoundedMap(MAX_CACHED, clock=clock)
        self._running: dict[str, asyncio.Task[ValidToken | str]] = {}

    async def validate(self, token: str) -> ValidToken:
        if len(token) > MAX_TOKEN_CHARS:
            raise InvalidToken(f"the token is longer than {MAX_TOKEN_CHARS} characters")
        key = token_hash(token)
        now = self._clock()
        held = self._cache.get(key)
        if held is not None:
            return _verdict(held)
        task = self._running.get(key)
        if task is None:
            # One introspection per token at a time: a client's burst asks the issuer once.
            task = self._running[key] = asyncio.create_task(self._introspect(token))
            task.add_done_callback(lambda _done: self._running.pop(key, None))
        verdict = await asyncio.shield(task)
        until = now + self._cache_ttl
        if isinstance(verdict, ValidToken) and verdict.expires_at is not None:
            until = min(until, verdict.expires_at)
        if self._cache_ttl > 0:
            self._cache.set(key, verdict, expires_at=until)
        return _verdict(verdict)

    async def _introspect(self, token: str) -> ValidToken | str:
        try:
            form, headers = await self._client_auth()
        except SecretUnavailable as exc:
            raise ValidationUnavailable(str(exc)) from None
        form = {**form, "token": token, "token_type_hint": "access_token"}
        try:
            answer = await request_json(
                self._http, "POST", self._url, timeout=self._timeout, form=form, headers=headers
            )
        except AuthServerError as exc:
            raise ValidationUnavailable(f"the issuer's introspection did not answer ({exc})") from None
        body = answer.body
        if answer.status != 200 or body is None:
            logger.warning("token introspection failed", extra={"outcome": f"HTTP {answer.status}"})
            raise ValidationUnavailable(f"the issuer's introspection answered HTTP {answer.status}")
        if body.get("active") is not True:
            return "the token is not active (expired or revoked)"
        issuer = body.get("iss")
        if issuer is not None and issuer != self._issuer:
            return f"the token was not issued by {self._issuer}"
        if not _names_audience(body.get("aud"), self._audiences):
            return f"the token was not issued for this server: its audience must be {self._resource}"
        expires_at = seconds(body.get("exp"))
        if expires_at is not None and expires_at + LEEWAY < self._clock():
            return "the token has expired"
        subject = body.get("sub")
        return ValidToken(subject if isinstance(subject, str) else None, expires_at)


class RememberedExpiries:
    """A validator that remembers when each token it admitted expires (by hash, the newest
    `max_entries`), so an exchanged token is never kept past the caller's own."""

    def __init__(self, validator: TokenValidator, max_entries: int = MAX_CACHED) -> None:
        self._validator = validator
        self._expiries: BoundedMap[str, float] = BoundedMap(max_entries)

    async def validate(self, token: str) -> ValidToken:
        valid = await self._validator.validate(token)
        if valid.expires_at is not None:
            self._expiries.set(token_hash(token), valid.expires_at)
        return valid

    def expires_at(self, token: str) -> float | None:
        """When `token` expires, as its validation said; None when unknown or without expiry."""
        return self._expiries.get(token_hash(token))


def _verdict(verdict: ValidToken | str) -> ValidToken:
    if isinstance(verdict, str):
        raise InvalidToken(verdict)
    return verdict
