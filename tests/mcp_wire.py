"""Hand-built MCP requests, for tests that check the wire itself."""

from __future__ import annotations

import base64
import itertools
from typing import Any

MODERN = "2026-07-28"
_ids = itertools.count(1)


def modern(
    method: str, params: dict[str, Any] | None = None, *, name_header: str | None = None
) -> dict[str, Any]:
    """Keyword arguments for httpx .post(): body and headers of a 2026-07-28 request."""
    params = dict(params or {})
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "wire-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
        **params.get("_meta", {}),
    }
    headers = {
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
        "Accept": "application/json, text/event-stream",
    }
    if method == "tools/call":
        headers["Mcp-Name"] = name_header if name_header is not None else params["name"]
    return {
        "json": {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params},
        "headers": headers,
    }


def legacy(
    method: str, params: dict[str, Any] | None = None, *, version: str | None = "2025-11-25"
) -> dict[str, Any]:
    headers = {"Accept": "application/json, text/event-stream"}
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    return {
        "json": {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params or {}},
        "headers": headers,
    }


def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return modern("tools/call", {"name": tool, "arguments": arguments})


def b64_sentinel(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="
