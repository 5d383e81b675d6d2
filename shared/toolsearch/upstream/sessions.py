"""Handshake-era sessions with a legacy upstream, one per credential, least recently used first out.

An upstream opens a session for the credential that sent `initialize`, so a
session is kept under the SHA-256 of that Authorization value (`session_key`);
the value itself is never kept here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from toolsearch.ops.bounded import BoundedMap


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
        self._entries: BoundedMap[str, LegacySession] = BoundedMap(max_entries)

    def get(self, key: str) -> LegacySession | None:
        return self._entries.use(key)

    def put(self, key: str, session: LegacySession) -> None:
        self._entries.set(key, session)

    def drop(self, key: str, session: LegacySession) -> None:
        """Forget `session` unless a newer one already replaced it."""
        if self._entries.get(key) == session:
            self._entries.pop(key)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
