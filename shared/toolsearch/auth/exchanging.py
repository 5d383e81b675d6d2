"""The upstream in exchange mode: each caller's token traded for an upstream one before it is used.

`ExchangingUpstream` stands where the upstream client stands (`CatalogSource`,
`ToolCaller`): it receives the caller's own Authorization, exchanges it
(`TokenExchanger`, held in memory) and sends the upstream the exchanged token.

When the upstream answers 401 to a held token (expired or revoked there), the
token is dropped. A listing is then exchanged again and retried once; a
`tools/call` is not sent again (at most once), and the caller is told
`token_expired`: the upstream did not run it (401 means it was not let in), and
the next request gets a new token. A token minted for this very request and
refused is the caller's refusal (401, with the upstream's reason): another
exchange would mint the same kind of token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from toolsearch.callers.challenge import parse_challenge, quoted
from toolsearch.service.progress import ProgressSink

from ..upstream import Listing, Upstream, UpstreamError
from .exchange import Exchanged, ExchangeRefused, ExchangeUnavailable, TokenExchanger


class ExchangingUpstream:
    def __init__(
        self,
        upstream: Upstream,
        exchanger: TokenExchanger,
        resource: str,
        *,
        expires_at: Callable[[str], float | None] = lambda _token: None,
    ) -> None:
        self._upstream = upstream
        self._exchanger = exchanger
        self._resource = resource
        self._expires_at = expires_at  # when a caller's own token expires, as its validation said

    async def list_tools(self, authorization: str | None) -> Listing:
        token = _bearer(authorization)
        started = time.time()
        exchanged = await self._exchange(token)
        try:
            return await self._upstream.list_tools(exchanged.authorization)
        except UpstreamError as exc:
            if exc.kind != "unauthorized":
                raise
            self._exchanger.drop(token, exchanged)
            if exchanged.minted_at >= started:
                raise _refused_exchanged(exc) from None
        exchanged = await self._exchange(token)  # the held one had gone stale upstream: once more
        try:
            return await self._upstream.list_tools(exchanged.authorization)
        except UpstreamError as exc:
            if exc.kind == "unauthorized":
                self._exchanger.drop(token, exchanged)
                raise _refused_exchanged(exc) from None
            raise

    async def call_tool(
        self,
        authorization: str | None,
        tool: Mapping[str, Any],
        arguments: dict[str, Any],
        *,
        progress: ProgressSink | None = None,
    ) -> dict[str, Any]:
        token = _bearer(authorization)
        started = time.time()
        exchanged = await self._exchange(token)
        try:
            return await self._upstream.call_tool(exchanged.authorization, tool, arguments, progress=progress)
        except UpstreamError as exc:
            if exc.kind != "unauthorized":
                raise
            self._exchanger.drop(token, exchanged)
            if exchanged.minted_at >= started:
                raise _refused_exchanged(exc) from None
            raise UpstreamError(
                "token_expired",
                "the upstream refused the token the proxy held for you (HTTP 401), so it did not run the"
                " call, and the call was not sent again. The next request gets a new token: call again if"
                " it is still wanted.",
                status=401,
            ) from None

    async def _exchange(self, token: str) -> Exchanged:
        try:
            return await self._exchanger.exchange(token, not_after=self._expires_at(token))
        except ExchangeRefused as exc:
            raise self._refusal(exc) from None
        except ExchangeUnavailable as exc:
            raise UpstreamError(
                "exchange_failed", f"no upstream token could be obtained for you: {exc}"
            ) from None

    def _refusal(self, exc: ExchangeRefused) -> UpstreamError:
        said = f"{exc.error}: {exc.description}" if exc.description else exc.error
        if exc.error == "invalid_target":
            why = (
                f"the authorization server will not issue a token for the upstream ({self._resource}) in"
                f" exchange for yours ({said})"
            )
            return UpstreamError("forbidden", why, status=403, www_authenticate=_challenge("", why))
        if exc.callers:
            why = f"the authorization server would not exchange your token for one for the upstream ({said})"
            return UpstreamError(
                "unauthorized", why, status=401, www_authenticate=_challenge("invalid_token", why)
            )
        # invalid_client, unauthorized_client, unsupported_grant_type...: the proxy's configuration.
        return UpstreamError(
            "exchange_failed",
            f"the authorization server refused the proxy's token exchange ({said}); the proxy's operator"
            " must check its client credentials and the server's token-exchange policy",
        )


def _bearer(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme != "Bearer" or not token:
        # The validating authenticator admits Bearer tokens only: anything else is a wiring error.
        raise UpstreamError("unauthorized", "a Bearer token issued for this server is required", status=401)
    return token


def _challenge(error: str, description: str) -> str:
    params = [f"error={quoted(error)}"] if error else []
    return "Bearer " + ", ".join([*params, f"error_description={quoted(description)}"])


def _refused_exchanged(exc: UpstreamError) -> UpstreamError:
    """The upstream refused a token minted for it just now: the caller's refusal, with its reason."""
    said = parse_challenge(exc.www_authenticate)
    reason = ": ".join(part for part in (said.get("error"), said.get("error_description")) if part)
    why = "the upstream refused the token obtained for it in exchange for yours" + (
        f" ({reason})" if reason else ""
    )
    challenge = _challenge(said.get("error") or "invalid_token", why)
    if said.get("scope"):
        challenge += f", scope={quoted(said['scope'])}"
    return UpstreamError("unauthorized", why, status=401, www_authenticate=challenge)
