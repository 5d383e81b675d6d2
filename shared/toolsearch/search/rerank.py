"""The final order: a small linear ranker over cheap features of each candidate.

BM25 and the embedding each propose their best candidates; the ranker then orders their union
by a weighted sum of features that say more than one score can (`search.features`).
`words_threshold` can hand queries whose words reach almost no tool back to the fused order of
the two rankings (`search.hybrid`); it is off by default (see WORDS_THRESHOLD).

The weights (`data/ranker.json`) were learned on the public benchmark's dev split
(`tools/searchbench`, `python -m tools.searchbench train-ranker`), one set for hybrid search and
one for BM25 alone: per query, one small matrix product. A non-linear ranker (a one-hidden-layer
network, boosted trees over the linear score) and margin features against the best other
candidate were tried and not taken: they fit dev better but lost when a dev source was held out
(tools/searchbench/README.md, "Choices").
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import NamedTuple

import numpy as np

from toolsearch.search import Embedder, Hit
from toolsearch.search.embedding import EmbeddingIndex
from toolsearch.search.features import FEATURES, TERMS_HELD, features
from toolsearch.search.fields import FieldIndex
from toolsearch.search.hybrid import DEFAULT_FUSION, Fusion, fuse
from toolsearch.search.lexical import LexicalIndex
from toolsearch.search.text import tokenize_query_words

__all__ = [
    "FEATURES",
    "TERMS_HELD",
    "FieldIndex",
    "Linear",
    "RankedIndex",
    "RankerWeights",
    "features",
    "load_weights",
]


@dataclass(frozen=True)
class Linear:
    """Feature weights, with the centring and scaling the features had in training."""

    weights: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    folded: np.ndarray = field(init=False, repr=False, compare=False)  # weights / scale
    offset: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:  # the centring and scaling folded into the weights, once
        object.__setattr__(self, "folded", self.weights / self.scale)
        object.__setattr__(self, "offset", -float((self.mean / self.scale) @ self.weights))

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        """((matrix - mean) / scale) @ weights, as one product."""
        return matrix @ self.folded + self.offset


@dataclass(frozen=True)
class RankerWeights:
    hybrid: Linear
    lexical: Linear  # BM25 alone: no cosine features


@functools.cache
def load_weights() -> RankerWeights | None:
    """The shipped weights, or None when the file is missing or of another feature set."""
    path = resources.files("toolsearch") / "data" / "ranker.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if tuple(raw.get("features", ())) != FEATURES:
        return None
    linear = {
        mode: Linear(*(np.asarray(raw[mode][key], dtype=np.float64) for key in ("weights", "mean", "scale")))
        for mode in ("hybrid", "lexical")
    }
    return RankerWeights(**linear)


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


_NO_TOP = (_read_only(np.zeros(0, np.int64)), _read_only(np.zeros(0, np.float32)))  # no embedding: none


def _hits(top: tuple[np.ndarray, np.ndarray]) -> list[Hit]:
    return [Hit(p, s) for p, s in zip(top[0].tolist(), top[1].tolist(), strict=True)]


def order(matrix: np.ndarray, candidates: np.ndarray, ranker: Linear, limit: int) -> list[Hit]:
    """The candidates best first by the ranker's score; ties by catalog position."""
    if not len(candidates):
        return []
    scores = ranker.scores(matrix)
    best = (-scores).argsort(kind="stable")[:limit]  # candidates ascend: ties stay by position
    return [Hit(p, s) for p, s in zip(candidates[best].tolist(), scores[best].tolist(), strict=True)]


CANDIDATES = 50  # from each ranking, before ranking their union
# Below this share of the query's terms in its best candidate, the fused order of BM25 and cosine
# is kept instead of the ranker's. Off (0): at 0.15 it lost on the public dev split (raw R@1 0.806
# -> 0.801), and even at "no word held" one request (0.806 -> 0.805); it gained only on our own
# made-up set (tools/searchbench/README.md, "Choices"), which the rule does not let decide.
WORDS_THRESHOLD = 0.0


class Candidates(NamedTuple):  # named tuples: made once a query, cheaper than frozen dataclasses
    positions: np.ndarray  # ascending
    matrix: np.ndarray  # (candidates x FEATURES)
    lexical_top: tuple[np.ndarray, np.ndarray]  # BM25's best: positions and scores, best first
    semantic_top: tuple[np.ndarray, np.ndarray]  # the embedding's best, likewise (empty without one)

    @property
    def lexical_hits(self) -> list[Hit]:
        return _hits(self.lexical_top)

    @property
    def semantic_hits(self) -> list[Hit]:
        return _hits(self.semantic_top)


