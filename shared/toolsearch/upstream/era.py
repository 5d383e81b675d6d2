"""The upstream's protocol era: what counts as evidence of it, and how long what was learnt holds.

The era is a property of the upstream, not of one request, so it is learnt only
from the discovery exchange: a well-formed answer to `server/discover`, or a
successful `initialize` handshake that the spec's fallback rules start from
that request. A failure of one caller's ordinary request (a front end's 400 for
a huge header, a plain-text 404) is that caller's error and teaches nothing.
What was learnt holds for a while (`upstream_era_ttl`), then is checked again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Literal

from toolsearch.mcp.protocol import (
    LEGACY_VERSIONS,
    MODERN_ERRORS,
    MODERN_VERSION,
    UNSUPPORTED_PROTOCOL_VERSION,
)

from .wire import Reply

log = logging.getLogger("toolsearch.upstream")

MODERN, LEGACY = "modern", "legacy"


# What an answer to server/discover says: the upstream is modern; try the initialize handshake
# (the spec's fallback); or nothing about the upstream (the caller's own failure: 401, 5xx, ...).
Verdict = Literal["modern", "fallback", "nothing"]


class EraMemory:
    """The era last learnt, and whether it is still fresh enough to go on without checking."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._era: str | None = None
        self._learnt_at = 0.0

    @property
    def known(self) -> str | None:
        """The era last learnt, fresh or not."""
        return self._era

    def fresh(self) -> str | None:
        """The era last learnt, if it was learnt less than `ttl` seconds ago."""
        if self._era is not None and self._clock() - self._learnt_at < self._ttl:
            return self._era
        return None

    def learn(self, era: str) -> None:
        if era != self._era:
            log.info("upstream protocol era learnt", extra={"era": era})
        self._era, self._learnt_at = era, self._clock()


def rpc_error(message: dict[str, Any] | None) -> dict[str, Any] | None:
    """The error object of a JSON-RPC error response, or None."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    error = message.get("error")
    return error if isinstance(error, dict) and isinstance(error.get("code"), int) else None


def answers(message: dict[str, Any] | None, request_id: int) -> bool:
    """Whether `message` is a JSON-RPC response (result or error) to this very request."""
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and message.get("id") == request_id
        and (isinstance(message.get("result"), dict) or rpc_error(message) is not None)
    )


def read_discovery(reply: Reply, request_id: int) -> Verdict:
    """What a reply to our server/discover (sent as a modern request) says of the upstream's era."""
    status, message = reply.status, reply.message
    if status in (401, 403, 413, 429) or status >= 500 or 300 <= status < 400:
        return "nothing"  # about this caller or this moment, not about the protocol
    error = rpc_error(message)
    if error is not None:
        code = error["code"]
        if code == UNSUPPORTED_PROTOCOL_VERSION:
            data = error.get("data")
            supported = data.get("supported") if isinstance(data, dict) else None
            supported = supported if isinstance(supported, list) else []
            if MODERN_VERSION not in supported and any(v in LEGACY_VERSIONS for v in supported):
                return "fallback"  # it speaks only handshake versions that we share
            return "modern"  # a modern server (with or without a version we share)
        if code in MODERN_ERRORS:
            return "modern"
        return "fallback"  # any other error is not a recognized modern one (spec: fall back)
    if 200 <= status < 300:
        return "modern" if answers(message, request_id) else "nothing"
    return "fallback"  # a 4xx without a JSON-RPC error body: the spec's cue for initialize


def refuses_as_modern(error: dict[str, Any] | None) -> bool:
    """Whether an error answered to our initialize is a modern server refusing the handshake."""
    if error is None:
        return False
    if error["code"] in MODERN_ERRORS:
        return True
    data = error.get("data")
    supported = data.get("supported") if isinstance(data, dict) else None
    return isinstance(supported, list) and MODERN_VERSION in supported
