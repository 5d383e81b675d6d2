"""OAuth discovery through the proxy (RFC 9728 protected-resource metadata).

Clients that sign in with OAuth (claude.ai, Claude Code, the MCP Inspector)
connect to the proxy's URL, get a 401, and follow its `WWW-Authenticate` to
metadata that names the authorization server. The proxy has no authorization
server of its own: it names the upstream's (read from the upstream's own
metadata, or set by the operator), but as a resource it names itself, so the
client asks for a token whose audience is the proxy's URL. The upstream must
accept such tokens (docs/security.md says how that squares with the MCP rule
against token passthrough).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
from starlette.requests import Request

from toolsearch.settings import Settings

logger = logging.getLogger(__name__)

WELL_KNOWN = "/.well-known/oauth-protected-resource"
MCP_PATH = "/mcp"
_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')
_KEPT_CHALLENGE_PARAMS = ("scope", "error", "error_description")


def parse_challenge(header: str | None) -> dict[str, str]:
    """The parameters of a Bearer challenge (`resource_metadata`, `scope`, `error`...)."""
    if not header:
        return {}
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return {}
    return {
        m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
        for m in _PARAM.finditer(rest)
    }


def public_base(request: Request, settings: Settings) -> str:
    """The proxy's own origin as its clients see it (behind API Gateway or a function URL too)."""
    if settings.public_url:
        parts = urlsplit(settings.public_url)
        return f"{parts.scheme}://{parts.netloc}"
    proto = request.headers.get("x-forwarded-proto", request.url.scheme).split(",")[0].strip()
    host = request.headers.get("x-forwarded-host") or request.headers.get("host") or request.url.netloc
    return f"{proto}://{host.split(',')[0].strip()}"


class ProtectedResource:
    """Serves the proxy's metadata and rewrites the upstream's 401 challenges to point at it."""

    def __init__(
        self, settings: Settings, upstream_url: str, http: httpx.AsyncClient, ttl: float = 600.0
    ) -> None:
        self.settings = settings
        self.upstream_url = upstream_url
        self.http = http
        self.ttl = ttl
        self._upstream_metadata: dict[str, Any] | None = None
        self._fetched_at = 0.0
        self._metadata_url_hint: str | None = None

    def resource(self, request: Request) -> str:
        return public_base(request, self.settings) + MCP_PATH

    def metadata_url(self, request: Request) -> str:
        return public_base(request, self.settings) + WELL_KNOWN + MCP_PATH

    def challenge(self, request: Request, upstream_challenge: str | None) -> str:
        """Our 401 challenge: the upstream's scope and error, our resource metadata."""
        if upstream_challenge:
            hint = parse_challenge(upstream_challenge).get("resource_metadata")
            if hint:
                self._metadata_url_hint = hint
        params = parse_challenge(upstream_challenge)
        parts = [f'resource_metadata="{self.metadata_url(request)}"']
        parts += [f'{key}="{params[key]}"' for key in _KEPT_CHALLENGE_PARAMS if key in params]
        return "Bearer " + ", ".join(parts)

    async def metadata(self, request: Request) -> dict[str, Any]:
        upstream = await self._upstream()
        servers = list(self.settings.authorization_servers) or list(
            upstream.get("authorization_servers") or []
        )
        document: dict[str, Any] = {
            "resource": self.resource(request),
            "authorization_servers": servers,
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-toolsearch-proxy",
        }
        if upstream.get("scopes_supported"):
            document["scopes_supported"] = upstream["scopes_supported"]
        return document

    async def _upstream(self) -> dict[str, Any]:
        """The upstream's own metadata, cached; {} when it publishes none."""
        if self._upstream_metadata is not None and time.monotonic() - self._fetched_at < self.ttl:
            return self._upstream_metadata
        metadata: dict[str, Any] = {}
        for url in self._candidate_urls():
            try:
                reply = await self.http.get(url, timeout=self.settings.upstream_connect_timeout + 5)
            except httpx.HTTPError:
                continue
            if reply.status_code == 200:
                try:
                    body = reply.json()
                except ValueError:
                    continue
                if isinstance(body, dict):
                    metadata = body
                    break
        if not metadata:
            logger.warning("upstream publishes no protected-resource metadata")
        self._upstream_metadata, self._fetched_at = metadata, time.monotonic()
        return metadata

    def _candidate_urls(self) -> list[str]:
        parts = urlsplit(self.upstream_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        urls = [self._metadata_url_hint] if self._metadata_url_hint else []
        urls += [origin + WELL_KNOWN + path, origin + WELL_KNOWN]
        # Only the upstream's own origin: a challenge must not send the proxy to fetch elsewhere.
        return list(dict.fromkeys(u for u in urls if u and u.startswith(origin + "/")))
