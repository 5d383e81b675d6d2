"""What the catalog store keeps per caller key, bounded: sets of keys, warm catalogs, strangers' refusals.

Anything keyed by a caller key grows with the tokens callers send, and anyone can send made-up
tokens: each structure here has a fixed bound and drops its oldest first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator

from .upstream import UpstreamError


class BoundedMap[V]:
    """A map of at most `limit` keys; past it the least recently set goes first."""

    def __init__(self, limit: int) -> None:
        self._limit = max(1, limit)
        self._items: OrderedDict[str, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def get(self, key: str) -> V | None:
        return self._items.get(key)

    def set(self, key: str, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._limit:
            self._items.popitem(last=False)

    def discard(self, key: str) -> None:
        self._items.pop(key, None)


class BoundedKeys(BoundedMap[bool]):
    def add(self, key: str) -> None:
        self.set(key, True)


class WarmCatalogs[V]:
    """Warm memory: at most `limit` entries (LRU), and at most `per_party` of them for one party.

    A party is who fair use counts as one caller (`Caller.party`: in exchange mode the verified
    subject, else the key). Past its share a party's new catalog pushes out its own oldest, never
    another party's, so one person's many tokens cannot empty everyone else's warm memory.
    """

    def __init__(self, limit: int, per_party: int) -> None:
        self._limit = max(1, limit)
        self._per_party = max(1, per_party)
        self._entries: OrderedDict[str, tuple[str, V]] = OrderedDict()
        self._counts: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        """The caller keys held, least recently used first."""
        return iter(list(self._entries))

    def get(self, key: str) -> V | None:
        held = self._entries.get(key)
        return None if held is None else held[1]

    def touch(self, key: str) -> None:
        self._entries.move_to_end(key)

    def pop(self, key: str) -> V | None:
        held = self._entries.pop(key, None)
        if held is None:
            return None
        party, entry = held
        self._counts[party] -= 1
        if not self._counts[party]:
            del self._counts[party]
        return entry

    def put(self, key: str, party: str, entry: V) -> int:
        """Keep `entry` as the newest; the number of other entries pushed out."""
        self.pop(key)
        self._entries[key] = (party, entry)
        self._counts[party] = self._counts.get(party, 0) + 1
        evicted = 0
        if self._counts[party] > self._per_party:
            oldest = next(k for k, (p, _e) in self._entries.items() if p == party)
            self.pop(oldest)
            evicted += 1
        while len(self._entries) > self._limit:
            self.pop(next(iter(self._entries)))
            evicted += 1
        return evicted


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
