"""How an upstream request failed, as data a model and a log can both carry.

Every failure of the upstream is an `UpstreamError` of a kind, made in this package only: from an
HTTP status or a JSON-RPC error object (`answers.py`), from httpx's failures (`wire.py`), and from a
deadline passing (`timed_out`, through `answer_by` wherever the proxy waits for the upstream).
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

from ..errors import ToolsearchError

KINDS = (
    "unauthorized",  # 401: the caller's token was refused
    "forbidden",  # 403
    "timeout",  # no full answer within the deadline; a call may have run
    "connect",  # no connection was made; a call certainly did not run
    "rate_limited",  # 429
    "unavailable",  # 5xx
    "bad_response",  # not JSON, malformed, a cut stream, an unexpected status
    "too_large",  # the answer exceeds the byte bound
    "rpc_error",  # the upstream answered a JSON-RPC error (see code and data)
    "bad_request",  # our request could not be sent as it is (e.g. a header HTTP forbids); nothing was sent
    "session_expired",  # a legacy upstream had forgotten the caller's session; the call was not re-sent
    "exchange_failed",  # exchange mode: the authorization server would not give the proxy an upstream token
    "token_expired",  # exchange mode: the upstream refused the proxy's held token; the call was not re-sent
    "no_time",  # the request's time was all but spent before the call could be sent; nothing was sent
)

RETRYABLE = frozenset({"connect", "timeout", "unavailable", "rate_limited"})


class UpstreamError(ToolsearchError):
    """`message` never holds a token or argument values; an rpc_error's is the upstream's own."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        www_authenticate: str | None = None,
        code: int | None = None,
        data: Any = None,
    ) -> None:
        assert kind in KINDS, kind
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.www_authenticate = www_authenticate
        self.code = code
        self.data = data

    def to_data(self) -> dict[str, Any]:
        """The structured form shown to the model (WWW-Authenticate is for the HTTP layer, not here)."""
        out: dict[str, Any] = {"error": self.kind, "message": self.message}
        if self.status is not None:
            out["status"] = self.status
        if self.retry_after is not None:
            out["retryAfterSeconds"] = self.retry_after
        if self.code is not None:
            out["code"] = self.code
        if self.data is not None:
            out["data"] = self.data
        return out

    def __repr__(self) -> str:
        return f"UpstreamError({self.kind!r}, status={self.status}, code={self.code})"


def timed_out(message: str) -> UpstreamError:
    """The one way a deadline passing becomes an upstream failure: `timeout` (a call may have run)."""
    return UpstreamError("timeout", message)


class answer_by:  # lower case: used as asyncio.timeout_at is
    """`async with answer_by(at, message, *args)`: the block, by the loop time `at`, or
    `timed_out(message % args)` (formatted only then). A `TimeoutError` that is not this deadline's
    passes through unchanged."""

    __slots__ = ("_args", "_message", "_timeout")

    def __init__(self, at: float, message: str, *args: object) -> None:
        self._timeout = asyncio.timeout_at(at)
        self._message = message
        self._args = args

    async def __aenter__(self) -> None:
        await self._timeout.__aenter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._timeout.__aexit__(kind, exc, tb)
        except TimeoutError:  # this deadline's, as asyncio raises it
            if not self._timeout.expired():
                raise
        else:  # the block's own exception, if any, goes on unless it is a timeout past this deadline
            if kind is None or not issubclass(kind, TimeoutError) or not self._timeout.expired():
                return
        raise timed_out(self._message % self._args) from None
