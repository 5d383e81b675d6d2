"""A request's headers looked up by name in a table made once, not by a pass over them each time:
a request to /mcp looks up about ten (origin, length, version, method, name, accept, authorization)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request


class IndexedHeaders(Headers):
    """Starlette's `Headers` of a scope, each name's values (in order) kept by name: the same answers."""

    def __init__(self, scope: MutableMapping[str, Any]) -> None:
        super().__init__(scope=scope)
        index: dict[bytes, list[str]] = {}
        for key, value in self._list:
            index.setdefault(key, []).append(value.decode("latin-1"))
        self._index = index

    def getlist(self, key: str) -> list[str]:
        return list(self._index.get(key.lower().encode("latin-1"), ()))

    def __getitem__(self, key: str) -> str:
        values = self._index.get(key.lower().encode("latin-1"))
        if not values:
            raise KeyError(key)
        return values[0]

    def __contains__(self, key: Any) -> bool:
        return key.lower().encode("latin-1") in self._index


def index_headers(request: Request) -> None:
    """The request's `headers` from now on indexed. Starlette keeps them in `_headers`, made on first
    use; were that ever renamed, this would only leave them as Starlette's own."""
    request._headers = IndexedHeaders(request.scope)
