"""`StrangerGate`: the catalog store's bound on the upstream refusals of never-seen tokens.

What the store keeps per caller key (warm catalogs, marked keys, refusals) is in `BoundedMap`s
(`ops/bounded.py`); this gate bounds what made-up tokens cost the upstream instead.
"""

from __future__ import annotations

from collections.abc import Callable

from toolsearch.upstream import UpstreamError


class StrangerGate:
    """Refusals of never-seen tokens, bounded per proxy.

    Behind the proxy every listing comes from one address, so a flood of made-up tokens would be a
    flood of upstream 401s against the gateway's per-address limits. Once the upstream refused
    `limit` never-seen tokens within `window` seconds, further never-seen tokens are answered the
    last of those refusals (its challenge too) until the window ends, without asking the upstream.
    Callers with a catalog, or listed successfully before, never meet this gate.
    """

    def __init__(self, limit: int, window: float, clock: Callable[[], float]) -> None:
        self._limit = limit
        self._window = window
        self._clock = clock
        self._started = float("-inf")
        self._count = 0
        self._last: UpstreamError | None = None

    def refusal(self) -> UpstreamError | None:
        """The remembered refusal while the gate is closed, else None."""
        if self._limit <= 0 or self._last is None or self._count < self._limit:
            return None
        if self._clock() - self._started >= self._window:
            return None
        return self._last

    def refused(self, error: UpstreamError) -> None:
        """The upstream refused a never-seen token with `error` (a 401)."""
        now = self._clock()
        if now - self._started >= self._window:
            self._started, self._count = now, 0
        self._count += 1
        self._last = error
