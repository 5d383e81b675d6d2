"""uvicorn as `toolsearch serve` runs it, with a deadline for each request's headers.

uvicorn bounds how long a connection may sit idle after a response (the
keep-alive timeout), but not how long a client may take to send a request's
headers, nor how long a new connection may stay silent: a client that trickles
a header byte now and then holds its connection, and a file descriptor, for
ever (16 KB of headers at a byte a second is four and a half hours). So the h11
protocol here closes a connection, with a 408, when a request's headers are not
complete `request_read_timeout` seconds after its first byte (or after the
connection opened). The body has its own deadline in the app
(`McpEndpoint._read_body`, server/endpoint.py), which holds wherever the app runs.

The deadline is kept on uvicorn's httptools protocol (its C parser takes about 0.1 ms of CPU
off each request against h11), which bounds no header's size: headers still incomplete past
h11's bound (16 KiB) get h11's answer, a 400. Without httptools, the h11 protocol keeps it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is a dependency; a platform without its wheel falls back to h11
    HttpToolsProtocol = None  # type: ignore[assignment,misc]

from toolsearch.server.host_check import with_host_check
from toolsearch.settings import Settings

# Written straight to the socket: h11 cannot send a response to a request it has not parsed.
_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class _HeaderDeadline:
    """A request's headers must arrive within `header_timeout` seconds (mixed into a uvicorn protocol)."""

    header_timeout = 15.0
    cycle: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._cycle_before: Any = None  # the request/response cycle current when the timer started

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._start_header_timer()

    def data_received(self, data: bytes) -> None:
        # The first bytes after a response start the next request: its headers are now on the clock.
        if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._start_header_timer()
        self._headers_received(data)
        super().data_received(data)  # type: ignore[misc]
        if self._header_timer is not None and self.cycle is not self._cycle_before:
            self._stop_header_timer()  # a new request's headers are complete
        elif self._header_timer is not None:
            self._headers_incomplete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def _headers_received(self, data: bytes) -> None:
        """Bytes of a request whose headers are not complete yet have arrived."""

    def _headers_incomplete(self) -> None:
        """They are still not complete once those bytes were read."""

    def _start_header_timer(self) -> None:
        self._cycle_before = self.cycle
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.cycle is self._cycle_before and not self.transport.is_closing():
            self.transport.write(_TIMED_OUT)
            self.transport.close()


class HeaderDeadlineProtocol(_HeaderDeadline, H11Protocol):
    """uvicorn's h11 protocol; a request's headers must arrive within `header_timeout` seconds."""


# h11's bound on an incomplete request head (its max_incomplete_event_size), which httptools lacks.
MAX_HEADER_BYTES = 16 * 1024


if HttpToolsProtocol is not None:  # else there is no such base: `uvicorn_options` keeps h11

    class HttpToolsHeaderDeadlineProtocol(_HeaderDeadline, HttpToolsProtocol):
        """uvicorn's httptools protocol with the header deadline, and h11's bound on a request's head."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_bytes = 0

        def _start_header_timer(self) -> None:
            super()._start_header_timer()
            self._head_bytes = 0

        def _headers_received(self, data: bytes) -> None:
            self._head_bytes += len(data)

        def _headers_incomplete(self) -> None:
            if self._head_bytes > MAX_HEADER_BYTES and not self.transport.is_closing():
                self._stop_header_timer()
                self.send_400_response("Invalid HTTP request received.")  # what h11 answers past its bound


# What a browser client may send and read across origins: the MCP headers of both eras and those
# an AWS SigV4 signature adds. template.yaml gives the function URL and the HTTP API the same lists.
CORS_ALLOW_HEADERS = (
    "authorization",
    "content-type",
    "accept",
    "last-event-id",
    "mcp-protocol-version",
    "mcp-session-id",
    "mcp-method",
    "mcp-name",
    "x-amz-date",
    "x-amz-security-token",
    "x-amz-content-sha256",
)
CORS_EXPOSE_HEADERS = ("mcp-session-id", "mcp-protocol-version", "www-authenticate", "retry-after")


def with_cors(app: ASGIApp, allowed_origins: Sequence[str]) -> ASGIApp:
    """`app` answering browsers' CORS preflights for the allowed origins (none: `app` unchanged).

    For `toolsearch serve` only: on Lambda the function URL and API Gateway answer preflights
    themselves (template.yaml), before any IAM check, and add the headers to every response.
    """
    if not allowed_origins:
        return app
    return CORSMiddleware(
        app,
        allow_origins=[origin.rstrip("/") for origin in allowed_origins],
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=list(CORS_ALLOW_HEADERS),
        expose_headers=list(CORS_EXPOSE_HEADERS),
        allow_credentials=False,
        max_age=600,
    )


def served_app(app: ASGIApp, settings: Settings) -> ASGIApp:
    """`app` as `toolsearch serve` serves it: the Host checked first (every route, preflights
    included), then browsers' CORS preflights answered."""
    cors = with_cors(app, settings.endpoint.allowed_origins)
    return with_host_check(cors, settings.server.host, settings.server.port, settings.server.allowed_hosts)


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The uvicorn settings of `toolsearch serve`, past host and port."""
    header_timeout = settings.endpoint.request_read_timeout
    base = HeaderDeadlineProtocol if HttpToolsProtocol is None else HttpToolsHeaderDeadlineProtocol
    protocol = type(base.__name__, (base,), {"header_timeout": header_timeout})
    return {
        "http": protocol,
        "log_level": "warning",
        "access_log": False,
        # Idle connections are kept 75 s (uvicorn's default is 5): MCP clients hold one connection for
        # long stretches, and a short timeout races their next request into a closed socket.
        "timeout_keep_alive": 75,
    }
