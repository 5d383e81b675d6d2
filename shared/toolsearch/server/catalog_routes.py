"""The catalog for a person to review: `GET /catalog` (paged), `POST /catalog/refresh`,
`POST /catalog/explain` (why a query does not find a tool) and `GET /catalog/lint`.

All know the caller exactly as the MCP endpoint does, by their Authorization
header, and read the same catalog store: a reviewer sees what their own token
sees, nothing more, and needs no admin credential (the proxy has none). A 401
or 403 from the upstream comes back with the same challenge as on /mcp.

A refresh lists the caller's catalog from the upstream at once, so new tools
appear without waiting out `catalog_ttl`. It is limited to one per
`catalog_refresh_interval` seconds per caller: in memory, and across Lambda
execution environments through the shared tier's lease when there is one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import hashlib
import json
import logging
import math
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from toolsearch.callers.identity import Caller
from toolsearch.catalogs.catalog import Catalog, Tool, short_description
from toolsearch.catalogs.lint import lint
from toolsearch.catalogs.store import CatalogStore, SharedTier
from toolsearch.ops.telemetry import Telemetry
from toolsearch.ops.timing import Span
from toolsearch.search.explain import ABOVE, explain
from toolsearch.server.http_edge import HttpEdge, HttpRefusal
from toolsearch.service.finding import cut_query

logger = logging.getLogger(__name__)

DEFAULT_PAGE = 100
MAX_PAGE = 500
_NO_STORE = {"Cache-Control": "private, no-store"}


class RefreshLimiter:
    """At most one refresh per `interval` seconds per caller key."""

    def __init__(
        self,
        interval: float,
        shared: SharedTier | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 4096,
    ) -> None:
        self.interval = interval
        self._shared = shared
        self._clock = clock
        self._max_keys = max_keys
        self._last: dict[str, float] = {}

    async def wait_for(self, key: str) -> float:
        """0 when `key` may refresh now (and the refresh is counted), else the seconds left to wait."""
        if self.interval <= 0:
            return 0.0
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            return self.interval - (now - last)
        if self._shared is not None:
            # A lease nobody releases: whoever takes it first refreshes; it lapses after the interval.
            gate = hashlib.sha256(f"refresh\n{key}".encode()).hexdigest()
            if not await self._shared.try_lease(gate, uuid.uuid4().hex, self.interval):
                return self.interval
        self._remember(key, now)
        return 0.0

    def _remember(self, key: str, now: float) -> None:
        self._last[key] = now
        if len(self._last) > self._max_keys:
            self._last = {k: t for k, t in self._last.items() if now - t < self.interval}


def encode_cursor(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise HttpRefusal(400, "invalid_arguments", "cursor is not one this endpoint gave") from exc


def page_of(catalog: Catalog, cursor: str | None, limit: int) -> tuple[list[Tool], str | None]:
    """The tools after the cursor's name, in name order, and the cursor of the next page.

    A cursor names the last tool shown rather than a position, so a page stays right when the
    catalog is refreshed between two requests (tools are sorted by name).
    """
    names = [tool.name for tool in catalog.tools]
    start = 0 if cursor is None else bisect.bisect_right(names, decode_cursor(cursor))
    page = list(catalog.tools[start : start + limit])
    more = start + limit < len(catalog.tools)
    return page, encode_cursor(page[-1].name) if more and page else None


def tool_row(tool: Tool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "readOnly": tool.read_only,
        "title": tool.title,
        "description": short_description(tool.description),
    }


def _limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_PAGE
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
        raise HttpRefusal(400, "invalid_arguments", f"limit must be a whole number from 1 to {MAX_PAGE}")
    return int(raw)


MAX_EXPLAIN_BODY = 16_384  # a query, a tool name and a number; max_query_chars bounds the query itself


async def _explain_request(request: Request, max_query_chars: int) -> dict[str, Any]:
    """The request's query, tool and `above`, read bounded; anything else is a 400 with the reason."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_EXPLAIN_BODY:
            raise HttpRefusal(413, "too_large", f"Request body over {MAX_EXPLAIN_BODY} bytes")
    try:
        asked = json.loads(bytes(body))
    except (ValueError, RecursionError) as exc:
        raise HttpRefusal(400, "invalid_arguments", "the body is not JSON") from exc
    if (
        not isinstance(asked, dict)
        or not isinstance(asked.get("query"), str)
        or not isinstance(asked.get("tool"), str)
    ):
        raise HttpRefusal(400, "invalid_arguments", 'give {"query": "...", "tool": "..."}')
    above = asked.get("above", ABOVE)
    if not isinstance(above, int) or isinstance(above, bool) or not 0 <= above <= 50:
        raise HttpRefusal(400, "invalid_arguments", "above must be a whole number from 0 to 50")
    return {"query": asked["query"], "tool": asked["tool"], "above": above}


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class CatalogRoutes:
    """`GET /catalog` and `POST /catalog/refresh`, for the caller the request's Authorization names."""

    def __init__(
        self,
        catalogs: CatalogStore,
        edge: HttpEdge,
        telemetry: Telemetry,
        limiter: RefreshLimiter,
        max_query_chars: int = 500,
    ) -> None:
        self.catalogs = catalogs
        self.edge = edge
        self.telemetry = telemetry
        self.limiter = limiter
        self.max_query_chars = max_query_chars

    async def explain(self, request: Request) -> JSONResponse:
        """POST /catalog/explain {"query", "tool", "above"?}: why the query does (not) find the tool."""

        async def run(caller: Caller) -> dict[str, Any]:
            asked = await _explain_request(request, self.max_query_chars)
            entry = await self.catalogs.get(caller)
            query = cut_query(asked["query"], self.max_query_chars)
            # Ranking a query costs what a search_tools call costs: off the event loop, as a long one.
            return await asyncio.to_thread(
                explain, entry.catalog, entry.index, query, asked["tool"], asked["above"]
            )

        return await self._answer(request, "catalog_explain", run)

    async def lint(self, request: Request) -> JSONResponse:
        """GET /catalog/lint: the caller's catalog checked for what keeps search from finding tools."""

        async def run(caller: Caller) -> dict[str, Any]:
            catalog = (await self.catalogs.get(caller)).catalog
            findings = await asyncio.to_thread(lint, catalog)
            return {"total": len(catalog), "findings": [finding.as_dict() for finding in findings]}

        return await self._answer(request, "catalog_lint", run)

    async def page(self, request: Request) -> JSONResponse:
        async def run(caller: Caller) -> dict[str, Any]:
            limit = _limit(request.query_params.get("limit"))
            cursor = request.query_params.get("cursor") or None
            catalog = (await self.catalogs.get(caller)).catalog
            page, next_cursor = page_of(catalog, cursor, limit)
            body: dict[str, Any] = {
                "tools": [tool_row(tool) for tool in page],
                "total": len(catalog),
                "fetchedAt": _iso(catalog.fetched_at),
            }
            if next_cursor:
                body["nextCursor"] = next_cursor
            return body

        return await self._answer(request, "catalog_review", run)

    async def refresh(self, request: Request) -> JSONResponse:
        async def run(caller: Caller) -> dict[str, Any]:
            wait = await self.limiter.wait_for(caller.key)
            if wait > 0:
                seconds = max(1, math.ceil(wait))
                raise HttpRefusal(
                    429,
                    "rate_limited",
                    f"This catalog was refreshed moments ago; try again in {seconds} s.",
                    {"Retry-After": str(seconds)},
                )
            before = self.catalogs.cached(caller.key)
            catalog = (await self.catalogs.refresh(caller)).catalog
            body: dict[str, Any] = {
                "refreshed": True,
                "total": len(catalog),
                "fetchedAt": _iso(catalog.fetched_at),
            }
            if before is not None:
                old, new = set(before.catalog.by_name), set(catalog.by_name)
                body["added"] = sorted(new - old)
                body["removed"] = sorted(old - new)
            return body

        return await self._answer(request, "catalog_refresh", run)

    async def _answer(self, request: Request, metric: str, run: Callable[[Caller], Any]) -> JSONResponse:
        span = Span()
        outcome = "ok"
        try:
            self.edge.check_origin(request)
            caller = await self.edge.caller(request)
            body = await run(caller)
            return JSONResponse(body, headers=_NO_STORE)
        except Exception as exc:
            error = await self.edge.answer_for(request, exc)  # our errors as the edge answers them
            if error is None:
                raise
            outcome = error.kind
            return JSONResponse(
                {"error": {"kind": error.kind, "message": error.message}},
                status_code=error.status,
                headers={**_NO_STORE, **error.headers},
            )
        finally:
            self.telemetry.count(metric, outcome=outcome)
            fields = {"route": metric, "outcome": outcome, "ms": span.logged_ms}
            logger.info("catalog route answered", extra=fields)
