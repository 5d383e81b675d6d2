"""Which protocol era a request speaks, and whether its headers match its body.

A modern (2026-07-28) request carries its version in `_meta` and mirrors the
method, the tool's name and any `x-mcp-header` parameters into headers, which
must agree with the body (else HeaderMismatch, -32020). A request without
`_meta` version is of the handshake era: its header names the version, and
none at all means 2025-03-26. Every header is compared without the optional
whitespace around it (RFC 9110 §5.5), whatever the server in front left there,
and a header compared with the body may come once only: with two values a
gateway that reads the last one would route on what the body does not say.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from toolsearch.mcp import param_headers
from toolsearch.mcp import protocol as P
from toolsearch.mcp.jsonrpc import Envelope


class Request(Protocol):
    """What negotiation reads of an HTTP request (a Starlette `Request` is one): its headers. No I/O."""

    @property
    def headers(self) -> Mapping[str, str]: ...


def negotiate(request: Request, env: Envelope) -> bool:
    """Whether the request speaks 2026-07-28 (else a handshake version); checks headers against the body.

    Raises RpcError for a version the proxy does not speak or headers that do not match the body.
    """
    header = _header(request.headers, "MCP-Protocol-Version")
    meta = env.params.get("_meta")
    meta = meta if isinstance(meta, Mapping) else {}
    in_body = meta.get(P.META_PROTOCOL_VERSION)
    if in_body is not None:
        if header is None:
            raise _mismatch("the MCP-Protocol-Version header is missing")
        if header != in_body:
            raise _mismatch(f"MCP-Protocol-Version {header!r} does not match the body's {in_body!r}")
        if in_body not in P.MODERN_VERSIONS:
            raise P.unsupported_version(in_body)
        _check_modern_headers(request, env, meta)
        return True
    if header is None or header in P.LEGACY_VERSIONS:
        return False  # no header at all: a client older than the header (2025-03-26)
    if header in P.MODERN_VERSIONS:
        if env.is_notification:
            return True
        raise P.RpcError(
            P.INVALID_PARAMS,
            f"A {header} request must carry _meta[{P.META_PROTOCOL_VERSION!r}]",
            http_status=400,
        )
    raise P.unsupported_version(header)


def _check_modern_headers(request: Request, env: Envelope, meta: Mapping[str, Any]) -> None:
    method_header = _header(request.headers, "Mcp-Method")
    if method_header is None:
        raise _mismatch("the Mcp-Method header is missing")
    if method_header != env.method:
        raise _mismatch(f"Mcp-Method {method_header!r} does not match the body's method {env.method!r}")
    if env.method in ("tools/call", "resources/read", "prompts/get"):
        body_name = env.params.get("name") if env.method != "resources/read" else env.params.get("uri")
        raw = _header(request.headers, "Mcp-Name", strip=False)
        if raw is None:
            raise _mismatch("the Mcp-Name header is missing")
        decoded = P.decode_header_value(raw)
        if decoded is None:
            raise _mismatch("the Mcp-Name header is malformed")
        if decoded != body_name:
            raise _mismatch("Mcp-Name does not match the body's name")
    if not isinstance(meta.get(P.META_CLIENT_CAPABILITIES), Mapping):
        raise P.RpcError(
            P.INVALID_PARAMS, f"_meta[{P.META_CLIENT_CAPABILITIES!r}] is required", http_status=400
        )


def check_param_headers(schema: Any, arguments: Mapping[str, Any], headers: Mapping[str, str]) -> None:
    """Each `Mcp-Param-*` header the tool declares must carry, decoded, the body's value."""
    try:
        params = param_headers.header_params(schema)
    except param_headers.InvalidHeaderAnnotation:
        return  # such a tool is never listed; the upstream call reports it
    for param in params:
        field = param_headers.PARAM_PREFIX + param.header
        mirrored = param_headers.mirror((param,), arguments).get(field)
        expected = P.decode_header_value(mirrored) if mirrored is not None else None
        raw = _header(headers, field, strip=False)
        if raw is None:
            if expected is not None:
                raise _mismatch(f"the {field} header is missing")
            continue
        received = P.decode_header_value(raw)
        if received is None:
            raise _mismatch(f"the {field} header is malformed")
        if expected is None or not _same_value(param.type, received, expected):
            raise _mismatch(f"{field} does not match the body's {'.'.join(param.path)}")


def _header(headers: Mapping[str, str], name: str, *, strip: bool = True) -> str | None:
    """The header's one value (without the whitespace around it unless `strip` is False), or None;
    a mismatch when it comes more than once."""
    getlist = getattr(headers, "getlist", None)  # Starlette's Headers keep every value
    values = getlist(name) if getlist is not None else [v for v in (headers.get(name),) if v is not None]
    if len(values) > 1:
        raise _mismatch(f"the {name} header comes more than once")
    if not values:
        return None
    return values[0].strip(P.HEADER_OWS) if strip else values[0]


def _same_value(kind: str, received: str, expected: str) -> bool:
    if received == expected:
        return True
    if kind != "integer":
        return False
    try:  # integers compare as numbers: 42.0 is 42
        return float(received) == float(expected)
    except ValueError:
        return False


def _mismatch(detail: str) -> P.RpcError:
    return P.RpcError(P.HEADER_MISMATCH, f"Header mismatch: {detail}", http_status=400)
