"""Search every source of the public benchmark: the BM25 floor, ours lexical, ours hybrid."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from toolsearch.catalogs.catalog import Catalog
from toolsearch.search import Embedder, Hit, SearchIndex
from toolsearch.search.embedding import EmbeddingIndex, VectorCache, build_embedding_index
from toolsearch.search.hybrid import Fusion
from toolsearch.search.index import make_indexer

from .benchset import Source
from .measure import Figures, PlainBM25, measure, pooled

PHRASINGS = ("raw", "model")


class CosineOnly:
    """The model alone: tools by cosine with the query, no words (what the embedding brings)."""

    def __init__(self, semantic: EmbeddingIndex, embedder: Embedder) -> None:
        self.semantic, self.embedder = semantic, embedder

    def search(self, queries: Sequence[str], limit: int) -> list[list[Hit]]:
        return [
            self.semantic.rank(self.semantic.scores(self.embedder.encode([q]))[0], limit) for q in queries
        ]


def indexes(
    catalog: Catalog, embedder: Embedder | None, fusion: Fusion | None, ranker: str, cache: VectorCache
) -> dict[str, SearchIndex]:
    out: dict[str, SearchIndex] = {
        "bm25-floor": PlainBM25(catalog),
        "lexical": make_indexer(None, ranker=ranker)(catalog),
    }
    if embedder is not None:
        out["hybrid"] = make_indexer(embedder, cache=cache, fusion=fusion or Fusion(), ranker=ranker)(catalog)
        out["embedding"] = CosineOnly(build_embedding_index(catalog.tools, embedder, cache), embedder)
    return out


def evaluate(
    sources: Sequence[Source],
    embedder: Embedder | None = None,
    fusion: Fusion | None = None,
    ranker: str = "learned",
) -> list[Figures]:
    figures: list[Figures] = []
    cache = VectorCache()
    for source in sources:
        catalog = Catalog.from_definitions(source.tools)
        for search, index in indexes(catalog, embedder, fusion, ranker, cache).items():
            for phrasing in PHRASINGS:
                if (f := measure(source, catalog, index, search, phrasing)) is not None:
                    figures.append(f)
    return figures


def with_pools(figures: Sequence[Figures]) -> list[Figures]:
    """Each split's sources pooled, per search and phrasing, after the sources themselves."""
    out = list(figures)
    keys = dict.fromkeys((f.split, f.search, f.phrasing) for f in figures)
    for split, search, phrasing in keys:
        group = [f for f in figures if (f.split, f.search, f.phrasing) == (split, search, phrasing)]
        if len(group) > 1:
            out.append(pooled(group, f"all {split}"))
    return out


def render(figures: Sequence[Figures]) -> str:
    lines = [
        "raw = the request's own text; model = a model's first search_tools query for it",
        f"{'source':<24} {'split':<5} {'asked':<5} {'search':<11} {'n':>5} {'R@1':>6} {'R@3':>6} "
        f"{'R@5':>6} {'MRR':>6} {'cov@5':>6} {'fR@1':>6} {'fR@5':>6} {'ms/q':>6}",
    ]
    order = sorted(figures, key=lambda f: (f.split, f.source.startswith("all "), f.source, f.phrasing))
    for f in order:
        lines.append(
            f"{f.source:<24} {f.split:<5} {f.phrasing:<5} {f.search:<11} {f.requests:>5} {f.r1:>6.3f} "
            f"{f.r3:>6.3f} {f.r5:>6.3f} {f.mrr:>6.3f} {f.coverage5:>6.3f} {f.family_r1:>6.3f} "
            f"{f.family_r5:>6.3f} {f.ms_per_query:>6.2f}"
        )
    return "\n".join(lines)


def to_json(figures: Sequence[Figures], meta: dict[str, Any]) -> str:
    return json.dumps({"meta": meta, "figures": [asdict(f) for f in figures]}, indent=2)
