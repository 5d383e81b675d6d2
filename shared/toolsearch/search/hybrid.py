"""BM25 and embeddings, fused into one ranking.

Fusion is a weighted sum of each ranking's scores, each scaled to [0, 1] over
its own top candidates (BM25 from min(0, worst) to its best, cosine from the
candidates' floor to their best), so it keeps how sure each ranking is, which
reciprocal rank fusion (`Fusion(method="rrf")`, kept for comparison) throws away.
BM25's share is the `lexical_weight` setting. The best share depends on the
model: a stronger model earns a lower one. `toolsearch eval --fusion all`
measures every weight and RRF for the model in use; docs/benchmarks.md
("Search quality") has the figures behind the default and behind the weighted sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolsearch.search import Embedder, Hit
from toolsearch.search.embedding import EmbeddingIndex
from toolsearch.search.lexical import LexicalIndex

CANDIDATES = 50  # from each ranking, before fusing


@dataclass(frozen=True)
class Fusion:
    method: str = "weighted"  # "weighted" or "rrf"
    lexical_weight: float = 0.4  # weighted: the share of BM25; the embedding gets the rest
    rrf_k: float = 60.0


DEFAULT_FUSION = Fusion()


def fuse(lexical: list[Hit], semantic: list[Hit], limit: int, fusion: Fusion = DEFAULT_FUSION) -> list[Hit]:
    scores: dict[int, float] = {}
    if fusion.method == "rrf":
        for hits in (lexical, semantic):
            for rank, hit in enumerate(hits, start=1):
                scores[hit.position] = scores.get(hit.position, 0.0) + 1.0 / (fusion.rrf_k + rank)
    else:
        if lexical:
            # BM25 can score below zero in tiny catalogs (rank-bm25's idf): scale from min(0, worst).
            best, low = max(hit.score for hit in lexical), min(0.0, min(hit.score for hit in lexical))
            span = best - low
            for hit in lexical:
                scaled = (hit.score - low) / span if span > 0 else 1.0
                scores[hit.position] = fusion.lexical_weight * scaled
        if semantic:
            top, floor = semantic[0].score, semantic[-1].score
            span = (top - floor) or 1.0
            weight = 1.0 - fusion.lexical_weight
            for hit in semantic:
                if hit.score <= 0:
                    continue
                scores[hit.position] = scores.get(hit.position, 0.0) + weight * (hit.score - floor) / span
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return [Hit(position, score) for position, score in ranked[:limit]]


class HybridIndex:
    """Implements `toolsearch.search.SearchIndex`: BM25 fused with cosine similarity."""

    def __init__(
        self,
        lexical: LexicalIndex,
        semantic: EmbeddingIndex,
        embedder: Embedder,
        fusion: Fusion = DEFAULT_FUSION,
    ) -> None:
        self.lexical = lexical
        self.semantic = semantic
        self.embedder = embedder
        self.fusion = fusion

    def search(self, queries: Sequence[str], limit: int) -> list[list[Hit]]:
        depth = max(limit, CANDIDATES)
        lexical = self.lexical.search(queries, depth)
        # Each query embedded on its own: the tokenizer's batch call hands even five short queries to
        # a thread pool, which cost milliseconds on a busy or throttled CPU (docs/benchmarks.md).
        vectors = (
            np.vstack([self.embedder.encode([query]) for query in queries])
            if queries
            else np.zeros((0, 1), np.float32)
        )
        all_scores = self.semantic.scores(vectors)
        results = []
        for row, lexical_hits in enumerate(lexical):
            semantic_hits = self.semantic.rank(all_scores[row], depth)
            results.append(fuse(lexical_hits, semantic_hits, limit, self.fusion))
        return results
