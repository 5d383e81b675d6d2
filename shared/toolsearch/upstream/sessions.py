"""Handshake-era sessions with a legacy upstream, one per credential, least recently used first out.

An upstream opens a session for the credential that sent `initialize`, so a
session is kept under the SHA-256 of that Authorization value (`session_key`);
the value itself is never kept here.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LegacySession:
    session_id: str | None  # None when the upstream mints none (a stateless legacy server)
    protocol_version: str
    instructions: str


def session_key(authorization: str | None) -> str:
    """The key of the session opened with this Authorization value (None: without one)."""
    return hashlib.sha256((authorization or "").encode()).hexdigest()


class SessionStore:
    def __init__(self, max_entries: int) -> None:
        self._max = max(1, max_entries)
        self._entries: OrderedDict[str, LegacySession] = OrderedDict()

    def get(self, key: str) -> LegacySession | None:
        session = self._entries.get(key)
        if session is not None:
            self._entries.move_to_end(key)
        return session

    def put(self, key: str, session: LegacySession) -> None:
        self._entries[key] = session
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def drop(self, key: str, session: LegacySession) -> None:
        """Forget `session` unless a newer one already replaced it."""
        if self._entries.get(key) == session:
            del self._entries[key]

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
