"""Progress of one tools/call, from the upstream to the caller who asked for it.

A caller asks by putting `_meta.progressToken` on its tools/call. The caller's
token is never passed on (callers choose tokens freely, so two of them may
pick the same one): the upstream gets a token of the proxy's own, one per call
(`ProgressRelay.token`), and each `notifications/progress` that carries it is
checked and handed to the caller's `ProgressSink`, which sends it on with the
caller's token.

An upstream is untrusted, so a relay passes on only well-formed progress: a
finite `progress` that increases (the spec's MUST), an optional finite
`total`, an optional `message` string cut at `MAX_MESSAGE_CHARS`, and at most
`MAX_RELAYED` of them per call. Everything else is dropped and counted.
Messages are the upstream's data: they are never logged.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

# A client draws progress as a bar or a line of text: a hundred updates move a bar by every percent.
# An event holds at most ~2.5 KB (a message of MAX_MESSAGE_CHARS, a token of MAX_TOKEN_CHARS), so a
# flood adds at most ~250 KB to the answer, which Lambda buffers whole (6 MB with the result).
MAX_RELAYED = 100
MAX_MESSAGE_CHARS = 500  # a status line, not a report
# The caller's own token comes back in every event: a long one would multiply the answer.
MAX_TOKEN_CHARS = 256
_INT_BOUND = 2**63  # integers beyond int64 are not tokens or counts any client keeps


@dataclass(frozen=True, slots=True)
class Progress:
    progress: float
    total: float | None = None
    message: str | None = None

    def params(self, token: str | int) -> dict[str, Any]:
        """The params of a notifications/progress carrying this progress under `token`."""
        params: dict[str, Any] = {"progressToken": token, "progress": self.progress}
        if self.total is not None:
            params["total"] = self.total
        if self.message is not None:
            params["message"] = self.message
        return params


# Where a call's progress goes: the endpoint's response stream, or another caller of the seam.
ProgressSink = Callable[[Progress], Awaitable[None]]


def caller_token(params: Mapping[str, Any]) -> str | int | None:
    """The progress token of a request's params, when it is one the proxy will answer to.

    A string of at most MAX_TOKEN_CHARS or an integer (never a boolean); anything else means the
    caller asked for no progress we can send, which the spec allows: it gets none.
    """
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, Mapping) else None
    if isinstance(token, str) and len(token) <= MAX_TOKEN_CHARS:
        return token
    if type(token) is int and -_INT_BOUND <= token < _INT_BOUND:
        return token
    return None


class ProgressRelay:
    """One upstream call's progress: our token for it, and the checks before the caller's sink."""

    def __init__(self, sink: ProgressSink, *, limit: int = MAX_RELAYED) -> None:
        self.token = "toolsearch-" + secrets.token_hex(8)
        self._sink = sink
        self._limit = limit
        self._last: float | None = None
        self.relayed = 0
        self.dropped = 0

    async def offer(self, params: Any) -> None:
        """A notifications/progress from the upstream: relayed when it is ours and well formed."""
        progress = self._check(params)
        if progress is None:
            self.dropped += 1
            return
        self._last = progress.progress
        self.relayed += 1
        await self._sink(progress)

    def _check(self, params: Any) -> Progress | None:
        if not isinstance(params, Mapping) or params.get("progressToken") != self.token:
            return None
        if self.relayed >= self._limit:
            return None
        progress, total, message = params.get("progress"), params.get("total"), params.get("message")
        if not isinstance(progress, int | float) or not _finite(progress):
            return None
        if total is not None and not _finite(total):
            return None
        if self._last is not None and progress <= self._last:
            return None
        if message is not None:
            if not isinstance(message, str):
                return None
            if len(message) > MAX_MESSAGE_CHARS:
                message = message[: MAX_MESSAGE_CHARS - 1] + "…"
        return Progress(progress, total, message)


def _finite(value: Any) -> bool:
    if type(value) is int:
        return -_INT_BOUND <= value < _INT_BOUND
    return type(value) is float and math.isfinite(value)
