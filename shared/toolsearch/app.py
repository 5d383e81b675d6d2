"""The Starlette app, wired: settings -> upstream, catalogs, search, the five tools, the endpoint.

The same app runs under uvicorn (`toolsearch serve`) and under Mangum in
Lambda. Everything is built once per process; nothing depends on lifespan
events, which Mangum may not deliver.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .catalogs import CatalogStore, SharedTier
from .demo import DEMO_URL, demo_app
from .endpoint import SERVER_INFO, McpEndpoint
from .oauth import WELL_KNOWN, ProtectedResource
from .response_size import ResponseSize
from .review import CatalogReview, RefreshLimiter
from .search.hybrid import Fusion
from .search.index import make_indexer
from .service import ToolService
from .settings import Settings
from .telemetry import Telemetry
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
    embedder: Any
    app: Starlette
    review: CatalogReview | None = None


def build_proxy(
    settings: Settings,
    *,
    http: httpx.AsyncClient | None = None,
    shared: SharedTier | None = None,
    embedder: Any = None,
    telemetry: Telemetry | None = None,
    response_size: ResponseSize | None = None,
) -> Proxy:
    """`response_size` counts answers where they are limited: `ResponseSize.lambda_runtime()` on Lambda."""
    telemetry = telemetry or Telemetry()
    upstream_url = settings.upstream
    if not upstream_url:
        # The embedded default: the demo upstream, in-process, through the ASGI transport.
        upstream_url = DEMO_URL
        http = http or httpx.AsyncClient(transport=httpx.ASGITransport(app=demo_app()))
    upstream = Upstream(upstream_url, settings, http=http, client_info=SERVER_INFO)
    catalogs = CatalogStore(
        settings,
        upstream.list_tools,
        make_indexer(embedder, fusion=Fusion(lexical_weight=settings.lexical_weight)),
        shared=shared,
        on_event=lambda name: telemetry.count("catalog", event=name),
    )
    service = ToolService(settings, catalogs, upstream.call_tool, response_size)
    oauth = ProtectedResource(settings, upstream_url, upstream.http)
    endpoint = McpEndpoint(settings, service, upstream_url, telemetry, oauth, response_size)
    limiter = RefreshLimiter(settings.catalog_refresh_interval, shared=shared)
    review = CatalogReview(settings, catalogs, upstream_url, oauth, telemetry, limiter)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(
            {"status": "ok", "server": SERVER_INFO, "search": "hybrid" if embedder else "lexical"}
        )

    app = Starlette(
        routes=[
            Route("/mcp", endpoint.post, methods=["POST"]),
            Route("/mcp", endpoint.not_allowed, methods=["GET", "DELETE", "PUT", "PATCH"]),
            Route(WELL_KNOWN, endpoint.protected_resource_metadata, methods=["GET"]),
            Route(WELL_KNOWN + "/mcp", endpoint.protected_resource_metadata, methods=["GET"]),
            Route("/catalog", review.page, methods=["GET"]),
            Route("/catalog/refresh", review.refresh, methods=["POST"]),
            Route("/healthz", health, methods=["GET"]),
        ]
    )
    return Proxy(settings, upstream, catalogs, service, endpoint, telemetry, embedder, app, review)


def create_app(settings: Settings, **kwargs: Any) -> Starlette:
    return build_proxy(settings, **kwargs).app
