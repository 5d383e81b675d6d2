"""The MCP endpoint: one stateless POST route, both protocol eras.

Each POST is checked in order: Origin, body size, JSON, the JSON-RPC envelope,
the protocol version and its headers; then the method runs. Every refusal is a
JSON-RPC error with the right HTTP status, never a stack trace (a bug of ours is
a JSON-RPC internal error, 500, logged by type and place only). No
session is minted or required; GET and DELETE answer 405. A tools/call that
asks for progress, from a caller that takes SSE, may be answered as an event
stream of its progress and then its response (streaming.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from . import protocol as P
from .catalogs import Caller
from .credentials import MalformedAuthorization
from .jsonrpc import Envelope, parse
from .jsonrpc import envelope as to_envelope
from .negotiation import check_param_headers, negotiate
from .oauth import ProtectedResource
from .progress import MAX_MESSAGE_CHARS, MAX_RELAYED, MAX_TOKEN_CHARS, ProgressSink, caller_token
from .response_size import JsonAnswer, ResponseSize
from .results import error_result, limit_result
from .service import AuthFailure, ToolService
from .settings import Settings
from .streaming import ProgressStream, accepts_event_stream
from .telemetry import Telemetry
from .tooldefs import GUIDANCE
from .upstream import UpstreamError

logger = logging.getLogger(__name__)

# The most a progress stream's events can take before its response, serialised on Lambda: every
# character of a message or token at most 4 bytes there (a quote: \" in the event, \\\" once more).
PROGRESS_EVENTS_BYTES = MAX_RELAYED * (4 * (MAX_MESSAGE_CHARS + MAX_TOKEN_CHARS) + 300)
SERVER_INFO = P.IMPLEMENTATION
LEGACY_METHODS = {"initialize", "ping", "tools/list", "tools/call"}
MODERN_METHODS = {"server/discover", "tools/list", "tools/call"}
_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


class McpEndpoint:
    def __init__(
        self,
        settings: Settings,
        service: ToolService,
        upstream_url: str,
        telemetry: Telemetry,
        oauth: ProtectedResource,
        size: ResponseSize | None = None,
    ) -> None:
        self.settings = settings
        self._size = size or ResponseSize.local()
        self.service = service
        self.upstream_url = upstream_url
        self.telemetry = telemetry
        self.oauth = oauth
        self._pinned = [name for name in settings.pinned_tools if not service.has_tool(name)]
        self._origins = {origin.rstrip("/") for origin in settings.allowed_origins}

    # -- HTTP

    async def protected_resource_metadata(self, request: Request) -> Response:
        document = await self.oauth.metadata(request)
        return JSONResponse(document.body, headers={"Cache-Control": document.cache_control})

    async def not_allowed(self, request: Request) -> Response:
        return JSONResponse(
            P.error_response(
                None, P.RpcError(P.INVALID_REQUEST, "This endpoint takes POST only; no sessions.")
            ),
            status_code=405,
            headers={"Allow": "POST"},
        )

    async def post(self, request: Request) -> Response:
        started = time.perf_counter()
        method = "-"
        message: Any = None
        streamed = False
        try:
            self._check_origin(request)
            message = parse(await self._read_body(request))
            envelope = to_envelope(message)
            method = envelope.method
            stream = self._progress_stream(request, envelope)
            if stream is None:
                return await self._answer(request, envelope)
            streamed = True  # timed when its last event is out
            return await stream.answer(
                self._answer(request, envelope, stream.sink),
                cancel_on_close=_is_modern(envelope),
                on_end=lambda: self._time(started, method),
            )
        except Exception as exc:
            request_id = message.get("id") if isinstance(message, dict) else None
            return self._failure(request_id, method, exc)
        finally:
            if not streamed:
                self._time(started, method)

    async def _answer(
        self, request: Request, envelope: Envelope, progress: ProgressSink | None = None
    ) -> Response:
        """The answer to a well-formed message; every failure is a JSON-RPC error response."""
        try:
            try:
                result = await self._dispatch(request, envelope, progress)
            except AuthFailure as failure:
                raise self._auth_error(request, failure.error) from failure
            if envelope.is_notification:
                return Response(status_code=202)
            return JsonAnswer(self._fitted(envelope, result, streamed=progress is not None))
        except Exception as exc:
            return self._failure(envelope.id, envelope.method, exc)

    def _failure(self, request_id: Any, method: str, exc: Exception) -> Response:
        request_id = request_id if P.is_valid_id(request_id) else None
        if isinstance(exc, P.RpcError):
            self.telemetry.count("request_error", method=_metric_method(method), code=str(exc.code))
            return JSONResponse(
                P.error_response(request_id, exc), status_code=exc.http_status, headers=exc.headers
            )
        # A bug of ours: the caller gets a JSON-RPC error, the log gets the exception's type and
        # where it happened (the message could quote a caller's input, so it stays out).
        frame = exc.__traceback__
        while frame is not None and frame.tb_next is not None:
            frame = frame.tb_next
        where = f"{frame.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.tb_lineno}" if frame else "?"
        logger.error("internal error", extra={"error": type(exc).__name__, "where": where})
        self.telemetry.count("request_error", method=_metric_method(method), code=str(P.INTERNAL_ERROR))
        error = P.RpcError(P.INTERNAL_ERROR, "Internal error in the proxy", http_status=500)
        return JSONResponse(P.error_response(request_id, error), 500)

    def _time(self, started: float, method: str) -> None:
        elapsed = (time.perf_counter() - started) * 1000
        self.telemetry.timing("request", elapsed, method=_metric_method(method))

    def _progress_stream(self, request: Request, envelope: Envelope) -> ProgressStream | None:
        """A stream for the progress of this request, when it asks for progress and can take SSE."""
        if envelope.method != "tools/call" or envelope.is_notification:
            return None
        token = caller_token(envelope.params)
        if token is None or not accepts_event_stream(request.headers.getlist("accept")):
            return None
        return ProgressStream(token)

    def _fitted(self, env: Envelope, result: dict[str, Any], *, streamed: bool = False) -> dict[str, Any]:
        """The JSON-RPC response, measured as the answer carries it and kept within what one may hold.

        On Lambda that is the runtime's serialisation of the whole response (response_size.py): a tool
        result that would not fit is cut with a note; any other answer becomes an error, not a 502.
        A response that ends a progress stream leaves room for the events sent before it.
        """
        message = P.response(env.id, result)
        limit = self._size.limit
        if limit is None:
            return message
        if streamed:
            limit -= PROGRESS_EVENTS_BYTES
        total = self._size.of(message)
        if total <= limit:
            return message
        room = limit - (total - self._size.of(result))  # what the result may take beside its envelope
        if env.method == "tools/call" and isinstance(result.get("content"), list) and room > 4_000:
            return P.response(env.id, limit_result(result, room, self._size.of))
        raise P.RpcError(
            P.INTERNAL_ERROR, f"The answer would take {total:,} bytes, more than the {limit:,} one can hold."
        )

    def _check_origin(self, request: Request) -> None:
        origin = request.headers.get("origin")
        if origin is None or "*" in self._origins:
            return
        # No general same-host exception: under DNS rebinding the Host header is the attacker's name too.
        if origin.rstrip("/") in self._origins or _is_own_loopback_origin(
            origin, request.headers.get("host")
        ):
            return
        raise P.RpcError(P.INVALID_REQUEST, "Origin not allowed", http_status=403)

    async def _read_body(self, request: Request) -> bytes:
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise P.RpcError(P.INVALID_REQUEST, f"Request body over {limit} bytes", http_status=413)
        body = bytearray()
        deadline = self.settings.request_read_timeout
        try:
            # One deadline for the whole body: a client trickling it would hold its connection for ever.
            async with asyncio.timeout(deadline):
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > limit:
                        raise P.RpcError(
                            P.INVALID_REQUEST, f"Request body over {limit} bytes", http_status=413
                        )
        except ClientDisconnect as exc:
            raise P.RpcError(P.INVALID_REQUEST, "Client went away", http_status=400) from exc
        except TimeoutError as exc:
            raise P.RpcError(
                P.INVALID_REQUEST,
                f"Request body not received within {deadline:g} s",
                http_status=408,
                headers={"Connection": "close"},
            ) from exc
        return bytes(body)

    # -- protocol

    async def _dispatch(
        self, request: Request, env: Envelope, progress: ProgressSink | None = None
    ) -> dict[str, Any]:
        _version, modern = negotiate(request, env)
        caller = self._caller(request)
        if env.is_notification:
            return {}  # initialized, cancelled, anything else: accepted and ignored
        if modern:
            if env.method not in MODERN_METHODS:
                raise P.RpcError(P.METHOD_NOT_FOUND, f"Method not found: {env.method}", http_status=404)
            result = await self._run(env, caller, request.headers, progress)
            result.setdefault("resultType", "complete")
            result.setdefault("_meta", {})[P.META_SERVER_INFO] = SERVER_INFO
            return result
        if env.method not in LEGACY_METHODS:
            raise P.RpcError(P.METHOD_NOT_FOUND, f"Method not found: {env.method}")
        if env.method == "initialize":
            return await self._initialize(env, caller)
        if env.method == "ping":
            return {}
        return await self._run(env, caller, None, progress)

    def _caller(self, request: Request) -> Caller:
        try:
            return Caller.from_header(self.upstream_url, *request.headers.getlist("authorization"))
        except MalformedAuthorization as exc:
            # 400, not 401 (RFC 6750 §3.1 invalid_request): signing in again would not mend the header.
            challenge = self.oauth.invalid_request(request, str(exc))
            raise P.RpcError(
                P.INVALID_REQUEST,
                str(exc),
                {"header": "Authorization", "reason": exc.reason},
                http_status=400,
                headers={"WWW-Authenticate": challenge},
            ) from None

    async def _run(
        self,
        env: Envelope,
        caller: Caller,
        modern_headers: Mapping[str, str] | None = None,
        progress: ProgressSink | None = None,
    ) -> dict[str, Any]:
        if env.method == "server/discover":
            return {
                "supportedVersions": list(P.SUPPORTED_VERSIONS),
                "capabilities": {"tools": {}},
                "instructions": await self._instructions(caller),
                "ttlMs": int(self.settings.catalog_ttl * 1000),
                "cacheScope": "private",
            }
        if env.method == "tools/list":
            return {
                "tools": self.service.definitions() + await self._pinned_definitions(caller),
                "ttlMs": int(self.settings.catalog_ttl * 1000),
                "cacheScope": "private",
            }
        return await self._call_tool(env, caller, modern_headers, progress)

    async def _initialize(self, env: Envelope, caller: Caller) -> dict[str, Any]:
        asked = env.params.get("protocolVersion")
        version = asked if asked in P.LEGACY_VERSIONS else P.LEGACY_VERSIONS[0]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO,
            "instructions": await self._instructions(caller),
        }

    async def _instructions(self, caller: Caller) -> str:
        try:
            upstream = (await self.service.catalogs.get(caller)).catalog.instructions
        except UpstreamError as exc:
            if exc.kind in ("unauthorized", "forbidden"):
                raise AuthFailure(exc) from exc
            logger.warning("upstream instructions unavailable", extra={"outcome": exc.kind})
            upstream = ""
        return compose_instructions(upstream, self.settings.max_instructions)

    async def _call_tool(
        self,
        env: Envelope,
        caller: Caller,
        modern_headers: Mapping[str, str] | None,
        progress: ProgressSink | None,
    ) -> dict[str, Any]:
        name = env.params.get("name")
        arguments = env.params.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise P.RpcError(P.INVALID_PARAMS, "tools/call needs params.name, a string")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise P.RpcError(P.INVALID_PARAMS, "params.arguments must be an object")
        if not self.service.has_tool(name):
            if name in self._pinned:
                return await self._call_pinned(caller, name, arguments, modern_headers, progress)
            raise P.RpcError(
                P.INVALID_PARAMS,
                f"Unknown tool: {name}. This server has: "
                + ", ".join(t["name"] for t in self.service.definitions()),
            )
        started = time.perf_counter()
        try:
            result = await self.service.call(caller, name, arguments, progress=progress)
        except AuthFailure as failure:
            self.telemetry.count("tool_call", tool=name, outcome=failure.error.kind)
            raise
        outcome = "error" if result.get("isError") else "ok"
        self.telemetry.count("tool_call", tool=name, outcome=outcome)
        self.telemetry.timing("tool_call", (time.perf_counter() - started) * 1000, tool=name)
        return result

    async def _pinned_definitions(self, caller: Caller) -> list[dict[str, Any]]:
        """The upstream tools the operator pinned, as the upstream defines them for this caller.

        Listing needs the caller's catalog, so a caller the upstream refuses gets its 401 here too,
        which is how OAuth clients learn to sign in.
        """
        try:
            catalog = (await self.service.catalogs.get(caller)).catalog
        except UpstreamError as exc:
            if exc.kind in ("unauthorized", "forbidden"):
                raise AuthFailure(exc) from exc
            logger.warning("upstream catalog unavailable for tools/list", extra={"outcome": exc.kind})
            return []
        return [dict(catalog.by_name[name].definition) for name in self._pinned if name in catalog.by_name]

    async def _call_pinned(
        self,
        caller: Caller,
        name: str,
        arguments: dict[str, Any],
        modern_headers: Mapping[str, str] | None,
        progress: ProgressSink | None,
    ) -> dict[str, Any]:
        try:
            catalog = (await self.service.catalogs.get(caller)).catalog
            if name not in catalog.by_name:
                raise P.RpcError(P.INVALID_PARAMS, f"Unknown tool: {name}")
            if modern_headers is not None:
                # We list this tool as the upstream defines it, x-mcp-header and all, so we are the
                # server that must check the Mcp-Param-* headers a client mirrors from its arguments.
                check_param_headers(
                    catalog.by_name[name].definition.get("inputSchema"), arguments, modern_headers
                )
            # A pinned tool is called as itself: the client saw its own annotations and asks accordingly.
            result = await self.service.call_tool(caller, name, arguments, read_only=False, progress=progress)
        except UpstreamError as exc:
            # The caller's catalog could not be listed: as for the five tools, a refusal is the
            # caller's HTTP status and anything else a tool error, never an internal error.
            if exc.kind in ("unauthorized", "forbidden"):
                raise AuthFailure(exc) from exc
            details = {k: v for k, v in exc.to_data().items() if k not in ("error", "message")}
            result = error_result(exc.kind, exc.message, tool=name, **details)
        self.telemetry.count("tool_call", tool="pinned", outcome="error" if result.get("isError") else "ok")
        return result

    def _auth_error(self, request: Request, exc: UpstreamError) -> P.RpcError:
        """The upstream's refusal as ours: same status, a challenge naming our own metadata."""
        status = exc.status if exc.status in (401, 403) else (401 if exc.kind == "unauthorized" else 403)
        challenge = self.oauth.challenge(request, exc.www_authenticate)
        message = (
            "The upstream requires authorization" if status == 401 else "The upstream refused this caller"
        )
        return P.RpcError(-32000, message, http_status=status, headers={"WWW-Authenticate": challenge})


