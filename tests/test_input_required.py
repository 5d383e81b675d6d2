"""An upstream answering a call with input_required (multi round-trip) gives the model a readable error."""

from __future__ import annotations

import json

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from fixtures.mcp_wire import call
from toolsearch.app import build_proxy
from toolsearch.settings import Settings

TOOL = {
    "name": "confirm_order",
    "description": "Confirms an order after asking the user.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}


async def upstream(request: Request) -> JSONResponse:
    message = json.loads(await request.body())
    method = message["method"]
    if method == "server/discover":
        result = {
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "ttlMs": 0,
            "cacheScope": "public",
        }
    elif method == "tools/list":
        result = {"tools": [TOOL], "ttlMs": 0, "cacheScope": "public"}
    else:  # tools/call: the server needs the user's answer first
        result = {
            "resultType": "input_required",
            "inputRequests": {"ask": {"method": "elicitation/create", "params": {"message": "Sure?"}}},
        }
    return JSONResponse(
        {"jsonrpc": "2.0", "id": message["id"], "result": {"resultType": "complete", **result}}
    )


async def test_input_required_becomes_an_error_result():
    app = Starlette(routes=[Route("/mcp", upstream, methods=["POST"])])
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
    proxy = build_proxy(Settings(upstream="http://upstream.invalid/mcp"), http=http)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=proxy.app), base_url="http://t") as client:
        reply = await client.post("/mcp", **call("call_read_tool", {"name": "confirm_order"}))
    result = reply.json()["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["kind"] == "input_required"
    assert "inputRequests" not in json.dumps(result)
