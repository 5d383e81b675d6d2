"""The time by which the current request must be answered, when the platform sets one.

On Lambda an answer has to be back before the function's own timeout and, for a
request that came through API Gateway, before the gateway stops waiting
(`lambda_support.answer_in_time` sets it for each invocation). Upstream work
done for the request is cut at that time, so that a slow upstream becomes a
`timeout` result the caller can read rather than a gateway's 503 or a bare 502.
A local server sets none, and work that outlives one request (a catalog listing
that other requests may wait for) runs detached from it.

Deadlines are in the running event loop's clock (`loop.time()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Iterator

# A call with less time than this left before its deadline is not sent: no upstream answers that
# fast, so it would only be abandoned mid-flight, its outcome unknown to the caller.
MIN_CALL_SECONDS = 0.05

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("answer_by", default=None)


def current() -> float | None:
    """The loop time by which this request must be answered, or None when nothing bounds it."""
    return _deadline.get()


def too_late_to_send(deadline: float, floor: float = MIN_CALL_SECONDS) -> bool:
    """True when a call due by `deadline` (loop time) has under `floor` seconds left to be worth sending."""
    return asyncio.get_running_loop().time() >= deadline - floor


def within(seconds: float) -> float:
    """The loop time by which work allowed `seconds` must end: then, or the request's deadline if sooner."""
    own = asyncio.get_running_loop().time() + seconds
    request = _deadline.get()
    return own if request is None else min(own, request)


@contextlib.contextmanager
def answer_by(deadline: float | None) -> Iterator[None]:
    """Run the block (and every task it starts) with `deadline` as the request's deadline."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


def detached() -> contextvars.Context:
    """A copy of the current context without the request's deadline, for tasks that outlive it."""
    context = contextvars.copy_context()
    context.run(_deadline.set, None)
    return context
