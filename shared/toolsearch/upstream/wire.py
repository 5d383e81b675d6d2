"""One JSON-RPC exchange over streamable HTTP: POST, then read a JSON body or an SSE stream.

Reads at most `limit` bytes of JSON (or of any one SSE event), so an
oversized answer fails as "too_large" without being held in memory. Of an SSE
answer, only the response is kept, and the call's progress notifications go to
its `ProgressRelay` when it has one; everything else is skipped. Network
failures become UpstreamError; HTTP statuses are left to the caller, which
knows the protocol era. A request that HTTP cannot carry (a header value with
surrounding whitespace or a control character) is refused before anything is
sent, as "bad_request" naming the header, never retried as if the network had
failed.
"""

from __future__ import annotations

import codecs
import json
import re
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, cast

import httpx

from toolsearch.mcp.protocol import loads_json
from toolsearch.service.progress import ProgressRelay

from .errors import UpstreamError, timed_out
from .sse import EventTooLarge, SSEParser

ACCEPT = "application/json, text/event-stream"
PROGRESS = "notifications/progress"
_ERROR_BODY_LIMIT = 64 * 1024  # an error answer worth reading is small
MAX_RETRY_AFTER = 86_400.0  # seconds: the longest Retry-After passed on
# A JSON escape of a UTF-16 surrogate (\ud800-\udfff): only then can a parsed string hold a lone one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # a regex: faster than `in` on large answers
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# A header value HTTP/1.1 can carry as httpx sends it: visible ASCII, with single spaces or tabs
# inside but not at either end (RFC 9110 field-value; h11 refuses anything else).
_FIELD_VALUE = re.compile(r"[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*")


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: httpx.Headers
    message: dict[str, Any] | None  # the JSON-RPC response to our id, or a JSON error body; None if none
    size: int = 0  # bytes of the answer read (the whole SSE stream up to the answer)


async def exchange(
    http: httpx.AsyncClient | httpx.AsyncBaseTransport,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    *,
    limit: int,
    timeout: httpx.Timeout,
    progress: ProgressRelay | None = None,
) -> Reply:
    _check_headers(headers)
    try:
        payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise UpstreamError(
            "bad_request", "the request holds text that is not valid Unicode; it was not sent"
        ) from None
    request_id = body.get("id")
    try:
        if isinstance(http, httpx.AsyncBaseTransport):
            request = httpx.Request(
                "POST", url, content=payload, headers=headers, extensions={"timeout": timeout.as_dict()}
            )
            response = await http.handle_async_request(request)
            try:
                return await _read(response, request_id, limit, progress)
            finally:
                await response.aclose()
        async with http.stream("POST", url, content=payload, headers=headers, timeout=timeout) as response:
            return await _read(response, request_id, limit, progress)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        raise UpstreamError("connect", f"could not connect to the upstream ({type(exc).__name__})") from None
    except httpx.TimeoutException:
        raise timed_out("the upstream did not answer in time") from None
    except httpx.LocalProtocolError:
        # Our request is not valid HTTP (the header check above should have said which part):
        # nothing reached the upstream, and sending it again would fail the same way.
        raise UpstreamError("bad_request", "the request is not valid HTTP; it was not sent") from None
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise UpstreamError(
            "bad_response", f"the upstream broke off its answer ({type(exc).__name__})"
        ) from None
    except httpx.TransportError as exc:
        raise UpstreamError("connect", f"could not reach the upstream ({type(exc).__name__})") from None


async def _read(
    response: httpx.Response, request_id: Any, limit: int, progress: ProgressRelay | None
) -> Reply:
    status, headers = response.status_code, response.headers
    if status == 202:
        return Reply(status, headers, None)
    if not 200 <= status < 300:
        raw = await _read_bounded(response, _ERROR_BODY_LIMIT, quiet=True)
        return Reply(status, headers, _json_object(raw) if raw else None, len(raw))
    media_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type == "text/event-stream":
        message, size = await _read_sse(response, request_id, limit, progress)
        return Reply(status, headers, message, size)
    if media_type == "application/json" or media_type.endswith("+json"):
        raw = await _read_bounded(response, limit)
        parsed = _json_object(raw)
        if parsed is None:
            raise UpstreamError("bad_response", "the upstream answered something that is not a JSON object")
        return Reply(status, headers, parsed, len(raw))
    raise UpstreamError(
        "bad_response", f"the upstream answered an unexpected content type ({media_type or 'none'})"
    )


