"""`HttpRefusal`: a request refused before or instead of an answer, in any route's body format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolsearch.errors import ToolsearchError
from toolsearch.mcp import protocol as P


@dataclass
class HttpRefusal(ToolsearchError):
    """A request refused before or instead of an answer: its status, a kind and a sentence."""

    status: int
    kind: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    code: int = P.INVALID_REQUEST  # the JSON-RPC code when the route speaks JSON-RPC
    data: Any = None
