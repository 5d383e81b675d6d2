"""What every HTTP route checks before the tools run, and how a refusal of the caller is answered.

The MCP endpoint and the catalog routes share these rules, so a browser page,
a token or a refused caller is treated the same on /mcp and on /catalog: the
`Origin` (listed origins, none, or the page on this very loopback address), the
caller read from `Authorization` (a malformed one is a 400 before anything
reaches the upstream), and the upstream's refusal of the caller, answered with
its status and the proxy's own challenge. Our errors become the HTTP answer in
one place, `HttpEdge.answer_for`; each route writes the `HttpRefusal` it
returns in its own body format (JSON-RPC on /mcp).
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.requests import Request

from toolsearch.auth.audience import AcceptedAudiences, issued_for_and_live
from toolsearch.callers.challenge import parse_challenge
from toolsearch.callers.credentials import form_hint
from toolsearch.callers.identity import Caller
from toolsearch.callers.refusal import CallerRefused, refused
from toolsearch.mcp import protocol as P
from toolsearch.server.authenticators import CallerAuthenticator
from toolsearch.server.http_refusal import HttpRefusal
from toolsearch.server.oauth import ProtectedResource
from toolsearch.service.tool_service import UnknownTool
from toolsearch.upstream import UpstreamError

__all__ = ["HttpEdge", "HttpRefusal"]

_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}
EXCHANGE_SETTING = "TOOLSEARCH_AUTH_MODE=exchange"


class HttpEdge:
    def __init__(
        self,
        allowed_origins: Iterable[str],
        upstream_url: str,
        oauth: ProtectedResource,
        authenticator: CallerAuthenticator,
        accepted: AcceptedAudiences | None = None,
    ) -> None:
        self._origins = {origin.rstrip("/") for origin in allowed_origins}
        self._upstream_url = upstream_url
        self._oauth = oauth
        self._authenticator = authenticator
        self._accepted = accepted or AcceptedAudiences()

    def check_origin(self, request: Request) -> None:
        """Raise HttpRefusal (403) for a page of an origin that is not allowed."""
        origin = request.headers.get("origin")
        if origin is None or "*" in self._origins or origin.rstrip("/") in self._origins:
            return
        # No general same-host exception: under DNS rebinding the Host header is the attacker's name too.
        if _is_own_loopback_origin(origin, request.headers.get("host")):
            return
        raise HttpRefusal(403, "origin_not_allowed", "Origin not allowed")

    async def caller(self, request: Request) -> Caller:
        """The caller the request's Authorization names, as the authenticator admits them (or an
        HttpRefusal: 400 for a malformed header, 401/503 in exchange mode)."""
        return await self._authenticator.caller(request)

    async def answer_for(self, request: Request, exc: BaseException) -> HttpRefusal | None:
        """Our error as the answer every route gives, each in its body format: the edge's one
        translation. None for anything else (a JSON-RPC error the endpoint writes as it is, or a bug).

        The upstream's refusal of the caller is its status with the proxy's challenge (`refusal`);
        any other upstream failure that reaches a route (the catalog routes' listing) is a 502; a
        tools/call of a tool nobody lists is JSON-RPC's invalid params.
        """
        if isinstance(exc, HttpRefusal):
            return exc
        if isinstance(exc, UpstreamError):
            refusal = refused(exc)
            if refusal is None:
                return HttpRefusal(502, exc.kind, f"The upstream could not list tools: {exc.message}")
            exc = refusal
        if isinstance(exc, CallerRefused):
            return await self.refusal(request, exc)
        if isinstance(exc, UnknownTool):
            return HttpRefusal(200, "unknown_tool", str(exc), code=P.INVALID_PARAMS)
        return None

    async def refusal(self, request: Request, refused: CallerRefused) -> HttpRefusal:
        """The upstream's refusal as the proxy's: its status and reason, a challenge naming the proxy's
        metadata. In forwarding mode, a token the proxy's metadata made the client ask for (its
        audience is the proxy) that the upstream refuses is a 403 saying so: signing in again would
        get the same kind of token, so the client is not sent to sign in."""
        params = parse_challenge(refused.error.www_authenticate)
        status, message = refused.status, refused.message
        if self._authenticator.forwards and status == 401:
            status, message, params = await self._explain_forwarded(request, refused, params)
        challenge = self._oauth.challenge(request, refused.error.www_authenticate, params)
        hint = form_hint(*request.headers.getlist("authorization"))  # a deployer's usual mistake
        if hint is not None:
            message = f"{message}. {hint}"
        return HttpRefusal(status, refused.error.kind, message, {"WWW-Authenticate": challenge}, code=-32000)

    async def _explain_forwarded(
        self, request: Request, refused: CallerRefused, params: dict[str, str]
    ) -> tuple[int, str, dict[str, str]]:
        authorization = request.headers.get("authorization")
        if not authorization:
            return 401, refused.message, params  # no token yet: signing in is the answer
        published = await self._oauth.upstream_resource()
        ours = self._oauth.resource(request)
        if published is None or _same_resource(ours, published):
            # An upstream that publishes no OAuth resource, or names the proxy's: signing in again is
            # the answer.
            return 401, refused.message, params
        if self._accepted.accepted(ours, published):
            return (
                401,
                refused.message,
                params,
            )  # it takes the proxy's tokens: this one expired or was revoked
        if issued_for_and_live(authorization, ours, published):
            why = (
                f"The upstream refused this token, which was issued for this proxy ({ours}), and has"
                " accepted no token issued for the proxy since it started: it most likely accepts only"
                f" tokens whose audience is itself ({published}). Signing in again would get the same"
                f" kind of token. The proxy must run in token-exchange mode ({EXCHANGE_SETTING};"
                " docs/security.md)."
            )
            reason = _reason(params)
            message = why + (f" The upstream said: {reason}." if reason else "")
            return 403, message, {"error": "invalid_token", "error_description": why}
        hint = (
            f". If the upstream checks token audiences, it refuses tokens issued for this proxy ({ours});"
            f" the proxy must then run in token-exchange mode ({EXCHANGE_SETTING}; docs/security.md)."
        )
        return 401, refused.message + hint, params


def _reason(params: dict[str, str]) -> str:
    error, description = params.get("error", ""), params.get("error_description", "")
    if error and description:
        return f"{error} ({description})"
    return error or description


def _same_resource(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def _is_own_loopback_origin(origin: str, host: str | None) -> bool:
    """Whether a page on this very loopback address (same host and port) sent the request.

    A rebinding page's Origin names the attacker's host, never a loopback one, so this
    same-origin case is safe to accept (the conformance suite's dns-rebinding scenario asks it).
    """
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and parts.hostname in _LOOPBACK_HOSTS
        and host is not None
        and parts.netloc.lower() == host.strip().lower()
    )
