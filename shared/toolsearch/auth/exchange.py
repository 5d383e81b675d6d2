"""RFC 8693 token exchange: a caller's token, issued for the proxy, traded for one issued for the upstream.

The proxy asks the authorization server's token endpoint, with its own client
credentials, for a token whose `resource` (and `audience`, when set) is the
upstream. The answer is kept in memory only, under the hash of the caller's
token, until shortly before it expires (never past the caller's own token), so a
caller's requests exchange once per token; concurrent requests of one caller share
one exchange. It is never logged and never written anywhere: a cold process
exchanges again. `drop` forgets one, after the upstream refused it.

A refusal by the authorization server is `ExchangeRefused` with its RFC 6749
error: `invalid_grant` (the caller's token cannot be exchanged: expired,
revoked, not allowed) and `invalid_target` (no token for the upstream for this
caller) are the caller's; `invalid_client`, `unauthorized_client` and the rest
are the proxy's configuration.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from toolsearch.ops.bounded import BoundedMap
from toolsearch.ops.tasks import retrieve
from toolsearch.ops.timing import Span

from ..errors import ToolsearchError
from .client_credentials import SecretUnavailable
from .http_json import AuthServerError, request_json
from .tokens import token_hash

logger = logging.getLogger(__name__)

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
MAX_CACHED = 4096
# An exchanged token is renewed this long before it expires (or a tenth of its life, if shorter),
# so a listing or call that starts with it does not fail halfway.
RENEW_BEFORE = 30.0
DEFAULT_LIFETIME = 300.0  # seconds an exchanged token without expires_in is kept
CALLER_ERRORS = frozenset({"invalid_grant", "invalid_target", "invalid_scope"})
_MAX_DESCRIPTION = 300


@dataclass(frozen=True)
class ExchangeConfig:
    token_url: str
    resource: str  # the upstream, as the authorization server names it
    audience: str = ""
    scope: str = ""
    timeout: float = 5.0


class ExchangeRefused(ToolsearchError):
    """The authorization server would not exchange the token: `error` (RFC 6749) and its description."""

    def __init__(self, error: str, description: str = "") -> None:
        super().__init__(f"{error}: {description}" if description else error)
        self.error = error
        self.description = description

    @property
    def callers(self) -> bool:
        """Whether the caller's token or rights are the reason (else the proxy's configuration)."""
        return self.error in CALLER_ERRORS


class ExchangeUnavailable(ToolsearchError):
    """The exchange could not be asked (the server did not answer, or the proxy has no secret)."""


@dataclass(frozen=True, slots=True)
class Exchanged:
    authorization: str  # the header value for the upstream, "Bearer ..."
    renew_at: float  # unix seconds
    minted_at: float


class TokenExchanger:
    def __init__(
        self,
        config: ExchangeConfig,
        http: httpx.AsyncClient,
        client_auth: Callable[[], Awaitable[tuple[dict[str, str], dict[str, str]]]],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._http = http
        self._client_auth = client_auth
        self._clock = clock
        self._held: BoundedMap[str, Exchanged] = BoundedMap(MAX_CACHED, clock=clock)
        self._running: dict[str, asyncio.Task[Exchanged]] = {}

    def __len__(self) -> int:
        return len(self._held)

    async def exchange(self, token: str, *, not_after: float | None = None) -> Exchanged:
        """An upstream token for `token`: the one held, or a new exchange. `not_after`: when the
        caller's own token expires (an exchanged token is never kept past it)."""
        key = token_hash(token)
        held = self._held.use(key)  # held until its renew_at
        if held is not None:
            return held
        task = self._running.get(key)
        if task is None:
            task = self._running[key] = asyncio.create_task(self._exchange(key, token, not_after))
            task.add_done_callback(lambda _done: self._running.pop(key, None))
            task.add_done_callback(retrieve)
        return await asyncio.shield(task)

    def drop(self, token: str, exchanged: Exchanged | None = None) -> None:
        """Forget the upstream token held for `token` (only `exchanged`, when given: not a newer one)."""
        key = token_hash(token)
        if exchanged is None or self._held.get(key) == exchanged:
            self._held.pop(key)

    async def _exchange(self, key: str, token: str, not_after: float | None) -> Exchanged:
        config = self._config
        try:
            form, headers = await self._client_auth()
        except SecretUnavailable as exc:
            raise ExchangeUnavailable(str(exc)) from None
        form = {
            **form,
            "grant_type": GRANT_TYPE,
            "subject_token": token,
            "subject_token_type": ACCESS_TOKEN_TYPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
            "resource": config.resource,
        }
        if config.audience:
            form["audience"] = config.audience
        if config.scope:
            form["scope"] = config.scope
        span = Span()
        try:
            answer = await request_json(
                self._http, "POST", config.token_url, timeout=config.timeout, form=form, headers=headers
            )
        except AuthServerError as exc:
            logger.warning("token exchange failed", extra={"outcome": "unavailable"})
            raise ExchangeUnavailable(
                f"the authorization server did not answer the exchange ({exc})"
            ) from None
        body = answer.body or {}
        elapsed = span.logged_ms
        if answer.status != 200:
            error = body.get("error")
            error = error if isinstance(error, str) and error.isascii() and len(error) <= 64 else ""
            if not error:
                logger.warning(
                    "token exchange failed", extra={"outcome": f"HTTP {answer.status}", "ms": elapsed}
                )
                raise ExchangeUnavailable(
                    f"the authorization server answered the exchange with HTTP {answer.status}"
                )
            logger.info("token exchange refused", extra={"outcome": error, "ms": elapsed})
            raise ExchangeRefused(error, _description(body.get("error_description")))
        access = body.get("access_token")
        kind = str(body.get("token_type", "")).lower()
        if not isinstance(access, str) or not access or not access.isascii() or kind not in ("bearer", "n_a"):
            logger.warning("token exchange failed", extra={"outcome": "bad_response", "ms": elapsed})
            raise ExchangeUnavailable(
                "the authorization server's exchange answer holds no bearer access token"
            )
        now = self._clock()
        lifetime = body.get("expires_in")
        if isinstance(lifetime, (int, float)) and not isinstance(lifetime, bool) and lifetime > 0:
            renew_at = now + lifetime - min(RENEW_BEFORE, lifetime / 10)
        else:
            renew_at = now + DEFAULT_LIFETIME
        if not_after is not None:
            renew_at = min(renew_at, not_after)
        exchanged = Exchanged(f"Bearer {access}", renew_at, now)
        self._held.set(key, exchanged, expires_at=renew_at)
        logger.info("token exchanged", extra={"outcome": "ok", "ms": elapsed})
        return exchanged


def _description(value: object) -> str:
    """An error_description fit to pass on: printable ASCII, cut short (it goes into a header)."""
    if not isinstance(value, str):
        return ""
    text = "".join(ch for ch in value if 0x20 <= ord(ch) <= 0x7E and ch not in '"\\')
    return text[:_MAX_DESCRIPTION]
