"""OAuth discovery through the proxy (RFC 9728 protected-resource metadata).

Clients that sign in with OAuth (claude.ai, Claude Code, the MCP Inspector)
connect to the proxy's URL, get a 401, and follow its `WWW-Authenticate` to
metadata that names the authorization server. The proxy has no authorization
server of its own: it names the upstream's (read from the upstream's own
metadata by `metadata_relay`, or set by the operator), but as a resource it
names itself, so the client asks for a token whose audience is the proxy's URL.
In forwarding mode the upstream must accept such tokens (docs/security.md says
how that squares with the MCP rule against token passthrough); in exchange mode
the proxy validates them itself and names its own issuer.

Without `public_url`, the proxy's URL comes from the request's
`X-Forwarded-Proto`/`X-Forwarded-Host`/`Host`, which a client controls: each is
used only when it is a plain scheme or host, every value put in a challenge is
quoted and escaped, and a document built from request headers is never left in
a shared cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from toolsearch.auth.metadata_relay import MetadataRelay
from toolsearch.callers.challenge import parse_challenge, quoted
from toolsearch.settings import OAuthConfig

WELL_KNOWN = "/.well-known/oauth-protected-resource"
MCP_PATH = "/mcp"
_KEPT_CHALLENGE_PARAMS = ("scope", "error", "error_description")
_MAX_PARAM_CHARS = 1024
# RFC 3986 host (a reg-name of unreserved characters and %-escapes, or an IPv6 literal), then an
# optional port. Sub-delimiters (`,;'!&...`), legal in a reg-name but in no real host name, are refused.
_HOST = re.compile(r"(?:(?:[A-Za-z0-9._~-]|%[0-9A-Fa-f]{2}){1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?")
_SCHEMES = ("http", "https")
# What a client or shared cache may do with the metadata document (see docs/security.md).
CACHE_SHARED = "public, max-age=300"
CACHE_PRIVATE = "private, max-age=300"
CACHE_NONE = "no-store"


def _echoable(value: str) -> bool:
    # Only printable ASCII goes back into a header: no CR/LF, no byte a front end might re-encode.
    return len(value) <= _MAX_PARAM_CHARS and all(0x20 <= ord(ch) <= 0x7E for ch in value)


def _first(value: str | None) -> str:
    # A proxy chain appends: "client-said, proxy-said"; the first one names the client's view.
    return (value or "").split(",")[0].strip(" \t")


def forwarded_origin(request: Request) -> str:
    """The proxy's origin from the request's headers, each used only when it is well formed."""
    proto = _first(request.headers.get("x-forwarded-proto")).lower()
    if proto not in _SCHEMES:
        # The scope's scheme, not request.url: building that URL parses the Host header we distrust.
        scheme = request.scope.get("scheme")
        proto = scheme if scheme in _SCHEMES else "http"
    for candidate in (request.headers.get("x-forwarded-host"), request.headers.get("host")):
        host = _first(candidate)
        if host and _is_host(host):
            return f"{proto}://{host}"
    server = request.scope.get("server")
    if server and _is_host(f"{server[0]}:{server[1]}"):
        return f"{proto}://{server[0]}:{server[1]}"
    return f"{proto}://localhost"


def _is_host(value: str) -> bool:
    if not _HOST.fullmatch(value):
        return False
    port = value.rpartition(":")[2] if not value.endswith("]") and ":" in value else ""
    return not port or int(port) <= 65535


def resource_of(public_url: str) -> str:
    """The resource the proxy's metadata names for a public URL: its origin and the MCP path."""
    parts = urlsplit(public_url)
    return f"{parts.scheme}://{parts.netloc}{MCP_PATH}"


@dataclass(frozen=True, slots=True)
class MetadataDocument:
    body: dict[str, Any]
    cache_control: str


class ProtectedResource:
    """Serves the proxy's metadata and rewrites the upstream's 401 challenges to point at it."""

    def __init__(self, config: OAuthConfig, upstream_url: str, http: httpx.AsyncClient) -> None:
        self.config = config
        self.upstream_url = upstream_url
        self._metadata_url_hint: str | None = None
        self.relay = MetadataRelay(http, self.candidate_urls, deadline=config.metadata_timeout)

    async def route(self, request: Request) -> Response:
        """`GET /.well-known/oauth-protected-resource[/mcp]`: the metadata document."""
        document = await self.metadata(request)
        return JSONResponse(document.body, headers={"Cache-Control": document.cache_control})

    def base(self, request: Request) -> str:
        if self.config.public_url:
            parts = urlsplit(self.config.public_url)
            return f"{parts.scheme}://{parts.netloc}"
        return forwarded_origin(request)

    def resource(self, request: Request) -> str:
        return self.base(request) + MCP_PATH

    def metadata_url(self, request: Request) -> str:
        return self.base(request) + WELL_KNOWN + MCP_PATH

    def challenge(
        self, request: Request, upstream_challenge: str | None, params: dict[str, str] | None = None
    ) -> str:
        """Our challenge for the upstream's refusal: its scope and error (or `params` in their place),
        our resource metadata."""
        upstream = parse_challenge(upstream_challenge)
        hint = upstream.get("resource_metadata")
        if hint and _echoable(hint):
            self._metadata_url_hint = hint
        return self.challenge_with(request, upstream if params is None else params)

    def challenge_with(self, request: Request, params: dict[str, str]) -> str:
        """A challenge naming our resource metadata, with `params`' scope, error and error_description."""
        kept = {key: params[key] for key in _KEPT_CHALLENGE_PARAMS if params.get(key)}
        return self._challenge(request, kept)

    async def upstream_resource(self) -> str | None:
        """The `resource` the upstream's own metadata names, when it publishes one."""
        upstream, _ = await self.relay.get()
        return upstream.resource

    def invalid_request(self, request: Request, description: str) -> str:
        """A challenge for a request whose credentials are malformed (RFC 6750 §3.1, with 400)."""
        return self._challenge(request, {"error": "invalid_request", "error_description": description})

    def _challenge(self, request: Request, params: dict[str, str]) -> str:
        parts = [f"resource_metadata={quoted(self.metadata_url(request))}"]
        parts += [f"{key}={quoted(value)}" for key, value in params.items() if _echoable(value)]
        return "Bearer " + ", ".join(parts)

    async def metadata(self, request: Request) -> MetadataDocument:
        upstream, current = await self.relay.get()
        servers = list(self.config.authorization_servers) or list(upstream.authorization_servers)
        body: dict[str, Any] = {
            "resource": self.resource(request),
            "authorization_servers": servers,
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-toolsearch-proxy",
        }
        if upstream.scopes_supported:
            body["scopes_supported"] = list(upstream.scopes_supported)
        if not current:
            # What the upstream says could not be read just now: nobody may keep this copy.
            cache = CACHE_NONE
        elif self.config.public_url:
            cache = CACHE_SHARED  # built from settings and the upstream alone: the same for everyone
        else:
            cache = CACHE_PRIVATE  # built from this request's headers: for this client only
        return MetadataDocument(body, cache)

    def candidate_urls(self) -> list[str]:
        parts = urlsplit(self.upstream_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        urls = [self._metadata_url_hint] if self._metadata_url_hint else []
        urls += [origin + WELL_KNOWN + path, origin + WELL_KNOWN]
        # Only the upstream's own origin: a challenge must not send the proxy to fetch elsewhere.
        return list(dict.fromkeys(u for u in urls if u and u.startswith(origin + "/")))
