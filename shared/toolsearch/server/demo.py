"""The built-in demo upstream: an MCP server with a few hundred made-up tools.

It serves the evaluation catalog (`data/catalog/*.json`, one file per domain)
so that `toolsearch serve` shows the whole proxy working with no network and
no AWS. Tools do nothing real: a call answers with what it would have done.
It runs in the same process; the proxy reaches it through httpx's ASGI
transport, so no port is opened for it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from toolsearch.mcp import protocol as P

DEMO_URL = "http://demo.invalid/mcp"  # never resolved: requests go through the ASGI transport
PAGE_SIZE = 100
INSTRUCTIONS = (
    "Demo upstream of mcp-toolsearch-proxy: made-up tools across many domains (calendar, email, CI, "
    "payments, travel, smart home and more). Calls do nothing real; each answers with what it would do."
)


@lru_cache(maxsize=1)
def demo_tools() -> tuple[dict[str, Any], ...]:
    folder = resources.files("toolsearch") / "data" / "catalog"
    tools: list[dict[str, Any]] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            tools.extend(json.loads(entry.read_text(encoding="utf-8")))
    return tuple(tools)


def _result(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    summary = f"[demo] {name} ran with {len(arguments)} argument(s); a real server would act here."
    return {
        "content": [P.text_content(summary)],
        "structuredContent": {"tool": name, "arguments": arguments, "demo": True},
        "isError": False,
    }


async def _handle(request: Request) -> Response:
    try:
        message = json.loads(await request.body())
    except (UnicodeDecodeError, json.JSONDecodeError):
        return JSONResponse(P.error_response(None, P.RpcError(P.PARSE_ERROR, "Parse error")), status_code=400)
    if not isinstance(message, dict) or "method" not in message:
        return JSONResponse(
            P.error_response(None, P.RpcError(P.INVALID_REQUEST, "Invalid request")), status_code=400
        )
    if "id" not in message:
        return Response(status_code=202)
    method, params, request_id = message["method"], message.get("params") or {}, message["id"]
    modern = isinstance(params.get("_meta"), dict) and P.META_PROTOCOL_VERSION in params["_meta"]
    tools = demo_tools()
    if method == "server/discover":
        result: dict[str, Any] = {
            "supportedVersions": list(P.SUPPORTED_VERSIONS),
            "capabilities": {"tools": {}},
            "instructions": INSTRUCTIONS,
            "ttlMs": 600_000,
            "cacheScope": "public",
        }
    elif method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion") or P.LEGACY_VERSIONS[0],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "toolsearch-demo", "version": "1"},
            "instructions": INSTRUCTIONS,
        }
    elif method == "tools/list":
        cursor = params.get("cursor") or "0"
        start = int(cursor) if cursor.isdigit() else 0
        result = {"tools": list(tools[start : start + PAGE_SIZE])}
        if start + PAGE_SIZE < len(tools):
            result["nextCursor"] = str(start + PAGE_SIZE)
        if modern:
            result.update(ttlMs=600_000, cacheScope="public")
    elif method == "tools/call":
        name = params.get("name")
        if not isinstance(name, str) or not any(tool["name"] == name for tool in tools):
            error = P.RpcError(P.INVALID_PARAMS, f"Unknown tool: {name}")
            return JSONResponse(P.error_response(request_id, error))
        result = _result(name, params.get("arguments") or {})
    elif method == "ping":
        result = {}
    else:
        error = P.RpcError(P.METHOD_NOT_FOUND, f"Method not found: {method}", http_status=404)
        return JSONResponse(P.error_response(request_id, error), status_code=404)
    if modern:
        result["resultType"] = "complete"
    return JSONResponse(P.response(request_id, result))


def demo_app() -> Starlette:
    return Starlette(routes=[Route("/mcp", _handle, methods=["POST"])])
