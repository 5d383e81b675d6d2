"""The Starlette app, wired: settings -> upstream, catalogs, search, the tools, the endpoint.

The one place that reads `Settings` to build the parts: each part takes its own
group of settings as it is (`settings.upstream` an `UpstreamConfig`, `settings.catalog`
a `CatalogConfig`, ...), the way httpx passes `Timeout` and `Limits`. The same app runs under uvicorn
(`toolsearch serve`) and under Mangum in Lambda. Everything is built once per
process; nothing depends on lifespan events, which Mangum may not deliver.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolsearch.catalogs.search_words import load_search_words
from toolsearch.catalogs.store import CatalogSource, CatalogStore, Indexer, SharedTier
from toolsearch.mcp import protocol as P
from toolsearch.ops.telemetry import Telemetry
from toolsearch.server.authenticators import (
    CallerAuthenticator,
    ForwardingAuthenticator,
    ValidatingAuthenticator,
)
from toolsearch.server.catalog_routes import CatalogRoutes, RefreshLimiter
from toolsearch.server.demo import DEMO_URL, demo_app
from toolsearch.server.endpoint import McpEndpoint
from toolsearch.server.http_edge import HttpEdge
from toolsearch.server.oauth import WELL_KNOWN, ProtectedResource, resource_of
from toolsearch.server.response_size import ResponseSize
from toolsearch.service.fairness import FairUse
from toolsearch.service.tool_service import ToolService
from toolsearch.service.upstream_calls import ToolCaller, UpstreamCalls

from .auth.audience import AcceptedAudiences, WitnessingUpstream
from .auth.client_credentials import ClientCredentials
from .auth.exchange import ExchangeConfig, TokenExchanger
from .auth.exchanging import ExchangingUpstream
from .auth.http_json import auth_server_client
from .auth.tokens import IntrospectionValidator, RememberedExpiries, TokenValidator
from .search import Embedder
from .search.embedding import single_threaded_blas
from .search.hybrid import Fusion
from .search.index import make_indexer
from .settings import Settings
from .upstream import Upstream

logger = logging.getLogger(__name__)


@dataclass
class Proxy:
    """Everything one process holds: what tests and the Lambda handler reach into."""

    settings: Settings
    upstream: Upstream
    catalogs: CatalogStore
    service: ToolService
    endpoint: McpEndpoint
    telemetry: Telemetry
    oauth: ProtectedResource
    embedder: Embedder | None
    app: Starlette


def tool_service(
    settings: Settings,
    catalogs: CatalogStore,
    upstream: ToolCaller,
    telemetry: Telemetry,
    size: ResponseSize | None = None,
) -> ToolService:
    """The five tools (and pinned ones) over a catalog store, calling `upstream`."""
    size_of = (size or ResponseSize.local()).of
    fair = FairUse(settings.fair_use)
    calls = UpstreamCalls(catalogs, upstream, settings.tools, settings.upstream, size_of, fair)
    return ToolService(settings.tools, catalogs, calls, telemetry)


def catalog_store(
    settings: Settings,
    source: CatalogSource,
    indexer: Indexer,
    *,
    shared: SharedTier | None = None,
    clock: Callable[[], float] = time.time,
    on_event: Callable[[str], None] | None = None,
) -> CatalogStore:
    """Callers' catalogs listed from `source`; a shared-tier lease outlives one listing's deadline."""
    lease = settings.upstream.timeout * 2  # a listing takes at most upstream_timeout: room to store it
    return CatalogStore(
        settings.catalog, source, indexer, shared=shared, clock=clock, on_event=on_event, lease_seconds=lease
    )


def exchange_mode(
    settings: Settings, upstream: Upstream, oauth: ProtectedResource, http: httpx.AsyncClient
) -> tuple[ValidatingAuthenticator, ExchangingUpstream]:
    """Exchange mode's parts: callers' tokens validated as the proxy's, exchanged for the upstream's."""
    auth, public_url = settings.auth, settings.oauth.public_url
    required = {"public_url": public_url, "oauth_issuer": auth.issuer}
    required |= {"oauth_token_url": auth.token_url, "oauth_client_id": auth.client_id}
    missing = [name for name, value in required.items() if not value]
    if not (auth.jwks_url or auth.introspection_url):
        missing.append("oauth_jwks_url or oauth_introspection_url")
    if not (auth.client_secret or auth.client_secret_arn):
        missing.append("oauth_client_secret or oauth_client_secret_arn")
    if missing:
        raise ValueError("auth_mode exchange needs " + ", ".join(missing))
    credentials = ClientCredentials(
        auth.client_id,
        auth.client_secret,
        secret_arn=auth.client_secret_arn,
        method=auth.client_auth,
        wait=auth.timeout,
    )
    # The audience is the configured public URL, never one derived from a request's Host header:
    # a caller could otherwise name the audience its token happens to have.
    resource = resource_of(public_url)
    validator: TokenValidator
    if auth.introspection_url:
        validator = IntrospectionValidator(
            http,
            auth.introspection_url,
            issuer=auth.issuer,
            resource=resource,
            client_auth=credentials,
            timeout=auth.timeout,
            cache_ttl=auth.introspection_cache_ttl,
        )
    else:
        # Here, not at the top: PyJWT and cryptography take a while to import, and forwarding needs neither.
        from .auth.jwks import KeySet
        from .auth.jwt_validation import JwtValidator

        keys = KeySet(http, auth.jwks_url, timeout=auth.timeout)
        validator = JwtValidator(keys, issuer=auth.issuer, resource=resource)
    upstream_resource = auth.resource or upstream.url
    exchange = ExchangeConfig(
        auth.token_url, upstream_resource, audience=auth.audience, scope=auth.scope, timeout=auth.timeout
    )
    exchanger = TokenExchanger(exchange, http, credentials)
    remembered = RememberedExpiries(validator)
    authenticator = ValidatingAuthenticator(
        upstream.url, oauth, remembered, auth.issuer, ready=credentials.secret
    )
    return authenticator, ExchangingUpstream(
        upstream, exchanger, upstream_resource, expires_at=remembered.expires_at
    )


def build_proxy(
    settings: Settings,
    *,
    http: httpx.AsyncClient | None = None,
    shared: SharedTier | None = None,
    embedder: Embedder | None = None,
    telemetry: Telemetry | None = None,
    response_size: ResponseSize | None = None,
    auth_http: httpx.AsyncClient | None = None,
) -> Proxy:
    """`response_size` counts answers where they are limited: `ResponseSize.lambda_runtime()` on Lambda.
    `auth_http` reaches the authorization server in exchange mode (its own client by default)."""
    search_words = load_search_words(settings.search.search_words_file)  # first: a bad file stops start-up
    telemetry = telemetry or Telemetry()
    size = response_size or ResponseSize.local()
    upstream_url = settings.upstream.url
    if not upstream_url:
        # The embedded default: the demo upstream, in-process, through the ASGI transport.
        upstream_url = DEMO_URL
        http = http or httpx.AsyncClient(transport=httpx.ASGITransport(app=demo_app()))
    if embedder is not None:
        single_threaded_blas()  # a process-wide knob, set once here (docs/benchmarks.md says why)
    upstream = Upstream(upstream_url, settings.upstream, http=http, client_info=P.IMPLEMENTATION)
    oauth_config, auth = settings.oauth, settings.auth
    if auth.mode == "exchange" and not oauth_config.authorization_servers and auth.issuer:
        # the server that issues the tokens the proxy accepts
        oauth_config = dataclasses.replace(oauth_config, authorization_servers=[auth.issuer])
    oauth = ProtectedResource(oauth_config, upstream_url, upstream.http)
    public_url = oauth_config.public_url
    accepted = AcceptedAudiences(resource_of(public_url) if public_url else None)
    authenticator: CallerAuthenticator
    source: ExchangingUpstream | WitnessingUpstream
    if auth.mode == "exchange":
        authenticator, source = exchange_mode(settings, upstream, oauth, auth_http or auth_server_client())
    else:
        authenticator = ForwardingAuthenticator(upstream_url, oauth)
        source = WitnessingUpstream(upstream, accepted)
    indexer = make_indexer(
        embedder,
        fusion=Fusion(lexical_weight=settings.search.lexical_weight),
        ranker=settings.search.ranker,
        search_words=search_words,
    )
    catalogs = catalog_store(
        settings, source, indexer, shared=shared, on_event=lambda name: telemetry.count("catalog", event=name)
    )
    service = tool_service(settings, catalogs, source, telemetry, size)
    edge = HttpEdge(settings.endpoint.allowed_origins, upstream_url, oauth, authenticator, accepted)
    endpoint = McpEndpoint(settings.endpoint, service, edge, telemetry, size)
    limiter = RefreshLimiter(settings.catalog.refresh_interval, shared=shared)
    catalog_routes = CatalogRoutes(catalogs, edge, telemetry, limiter, settings.tools.max_query_chars)

    async def health(request: Request) -> JSONResponse:
        search = "hybrid" if embedder is not None else "lexical"
        return JSONResponse({"status": "ok", "server": P.IMPLEMENTATION, "search": search})

    app = Starlette(
        routes=[
            Route("/mcp", endpoint.post, methods=["POST"]),
            Route("/mcp", endpoint.not_allowed, methods=["GET", "DELETE", "PUT", "PATCH"]),
            Route(WELL_KNOWN, oauth.route, methods=["GET"]),
            Route(WELL_KNOWN + "/mcp", oauth.route, methods=["GET"]),
            Route("/catalog", catalog_routes.page, methods=["GET"]),
            Route("/catalog/refresh", catalog_routes.refresh, methods=["POST"]),
            Route("/catalog/explain", catalog_routes.explain, methods=["POST"]),
            Route("/catalog/lint", catalog_routes.lint, methods=["GET"]),
            Route("/healthz", health, methods=["GET"]),
        ]
    )
    return Proxy(settings, upstream, catalogs, service, endpoint, telemetry, oauth, embedder, app)
