"""`Span`: the one way the package times something (a call, a request, a listing, an exchange).

A span starts when it is made and is read when the timed work is over, as milliseconds: `ms` for a
metric, `logged_ms` (to a tenth) for a log line's `ms` field. It is an object rather than only a
`with` block because some spans end in a callback (a progress stream's last event), not where they
began.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Span:
    """A span of time being measured on the performance counter, from when it was made."""

    __slots__ = ("_clock", "started")

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock  # seconds; injected by tests
        self.started = clock()

    @property
    def ms(self) -> float:
        """Milliseconds since the span started."""
        return (self._clock() - self.started) * 1000

    @property
    def logged_ms(self) -> float:
        """Milliseconds since the span started, to a tenth: what a log line's `ms` field carries."""
        return round(self.ms, 1)
