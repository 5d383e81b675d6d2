"""Fair use of the upstream everyone shares: how much one caller may make the proxy send it.

Behind the proxy every caller reaches the upstream from the proxy's own address, and gateways
limit, and lock out, per address: left alone, one caller's burst becomes everyone's refusal. So
each caller key gets a token bucket (`rate` calls a minute, up to `burst` at once after a pause)
and at most `concurrency` calls in flight. A call beyond the rate is refused before it is sent,
with the seconds until the next token; a call beyond the concurrency waits for a slot until its
deadline, and is refused unsent if none frees in time. Other callers never wait for it.

The map of keys is bounded (`max_keys`, least recently used first), so many tokens cannot grow
memory; an entry with a call waiting or in flight is never dropped, since its slots are in use.
Everything is per process: on Lambda, per execution environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable

from toolsearch.errors import ToolsearchError
from toolsearch.ops.bounded import BoundedMap
from toolsearch.ops.deadline import too_late_to_send
from toolsearch.settings import FairUseConfig

MAX_KEYS = 4096  # callers remembered at once (about 600 bytes each, key included)


class CallerLimited(ToolsearchError):
    """A call refused before it was sent: `limit` says which bound, `retry_after` when to try again."""

    def __init__(self, limit: str, retry_after: float | None) -> None:
        super().__init__(limit)
        self.limit = limit  # "rate" | "concurrency"
        self.retry_after = retry_after


class _Caller:
    __slots__ = ("at", "loop", "slots", "tokens", "users")

    def __init__(self, tokens: float, at: float) -> None:
        self.tokens = tokens  # calls this caller may start now
        self.at = at  # clock time `tokens` was counted at
        self.users = 0  # calls waiting for a slot or holding one
        self.slots: asyncio.Semaphore | None = None
        self.loop: asyncio.AbstractEventLoop | None = None


class FairUse:
    """The per-caller bounds of one process. `clock` (seconds, monotonic) refills the buckets."""

    def __init__(
        self, config: FairUseConfig, clock: Callable[[], float] = time.monotonic, *, max_keys: int = MAX_KEYS
    ) -> None:
        self.config = config
        self._clock = clock
        self._per_second = max(0.0, config.rate) / 60.0
        self._burst = max(1, config.burst)
        # A caller with a call waiting or in flight is pinned: its slots are in use.
        self._callers: BoundedMap[str, _Caller] = BoundedMap(max_keys, pinned=lambda caller: caller.users > 0)

    def __len__(self) -> int:
        return len(self._callers)

    @contextlib.asynccontextmanager
    async def turn(self, key: str, deadline: float) -> AsyncIterator[None]:
        """The block runs as one of `key`'s calls: a token taken, a slot held until it ends.

        Raises CallerLimited, before the block runs, when the caller is past its rate, or when no
        slot frees by `deadline` (the running loop's time)."""
        caller = self._caller(key)
        self._take_token(caller)
        caller.users += 1
        try:
            slots = self._slots(caller)
            if slots is None:
                yield
                return
            if slots.locked():
                await self._wait_for_slot(caller, slots, deadline)
            else:
                await slots.acquire()  # a free slot: taken at once, whatever the deadline
            try:
                yield
            finally:
                slots.release()
        finally:
            caller.users -= 1

    async def _wait_for_slot(self, caller: _Caller, slots: asyncio.Semaphore, deadline: float) -> None:
        try:
            async with asyncio.timeout_at(deadline):
                await slots.acquire()
        except TimeoutError:
            acquired = False
        else:
            # A slot freed at (or just before) the deadline leaves no time to call: as good as none.
            acquired = not too_late_to_send(deadline)
            if not acquired:
                slots.release()
        if not acquired:
            caller.tokens = min(self._burst, caller.tokens + 1)  # nothing was sent: give it back
            raise CallerLimited("concurrency", None)

    def _take_token(self, caller: _Caller) -> None:
        if self._per_second <= 0:
            return
        now = self._clock()
        caller.tokens = min(self._burst, caller.tokens + max(0.0, now - caller.at) * self._per_second)
        caller.at = now
        if caller.tokens >= 1:
            caller.tokens -= 1
            return
        wait = (1 - caller.tokens) / self._per_second
        raise CallerLimited("rate", max(0.1, math.ceil(wait * 10) / 10))

    def _slots(self, caller: _Caller) -> asyncio.Semaphore | None:
        if self.config.concurrency <= 0:
            return None
        loop = asyncio.get_running_loop()
        if caller.loop is not loop:
            # A semaphore belongs to the loop it first waited on (Lambda keeps one; tests make more).
            caller.slots, caller.loop = asyncio.Semaphore(self.config.concurrency), loop
        assert caller.slots is not None
        return caller.slots

    def _caller(self, key: str) -> _Caller:
        caller = self._callers.use(key)
        if caller is None:
            caller = _Caller(float(self._burst), self._clock())
            self._callers.set(key, caller)
        return caller