def compose_instructions(upstream: str, limit: int) -> str:
    """The proxy's guidance, then the upstream's instructions unchanged, cut at `limit` characters."""
    if not upstream:
        return GUIDANCE
    if len(upstream) > limit:
        upstream = upstream[:limit] + (
            f"\n[The upstream's instructions were cut here, at {limit:,} of {len(upstream):,} characters.]"
        )
    return f"{GUIDANCE}\n\nThe upstream server's own instructions follow.\n\n{upstream}"


def _is_own_loopback_origin(origin: str, host: str | None) -> bool:
    """Whether a page on this very loopback address (same host and port) sent the request.

    A rebinding page's Origin names the attacker's host, never a loopback one, so this
    same-origin case is safe to accept (the conformance suite's dns-rebinding scenario asks it).
    """
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and parts.hostname in _LOOPBACK_HOSTS
        and host is not None
        and parts.netloc.lower() == host.strip().lower()
    )


def _is_modern(envelope: Envelope) -> bool:
    """Whether the request speaks 2026-07-28 (its `_meta` names the version; negotiate() checks it)."""
    meta = envelope.params.get("_meta")
    return isinstance(meta, Mapping) and meta.get(P.META_PROTOCOL_VERSION) is not None


def _metric_method(method: str) -> str:
    # Only known method names become a metric dimension; anything else a client sends is "other".
    return method if method in LEGACY_METHODS | MODERN_METHODS else "other"
