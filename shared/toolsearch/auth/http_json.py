"""One bounded request to an authorization server, read as a JSON object.

Key sets, introspection and token exchange all talk to a server the proxy does
not control: each request has one deadline for connecting and the whole answer,
reads at most `max_bytes` (no compressed answers), and fails as `AuthServerError`
with a reason fit for a log (never a token, never the body).
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
from dataclasses import dataclass
from typing import Any

import httpx

from ..errors import ToolsearchError

MAX_BYTES = 64 * 1024  # a token response, an introspection answer or a key set is a few KB


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """A cookie set in one caller's exchange must never ride along with another's."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False

    def return_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False


def auth_server_client() -> httpx.AsyncClient:
    """The HTTP client for the authorization server: no redirects followed, no cookies kept."""
    client = httpx.AsyncClient(follow_redirects=False)
    client.cookies.jar.set_policy(_NoCookies())
    return client


class AuthServerError(ToolsearchError):
    """The authorization server could not be asked, or gave no usable answer; `str()` says why."""


@dataclass(frozen=True, slots=True)
class JsonAnswer:
    status: int
    body: dict[str, Any] | None  # None when the answer was not a JSON object


async def request_json(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    timeout: float,
    form: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    max_bytes: int = MAX_BYTES,
) -> JsonAnswer:
    """The status and JSON object of one request; AuthServerError when none came in time or in size."""
    sent = {"Accept": "application/json", "Accept-Encoding": "identity", **(headers or {})}
    try:
        async with asyncio.timeout(timeout):
            async with http.stream(method, url, data=form, headers=sent, timeout=timeout) as reply:
                if reply.headers.get("content-encoding", "identity").lower() != "identity":
                    raise AuthServerError("a compressed answer, which was not asked for")
                declared = reply.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise AuthServerError(f"an answer larger than {max_bytes} bytes")
                body = bytearray()
                async for chunk in reply.aiter_raw():
                    body += chunk
                    if len(body) > max_bytes:
                        raise AuthServerError(f"an answer larger than {max_bytes} bytes")
                status = reply.status_code
    except TimeoutError:
        raise AuthServerError(f"no complete answer within {timeout:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise AuthServerError(f"no answer ({type(exc).__name__})") from None
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        parsed = None
    return JsonAnswer(status, parsed if isinstance(parsed, dict) else None)
