"""What an upstream's HTTP status and JSON-RPC answer mean: a result, or an `UpstreamError` of a kind."""

from __future__ import annotations

from typing import Any

from .era import rpc_error
from .errors import UpstreamError
from .wire import Reply, retry_after


def raise_for_status(reply: Reply) -> None:
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
            retry_after=retry_after(reply.headers),
        )
    if status >= 500:
        raise UpstreamError(
            "unavailable",
            f"the upstream failed with HTTP {status}",
            status=status,
            retry_after=retry_after(reply.headers),
        )
    if status == 413:
        raise UpstreamError("too_large", "the upstream refused the request as too large", status=413)
    if status >= 300:
        error = rpc_error(reply.message)
        if error is not None:
            raise rpc_failure(error, status)
        raise UpstreamError("bad_response", f"the upstream answered HTTP {status}", status=status)


def result_of(reply: Reply, request_id: int) -> dict:
    raise_for_status(reply)
    message = reply.message
    if message is None:
        raise UpstreamError(
            "bad_response", "the upstream answered without a JSON-RPC response", status=reply.status
        )
    error = rpc_error(message)
    if error is not None:
        raise rpc_failure(error, reply.status)
    if message.get("id") != request_id or message.get("jsonrpc") != "2.0":
        raise UpstreamError("bad_response", "the upstream's answer is not a response to this request")
    result = message.get("result")
    if not isinstance(result, dict):
        raise UpstreamError("bad_response", "the upstream's response has no result object")
    return result


def rpc_failure(error: dict[str, Any], status: int | None) -> UpstreamError:
    text = error.get("message")
    return UpstreamError(
        "rpc_error",
        text if isinstance(text, str) and text else "the upstream answered an error",
        status=status if status and status >= 400 else None,
        code=error["code"],
        data=error.get("data"),
    )
