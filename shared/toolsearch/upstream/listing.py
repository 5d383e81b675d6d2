"""One caller's tool listing as read from the upstream: the tools kept, those dropped and why.

A tool is kept only when the proxy can list and call it safely: a name, first
of its name, an object for an input schema, nesting within `nesting.MAX_DEPTH`,
and `x-mcp-header` marks that follow the spec. The rest are dropped with a
reason, logged by name only, and the catalog goes on without them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from toolsearch.mcp import param_headers
from toolsearch.validation.nesting import too_deep

from .errors import UpstreamError

log = logging.getLogger("toolsearch.upstream")


@dataclass(frozen=True)
class Listing:
    tools: list[dict]  # valid tool definitions, in upstream order, first of each name kept
    instructions: str  # the upstream's instructions ("" if none)
    dropped: list[tuple[str, str]]  # (tool name, reason) for tools left out


def catalog_too_large(what: str, setting: str) -> UpstreamError:
    return UpstreamError(
        "too_large",
        f"the upstream's tool list for this caller is too large: {what} (the proxy's {setting} setting)",
    )


def clean_listing(pages: list[list[Any]]) -> Listing:
    """Valid tools in upstream order; the rest dropped with a reason (logged by name only)."""
    tools: list[dict] = []
    dropped: list[tuple[str, str]] = []
    seen: set[str] = set()
    for page in pages:
        for tool in page:
            name = tool.get("name") if isinstance(tool, dict) else None
            reason = _invalid(tool, name, seen)
            if reason is not None:
                shown = name if isinstance(name, str) and name else "(no name)"
                dropped.append((shown, reason))
                log.warning("upstream tool dropped", extra={"tool": shown, "reason": reason})
                continue
            seen.add(str(name))
            tools.append(tool)
    return Listing(tools=tools, instructions="", dropped=dropped)


def _invalid(tool: Any, name: Any, seen: set[str]) -> str | None:
    if not isinstance(name, str) or not name:
        return "no name"
    if name in seen:
        return "duplicate name (the first one is kept)"
    schema = tool.get("inputSchema")
    if schema is not None and not isinstance(schema, dict):
        return "inputSchema is not an object"
    if (reason := too_deep(tool)) is not None:  # before any recursive walk of it
        return reason
    try:
        param_headers.header_params(schema)
    except param_headers.InvalidHeaderAnnotation as exc:
        return str(exc)
    return None
