"""The Starlette app, wired: settings -> upstream, catalogs, search, the tools, the endpoint.

The one place that reads `Settings` to build the parts: each part gets a small
config of its own (`UpstreamConfig`, `CatalogConfig`, `ToolsConfig`...), the
way httpx passes `Timeout` and `Limits`. The same app runs under uvicorn
(`toolsearch serve`) and under Mangum in Lambda. Everything is built once per
process; nothing depends on lifespan events, which Mangum may not deliver.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from . import protocol as P
from .auth.audience import AcceptedAudiences, WitnessingUpstream
from .auth.client_credentials import ClientCredentials
from .auth.exchange import ExchangeConfig, TokenExchanger
from .auth.exchanging import ExchangingUpstream
from .auth.http_json import auth_server_client
from .auth.tokens import IntrospectionValidator, RememberedExpiries, TokenValidator
from .authenticators import CallerAuthenticator, ForwardingAuthenticator, ValidatingAuthenticator
from .calling import CallLimits, ToolCaller, UpstreamCalls
from .catalog_routes import CatalogRoutes, RefreshLimiter
from .catalog_store import CatalogConfig, CatalogStore, SharedTier
from .demo import DEMO_URL, demo_app
from .endpoint import EndpointConfig, McpEndpoint
from .fairness import FairUse, FairUseConfig
from .http_edge import HttpEdge
from .oauth import WELL_KNOWN, OAuthConfig, ProtectedResource, resource_of
from .response_size import ResponseSize
from .search import Embedder
from .search.embedding import single_threaded_blas
from .search.hybrid import Fusion
from .search.index import make_indexer
from .search_words import load_search_words
from .service import ToolsConfig, ToolService
from .settings import Settings
from .telemetry import Telemetry
from .upstream import Upstream, UpstreamConfig

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


def upstream_config(settings: Settings) -> UpstreamConfig:
    return UpstreamConfig(
        timeout=settings.upstream_timeout,
        connect_timeout=settings.upstream_connect_timeout,
        list_retries=settings.list_retries,
        max_list_pages=settings.max_list_pages,
        max_result_bytes=settings.max_result_bytes,
        max_catalog_bytes=settings.max_catalog_bytes,
        max_catalog_tools=settings.max_catalog_tools,
        era_ttl=settings.upstream_era_ttl,
    )


def catalog_config(settings: Settings) -> CatalogConfig:
    return CatalogConfig(
        ttl=settings.catalog_ttl,
        max_age=settings.catalog_max_age,
        memory_entries=max(1, settings.catalog_memory_entries),
        write_tools=frozenset(settings.write_tools),
        read_tools=frozenset(settings.read_tools),
        # A listing takes at most upstream_timeout: the lease outlives one, with room to store it.
        lease_seconds=settings.upstream_timeout * 2,
        unauthorized_ttl=settings.unauthorized_ttl,
        memory_per_caller=max(1, settings.catalog_memory_per_caller),
        stranger_refusals=max(0, settings.stranger_refusals),
        stranger_window=settings.stranger_window,
    )


def fair_use_config(settings: Settings) -> FairUseConfig:
    return FairUseConfig(
        concurrency=settings.caller_concurrency, rate=settings.caller_rate, burst=settings.caller_burst
    )


def tools_config(settings: Settings) -> ToolsConfig:
    return ToolsConfig(
        max_batch_calls=settings.max_batch_calls,
        max_query_chars=settings.max_query_chars,
        search_schemas=settings.search_schemas,
        max_instructions=settings.max_instructions,
        pinned_tools=tuple(settings.pinned_tools),
        always_load_tools=settings.always_load_tools,
        list_ttl=settings.catalog_ttl,
    )


def tool_service(
    settings: Settings,
    catalogs: CatalogStore,
    upstream: ToolCaller,
    telemetry: Telemetry,
    size: ResponseSize | None = None,
) -> ToolService:
    """The five tools (and pinned ones) over a catalog store, calling `upstream`."""
    limits = CallLimits(settings.validation_timeout, settings.upstream_timeout, settings.max_result_bytes)
    calls = UpstreamCalls(
        catalogs, upstream, limits, (size or ResponseSize.local()).of, FairUse(fair_use_config(settings))
    )
    return ToolService(tools_config(settings), catalogs, calls, telemetry)


def exchange_mode(
    settings: Settings, upstream: Upstream, oauth: ProtectedResource, http: httpx.AsyncClient
) -> tuple[ValidatingAuthenticator, ExchangingUpstream]:
    """Exchange mode's parts: callers' tokens validated as the proxy's, exchanged for the upstream's."""
    missing = [
        name
        for name in ("public_url", "oauth_issuer", "oauth_token_url", "oauth_client_id")
        if not getattr(settings, name)
    ]
    if not (settings.oauth_jwks_url or settings.oauth_introspection_url):
        missing.append("oauth_jwks_url or oauth_introspection_url")
    if not (settings.oauth_client_secret or settings.oauth_client_secret_arn):
        missing.append("oauth_client_secret or oauth_client_secret_arn")
    if missing:
        raise ValueError("auth_mode exchange needs " + ", ".join(missing))
    credentials = ClientCredentials(
        settings.oauth_client_id,
        settings.oauth_client_secret,
        secret_arn=settings.oauth_client_secret_arn,
        method=settings.oauth_client_auth,
        wait=settings.oauth_timeout,
    )
    # The audience is the configured public URL, never one derived from a request's Host header:
    # a caller could otherwise name the audience its token happens to have.
    resource = resource_of(settings.public_url)
    validator: TokenValidator
    if settings.oauth_introspection_url:
        validator = IntrospectionValidator(
            http,
            settings.oauth_introspection_url,
            issuer=settings.oauth_issuer,
            resource=resource,
            client_auth=credentials,
            timeout=settings.oauth_timeout,
            cache_ttl=settings.introspection_cache_ttl,
        )
    else:
        # Here, not at the top: PyJWT and cryptography take a while to import, and forwarding needs neither.
        from .auth.jwks import KeySet
        from .auth.jwt_validation import JwtValidator

        keys = KeySet(http, settings.oauth_jwks_url, timeout=settings.oauth_timeout)
        validator = JwtValidator(keys, issuer=settings.oauth_issuer, resource=resource)
    upstream_resource = settings.exchange_resource or upstream.url
    exchange = ExchangeConfig(
        settings.oauth_token_url,
        upstream_resource,
        audience=settings.exchange_audience,
        scope=settings.exchange_scope,
        timeout=settings.oauth_timeout,
    )
    exchanger = TokenExchanger(exchange, http, credentials)
    remembered = RememberedExpiries(validator)
    authenticator = ValidatingAuthenticator(
        upstream.url, oauth, remembered, settings.oauth_issuer, ready=credentials.secret
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
    search_words = load_search_words(settings.search_words_file)  # first: a bad file stops start-up
    telemetry = telemetry or Telemetry()
    size = response_size or ResponseSize.local()
    upstream_url = settings.upstream
    if not upstream_url:
        # The embedded default: the demo upstream, in-process, through the ASGI transport.
        upstream_url = DEMO_URL
        http = http or httpx.AsyncClient(transport=httpx.ASGITransport(app=demo_app()))
    if embedder is not None:
        single_threaded_blas()  # a process-wide knob, set once here (docs/benchmarks.md says why)
    upstream = Upstream(upstream_url, upstream_config(settings), http=http, client_info=P.IMPLEMENTATION)
    servers = tuple(settings.authorization_servers)
    if settings.auth_mode == "exchange" and not servers and settings.oauth_issuer:
        servers = (settings.oauth_issuer,)  # the server that issues the tokens the proxy accepts
    oauth_config = OAuthConfig(settings.public_url, servers, settings.oauth_metadata_timeout)
    oauth = ProtectedResource(oauth_config, upstream_url, upstream.http)
    accepted = AcceptedAudiences(resource_of(settings.public_url) if settings.public_url else None)
    authenticator: CallerAuthenticator
    source: ExchangingUpstream | WitnessingUpstream
    if settings.auth_mode == "exchange":
        authenticator, source = exchange_mode(settings, upstream, oauth, auth_http or auth_server_client())
    else:
        authenticator = ForwardingAuthenticator(upstream_url, oauth)
        source = WitnessingUpstream(upstream, accepted)
    catalogs = CatalogStore(
        catalog_config(settings),
        source,
        make_indexer(
            embedder,
            fusion=Fusion(lexical_weight=settings.lexical_weight),
            ranker=settings.ranker,
            search_words=search_words,
        ),
        shared=shared,
        on_event=lambda name: telemetry.count("catalog", event=name),
    )
    service = tool_service(settings, catalogs, source, telemetry, size)
    edge = HttpEdge(settings.allowed_origins, upstream_url, oauth, authenticator, accepted)
    endpoint_config = EndpointConfig(settings.max_body_bytes, settings.request_read_timeout)
    endpoint = McpEndpoint(endpoint_config, service, edge, telemetry, size)
    limiter = RefreshLimiter(settings.catalog_refresh_interval, shared=shared)
    catalog_routes = CatalogRoutes(catalogs, edge, telemetry, limiter, settings.max_query_chars)

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
