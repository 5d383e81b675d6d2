"""Build a catalog's search index: BM25 alone, or BM25 fused with embeddings."""

from __future__ import annotations

from collections.abc import Callable

from toolsearch.catalog import Catalog
from toolsearch.search import Embedder, SearchIndex
from toolsearch.search.embedding import VectorCache, build_embedding_index
from toolsearch.search.hybrid import DEFAULT_FUSION, Fusion, HybridIndex
from toolsearch.search.lexical import build_lexical_index


def make_indexer(
    embedder: Embedder | None = None, *, cache: VectorCache | None = None, fusion: Fusion = DEFAULT_FUSION
) -> Callable[[Catalog], SearchIndex]:
    """An indexer for catalogs; with an embedder, tool vectors are shared through one cache."""
    cache = cache if cache is not None else VectorCache()  # an empty cache is falsy (len 0)

    def index(catalog: Catalog) -> SearchIndex:
        lexical = build_lexical_index(catalog.tools)
        if embedder is None:
            return lexical
        semantic = build_embedding_index(catalog.tools, embedder, cache)
        return HybridIndex(lexical, semantic, embedder, fusion)

    return index
