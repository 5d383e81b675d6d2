"""What every HTTP route checks before the tools run, and how a refusal of the caller is answered.

The MCP endpoint and the catalog routes share these rules, so a browser page,
a token or a refused caller is treated the same on /mcp and on /catalog: the
`Origin` (listed origins, none, or the page on this very loopback address), the
caller read from `Authorization` (a malformed one is a 400 before anything
reaches the upstream), and the upstream's refusal of the caller, answered with
its status and the proxy's own challenge. Each route writes an `HttpRefusal`
in its own body format (JSON-RPC on /mcp).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request

from . import protocol as P
from .callers import Caller
from .credentials import MalformedAuthorization, form_hint
from .oauth import ProtectedResource
from .refusal import CallerRefused

_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


@dataclass
class HttpRefusal(Exception):
    """A request refused before or instead of an answer: its status, a kind and a sentence."""

    status: int
    kind: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    code: int = P.INVALID_REQUEST  # the JSON-RPC code when the route speaks JSON-RPC
    data: Any = None


class HttpEdge:
    def __init__(self, allowed_origins: Iterable[str], upstream_url: str, oauth: ProtectedResource) -> None:
        self._origins = {origin.rstrip("/") for origin in allowed_origins}
        self._upstream_url = upstream_url
        self._oauth = oauth

    def check_origin(self, request: Request) -> None:
        """Raise HttpRefusal (403) for a page of an origin that is not allowed."""
        origin = request.headers.get("origin")
        if origin is None or "*" in self._origins or origin.rstrip("/") in self._origins:
            return
        # No general same-host exception: under DNS rebinding the Host header is the attacker's name too.
        if _is_own_loopback_origin(origin, request.headers.get("host")):
            return
        raise HttpRefusal(403, "origin_not_allowed", "Origin not allowed")

    def caller(self, request: Request) -> Caller:
        """The caller the request's Authorization names; a malformed one is an HttpRefusal (400).

        400, not 401 (RFC 6750 §3.1 invalid_request): signing in again would not mend the header.
        """
        try:
            return Caller.from_header(self._upstream_url, *request.headers.getlist("authorization"))
        except MalformedAuthorization as exc:
            challenge = self._oauth.invalid_request(request, str(exc))
            raise HttpRefusal(
                400,
                "invalid_request",
                str(exc),
                {"WWW-Authenticate": challenge},
                data={"header": "Authorization", "reason": exc.reason},
            ) from None

    def refusal(self, request: Request, refused: CallerRefused) -> HttpRefusal:
        """The upstream's refusal as the proxy's: same status, a challenge naming the proxy's metadata,
        and how to mend a header of one word (a deployer's usual mistake)."""
        challenge = self._oauth.challenge(request, refused.error.www_authenticate)
        message = refused.message
        hint = form_hint(*request.headers.getlist("authorization"))
        if hint is not None:
            message = f"{message}. {hint}"
        return HttpRefusal(
            refused.status, refused.error.kind, message, {"WWW-Authenticate": challenge}, code=-32000
        )


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
