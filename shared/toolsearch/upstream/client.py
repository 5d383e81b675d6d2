"""The proxy's client of its one upstream MCP server.

Speaks MCP 2026-07-28 (every request carries its protocol version, client
info and capabilities in `_meta`, mirrored into headers) and falls back to the
`initialize` handshake of 2025-11-25 (answers of 2025-06-18 and 2025-03-26
accepted) when the upstream turns out to be a legacy server. The era is learnt
from the discovery exchange only (era.py), once per `upstream_era_ttl`, one
discovery at a time; between checks each call costs one round trip.

Each request carries the caller's Authorization header and nothing else of
theirs; cookies are never kept. Listing is retried on transient failures. A
tools/call is sent at most once: never retried, never re-sent after an era
check or a legacy session's renewal, since a call may have run even when its
answer was lost. A call whose caller asked for progress carries a progress
token of the proxy's own; what the upstream reports under it reaches the
caller's sink, checked and bounded (service/progress.py).

What an answer means is `answers.py`, what a listing keeps is `listing.py`, the
era's evidence is `era.py`. The rest stays in one class on purpose: discovery,
listing and calls share one request path (ids, headers, legacy sessions,
deadlines), and splitting it would hand that state around between classes.
"""

from __future__ import annotations

import asyncio
import functools
import http.cookiejar
import itertools
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from toolsearch.mcp import param_headers
from toolsearch.mcp.protocol import (
    IMPLEMENTATION,
    LEGACY_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    encode_header_value,
)
from toolsearch.ops import deadline as request_deadline
from toolsearch.ops.deadline import MIN_CALL_SECONDS, too_late_to_send
from toolsearch.ops.tasks import retrieve
from toolsearch.ops.timing import Span
from toolsearch.service.progress import ProgressRelay, ProgressSink

from ..settings import UpstreamConfig
from . import endpoint_hint
from .answers import raise_for_status, result_of
from .era import (
    LEGACY,
    MODERN,
    EraMemory,
    answers,
    read_discovery,
    refuses_as_modern,
)
from .errors import RETRYABLE, UpstreamError, answer_by
from .listing import Listing, catalog_too_large, clean_listing
from .sessions import LegacySession, SessionStore, session_key
from .wire import ACCEPT, Reply, exchange

log = logging.getLogger("toolsearch.upstream")


BACKOFF_BASE, BACKOFF_CAP = 0.25, 4.0
LONGEST_RETRY_WAIT = 10.0  # seconds a listing waits for the upstream's Retry-After; longer: it fails at once
DEFAULT_MAX_SESSIONS = 1024


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