async def _read_bounded(response: httpx.Response, limit: int, *, quiet: bool = False) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit and not quiet:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            if quiet:
                break
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_sse(
    response: httpx.Response, request_id: Any, limit: int, progress: ProgressRelay | None
) -> tuple[dict[str, Any], int]:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    parser = SSEParser(max_event_chars=limit)
    size = 0
    try:
        # Closed here, not left to the garbage collector: returning at the answer leaves the stream
        # unread, and an unclosed generator's finaliser is a task no invocation would wait for.
        chunks = cast(AsyncGenerator[bytes], response.aiter_bytes())  # typed an iterator; a generator
        try:
            async for chunk in chunks:
                size += len(chunk)
                for event in parser.feed(decoder.decode(chunk)):
                    if event.type != "message":
                        continue
                    message = _json_object(event.data.encode())
                    if message is None:
                        raise UpstreamError("bad_response", "the upstream sent an SSE event that is not JSON")
                    if message.get("id") == request_id and ("result" in message or "error" in message):
                        return message, size
                    if progress is not None and message.get("method") == PROGRESS and "id" not in message:
                        await progress.offer(message.get("params"))  # the relay checks token and params
                    # Anything else (log messages, requests we cannot answer, others' answers) is skipped.
        finally:
            await chunks.aclose()
    except EventTooLarge:
        raise _too_large(limit) from None
    raise UpstreamError("bad_response", "the upstream's event stream ended without an answer")


def _check_headers(headers: dict[str, str]) -> None:
    """Refuse, by name, a header that HTTP cannot carry; its value is never repeated (it may be a token)."""
    for name, value in headers.items():
        if not value or _FIELD_VALUE.fullmatch(value):
            continue
        if value != value.strip(" \t"):
            why = "it begins or ends with whitespace"
        elif not value.isascii():
            why = "it holds characters outside ASCII"
        else:
            why = "it holds a control character (such as CR, LF or NUL)"
        raise UpstreamError("bad_request", f"the {name} header cannot be sent: {why}; nothing was sent")


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = loads_json(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    if _SURROGATE_ESCAPE.search(raw):
        _mend_lone_surrogates(value)
    return value


def _mend_lone_surrogates(value: dict[str, Any]) -> None:
    """Replace, in place, each lone surrogate (JSON's `\\ud800` reads as one) with U+FFFD.

    Such text is valid JSON but not Unicode: no UTF-8 answer can carry it, so anything the upstream
    wrote that way (a result, a description, an error message) is mended as a UTF-8 decoder mends a
    bad byte, rather than failing whatever answer it later lands in. Pairs were joined when parsed.
    """
    stack: list[Any] = [value]
    while stack:  # not recursive: a value may be nested as deep as the parser allowed
        node = stack.pop()
        if isinstance(node, dict):
            if any(_mended(key) is not None for key in node):
                items = [(_mended(key) or key, item) for key, item in node.items()]
                node.clear()
                node.update(items)
            slots: Any = node.items()
        elif isinstance(node, list):
            slots = enumerate(node)
        else:
            continue
        for slot, item in list(slots):
            if isinstance(item, str):
                mended = _mended(item)
                if mended is not None:
                    node[slot] = mended
            elif isinstance(item, (dict, list)):
                stack.append(item)


def _mended(text: str) -> str | None:
    """`text` with its lone surrogates replaced by U+FFFD; None when it has none (the usual case)."""
    if text.isascii():  # O(1): CPython knows
        return None
    try:
        text.encode("utf-8")  # twice as fast as searching for them
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text)
    return None


def _too_large(limit: int) -> UpstreamError:
    return UpstreamError("too_large", f"the upstream's answer is larger than {limit} bytes")


def retry_after(headers: httpx.Headers) -> float | None:
    """Retry-After in seconds (delta or HTTP date), as the upstream said it; None if absent or
    unreadable. What the caller is told: a wait of the proxy's own is bounded where it waits."""
    raw = headers.get("retry-after", "").strip()
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(raw).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if seconds != seconds:  # NaN
        return None
    # A day at most: "inf" or 1e400 must stay a number JSON can carry, and longer tells a caller nothing more.
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)
