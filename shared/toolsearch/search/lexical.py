"""BM25 over one catalog: rank-bm25's Okapi scores, computed ahead of time.

`rank_bm25.BM25Okapi` defines the scores (its idf with the epsilon floor, k1,
b, avgdl). Its `get_scores` walks every document in Python for every query
term, so at index time each term's contribution to each document that holds
it is computed once, with the same arithmetic, into a compressed sparse
layout (CSR: one slice of positions and contributions per term). A query then
adds a few slices. tests/test_search_lexical.py holds the two equal.

A document is a hit when it holds at least one query term. That is the same
as "score above zero" except in tiny catalogs, where rank-bm25's idf is zero
for a term in exactly half of the documents and negative (floored at
epsilon * average idf, itself negative) when every term is common: a tool
that matches must still be found there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rank_bm25 import BM25Okapi

from toolsearch.catalogs.catalog import Tool
from toolsearch.search import Hit
from toolsearch.search.documents import document_tokens
from toolsearch.search.text import tokenize_query

__all__ = ["LexicalIndex", "build_lexical_index"]


class LexicalIndex:
    """Implements `toolsearch.search.SearchIndex` with BM25 alone."""

    def __init__(
        self, documents: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ) -> None:
        self.size = len(documents)
        self._term_ids: dict[str, int] = {}
        self._starts = np.zeros(1, dtype=np.int64)  # term t's postings: [_starts[t], _starts[t + 1])
        self._positions = np.zeros(0, dtype=np.int32)
        self._contributions = np.zeros(0, dtype=np.float64)
        if any(len(doc) for doc in documents):  # rank-bm25 divides by zero on an empty corpus
            self._build(BM25Okapi([list(doc) for doc in documents], k1=k1, b=b, epsilon=epsilon))

    def _build(self, bm25: BM25Okapi) -> None:
        self._term_ids = term_ids = {term: i for i, term in enumerate(bm25.idf)}
        postings_term: list[int] = []
        postings_tf: list[int] = []
        terms_per_doc: list[int] = []
        for frequencies in bm25.doc_freqs:  # extend/map keep the per-posting work out of Python bytecode
            postings_term.extend(map(term_ids.__getitem__, frequencies))
            postings_tf.extend(frequencies.values())
            terms_per_doc.append(len(frequencies))
        terms = np.array(postings_term, dtype=np.int64)
        order = np.argsort(terms, kind="stable")  # stable: positions stay ascending within a term
        positions = np.repeat(np.arange(self.size, dtype=np.int32), terms_per_doc)[order]
        tf = np.array(postings_tf, dtype=np.float64)[order]
        idf = np.fromiter(bm25.idf.values(), dtype=np.float64, count=len(term_ids))[terms[order]]
        # The same expression, in the same order, as BM25Okapi.get_scores.
        doc_len = np.array(bm25.doc_len)[positions]
        k1, b = bm25.k1, bm25.b
        self._contributions = idf * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / bm25.avgdl)))
        self._positions = positions
        self._starts = np.concatenate(([0], np.cumsum(np.bincount(terms, minlength=len(term_ids)))))

    def _postings(
        self, terms: Sequence[str], weights: Sequence[float] | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The postings of `terms`, term after term in their order: positions, and each one's BM25
        contribution (or, with `weights`, its term's weight). None when no term is indexed."""
        get, starts, positions = self._term_ids.get, self._starts, self._positions
        held: list[np.ndarray] = []
        values: list[np.ndarray] = []
        for i, term in enumerate(terms):
            term_id = get(term)
            if term_id is None:
                continue
            span = slice(starts[term_id], starts[term_id + 1])
            held.append(positions[span])
            values.append(
                self._contributions[span] if weights is None else np.full(len(held[-1]), weights[i])
            )
        if not held:
            return None
        return np.concatenate(held), np.concatenate(values)

    def _sums(self, terms: Sequence[str], weights: Sequence[float] | None = None) -> np.ndarray:
        # bincount adds each document's values in the order given, term after term, from 0.0: the
        # same sums, in the same order, as adding one term's postings at a time.
        found = self._postings(terms, weights)
        if found is None:
            return np.zeros(self.size)
        return np.bincount(found[0], weights=found[1], minlength=self.size)

    def scores(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """BM25 score of every document for these query terms, and which documents hold any of them."""
        matched = np.zeros(self.size, dtype=bool)
        found = self._postings(terms)  # in order, repeats included, as rank-bm25 sums them
        if found is None:
            return np.zeros(self.size), matched
        matched[found[0]] = True
        return np.bincount(found[0], weights=found[1], minlength=self.size), matched

    def term_scores(self, terms: Sequence[str]) -> np.ndarray:
        """`scores(terms)` without which documents matched: the same sums, in the same order."""
        return self._sums(terms)

    def document_frequencies(self) -> dict[str, int]:
        """How many documents hold each term."""
        counts = np.diff(self._starts)
        return {term: int(counts[i]) for term, i in self._term_ids.items()}

    def term_matches(
        self, distinct_terms: Sequence[str], weights: Sequence[float] | None = None
    ) -> np.ndarray:
        """How many of these (distinct) terms each document holds; with `weights`, their sum."""
        return self._sums(distinct_terms, [1.0] * len(distinct_terms) if weights is None else weights)

    def search_terms(self, terms: Sequence[str], limit: int) -> list[Hit]:
        """The best `limit` documents holding any of `terms`, best first, ties by position."""
        if limit <= 0:
            return []
        return self.top(*self.scores(terms), limit)

    @staticmethod
    def top(scores: np.ndarray, matched: np.ndarray, limit: int) -> list[Hit]:
        """The best `limit` matched documents of these scores, best first, ties by position."""
        positions, best = LexicalIndex.top_arrays(scores, matched, limit)
        return [
            Hit(position, score) for position, score in zip(positions.tolist(), best.tolist(), strict=True)
        ]

    @staticmethod
    def top_arrays(scores: np.ndarray, matched: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """`top` as two arrays, positions and their scores, best first: no `Hit` made per document."""
        # The arrays' own methods, here and below: numpy's functions of the same names are Python
        # wrappers around them, a few calls a query each.
        candidates = matched.nonzero()[0]
        candidate_scores = scores[candidates]
        if len(candidates) > limit:  # keep the top `limit` scores and every tie with the last of them
            cut = len(candidates) - limit
            kth = candidate_scores.copy()  # np.partition's own copy, sorted in place without its wrapper
            kth.partition(cut)
            threshold = kth[cut]
            keep = candidate_scores >= threshold
            candidates, candidate_scores = candidates[keep], candidate_scores[keep]
        order = (-candidate_scores).argsort(kind="stable")[:limit]  # candidates ascend, so ties by position
        return candidates[order], candidate_scores[order]

    def search(self, queries: Sequence[str], limit: int) -> list[list[Hit]]:
        return [self.search_terms(tokenize_query(query), limit) for query in queries]


def build_lexical_index(tools: Sequence[Tool]) -> LexicalIndex:
    return LexicalIndex([document_tokens(tool) for tool in tools])
