"""`BoundedMap`: the one map of the package that holds what callers' requests create, bounded.

Anything keyed by what a caller sends (a token's hash, a caller key, a text) grows with what
callers send, and anyone can send made-up tokens: every such map here is a `BoundedMap` of at most
`max_entries` entries. Past it the least recently set (or touched) goes first. On top of that:

- an entry may expire (`set(..., expires_at=...)`, in the time of the map's injected `clock`):
  from then on it reads as absent, and is dropped when read;
- a group (`per_group`): at most that many entries of one group; past its share a group's new
  entry pushes out that group's own oldest, never another group's;
- pinned entries (`pinned(value)` true) are never pushed out: while only pinned entries are left
  to evict, the map may hold more than `max_entries`.

Values are never None: `get` answers None for an absent key. Not thread safe (a caller that shares
one across threads holds a lock around it).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator

_ABSENT = object()


class BoundedMap[K: Hashable, V]:
    def __init__(
        self,
        max_entries: int,
        *,
        clock: Callable[[], float] | None = None,
        per_group: int | None = None,
        pinned: Callable[[V], bool] | None = None,
    ) -> None:
        self.max_entries = max(1, max_entries)
        self._clock = clock
        self._per_group = None if per_group is None else max(1, per_group)
        self._pinned = pinned
        self._items: OrderedDict[K, V] = OrderedDict()  # least recently used first
        self._expiries: dict[K, float] = {}  # only the entries that expire
        self._groups: dict[K, Hashable] = {}  # only with per_group
        self._counts: dict[Hashable, int] = {}

    def __len__(self) -> int:
        """Entries held, expired ones not yet read included."""
        return len(self._items)

    def __iter__(self) -> Iterator[K]:
        """The keys held, least recently used first (a copy: the map may change meanwhile)."""
        return iter(list(self._items))

    def __contains__(self, key: K) -> bool:
        return self.get(key) is not None

    def get(self, key: K) -> V | None:
        """The value of a live entry, else None; its place in the order is left as it was."""
        value = self._items.get(key, _ABSENT)
        if value is _ABSENT:
            return None
        if self._expiries:
            until = self._expiries.get(key)
            if until is not None and self._now() >= until:
                self.pop(key)
                return None
        return value  # type: ignore[return-value]

    def use(self, key: K) -> V | None:
        """`get`, and the entry (when live) becomes the most recently used."""
        value = self.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def entry(self, key: K) -> tuple[V, float] | None:
        """The value of a live entry and the seconds it has left (inf when it does not expire)."""
        value = self._items.get(key, _ABSENT)
        if value is _ABSENT:
            return None
        until = self._expiries.get(key)
        if until is None:
            return value, math.inf  # type: ignore[return-value]
        left = until - self._now()
        if left <= 0:
            self.pop(key)
            return None
        return value, left  # type: ignore[return-value]

    def touch(self, key: K) -> None:
        """The entry becomes the most recently used (a KeyError when absent)."""
        self._items.move_to_end(key)

    def set(self, key: K, value: V, *, expires_at: float | None = None, group: Hashable = None) -> int:
        """Hold `value` as the most recently used entry (in `group`, when the map has shares).

        `expires_at`: when it stops being read, in the time of `clock`. Returns how many other
        entries were pushed out to keep the bounds.
        """
        self.pop(key)
        self._items[key] = value
        if expires_at is not None:
            if self._clock is None:
                raise ValueError("an entry that expires needs a map with a clock")
            self._expiries[key] = expires_at
        evicted = 0
        if self._per_group is not None:
            self._groups[key] = group
            self._counts[group] = self._counts.get(group, 0) + 1
            if self._counts[group] > self._per_group:
                evicted += self._evict(lambda k: k != key and self._groups[k] == group)
        while len(self._items) > self.max_entries:
            if not self._evict(lambda k: k != key):
                break  # only pinned entries are left to push out
            evicted += 1
        return evicted

    def pop(self, key: K) -> V | None:
        """Remove an entry; its value (even when expired), or None when absent."""
        value = self._items.pop(key, _ABSENT)
        if value is _ABSENT:
            return None
        self._expiries.pop(key, None)
        if self._per_group is not None:
            group = self._groups.pop(key)
            self._counts[group] -= 1
            if not self._counts[group]:
                del self._counts[group]
        return value  # type: ignore[return-value]

    def discard(self, key: K) -> None:
        self.pop(key)

    def clear(self) -> None:
        self._items.clear()
        self._expiries.clear()
        self._groups.clear()
        self._counts.clear()

    def _evict(self, eligible: Callable[[K], bool]) -> int:
        """Drop the least recently used eligible, unpinned entry: 1, or 0 when there is none."""
        pinned = self._pinned
        for key, value in self._items.items():
            if eligible(key) and (pinned is None or not pinned(value)):
                self.pop(key)
                return 1
        return 0

    def _now(self) -> float:
        assert self._clock is not None  # entries expire only in a map with a clock
        return self._clock()
