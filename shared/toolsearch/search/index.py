"""Build a catalog's search index: BM25 alone, or BM25 fused with embeddings, then ranked.

With `ranker="learned"` (the default) the candidates of BM25 and of the embedding are put in
order by the learned ranker (`search.rerank`); with `ranker="fusion"`, or when its weights are
missing, by the weighted sum of the two scores (`search.hybrid`) or by BM25 alone.

`search_words` (the operator's `search_words_file`, by tool name) are indexed with each tool, in
its BM25 document and its embedded text, beside the tool's own `_meta` search hint.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from toolsearch.catalogs.catalog import Catalog
from toolsearch.search import Embedder, SearchIndex
from toolsearch.search.documents import document_tokens
from toolsearch.search.embedding import VectorCache, build_embedding_index
from toolsearch.search.hybrid import DEFAULT_FUSION, Fusion, HybridIndex
from toolsearch.search.lexical import LexicalIndex
from toolsearch.search.rerank import FieldIndex, RankedIndex, load_weights

RANKERS = ("learned", "fusion")


def make_indexer(
    embedder: Embedder | None = None,
    *,
    cache: VectorCache | None = None,
    fusion: Fusion = DEFAULT_FUSION,
    ranker: str = "learned",
    search_words: Mapping[str, str] | None = None,
) -> Callable[[Catalog], SearchIndex]:
    """An indexer for catalogs; with an embedder, tool vectors are shared through one cache."""
    cache = cache if cache is not None else VectorCache()  # an empty cache is falsy (len 0)
    weights = load_weights() if ranker == "learned" else None
    words = dict(search_words or {})

    def index(catalog: Catalog) -> SearchIndex:
        lexical = LexicalIndex(
            [document_tokens(tool, extra=words.get(tool.name, "")) for tool in catalog.tools]
        )
        semantic = (
            build_embedding_index(catalog.tools, embedder, cache, words) if embedder is not None else None
        )
        if weights is not None:
            fields = FieldIndex(catalog.tools, lexical)
            return RankedIndex(lexical, fields, weights, semantic, embedder, fusion)
        if embedder is None or semantic is None:
            return lexical
        return HybridIndex(lexical, semantic, embedder, fusion)

    return index
