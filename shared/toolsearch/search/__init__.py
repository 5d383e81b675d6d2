"""Search over one catalog, behind one small interface.

This module holds the interface: a `SearchIndex` ranks a catalog's tools for each query
(`search(queries, limit)`) as lists of `Hit`s. `search.index.make_indexer(embedder)` gives the
function that builds one for a `Catalog`: BM25 (`search.lexical`) always, fused with embeddings
(`search.embedding`, `search.hybrid`) when an embedder is given; `search.embedder` picks that
embedder from the settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, slots=True)
class Hit:
    position: int  # index into the catalog's tools
    score: float


class SearchIndex(Protocol):
    def search(self, queries: Sequence[str], limit: int) -> list[list[Hit]]:
        """The best `limit` hits for each query, best first, ties broken by position."""
        ...


class Embedder(Protocol):
    """A static embedding model (`model.load.load_embedder`): texts in, unit vectors out."""

    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, L2-normalised (all zeros for a text with no known token)."""
        ...
