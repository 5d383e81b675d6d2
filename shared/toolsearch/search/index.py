"""Build a catalog's search index: BM25 alone, or BM25 fused with embeddings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..catalog import Catalog
from . import SearchIndex
from .lexical import build_lexical_index


def make_indexer(embedder: Any = None) -> Callable[[Catalog], SearchIndex]:
    def index(catalog: Catalog) -> SearchIndex:
        return build_lexical_index(catalog.tools)

    return index
