"""One request answered as Server-Sent Events: its progress notifications, then its response.

Streamable HTTP lets a server answer a request with an SSE stream of
notifications related to it, ending with the response. The proxy does so for a
tools/call whose `_meta.progressToken` it can answer to, from a caller whose
Accept lists `text/event-stream`, and only once there is progress to send:
until the first notification the answer is still one JSON response with its own
HTTP status (as the official SDK decides too). So a caller that asked for
progress and got none sees what it saw before, and a refusal before the call
(a 401 among them) keeps its status. After the first event the status is 200
and the response, whatever it holds, is the last event.

Closing the stream cancels the call in the 2026-07-28 era, where that is what
closing means. In the handshake era it does not (there a disconnect is not a
cancellation), so the call runs to its end unobserved, as a call answered with
JSON does. Under Lambda's buffered mode the events are collected into one
body, which is still a valid SSE answer, and one Lambda limits: so the stream
counts what each event takes as the answer is measured (`ResponseSize`: on
Lambda, as the runtime serialises the body, where a control character of a
message, `\\u001b` in the event, takes 7 bytes), and the response that ends it
is fitted into what the events left.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from typing import Any

from starlette.responses import Response, StreamingResponse

from toolsearch.server.response_size import ResponseSize
from toolsearch.service.progress import Progress

MEDIA_TYPE = "text/event-stream"
# As the spec asks of an SSE answer: no caching, and no buffering by a reverse proxy (nginx).
HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}

_unobserved: set[asyncio.Task[Any]] = set()  # handshake-era calls whose caller went away, until they end


def accepts_event_stream(accept: Iterable[str]) -> bool:
    """Whether the Accept header values list `text/event-stream` (with a q other than 0)."""
    for value in accept:
        for item in value.split(","):
            media, *params = (part.strip() for part in item.split(";"))
            if media.lower() == MEDIA_TYPE and not any(_refuses(param) for param in params):
                return True
    return False


def _refuses(param: str) -> bool:
    name, _, value = param.partition("=")
    if name.strip().lower() != "q":
        return False
    try:
        return float(value) == 0
    except ValueError:
        return False


EVENT_PREFIX, EVENT_SUFFIX = "event: message\ndata: ", "\n\n"


def event(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as one SSE event (JSON text holds no raw line break)."""
    data = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (EVENT_PREFIX + data + EVENT_SUFFIX).encode()


class ProgressStream:
    """One request's progress events, and the choice between a JSON and an SSE answer."""

    def __init__(self, token: str | int, size: ResponseSize | None = None) -> None:
        self.token = token  # the caller's own: every event carries it back
        self._size = size or ResponseSize.local()
        self._framing = self._size.of_text(EVENT_PREFIX + EVENT_SUFFIX)
        self._pending: deque[bytes] = deque()
        self._arrived = asyncio.Event()
        self.sent_bytes = 0  # what the progress events take of the answer, measured as it is limited

    @property
    def room_taken(self) -> int:
        """What the answer holds besides its response: the events so far and the last one's framing."""
        return self.sent_bytes + self._framing

    async def sink(self, progress: Progress) -> None:
        """The `ProgressSink` of this request. Never blocks: the relay bounds how many come."""
        note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": progress.params(self.token)}
        self._pending.append(event(note))
        self.sent_bytes += self._size.of(note) + self._framing
        self._arrived.set()

    async def answer(
        self,
        work: Coroutine[Any, Any, Response],
        *,
        cancel_on_close: bool,
        on_end: Callable[[], None],
    ) -> Response:
        """`work`'s JSON response when it comes before any progress; else the SSE stream of both.

        `work` must turn every failure into a response. `on_end` is called once, when the answer
        has been given in full (or the caller has gone).
        """
        task = asyncio.create_task(work)
        try:
            await self._next(task)
        except BaseException:
            _let_go(task, cancel=cancel_on_close)
            on_end()
            raise
        if not self._pending:
            on_end()
            return task.result()
        return StreamingResponse(
            self._events(task, cancel_on_close, on_end), media_type=MEDIA_TYPE, headers=HEADERS
        )

    async def _events(
        self, task: asyncio.Task[Response], cancel_on_close: bool, on_end: Callable[[], None]
    ) -> AsyncIterator[bytes]:
        try:
            while True:
                while self._pending:
                    yield self._pending.popleft()
                if task.done():
                    break
                await self._next(task)
            body = bytes(task.result().body)
            if body:
                yield EVENT_PREFIX.encode() + body + EVENT_SUFFIX.encode()  # a JSON body is one line
        finally:
            if not task.done():
                _let_go(task, cancel=cancel_on_close)
            on_end()

    async def _next(self, task: asyncio.Task[Response]) -> None:
        """Until a progress event is pending or the work is done."""
        if self._pending or task.done():
            return
        self._arrived.clear()
        waiter = asyncio.ensure_future(self._arrived.wait())
        try:
            await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()


def _let_go(task: asyncio.Task[Any], *, cancel: bool) -> None:
    """The caller is gone before the answer: cancel the work, or let it finish unobserved."""
    if cancel:
        task.cancel()
        return
    _unobserved.add(task)
    task.add_done_callback(_forget)


def _forget(task: asyncio.Task[Any]) -> None:
    _unobserved.discard(task)
    if not task.cancelled():
        task.exception()  # read, so that nothing is logged as never retrieved