class QueryFacts(NamedTuple):
    """What searching one query found out about it, for the weak-match check to reuse."""

    terms: tuple[str, ...]  # tokenize_query(query)
    best_cosine: float | None  # its highest cosine with any tool; None without an embedding
    candidates: np.ndarray | None = None  # its candidates' positions, ascending
    terms_held: np.ndarray | None = None  # their `query_terms_held`, in the same order

    def words_held(self, positions: Sequence[int]) -> float | None:
        """The best `query_terms_held` of these positions, or None unless all are candidates.

        The weak-match check's share (search.weak), read from the features instead of summed
        again over the catalog: the same counts divided by the same number of distinct terms."""
        candidates, held = self.candidates, self.terms_held
        if candidates is None or held is None or not len(candidates) or not len(positions):
            return None
        wanted = np.asarray(positions)
        slots = candidates.searchsorted(wanted)
        # The ufuncs' reductions: ndarray.any and .max are Python wrappers around them.
        if np.logical_or.reduce(candidates.take(slots, mode="clip") != wanted):  # one is no candidate
            return None
        return float(np.maximum.reduce(held[slots]))


RECALLED_QUERIES = 64  # the last queries' facts kept per index: a search_tools call asks a few


class RankedIndex:
    """Implements `toolsearch.search.SearchIndex`: candidates from BM25 (and the embedding), ranked.

    Each query searched leaves its terms and best cosine behind (`recall`), so the weak-match check
    that follows (`search.weak`) neither tokenizes nor embeds the query again.
    """

    def __init__(
        self,
        lexical: LexicalIndex,
        fields: FieldIndex,
        rankers: RankerWeights,
        semantic: EmbeddingIndex | None = None,
        embedder: Embedder | None = None,
        fusion: Fusion = DEFAULT_FUSION,
        words_threshold: float = WORDS_THRESHOLD,
    ) -> None:
        self.fusion = fusion
        self.words_threshold = words_threshold
        self.lexical = lexical
        self.fields = fields
        self.semantic = semantic if embedder is not None else None
        self.embedder = embedder
        self.ranker = rankers.hybrid if self.semantic is not None else rankers.lexical
        self._recent: dict[str, QueryFacts] = {}

    def recall(self, query: str) -> QueryFacts | None:
        """The facts of `query` if it was among the last ones searched."""
        return self._recent.get(query)

    def _remember(self, query: str, facts: QueryFacts) -> None:
        recent = self._recent
        if len(recent) >= RECALLED_QUERIES and query not in recent:
            recent.pop(next(iter(recent), query), None)  # the oldest; another thread may have taken it
        recent[query] = facts

    def candidates(self, query: str, depth: int = CANDIDATES) -> tuple[np.ndarray, np.ndarray]:
        """The positions of one query's candidates and their (candidates x FEATURES) matrix."""
        found = self.find(query, depth)
        return found.positions, found.matrix

    def find(self, query: str, depth: int = CANDIDATES) -> Candidates:
        terms, words = tokenize_query_words(query)  # tokenize_query's, and wording.query_words'
        gathered = None
        if self.fields.whole is self.lexical:  # its scores from the gather the features' sums come from
            gathered = self.fields.gather(terms, words)
            scores, matched = self.fields.scores(gathered)
        else:
            scores, matched = self.lexical.scores(terms)
        lexical_top = LexicalIndex.top_arrays(scores, matched, depth)
        cosines, semantic_top = None, _NO_TOP
        if self.semantic is not None and self.embedder is not None:
            cosines = self.semantic.scores(self.embedder.encode([query]))[0]
            semantic_top = self.semantic.rank_arrays(cosines, depth)
        best = None if cosines is None else (float(cosines.max()) if len(cosines) else 0.0)
        if len(semantic_top[0]):
            chosen = np.zeros(self.lexical.size, dtype=bool)  # the union, ascending: no sort needed
            chosen[lexical_top[0]] = True
            chosen[semantic_top[0]] = True
            positions = chosen.nonzero()[0].astype(np.int64, copy=False)
        else:  # BM25's alone: distinct positions, sorted in a copy of their own
            positions = lexical_top[0].astype(np.int64)
            positions.sort()
        matrix = features(
            self.fields, scores, terms, positions, lexical_top, cosines, semantic_top, gathered, words
        )
        # The terms held are counted over the whole tool's text: the weak check's share only when
        # that text is the BM25 index's own.
        held = (positions, matrix[:, TERMS_HELD]) if self.fields.whole is self.lexical else (None, None)
        self._remember(query, QueryFacts(tuple(terms), best, *held))
        return Candidates(positions, matrix, lexical_top, semantic_top)

    def search(self, queries: Sequence[str], limit: int) -> list[list[Hit]]:
        results = []
        for query in queries:
            found = self.find(query, max(limit, CANDIDATES))
            if (
                len(found.semantic_top[0])
                and self.words_threshold > 0  # a share held is never under 0: not looked at
                and float(found.matrix[:, TERMS_HELD].max(initial=0.0)) < self.words_threshold
            ):
                # Few of the query's words are in any tool: outside what the ranker learned from.
                results.append(fuse(found.lexical_hits, found.semantic_hits, limit, self.fusion))
            else:
                results.append(order(found.matrix, found.positions, self.ranker, limit))
        return results
