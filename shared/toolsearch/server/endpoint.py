"""The MCP endpoint: one stateless POST route, both protocol eras. HTTP, JSON-RPC and versions only.

Each POST is checked in order: Origin, body size and read time, JSON, the
JSON-RPC envelope, the protocol version and its headers, the caller's
Authorization (`server/http_edge.py`); then the method, looked up in `METHODS` (its
handler, the eras that have it, the capability it is under: the method sets and
each era's declared capabilities derive from that one table), goes to
`ToolService`, which owns everything tool-shaped. Negotiation's answer (`ERAS`)
decides the rest: which methods exist, the reply's fields, cancelling on close.
Every refusal is a JSON-RPC error with the right HTTP status, never a stack
trace (a bug of ours is a JSON-RPC internal error, 500, logged by type and
place only). Each era's replies carry that era's
fields only. No session is minted or required; GET and DELETE answer 405. A
tools/call that asks for progress, from a caller that takes SSE, may be
answered as an event stream of its progress and then its response
(server/streaming.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from toolsearch.callers.identity import Caller
from toolsearch.mcp import protocol as P
from toolsearch.mcp.jsonrpc import Envelope, holds_lone_surrogate, parse
from toolsearch.mcp.jsonrpc import envelope as to_envelope
from toolsearch.mcp.negotiation import check_param_headers, negotiate
from toolsearch.ops.telemetry import Telemetry
from toolsearch.ops.timing import Span
from toolsearch.server.http_edge import HttpEdge
from toolsearch.server.request_body import read_body
from toolsearch.server.request_headers import index_headers
from toolsearch.server.response_size import JsonAnswer, ResponseSize
from toolsearch.server.streaming import ProgressStream, accepts_event_stream
from toolsearch.service import tooldefs as T
from toolsearch.service.progress import ProgressSink, caller_token
from toolsearch.service.results import ResultBudget
from toolsearch.service.tool_service import ToolService
from toolsearch.settings import EndpointConfig

logger = logging.getLogger(__name__)

# Fields of a result that only the 2026-07-28 era has: a handshake-era reply carries none of them.
MODERN_RESULT_FIELDS = ("resultType", "ttlMs", "cacheScope")


@dataclass(frozen=True, slots=True)
class Call:
    """One method call, as its handler sees it."""

    env: Envelope
    caller: Caller
    era: Era
    headers: Mapping[str, str]
    progress: ProgressSink | None


Handler = Callable[["McpEndpoint", Call], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Method:
    """A method the endpoint answers: its handler, the eras that have it, what it adds to a reply."""

    handler: Handler
    eras: frozenset[str]  # MODERN and/or HANDSHAKE
    capability: str = ""  # the capability it is declared under ("" for the lifecycle)
    cached: bool = False  # the reply carries the caching hints of tools/list (`ttlMs`, `cacheScope`)


class McpEndpoint:
    def __init__(
        self,
        config: EndpointConfig,
        service: ToolService,
        edge: HttpEdge,
        telemetry: Telemetry,
        size: ResponseSize | None = None,
    ) -> None:
        self.config = config
        self.service = service
        self._edge = edge
        self._telemetry = telemetry
        self._size = size or ResponseSize.local()

    # -- HTTP

    async def not_allowed(self, request: Request) -> Response:
        error = P.RpcError(P.INVALID_REQUEST, "This endpoint takes POST only; no sessions.")
        return JSONResponse(P.error_response(None, error), status_code=405, headers={"Allow": "POST"})

    async def post(self, request: Request) -> Response:
        span = Span()
        method = "-"
        message: Any = None
        streamed = False
        try:
            index_headers(request)
            self._edge.check_origin(request)
            body = await self._read_body(request)
            message = parse(body)
            envelope = to_envelope(message, body)
            method = envelope.method
            era = ERAS[negotiate(request, envelope)]
            stream = self._progress_stream(request, envelope)
            if stream is None:
                return await self._answer(request, envelope, era)
            streamed = True  # timed when its last event is out
            return await stream.answer(
                self._answer(request, envelope, era, stream),
                cancel_on_close=era.modern,
                on_end=lambda: self._time(span, method),
            )
        except Exception as exc:
            request_id = message.get("id") if isinstance(message, dict) else None
            return await self._failure(request, request_id, method, exc)
        finally:
            if not streamed:
                self._time(span, method)

    async def _answer(
        self, request: Request, envelope: Envelope, era: Era, stream: ProgressStream | None = None
    ) -> Response:
        """The answer to a well-formed message; every failure is a JSON-RPC error response."""
        try:
            result, known = await self._dispatch(request, envelope, era, stream.sink if stream else None)
            if envelope.is_notification:
                return Response(status_code=202)
            return JsonAnswer(self._fitted(envelope, result, stream, known))
        except Exception as exc:
            return await self._failure(request, envelope.id, envelope.method, exc)

    async def _failure(self, request: Request, request_id: Any, method: str, exc: Exception) -> Response:
        # An id that cannot be written back (a lone surrogate: envelope() refused it) is not echoed.
        request_id = (
            request_id if P.is_valid_id(request_id) and not holds_lone_surrogate(request_id) else None
        )
        try:
            refusal = await self._edge.answer_for(request, exc)  # our errors as the edge answers them
        except Exception as bug:  # answering a refusal failed: that is the error to report
            exc, refusal = bug, None
        if refusal is not None:
            exc = P.RpcError(
                refusal.code,
                refusal.message,
                refusal.data,
                http_status=refusal.status,
                headers=refusal.headers,
            )
        if isinstance(exc, P.RpcError):
            self._telemetry.count("request_error", method=_metric_method(method), code=str(exc.code))
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
        self._telemetry.count("request_error", method=_metric_method(method), code=str(P.INTERNAL_ERROR))
        error = P.RpcError(P.INTERNAL_ERROR, "Internal error in the proxy", http_status=500)
        return JSONResponse(P.error_response(request_id, error), 500)

    def _time(self, span: Span, method: str) -> None:
        self._telemetry.timing("request", span.ms, method=_metric_method(method))

    def _progress_stream(self, request: Request, envelope: Envelope) -> ProgressStream | None:
        """A stream for the progress of this request, when it asks for progress and can take SSE."""
        if envelope.method != "tools/call" or envelope.is_notification:
            return None
        token = caller_token(envelope.params)
        if token is None or not accepts_event_stream(request.headers.getlist("accept")):
            return None
        return ProgressStream(token, self._size)

    def _fitted(
        self,
        env: Envelope,
        result: dict[str, Any],
        stream: ProgressStream | None = None,
        known: int | None = None,
    ) -> dict[str, Any]:
        """The JSON-RPC response, measured as the answer carries it and kept within what one may hold.

        On Lambda that is the runtime's serialisation of the whole response (server/response_size.py): a tool
        result that would not fit is cut with a note; any other answer becomes an error, not a 502.
        A response that ends a progress stream fits in what its events left, measured the same way
        (the call is over: no more progress comes after its response). This is a budget of its own,
        decided here: the room beside the envelope (and the stream's events), held by the same `fit`.
        A result whose bytes are `known` (at most; `ResponseSize.shaped`) is not serialised again when
        the answer has room for that: one that a budget of this count measured is measured once.
        """
        message = P.response(env.id, result)
        limit = self._size.limit
        if limit is None:
            return message
        if stream is not None:
            limit -= stream.room_taken
        if known is not None and self._size.of(P.response(env.id, {})) - 2 + known <= limit:
            return message  # the envelope's bytes with an empty result ("{}"), and the result's
        total = self._size.of(message)
        if total <= limit:
            return message
        room = limit - (total - self._size.of(result))  # what the result may take beside its envelope
        if env.method == "tools/call" and isinstance(result.get("content"), list) and room > 4_000:
            return P.response(env.id, ResultBudget(room, self._size.of).fit(result))
        raise P.RpcError(
            P.INTERNAL_ERROR, f"The answer would take {total:,} bytes, more than the {limit:,} one can hold."
        )

    async def _read_body(self, request: Request) -> bytes:
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise P.RpcError(P.INVALID_REQUEST, f"Request body over {limit} bytes", http_status=413)
        deadline = self.config.request_read_timeout
        try:
            # One deadline for the whole body: a client trickling it would hold its connection for ever.
            async with asyncio.timeout(deadline):
                body = await read_body(request.receive, limit)
        except ClientDisconnect as exc:
            raise P.RpcError(P.INVALID_REQUEST, "Client went away", http_status=400) from exc
        except TimeoutError as exc:
            raise P.RpcError(
                P.INVALID_REQUEST,
                f"Request body not received within {deadline:g} s",
                http_status=408,
                headers={"Connection": "close"},
            ) from exc
        if body is None:
            raise P.RpcError(P.INVALID_REQUEST, f"Request body over {limit} bytes", http_status=413)
        return body

    # -- protocol

    async def _dispatch(
        self, request: Request, env: Envelope, era: Era, progress: ProgressSink | None = None
    ) -> tuple[dict[str, Any], int | None]:
        caller = await self._edge.caller(request)
        if env.is_notification:
            return {}, None  # initialized, cancelled, anything else: accepted and ignored
        method = METHODS.get(env.method)
        if method is None or era.name not in method.eras:
            raise P.RpcError(P.METHOD_NOT_FOUND, f"Method not found: {env.method}", http_status=era.not_found)
        result = await method.handler(self, Call(env, caller, era, request.headers, progress))
        if method.cached:
            result.update(ttlMs=int(self.service.catalogs.ttl * 1000), cacheScope="private")
        return self._size.shaped(era.reply, result)  # and its bytes, when known without serialising

    # -- the methods (METHODS, below the class, says which era has which)

    async def _discover(self, call: Call) -> dict[str, Any]:
        return {
            "supportedVersions": list(P.SUPPORTED_VERSIONS),
            "capabilities": capabilities(call.era),
            "instructions": await self.service.instructions(call.caller),
        }

    async def _initialize(self, call: Call) -> dict[str, Any]:
        asked = call.env.params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in P.LEGACY_VERSIONS else P.LEGACY_VERSIONS[0],
            "capabilities": capabilities(call.era),
            "serverInfo": P.IMPLEMENTATION,
            "instructions": await self.service.instructions(call.caller),
        }

    async def _ping(self, call: Call) -> dict[str, Any]:
        return {}

    async def _list_tools(self, call: Call) -> dict[str, Any]:
        return {"tools": await self.service.list_tools(call.caller)}

    # The proxy offers tools only, but declares empty prompts and resources (as a bare SDK server
    # does): clients that list them get an empty list with the caching hints of tools/list, and a
    # name or URI is unknown (-32602), rather than a method that is not there.

    async def _list_prompts(self, call: Call) -> dict[str, Any]:
        return {"prompts": []}

    async def _list_resources(self, call: Call) -> dict[str, Any]:
        return {"resources": []}

    async def _list_resource_templates(self, call: Call) -> dict[str, Any]:
        return {"resourceTemplates": []}

    async def _read_resource(self, call: Call) -> dict[str, Any]:
        uri = call.env.params.get("uri")
        echoed = isinstance(uri, str) and len(uri) <= T.MAX_NAME_CHARS  # a huge URI is not sent back
        raise P.RpcError(P.INVALID_PARAMS, "Resource not found", data={"uri": uri} if echoed else None)

    async def _get_prompt(self, call: Call) -> dict[str, Any]:
        raise P.RpcError(P.INVALID_PARAMS, "Unknown prompt: this server offers tools only")

    async def _tools_call(self, call: Call) -> dict[str, Any]:
        env, caller, progress = call.env, call.caller, call.progress
        name = env.params.get("name")
        arguments = env.params.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise P.RpcError(P.INVALID_PARAMS, "tools/call needs params.name, a string")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise P.RpcError(P.INVALID_PARAMS, "params.arguments must be an object")
        if call.era.modern and await self.service.is_pinned_for(caller, name):
            # A pinned tool is listed as the upstream defines it, x-mcp-header and all, so the proxy is
            # the server that must check the Mcp-Param-* headers a client mirrors from its arguments.
            schema = await self.service.pinned_input_schema(caller, name)
            check_param_headers(schema, arguments, call.headers)
        return await self.service.call(caller, name, arguments, progress=progress)


def _as_modern(result: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 reply: complete, with the server's identity in `_meta`."""
    result.setdefault("resultType", "complete")
    meta = result.get("_meta")
    result["_meta"] = {**(meta if isinstance(meta, dict) else {}), P.META_SERVER_INFO: P.IMPLEMENTATION}
    return result


def _as_legacy(result: dict[str, Any]) -> dict[str, Any]:
    """A handshake-era reply: without the fields of 2026-07-28, even those an upstream's result had."""
    if "_meta" not in result and not any(key in result for key in MODERN_RESULT_FIELDS):
        return result  # nothing to drop: the result itself (a structured result keeps its JSON)
    legacy = {key: value for key, value in result.items() if key not in MODERN_RESULT_FIELDS}
    meta = legacy.get("_meta")
    if isinstance(meta, dict) and P.META_SERVER_INFO in meta:
        rest = {key: value for key, value in meta.items() if key != P.META_SERVER_INFO}
        if rest:
            legacy["_meta"] = rest
        else:
            del legacy["_meta"]
    return legacy


@dataclass(frozen=True, slots=True)
class Era:
    """What differs between the eras once negotiation (mcp/negotiation.py) has said which one is spoken."""

    name: str
    modern: bool
    not_found: int  # the HTTP status of an unknown method
    reply: Callable[[dict[str, Any]], dict[str, Any]]  # a result as that era carries it
    flags: Mapping[str, Mapping[str, bool]]  # what each declared capability says in that era


MODERN, HANDSHAKE = "2026-07-28", "handshake"
BOTH = frozenset({MODERN, HANDSHAKE})
ERAS = {
    True: Era(MODERN, True, 404, _as_modern, {}),
    # The handshake era's capabilities say no list changes and no subscriptions: no session to send them on.
    False: Era(
        HANDSHAKE,
        False,
        200,
        _as_legacy,
        {
            "tools": {"listChanged": False},
            "prompts": {"listChanged": False},
            "resources": {"listChanged": False, "subscribe": False},
        },
    ),
}

# Every method the endpoint answers, in the order the capabilities are declared.
METHODS: dict[str, Method] = {
    "server/discover": Method(McpEndpoint._discover, frozenset({MODERN}), cached=True),
    "initialize": Method(McpEndpoint._initialize, frozenset({HANDSHAKE})),
    "ping": Method(McpEndpoint._ping, frozenset({HANDSHAKE})),
    "tools/list": Method(McpEndpoint._list_tools, BOTH, "tools", cached=True),
    "tools/call": Method(McpEndpoint._tools_call, BOTH, "tools"),
    "prompts/list": Method(McpEndpoint._list_prompts, BOTH, "prompts", cached=True),
    "prompts/get": Method(McpEndpoint._get_prompt, BOTH, "prompts"),
    "resources/list": Method(McpEndpoint._list_resources, BOTH, "resources", cached=True),
    "resources/templates/list": Method(McpEndpoint._list_resource_templates, BOTH, "resources", cached=True),
    "resources/read": Method(McpEndpoint._read_resource, BOTH, "resources"),
}
MODERN_METHODS = frozenset(name for name, method in METHODS.items() if MODERN in method.eras)
LEGACY_METHODS = frozenset(name for name, method in METHODS.items() if HANDSHAKE in method.eras)


def capabilities(era: Era) -> dict[str, Any]:
    """What the server declares in `era`: each capability some method of that era is under, with its flags."""
    names = dict.fromkeys(m.capability for m in METHODS.values() if m.capability and era.name in m.eras)
    return {name: dict(era.flags.get(name, {})) for name in names}


def _metric_method(method: str) -> str:
    # Only known method names become a metric dimension; anything else a client sends is "other".
    return method if method in METHODS else "other"
