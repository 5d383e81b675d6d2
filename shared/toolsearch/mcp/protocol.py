"""The MCP wire, for both sides of the proxy: versions, `_meta` keys, error codes, JSON, header values.

The endpoint (the proxy as a server) and `upstream/` (the proxy as a client)
both read this module and nothing of each other, the way the SDK keeps its
types apart from its client and server. Two eras share the wire: modern
requests (2026-07-28) carry their version in `_meta` and headers on every
request; legacy ones open with `initialize`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

from toolsearch import __version__
from toolsearch.errors import ToolsearchError

# Who the proxy is, as a server to its callers and as a client to its upstream.
IMPLEMENTATION = {"name": "mcp-toolsearch-proxy", "version": __version__}

MODERN_VERSION = "2026-07-28"
MODERN_VERSIONS = (MODERN_VERSION,)
# Handshake versions, newest first: the first is the one the proxy asks an upstream for.
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
SUPPORTED_VERSIONS = MODERN_VERSIONS + LEGACY_VERSIONS

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

# Errors a modern server answers about the request itself rather than the method.
MODERN_ERRORS = frozenset({HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION})

# Optional whitespace around a header field value, which is not part of it (RFC 9110 §5.5).
HEADER_OWS = " \t"
_SENTINEL_PREFIX = "=?base64?"
_SENTINEL_SUFFIX = "?="
_FIELD_TEXT = re.compile(
    r"[\t\x20-\x7e]*"
)  # visible ASCII, space and tab: one match, not a loop per character


@dataclass
class RpcError(ToolsearchError):
    """A JSON-RPC error to answer with, and the HTTP status that carries it."""

    code: int
    message: str
    data: Any = None
    http_status: int = 200
    headers: dict[str, str] = field(default_factory=dict)

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def response(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: Any, error: RpcError) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "error": error.to_error()}
    if request_id is not None:
        message["id"] = request_id
    return message


def is_valid_id(value: Any) -> bool:
    # JSON-RPC ids are strings or numbers; MCP forbids null, and bool is not a number here.
    return isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool))


def encode_header_value(value: str) -> str:
    """The value itself when it is a plain, safe header value, else the Base64 sentinel form."""
    plain = (
        all(c == "\t" or " " <= c <= "~" for c in value)
        and value == value.strip(HEADER_OWS)
        and not (value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX))
    )
    if plain:
        return value
    return _SENTINEL_PREFIX + base64.b64encode(value.encode()).decode("ascii") + _SENTINEL_SUFFIX


def decode_header_value(value: str) -> str | None:
    """A header value as its sender meant it: Base64-sentinel values decoded; None if malformed.

    Leading and trailing SP/HTAB are not part of a field value (RFC 9110 §5.5): they go first.
    A value that needs them, or any byte outside visible ASCII, comes Base64-encoded.
    """
    value = value.strip(HEADER_OWS)
    if value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX) and len(value) >= 11:
        encoded = value[len(_SENTINEL_PREFIX) : -len(_SENTINEL_SUFFIX)]
        try:
            return base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    if _FIELD_TEXT.fullmatch(value) is None:
        return None
    return value


def unsupported_version(requested: Any) -> RpcError:
    return RpcError(
        UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        {"supported": list(SUPPORTED_VERSIONS), "requested": requested},
        http_status=400,
    )


def _not_json(constant: str) -> Any:
    # Python reads NaN and Infinity, which JSON lacks: passed on, they could not be written back.
    raise ValueError(f"{constant} is not JSON")


# One decoder for every message: `json.loads` with an option builds a decoder (and its scanner) a call.
_DECODER = json.JSONDecoder(parse_constant=_not_json)


def loads_json(raw: bytes | str) -> Any:
    """JSON as the wire allows it: NaN and Infinity refused. Raises ValueError or RecursionError.

    As `json.loads(raw, parse_constant=...)` reads it: bytes in the encoding their start shows, and
    a text that starts with a byte-order mark refused.
    """
    if isinstance(raw, str):
        if raw.startswith("\ufeff"):
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", raw, 0)
        return _DECODER.decode(raw)
    return _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))


def text_content(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
