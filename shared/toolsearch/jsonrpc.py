"""A POST body as one JSON-RPC 2.0 request or notification, or the error that refuses it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import protocol as P


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


def envelope(message: Any) -> Envelope:
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
