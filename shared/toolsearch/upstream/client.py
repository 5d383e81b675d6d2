"""The proxy's client of its one upstream MCP server.

Speaks MCP 2026-07-28 (every request carries its protocol version, client
info and capabilities in `_meta`, mirrored into headers) and falls back to the
`initialize` handshake of 2025-11-25 (answers of 2025-06-18 and 2025-03-26
accepted) when the upstream turns out to be a legacy server. The era is learnt
once per Upstream, so after the first request each call costs one round trip.

Each request carries the caller's Authorization header and nothing else of
theirs; cookies are never kept. Listing is retried on transient failures;
calls never are, since a call may have run even when its answer was lost.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import itertools
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from toolsearch import __version__
from toolsearch.nesting import too_deep
from toolsearch.settings import Settings

from . import headers as mcp_headers
from .errors import RETRYABLE, UpstreamError
from .sessions import LegacySession, SessionStore, caller_key
from .wire import ACCEPT, Reply, exchange, retry_after

log = logging.getLogger("toolsearch.upstream")

MODERN_VERSION = "2026-07-28"
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")  # first is the one we ask for
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"

HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION = -32020, -32021, -32022
METHOD_NOT_FOUND, INVALID_PARAMS = -32601, -32602

RETRY_AFTER_CAP = 10.0  # seconds: a listing is waited for by a caller
BACKOFF_BASE, BACKOFF_CAP = 0.25, 4.0
DEFAULT_MAX_SESSIONS = 1024


@dataclass(frozen=True)
class Listing:
    tools: list[dict]  # valid tool definitions, in upstream order, first of each name kept
    instructions: str  # the upstream's instructions ("" if none)
    dropped: list[tuple[str, str]]  # (tool name, reason) for tools left out


class _NoCookies(http.cookiejar.CookiePolicy):
    """A cookie from one caller's answer must never ride along with another caller's request."""

    netscape, rfc2965, hide_cookie2 = True, False, False

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False

    def return_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False

    def domain_return_ok(self, domain: str, request: Any) -> bool:
        return False

    def path_return_ok(self, path: str, request: Any) -> bool:
        return False


class _LegacyUpstream(Exception):
    """Raised inside a modern-only request when the upstream proves to be legacy."""


class Upstream:
    def __init__(
        self,
        url: str,
        settings: Settings,
        *,
        http: httpx.AsyncClient | None = None,
        client_info: dict | None = None,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
    ) -> None:
        self.url = url
        self._settings = settings
        self._owns_http = http is None
        # Our own connection pool, used directly: MCP requests need none of the client layer (auth,
        # redirects, cookies), and skipping it saves about half a millisecond a call. A client given
        # to us (the demo's ASGI transport, tests) is used as it is.
        self._transport = httpx.AsyncHTTPTransport() if http is None else None
        self._http = http or httpx.AsyncClient(transport=self._transport, follow_redirects=False)
        self._http.cookies.jar.set_policy(_NoCookies())
        self._client_info = client_info or {"name": "mcp-toolsearch-proxy", "version": __version__}
        self._timeout = httpx.Timeout(settings.upstream_timeout, connect=settings.upstream_connect_timeout)
        # Bytes one answer may take: the largest result passed on, plus room for the envelope and a note.
        self._limit = settings.max_result_bytes + max(settings.max_result_bytes // 4, 64 * 1024)
        self._ids = itertools.count(1)
        self._sessions = SessionStore(max_sessions)
        self.era: str | None = None  # "modern" | "legacy" once known

    @property
    def _sender(self) -> httpx.AsyncClient | httpx.AsyncBaseTransport:
        return self._transport or self._http

    @property
    def http(self) -> httpx.AsyncClient:
        """The HTTP client to the upstream (OAuth discovery reads the upstream's metadata with it)."""
        return self._http

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    # -- public

    async def list_tools(self, authorization: str | None) -> Listing:
        started = time.monotonic()
        limit = self._settings.upstream_timeout
        # One deadline for the whole listing: every page, retry and backoff wait fits inside it.
        deadline = asyncio.get_running_loop().time() + limit
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    instructions, pages = await self._list(authorization, deadline)
            except TimeoutError:
                raise UpstreamError(
                    "timeout", f"the upstream did not list its tools within {limit:g} s"
                ) from None
        except UpstreamError as exc:
            log.info("upstream tools/list failed: %s status=%s code=%s", exc.kind, exc.status, exc.code)
            raise
        listing = _clean(pages)
        listing = Listing(tools=listing.tools, instructions=instructions, dropped=listing.dropped)
        log.info(
            "upstream tools/list ok: %d tools, %d dropped, era=%s, %d ms",
            len(listing.tools),
            len(listing.dropped),
            self.era,
            (time.monotonic() - started) * 1000,
        )
        return listing

    async def call_tool(self, authorization: str | None, tool: Mapping[str, Any], arguments: dict) -> dict:
        name = str(tool.get("name") or "")
        started = time.monotonic()
        outcome, status = "ok", None
        try:
            try:
                params = mcp_headers.header_params(tool.get("inputSchema"))
            except mcp_headers.InvalidHeaderAnnotation as exc:
                raise UpstreamError("bad_response", f"the tool's definition is invalid: {exc}") from None
            extra = {"Mcp-Name": mcp_headers.encode_value(name), **mcp_headers.mirror(params, arguments)}
            result = await self._deadline(
                self._rpc(authorization, "tools/call", {"name": name, "arguments": arguments}, extra)
            )
            if result.get("isError") is True:
                outcome = "tool_error"
            return result
        except UpstreamError as exc:
            outcome, status = exc.kind, exc.status
            raise
        finally:
            log.info(
                "upstream tools/call %s: %s status=%s, %d ms",
                name,
                outcome,
                status,
                (time.monotonic() - started) * 1000,
            )

    # -- listing

    async def _list(self, authorization: str | None, deadline: float) -> tuple[str, list[list[Any]]]:
        discover: asyncio.Task[str] | None = None
        if self.era is None:
            try:
                instructions = await self._retrying(lambda: self._discover(authorization), deadline)
            except _LegacyUpstream:
                instructions = None
        elif self.era == "modern":
            discover = asyncio.create_task(self._retrying(lambda: self._discover(authorization), deadline))
            instructions = None
        else:
            instructions = None
        try:
            pages = await self._pages(authorization, deadline)
            if discover is not None:
                try:
                    instructions = await discover
                except _LegacyUpstream:
                    instructions = None
        finally:
            if discover is not None and not discover.done():
                discover.cancel()
        if instructions is None:  # legacy: the handshake carried them
            session = self._sessions.get(caller_key(authorization))
            instructions = session.instructions if session else ""
        return instructions, pages

    async def _discover(self, authorization: str | None) -> str:
        try:
            result = await self._deadline(
                self._rpc(authorization, "server/discover", {}, {}, modern_only=True)
            )
        except UpstreamError as exc:
            if exc.kind == "rpc_error":  # a modern server without discover still lists tools
                log.warning("upstream server/discover failed with code %s; no instructions", exc.code)
                return ""
            raise
        instructions = result.get("instructions")
        return instructions if isinstance(instructions, str) else ""

    async def _pages(self, authorization: str | None, deadline: float) -> list[list[Any]]:
        pages: list[list[Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(max(1, self._settings.max_list_pages)):
            params = {"cursor": cursor} if cursor is not None else {}
            result = await self._retrying(
                lambda p=params: self._deadline(self._rpc(authorization, "tools/list", p, {})), deadline
            )
            tools = result.get("tools")
            if not isinstance(tools, list):
                raise UpstreamError("bad_response", "the upstream's tools/list answer has no list of tools")
            pages.append(tools)
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return pages
            if cursor in seen:
                # A loop: keep what was listed rather than fail the whole catalog.
                log.warning("upstream tools/list repeated a cursor; stopping after %d pages", len(pages))
                return pages
            seen.add(cursor)
        log.warning("upstream tools/list has more than %d pages; keeping the first ones", len(pages))
        return pages

    async def _retrying(self, attempt: Any, deadline: float) -> Any:
        retries = max(0, self._settings.list_retries)
        for n in itertools.count():
            try:
                return await attempt()
            except UpstreamError as exc:
                if exc.kind not in RETRYABLE or n >= retries:
                    raise
                delay = random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**n))  # full jitter
                if exc.retry_after is not None:
                    delay = max(delay, exc.retry_after)
                if asyncio.get_running_loop().time() + delay >= deadline:
                    raise  # the wait alone would pass the deadline: this error says more than a timeout
                log.info("upstream listing %s; retry %d in %.2f s", exc.kind, n + 1, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _deadline(self, request: Any) -> dict:
        try:
            async with asyncio.timeout(self._settings.upstream_timeout):
                return await request
        except TimeoutError:
            raise UpstreamError(
                "timeout", f"the upstream did not answer within {self._settings.upstream_timeout:g} s"
            ) from None

    # -- one request, in either era

    async def _rpc(
        self,
        authorization: str | None,
        method: str,
        params: dict[str, Any],
        extra_headers: dict[str, str],
        *,
        modern_only: bool = False,
    ) -> dict:
        renewed = False
        for _ in range(4):  # bounded: one era switch, one session renewal
            if self.era != "legacy":
                body = self._body(method, {**params, "_meta": self._meta()})
                headers = self._headers(authorization, MODERN_VERSION, method, extra_headers)
                reply = await exchange(
                    self._sender, self.url, headers, body, limit=self._limit, timeout=self._timeout
                )
                era = _era_of(reply, body["id"], method)
                if era == "legacy":
                    self._switch("legacy")
                    if modern_only:
                        raise _LegacyUpstream
                    continue
                if self.era is None and reply.status < 400:
                    self._switch("modern")
                return _result(reply, body["id"])
            session = await self._legacy_session(authorization)
            body = self._body(method, params)
            headers = self._headers(authorization, session.protocol_version, method, extra_headers)
            if session.session_id:
                headers["Mcp-Session-Id"] = session.session_id
            reply = await exchange(
                self._sender, self.url, headers, body, limit=self._limit, timeout=self._timeout
            )
            if reply.status == 404 and session.session_id and not renewed:
                # The upstream forgot the session (expired, restarted): hand-shake again, once.
                self._sessions.drop(caller_key(authorization), session)
                renewed = True
                continue
            return _result(reply, body["id"])
        raise UpstreamError("bad_response", "the upstream's protocol era could not be settled")

    async def _legacy_session(self, authorization: str | None) -> LegacySession:
        key = caller_key(authorization)
        session = self._sessions.get(key)
        if session is not None:
            return session
        body = self._body(
            "initialize",
            {"protocolVersion": LEGACY_VERSIONS[0], "capabilities": {}, "clientInfo": self._client_info},
        )
        headers = self._headers(authorization, None, None, {})
        reply = await exchange(
            self._sender, self.url, headers, body, limit=self._limit, timeout=self._timeout
        )
        result = _result(reply, body["id"])
        version = result.get("protocolVersion")
        if version not in LEGACY_VERSIONS:
            raise UpstreamError("bad_response", f"the upstream answered initialize with version {version!r}")
        instructions = result.get("instructions")
        session_id = reply.headers.get("mcp-session-id") or None
        if session_id is not None and not all("!" <= c <= "~" for c in session_id):
            raise UpstreamError("bad_response", "the upstream minted a session id that is not visible ASCII")
        session = LegacySession(
            session_id=session_id,
            protocol_version=version,
            instructions=instructions if isinstance(instructions, str) else "",
        )
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        headers = self._headers(authorization, version, None, {})
        if session.session_id:
            headers["Mcp-Session-Id"] = session.session_id
        ack = await exchange(
            self._sender, self.url, headers, notice, limit=self._limit, timeout=self._timeout
        )
        if ack.status >= 400:
            _raise_for_status(ack)
        self._sessions.put(key, session)
        log.info("upstream legacy session opened: version=%s, session=%s", version, bool(session.session_id))
        return session

    # -- message building

    def _body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    def _meta(self) -> dict[str, Any]:
        return {META_VERSION: MODERN_VERSION, META_CLIENT_INFO: self._client_info, META_CAPABILITIES: {}}

    def _headers(
        self, authorization: str | None, version: str | None, method: str | None, extra: dict[str, str]
    ) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": ACCEPT}
        if version is not None:
            headers["MCP-Protocol-Version"] = version
        if version == MODERN_VERSION and method is not None:
            headers["Mcp-Method"] = method
            headers.update(extra)  # Mcp-Name and Mcp-Param-*: request metadata of the modern era only
        if authorization:
            headers["Authorization"] = authorization
        return headers

    def _switch(self, era: str) -> None:
        if self.era != era:
            log.info("upstream speaks the %s protocol era", era)
        self.era = era


def _era_of(reply: Reply, request_id: int, method: str) -> str | None:
    """ "legacy" when a reply to a modern request shows a handshake-era upstream, else None."""
    error = _rpc_error(reply.message)
    if error is not None and error.get("code") == UNSUPPORTED_VERSION:
        data = error.get("data")
        supported = data.get("supported") if isinstance(data, dict) else None
        if isinstance(supported, list) and any(v in LEGACY_VERSIONS for v in supported):
            return "legacy"  # it speaks only handshake versions we share
        return None  # modern, without a version we share: surfaces as rpc_error
    if method == "server/discover" and error is not None and error.get("code") == METHOD_NOT_FOUND:
        return "legacy"  # every modern server implements discover; only a legacy one lacks it
    if reply.status not in (400, 404, 405):
        return None
    if error is None:
        return "legacy"
    code, same_id = error.get("code"), reply.message.get("id") == request_id  # type: ignore[union-attr]
    if code in (HEADER_MISMATCH, MISSING_CAPABILITY):
        return None
    if code in (METHOD_NOT_FOUND, INVALID_PARAMS) and same_id:
        return None  # a modern answer to this very request
    return "legacy"  # a transport-level refusal (no session, unknown version header) by a legacy server


def _rpc_error(message: dict[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    error = message.get("error")
    return error if isinstance(error, dict) and isinstance(error.get("code"), int) else None


def _raise_for_status(reply: Reply) -> None:
    status = reply.status
    www = reply.headers.get("www-authenticate")
    if status == 401:
        raise UpstreamError(
            "unauthorized", "the upstream refused the credentials", status=401, www_authenticate=www
        )
    if status == 403:
        raise UpstreamError(
            "forbidden", "the upstream forbids this request", status=403, www_authenticate=www
        )
    if status == 429:
        raise UpstreamError(
            "rate_limited",
            "the upstream is rate limiting requests",
            status=429,
            retry_after=retry_after(reply.headers, RETRY_AFTER_CAP),
        )
    if status >= 500:
        raise UpstreamError(
            "unavailable",
            f"the upstream failed with HTTP {status}",
            status=status,
            retry_after=retry_after(reply.headers, RETRY_AFTER_CAP),
        )
    if status == 413:
        raise UpstreamError("too_large", "the upstream refused the request as too large", status=413)
    if status >= 300:
        error = _rpc_error(reply.message)
        if error is not None:
            raise _from_rpc(error, status)
        raise UpstreamError("bad_response", f"the upstream answered HTTP {status}", status=status)


def _result(reply: Reply, request_id: int) -> dict:
    _raise_for_status(reply)
    message = reply.message
    if message is None:
        raise UpstreamError(
            "bad_response", "the upstream answered without a JSON-RPC response", status=reply.status
        )
    error = _rpc_error(message)
    if error is not None:
        raise _from_rpc(error, reply.status)
    if message.get("id") != request_id or message.get("jsonrpc") != "2.0":
        raise UpstreamError("bad_response", "the upstream's answer is not a response to this request")
    result = message.get("result")
    if not isinstance(result, dict):
        raise UpstreamError("bad_response", "the upstream's response has no result object")
    return result


def _from_rpc(error: dict[str, Any], status: int | None) -> UpstreamError:
    text = error.get("message")
    return UpstreamError(
        "rpc_error",
        text if isinstance(text, str) and text else "the upstream answered an error",
        status=status if status and status >= 400 else None,
        code=error["code"],
        data=error.get("data"),
    )


def _clean(pages: list[list[Any]]) -> Listing:
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
                log.warning("upstream tool %s dropped: %s", shown, reason)
                continue
            seen.add(name)
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
        mcp_headers.header_params(schema)
    except mcp_headers.InvalidHeaderAnnotation as exc:
        return str(exc)
    return None
