"""A POST body as one JSON-RPC 2.0 request or notification, or the error that refuses it.

JSON may write a lone UTF-16 surrogate (`"\\ud800"`): it parses, but it is not
Unicode, so no answer, log line or upstream request can carry it. A message
holding one anywhere (its id, method, a key or value of its params) is refused
here, before anything runs or is sent upstream, rather than failing later in a
500 after the upstream already ran a write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from toolsearch.mcp import protocol as P


@dataclass(frozen=True, slots=True)
class Envelope:
    id: Any
    method: str
    params: dict[str, Any]
    is_notification: bool


def parse(body: bytes) -> Any:
    try:
        return P.loads_json(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError among them
        raise P.RpcError(P.PARSE_ERROR, "Parse error: the body is not JSON", http_status=400) from exc


# A JSON escape of a surrogate: only a body holding one can parse into a lone surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def envelope(message: Any, raw: bytes | None = None) -> Envelope:
    """`message` as an Envelope; `raw`, the body it was parsed from, spares the surrogate scan when
    it holds no surrogate escape (the usual case)."""
    if (raw is None or _SURROGATE_ESCAPE.search(raw)) and holds_lone_surrogate(message):
        raise P.RpcError(
            P.INVALID_REQUEST,
            "The request holds text that is not Unicode (a lone surrogate, such as \\ud800, in its id,"
            " method or params); nothing was run or sent",
            http_status=400,
        )
    if isinstance(message, list):
        raise P.RpcError(P.INVALID_REQUEST, "JSON-RPC batches are not supported", http_status=400)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise P.RpcError(P.INVALID_REQUEST, "Not a JSON-RPC 2.0 message", http_status=400)
    method = message.get("method")
    if not isinstance(method, str) or not method:
        raise P.RpcError(
            P.INVALID_REQUEST, "A request needs a method (responses are not accepted here)", http_status=400
        )
    is_notification = "id" not in message
    if not is_notification and not P.is_valid_id(message["id"]):
        raise P.RpcError(P.INVALID_REQUEST, "The id must be a string or a number", http_status=400)
    params = message.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise P.RpcError(P.INVALID_PARAMS, "params must be an object", http_status=400)
    return Envelope(message.get("id"), method, params, is_notification)


def holds_lone_surrogate(value: Any) -> bool:
    """Whether a string anywhere in `value` (a key or a value, at any depth) holds a lone surrogate."""
    stack = [value]
    while stack:  # not recursive: a value may be nested as deep as the parser allowed
        node = stack.pop()
        if isinstance(node, str):
            if not node.isascii() and not _encodes(node):
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
