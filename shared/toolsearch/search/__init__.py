"""Search over one catalog, behind one small interface.

`build_index(tools, embedder)` returns an index whose `search(queries, limit)`
ranks the catalog's tools for each query. The lexical half (BM25) always runs;
the embedding half joins in when an embedder is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Hit:
    position: int  # index into the catalog's tools
    score: float


class SearchIndex(Protocol):
    def search(self, queries: Sequence[str], limit: int) -> list[list[Hit]]:
        """The best `limit` hits for each query, best first, ties broken by position."""
        ...
