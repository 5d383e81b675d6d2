"""The issuer's signing keys (a JSON Web Key Set), fetched bounded and kept for a while.

Every caller may present a token, so the key set must cost little whatever
callers send: one fetch at a time (concurrent askers share it), bounded in time
and bytes (`http_json`), kept for `ttl`. A token naming a key the set lacks
(the issuer rotated its keys) fetches the set again, at most once per
`refetch_interval`, so tokens with made-up key ids cannot make the proxy hammer
the issuer. Only asymmetric keys are kept: a shared-secret key in a public set
would let anyone sign.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable

import httpx
import jwt

from .http_json import AuthServerError, request_json

logger = logging.getLogger(__name__)

TTL = 3600.0
REFETCH_INTERVAL = 60.0
FAILURE_RETRY = 5.0  # seconds before a failed first fetch is tried again
MAX_KEYS = 32
# Algorithms of asymmetric keys; "none" and the HMAC ones (a key anyone holding the set could use) never.
ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


class KeySet:
    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        *,
        timeout: float,
        ttl: float = TTL,
        refetch_interval: float = REFETCH_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._http = http
        self._url = url
        self._timeout = timeout
        self._ttl = ttl
        self._refetch_interval = refetch_interval
        self._clock = clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None  # of the keys held
        self._attempted_at: float | None = None  # of the last fetch, whatever its outcome
        self._running: asyncio.Task[None] | None = None

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key named `kid` (the only key when the token names none); None when the set lacks it.

        Raises AuthServerError when no set is held and none could be fetched (a failed first fetch is
        not tried again for `FAILURE_RETRY` seconds: an outage costs the issuer no flood).
        """
        now = self._clock()
        since = math.inf if self._attempted_at is None else now - self._attempted_at
        if self._fetched_at is None:
            if since < FAILURE_RETRY and self._running is None:  # (a fetch under way is joined)
                raise AuthServerError("the key set could not be fetched moments ago")
            await self._fetch_once(required=True)
        elif now - self._fetched_at >= self._ttl and since >= self._refetch_interval:
            await self._fetch_once(required=False)
        found = self._find(kid)
        last = self._attempted_at if self._attempted_at is not None else -math.inf
        if found is None and self._clock() - last >= self._refetch_interval:
            await self._fetch_once(required=False)  # rotated keys: look once more, not more often
            found = self._find(kid)
        return found

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _fetch_once(self, *, required: bool) -> None:
        if self._running is None:
            self._running = asyncio.create_task(self._fetch())
        try:
            # shield: one asker going away must not cancel the fetch the others wait for.
            await asyncio.shield(self._running)
        except AuthServerError:
            if required:
                raise
            logger.warning("issuer key set could not be fetched again; keeping the keys held")

    async def _fetch(self) -> None:
        self._attempted_at = self._clock()
        try:
            answer = await request_json(self._http, "GET", self._url, timeout=self._timeout)
            if answer.status != 200 or answer.body is None:
                raise AuthServerError(f"the key set answered HTTP {answer.status} without a JSON object")
            keys = _usable_keys(answer.body)
            if not keys:
                raise AuthServerError("the key set holds no usable signing key")
            self._keys, self._fetched_at = keys, self._clock()
        except AuthServerError as exc:
            logger.warning("issuer key set unavailable", extra={"outcome": str(exc)})
            raise
        finally:
            self._running = None


def _usable_keys(document: dict) -> dict[str, jwt.PyJWK]:
    raw = document.get("keys")
    if not isinstance(raw, list):
        return {}
    keys: dict[str, jwt.PyJWK] = {}
    for number, entry in enumerate(raw[:MAX_KEYS]):
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(entry)
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            continue  # a key type this library cannot use, or a malformed one
        if key.algorithm_name not in ASYMMETRIC:
            continue
        kid = entry.get("kid")
        keys[kid if isinstance(kid, str) else f"#{number}"] = key
    return keys
