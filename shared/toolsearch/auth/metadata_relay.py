"""The upstream's own protected-resource metadata (RFC 9728), read for the proxy's, bounded.

Anyone can ask for the proxy's metadata without a token, so reading the
upstream's copy must cost little whatever the upstream does: one fetch at a
time (concurrent askers share it), one deadline for the whole fetch (every
candidate URL, connecting and reading), at most `MAX_BYTES` read, a success
kept for `ttl`, a failure remembered only for `failure_ttl` (so a recovered
upstream is seen again within seconds) and never put in place of a good copy.
Only the fields the proxy relays are kept, and only when they have the right
types; anything else is dropped with a warning.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from toolsearch.errors import ToolsearchError

logger = logging.getLogger(__name__)

MAX_BYTES = 64 * 1024  # a metadata document is a few hundred bytes; 64 KiB is generous
TTL = 600.0
FAILURE_TTL = 5.0
# RFC 6749 §3.3 scope-token: visible ASCII except the double quote and the backslash.
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,256}")
_MAX_ENTRIES = 64


class _Unusable(ToolsearchError):
    """This candidate gave no usable document (the reason is for the log, never the caller)."""


@dataclass(frozen=True, slots=True)
class UpstreamMetadata:
    """The fields of the upstream's metadata the proxy relays; empty when it publishes none."""

    authorization_servers: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] | None = None
    resource: str | None = None  # the upstream's own resource identifier (explains audience refusals)


@dataclass
class _State:
    good: UpstreamMetadata | None = None
    good_at: float = 0.0
    failed_at: float | None = None
    running: asyncio.Task[UpstreamMetadata | None] | None = field(default=None, repr=False)


class MetadataRelay:
    def __init__(
        self,
        http: httpx.AsyncClient,
        candidates: Callable[[], list[str]],
        *,
        deadline: float,
        ttl: float = TTL,
        failure_ttl: float = FAILURE_TTL,
        max_bytes: int = MAX_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._http = http
        self._candidates = candidates
        self._deadline = deadline
        self._ttl = ttl
        self._failure_ttl = failure_ttl
        self._max_bytes = max_bytes
        self._clock = clock
        self._state = _State()

    async def get(self) -> tuple[UpstreamMetadata, bool]:
        """The upstream's metadata and whether it is current (False: a failed fetch, or none yet)."""
        state, now = self._state, self._clock()
        if state.good is not None and now - state.good_at < self._ttl:
            return state.good, True
        if state.failed_at is not None and now - state.failed_at < self._failure_ttl:
            return state.good or UpstreamMetadata(), False
        if state.running is None:
            state.running = asyncio.create_task(self._fetch_once())
        # shield: one asker going away must not cancel the fetch the others wait for.
        fetched = await asyncio.shield(state.running)
        if fetched is not None:
            return fetched, True
        return state.good or UpstreamMetadata(), False

    async def _fetch_once(self) -> UpstreamMetadata | None:
        state = self._state
        try:
            fetched = await self._fetch()
        finally:
            state.running = None
        if fetched is None:
            state.failed_at = self._clock()  # the good copy, if any, stays
        else:
            state.good, state.good_at, state.failed_at = fetched, self._clock(), None
        return fetched

    async def _fetch(self) -> UpstreamMetadata | None:
        reasons = []
        try:
            async with asyncio.timeout(self._deadline):
                for url in self._candidates():
                    try:
                        return _fields(await self._read(url))
                    except _Unusable as exc:
                        reasons.append(str(exc))
        except TimeoutError:
            reasons.append(f"no complete answer within {self._deadline:g} s")
        logger.warning(
            "upstream protected-resource metadata unavailable", extra={"outcome": "; ".join(reasons)}
        )
        return None

    async def _read(self, url: str) -> dict[str, Any]:
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        try:
            async with self._http.stream("GET", url, headers=headers, timeout=self._deadline) as reply:
                if reply.status_code != 200:
                    raise _Unusable(f"HTTP {reply.status_code}")
                if reply.headers.get("content-encoding", "identity").lower() != "identity":
                    raise _Unusable("a compressed answer")  # we asked for none: no decompression bombs
                declared = reply.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self._max_bytes:
                    raise _Unusable(f"larger than {self._max_bytes} bytes")
                body = bytearray()
                async for chunk in reply.aiter_raw():
                    body += chunk
                    if len(body) > self._max_bytes:
                        raise _Unusable(f"larger than {self._max_bytes} bytes")
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise _Unusable(type(exc).__name__) from None
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):
            raise _Unusable("not JSON") from None
        if not isinstance(document, dict):
            raise _Unusable("not a JSON object")
        return document


def _fields(document: dict[str, Any]) -> UpstreamMetadata:
    servers = document.get("authorization_servers")
    kept_servers: tuple[str, ...] = ()
    if isinstance(servers, list):
        kept_servers = tuple(s for s in servers[:_MAX_ENTRIES] if is_http_url(s))
        if len(kept_servers) != len(servers):
            logger.warning("upstream metadata: authorization_servers that are not http(s) URLs dropped")
    elif servers is not None:
        logger.warning("upstream metadata: authorization_servers is not a list; ignored")
    scopes = document.get("scopes_supported")
    kept_scopes: tuple[str, ...] | None = None
    if isinstance(scopes, list):
        kept_scopes = tuple(s for s in scopes[:_MAX_ENTRIES] if _is_scope(s))
        if len(kept_scopes) != len(scopes):
            logger.warning("upstream metadata: scopes_supported entries that are not scope tokens dropped")
    elif scopes is not None:
        logger.warning("upstream metadata: scopes_supported is not a list; ignored")
    resource = document.get("resource")
    return UpstreamMetadata(kept_servers, kept_scopes, resource if is_http_url(resource) else None)


def _is_scope(value: Any) -> bool:
    return isinstance(value, str) and _SCOPE_TOKEN.fullmatch(value) is not None


def is_http_url(value: Any) -> bool:
    """An absolute http(s) URL of visible ASCII, with a host: what may be relayed as a server."""
    if not isinstance(value, str) or not 0 < len(value) <= 2048:
        return False
    if any(not 0x21 <= ord(ch) <= 0x7E for ch in value):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