class Upstream:
    def __init__(
        self,
        url: str,
        config: UpstreamConfig,
        *,
        http: httpx.AsyncClient | None = None,
        client_info: dict | None = None,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
    ) -> None:
        self.url = url
        self._config = config
        self._owns_http = http is None
        # Our own connection pool, used directly: MCP requests need none of the client layer (auth,
        # redirects, cookies), and skipping it saves about half a millisecond a call. A client given
        # to us (the demo's ASGI transport, tests) is used as it is.
        self._transport = httpx.AsyncHTTPTransport() if http is None else None
        self._http = http or httpx.AsyncClient(transport=self._transport, follow_redirects=False)
        self._http.cookies.jar.set_policy(_NoCookies())
        self._client_info = client_info or IMPLEMENTATION
        self._timeout = httpx.Timeout(config.timeout, connect=config.connect_timeout)
        # Bytes one answer may take: the largest result passed on, plus room for the envelope and a note.
        self._limit = config.max_result_bytes + max(config.max_result_bytes // 4, 64 * 1024)
        self._ids = itertools.count(1)
        self._sessions = SessionStore(max_sessions)
        self._era = EraMemory(config.era_ttl)
        self._discovering: asyncio.Future[None] | None = None  # set while one discovery runs

    @property
    def era(self) -> str | None:
        """ "modern" | "legacy" as last learnt from the upstream (None before the first discovery)."""
        return self._era.known

    @era.setter
    def era(self, era: str) -> None:
        self._era.learn(era)

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
        span = Span()
        limit = self._config.timeout
        # One deadline for the whole listing: every page, retry and backoff wait fits inside it.
        deadline = asyncio.get_running_loop().time() + limit
        try:
            async with answer_by(deadline, "the upstream did not list its tools within %g s", limit):
                instructions, pages = await self._list(authorization, deadline)
        except UpstreamError as exc:
            log.info(
                "upstream tools/list failed",
                extra={"outcome": exc.kind, "status": exc.status, "code": exc.code},
            )
            raise
        listing = clean_listing(pages)
        listing = Listing(tools=listing.tools, instructions=instructions, dropped=listing.dropped)
        log.info(
            "upstream tools/list ok",
            extra={
                "tools": len(listing.tools),
                "dropped": len(listing.dropped),
                "era": self.era,
                "ms": span.logged_ms,
            },
        )
        return listing

    async def call_tool(
        self,
        authorization: str | None,
        tool: Mapping[str, Any],
        arguments: dict,
        *,
        progress: ProgressSink | None = None,
    ) -> dict:
        """The upstream's result of one call, sent once. With a `progress` sink, the call carries a
        progress token of our own, and the upstream's progress for it reaches the sink, checked."""
        name = str(tool.get("name") or "")
        span = Span()
        outcome, status = "ok", None
        relay = ProgressRelay(progress) if progress is not None else None
        try:
            try:
                params = param_headers.header_params(tool.get("inputSchema"))
            except param_headers.InvalidHeaderAnnotation as exc:
                raise UpstreamError("bad_response", f"the tool's definition is invalid: {exc}") from None
            extra = {"Mcp-Name": encode_header_value(name), **param_headers.mirror(params, arguments)}
            # upstream_timeout, or less when the request must be answered sooner (Lambda, API Gateway).
            deadline = request_deadline.within(self._config.timeout)
            # The era is settled before the call is sent, so that nothing learnt after it can send it again.
            era, _ = await self._deadline(self._settle_era(authorization, deadline), deadline)
            call = {"name": name, "arguments": arguments}
            result, _ = await self._deadline(
                self._request(
                    authorization, era, "tools/call", call, extra, progress=relay, send_by=deadline
                ),
                deadline,
            )
            if result.get("isError") is True:
                outcome = "tool_error"
            return result
        except UpstreamError as exc:
            outcome, status = exc.kind, exc.status
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"  # the caller closed its stream (2026-07-28: that cancels the call)
            raise
        finally:
            fields: dict[str, Any] = {
                "tool": name,
                "outcome": outcome,
                "status": status,
                "ms": span.logged_ms,
            }
            if relay:
                fields.update(progress_relayed=relay.relayed, progress_dropped=relay.dropped)
            log.info("upstream tools/call", extra=fields)

    # -- the era

    async def _settle_era(self, authorization: str | None, deadline: float) -> tuple[str, str | None]:
        """The era to speak, and this caller's instructions when its own discovery just read them.

        A fresh era is used as it is. Otherwise one discovery runs at a time: the others wait for it
        when nothing is known yet, or go on with the stale era while it is checked. A discovery that
        proves nothing (this caller's 401, a front end's 400 to its header) fails this caller only;
        the others then try their own.
        """
        era = self._era.fresh()
        if era is not None:
            return era, None
        running = self._discovering
        if running is not None and running.get_loop() is not asyncio.get_running_loop():
            running = self._discovering = None  # left by an event loop that is gone
        if running is not None:
            if self._era.known is not None:
                return self._era.known, None
            await asyncio.shield(running)  # never fails: the outcome is read from self._era
            era = self._era.fresh()
            if era is not None:
                return era, None
        leading = self._discovering is None
        if leading:
            self._discovering = asyncio.get_running_loop().create_future()
        try:
            era, instructions = await self._retrying(lambda: self._discover_era(authorization), deadline)
            if era == MODERN and self._era.known == LEGACY:
                self._sessions.clear()  # so that a later return to the handshake starts afresh
            self._era.learn(era)
        except UpstreamError as exc:
            stale = self._era.known
            if stale is None:
                raise
            # The check failed for this caller; the era it was checking still stands until the next check.
            log.info(
                "upstream era check failed; keeping the era learnt", extra={"outcome": exc.kind, "era": stale}
            )
            return stale, None
        finally:
            if leading:
                done, self._discovering = self._discovering, None
                if done is not None and not done.done():
                    done.set_result(None)
        return era, instructions

    async def _discover_era(self, authorization: str | None) -> tuple[str, str | None]:
        """Ask server/discover as a modern request; fall back to initialize as the spec says."""
        body = self._body("server/discover", {"_meta": self._meta()})
        headers = self._headers(authorization, MODERN_VERSION, "server/discover", {})
        reply = await self._deadline(self._exchange(headers, body))
        verdict = read_discovery(reply, body["id"])
        if verdict == "modern":
            result = reply.message.get("result") if answers(reply.message, body["id"]) else None
            instructions = result.get("instructions") if isinstance(result, dict) else None
            return MODERN, instructions if isinstance(instructions, str) else ""
        if verdict == "nothing":
            if 300 <= reply.status < 400:
                hint = endpoint_hint.redirect(self.url, reply.headers)
                log.warning(
                    "upstream answered server/discover with a redirect", extra={"status": reply.status}
                )
                raise UpstreamError(
                    "bad_response",
                    f"the upstream answered server/discover with a redirect (HTTP {reply.status}). {hint}",
                    status=reply.status,
                )
            result_of(reply, body["id"])  # raises this caller's error
            raise UpstreamError("bad_response", "the upstream's answer to server/discover is not MCP")
        try:
            session = await self._deadline(self._legacy_session(authorization, renew=True))
        except UpstreamError as exc:
            refusal = {"code": exc.code, "data": exc.data} if exc.kind == "rpc_error" else None
            if refuses_as_modern(refusal) or (refusal and answers(reply.message, body["id"])):
                # Both answered as JSON-RPC, and a legacy server never refuses initialize: a modern
                # server whose server/discover fails. It still lists tools.
                log.warning("upstream server/discover failed, initialize refused: modern, no instructions")
                return MODERN, ""
            if exc.kind == "bad_response" and exc.status is not None and 400 <= exc.status < 500:
                log.warning(
                    "upstream answered neither server/discover nor initialize; the MCP endpoint is elsewhere",
                    extra={
                        "discover_status": reply.status,
                        "initialize_status": exc.status,
                        "likely_endpoint": endpoint_hint.likely_endpoint(self.url) or "unknown",
                    },
                )
                raise UpstreamError(
                    "bad_response",
                    f"the upstream answered neither server/discover (HTTP {reply.status}) nor initialize "
                    f"(HTTP {exc.status}) as an MCP server. {endpoint_hint.not_an_endpoint(self.url)}",
                    status=exc.status,
                ) from None
            raise
        return LEGACY, session.instructions

    # -- listing

    async def _list(self, authorization: str | None, deadline: float) -> tuple[str, list[list[Any]]]:
        era, instructions = await self._settle_era(authorization, deadline)
        discover: asyncio.Task[str] | None = None
        if era == MODERN and instructions is None:
            # This caller's own instructions (another caller's discovery settled the era).
            asking = self._retrying(lambda: self._instructions(authorization), deadline)
            discover = asyncio.create_task(asking)
            discover.add_done_callback(retrieve)  # read even when the pages fail first
        try:
            pages = await self._pages(authorization, era, deadline)
            if discover is not None:
                instructions = await discover
        finally:
            if discover is not None and not discover.done():
                discover.cancel()
        if instructions is None:  # legacy: the handshake carried them
            session = self._sessions.get(session_key(authorization))
            instructions = session.instructions if session else ""
        return instructions, pages

    async def _instructions(self, authorization: str | None) -> str:
        try:
            result, _ = await self._deadline(self._request(authorization, MODERN, "server/discover", {}, {}))
        except UpstreamError as exc:
            if exc.kind == "rpc_error":  # a modern server whose discover fails still lists tools
                log.warning("upstream server/discover failed; no instructions", extra={"code": exc.code})
                return ""
            raise
        instructions = result.get("instructions")
        return instructions if isinstance(instructions, str) else ""

    async def _pages(self, authorization: str | None, era: str, deadline: float) -> list[list[Any]]:
        max_bytes, max_tools = self._config.max_catalog_bytes, self._config.max_catalog_tools
        pages: list[list[Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        listed_bytes = listed_tools = 0
        for _ in range(max(1, self._config.max_list_pages)):
            params = {"cursor": cursor} if cursor is not None else {}
            # A page may take what is left of the catalog's bytes, so a catalog too large is never read whole.
            left = max_bytes - listed_bytes
            if left <= 0:
                raise catalog_too_large(f"more than {max_bytes} bytes", "max_catalog_bytes")
            limit = min(self._limit, left)
            try:
                page = functools.partial(self._list_page, authorization, era, params, limit)
                result, size = await self._retrying(page, deadline)
            except UpstreamError as exc:
                if exc.kind == "too_large" and limit == left:
                    raise catalog_too_large(f"more than {max_bytes} bytes", "max_catalog_bytes") from None
                raise
            tools = result.get("tools")
            if not isinstance(tools, list):
                raise UpstreamError("bad_response", "the upstream's tools/list answer has no list of tools")
            listed_bytes += size  # an SSE answer is bounded per event: its whole stream is counted here
            listed_tools += len(tools)
            if listed_bytes > max_bytes:
                raise catalog_too_large(f"more than {max_bytes} bytes", "max_catalog_bytes")
            if listed_tools > max_tools:
                raise catalog_too_large(f"more than {max_tools} tools", "max_catalog_tools")
            pages.append(tools)
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return pages
            if cursor in seen:
                # A loop: keep what was listed rather than fail the whole catalog.
                log.warning("upstream tools/list repeated a cursor; stopping", extra={"pages": len(pages)})
                return pages
            seen.add(cursor)
        log.warning(
            "upstream tools/list has too many pages; keeping the first ones", extra={"pages": len(pages)}
        )
        return pages

    async def _list_page(
        self, authorization: str | None, era: str, params: dict[str, Any], limit: int
    ) -> tuple[dict, int]:
        return await self._deadline(self._request(authorization, era, "tools/list", params, {}, limit=limit))

    async def _retrying(self, attempt: Callable[[], Awaitable[Any]], deadline: float) -> Any:
        retries = max(0, self._config.list_retries)
        for n in itertools.count():
            try:
                return await attempt()
            except UpstreamError as exc:
                if exc.kind not in RETRYABLE or n >= retries:
                    raise
                delay = random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**n))  # full jitter
                if exc.retry_after is not None:
                    # Never before the upstream's Retry-After: a request sooner is one more refusal,
                    # which a gateway counts towards locking the proxy's address out.
                    if exc.retry_after > LONGEST_RETRY_WAIT:
                        raise  # a caller is waiting: the upstream's own figure tells them more
                    delay = max(delay, exc.retry_after)
                if asyncio.get_running_loop().time() + delay >= deadline:
                    raise  # the wait alone would pass the deadline: this error says more than a timeout
                log.info(
                    "upstream listing retried",
                    extra={"outcome": exc.kind, "retry": n + 1, "delay_s": round(delay, 2)},
                )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _deadline(self, request: Awaitable[Any], at: float | None = None) -> Any:
        """`request` within upstream_timeout, or by the loop time `at` (a call's whole deadline)."""
        loop = asyncio.get_running_loop()
        if at is None:
            at = loop.time() + self._config.timeout
        allowed = max(0.0, at - loop.time())
        async with answer_by(at, "the upstream did not answer within %.3g s", allowed):
            return await request

    # -- one request, in a known era

    async def _request(
        self,
        authorization: str | None,
        era: str,
        method: str,
        params: dict[str, Any],
        extra_headers: dict[str, str],
        *,
        limit: int = 0,
        progress: ProgressRelay | None = None,
        send_by: float | None = None,
    ) -> tuple[dict, int]:
        """The result of one request and the bytes its answer took. Whatever the upstream answers,
        a tools/call is sent once: an answer that looks like another era is this caller's error.
        With `send_by` (a call's deadline), it is not sent at all when too little time is left."""
        asked = {"progressToken": progress.token} if progress is not None else {}
        if era == MODERN:
            body = self._body(method, {**params, "_meta": {**self._meta(), **asked}})
            headers = self._headers(authorization, MODERN_VERSION, method, extra_headers)
            self._time_to_send(send_by, params)
            reply = await self._exchange(headers, body, limit, progress)
            return result_of(reply, body["id"]), reply.size
        for renewal in (False, True):
            session = await self._legacy_session(authorization)
            body = self._body(method, {**params, "_meta": asked} if asked else params)
            headers = self._headers(authorization, session.protocol_version, method, extra_headers)
            if session.session_id:
                headers["Mcp-Session-Id"] = session.session_id
            self._time_to_send(send_by, params)  # after the handshake, which may have taken the time
            reply = await self._exchange(headers, body, limit, progress)
            if reply.status == 404 and session.session_id:
                # The upstream forgot the session (expired, restarted): the next request hand-shakes again.
                self._sessions.drop(session_key(authorization), session)
                if method == "tools/call":
                    raise UpstreamError(
                        "session_expired",
                        "the upstream had forgotten this caller's session (HTTP 404), so it most likely "
                        "did not run the call; the call was not sent again. A new session opens with "
                        "the next request: call again if it is still wanted.",
                        status=404,
                    )
                if not renewal:
                    continue
            return result_of(reply, body["id"]), reply.size
        raise AssertionError("unreachable")

    def _time_to_send(self, send_by: float | None, params: dict[str, Any]) -> None:
        """Refuse, unsent, a request due by `send_by` with too little time left: sent, it would be
        abandoned mid-flight, its outcome (for a write, the worst answer) unknown to the caller.
        The floor never exceeds half the configured timeout, so a short one still sends calls."""
        if send_by is not None and too_late_to_send(send_by, min(MIN_CALL_SECONDS, self._config.timeout / 2)):
            name = params.get("name", "the tool")
            raise UpstreamError(
                "no_time", f"too little of this request's time was left to call {name}; it was not sent"
            )

    async def _legacy_session(self, authorization: str | None, *, renew: bool = False) -> LegacySession:
        key = session_key(authorization)
        session = None if renew else self._sessions.get(key)
        if session is not None:
            return session
        body = self._body(
            "initialize",
            {"protocolVersion": LEGACY_VERSIONS[0], "capabilities": {}, "clientInfo": self._client_info},
        )
        reply = await self._exchange(self._headers(authorization, None, None, {}), body)
        result = result_of(reply, body["id"])
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
        ack = await self._exchange(headers, notice)
        if ack.status >= 400:
            raise_for_status(ack)
        self._sessions.put(key, session)
        log.info(
            "upstream legacy session opened",
            extra={"protocol_version": version, "session": bool(session.session_id)},
        )
        return session

    # -- message building

    async def _exchange(
        self,
        headers: dict[str, str],
        body: dict[str, Any],
        limit: int = 0,
        progress: ProgressRelay | None = None,
    ) -> Reply:
        limit = limit if limit > 0 else self._limit
        return await exchange(
            self._sender, self.url, headers, body, limit=limit, timeout=self._timeout, progress=progress
        )

    def _body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    def _meta(self) -> dict[str, Any]:
        return {
            META_PROTOCOL_VERSION: MODERN_VERSION,
            META_CLIENT_INFO: self._client_info,
            META_CLIENT_CAPABILITIES: {},
        }

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
