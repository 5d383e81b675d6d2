"""The final order: a small linear ranker over cheap features of each candidate.

BM25 and the embedding each propose their best candidates; the ranker then orders their union
by a weighted sum of features that say more than one score can: BM25 over the whole tool, and
over its name, its description and its parameters apart; how many of the query's terms the tool
holds, and how much of the tool's name the query holds; the cosine and how far it is from the
best; each ranking's own rank; whether the tool's first name word (its verb, mostly) is asked;
and the tool's server among the candidates (how many of them it has, their best BM25 and cosine);
the cosine's gap to the best again, weighed by how little of the query the best candidate holds;
the query's IDF the tool holds that its server's other tools lack (what sets it apart from its
siblings); and the query's terms found only among the WordNet synonyms of its action words
(`search.synonyms`); the query's words side by side in the tool, and how much of the IDF of its
two rarest words the tool holds (`search.wording`).
`words_threshold` can hand queries whose words reach almost no tool back to the fused order of
the two rankings (`search.hybrid`); it is off by default (see WORDS_THRESHOLD).

The weights (`data/ranker.json`) were learned on the public benchmark's dev split
(`tools/searchbench`, `python -m tools.searchbench train-ranker`), one set for hybrid search and
one for BM25 alone. Per query the work is a few numpy passes over the candidates only (what the
features need of each tool is indexed once per catalog, `search.fields`) and one small matrix
product. A non-linear ranker (a one-hidden-layer network, boosted trees over the linear score)
and margin features against the best other candidate were tried and not taken: they fit dev
better but lost when a dev source was held out (tools/searchbench/README.md, "Choices").
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
from toolsearch.search.field_table import HELD_CELLS, NAME_IDF_CELL, SERVER_IDF_CELL, Gathered
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

FEATURES = (
    "bm25",  # the whole tool, scaled by the best candidate's
    "bm25_name",
    "bm25_description",
    "bm25_parameters",
    "query_terms_held",  # share of the query's distinct terms the tool holds anywhere
    "query_terms_in_name",
    "name_terms_asked",  # share of the tool's distinct name terms the query holds
    "verb_asked",  # the tool's first name term is one of the query's
    "lexical_rank",  # 1 / (1 + rank) in BM25's own list, 0 when not in it
    "cosine",
    "cosine_gap",  # cosine minus the best candidate's
    "cosine_scaled",  # from the embedding's last candidate (0) to its best (1), as fusion scales it
    "semantic_rank",
    "description_length",  # log of the description's terms, / 5
    # How far words alone can be trusted for this query: the best candidate's share of the query's
    # terms. Equal for every candidate, so it matters only through the two products below.
    "cosine_when_words_miss",  # cosine_scaled x (1 - that share)
    "bm25_when_words_hit",  # bm25 x that share
    "action_verb_asked",  # the first term of the name after its server prefix is one of the query's
    "verb_class_agrees",  # +1: the query asks the tool's kind of action (get, list, create...); -1: another
    "server_terms_asked",  # share of the server prefix's terms (shared by 2+ tools) the query holds
    "parameter_names_asked",  # share of the query's terms among the tool's parameter names
    "name_idf_share",  # IDF-weighted share of the query's terms in the name
    "name_phrase",  # the name's action terms appear in the query in order, side by side
    "near_duplicates",  # log of how many candidates share this tool's action name
    # The tool's server (its name prefix shared by 2+ tools; else the tool alone) among the candidates:
    "server_candidates",  # log of how many candidates it has
    "server_best_bm25",  # its candidates' best `bm25`
    "server_bm25_share",  # its candidates' share of all candidates' `bm25`
    "server_best_cosine_gap",  # its candidates' best cosine minus the best candidate's
    # cosine_gap x (1 - the best candidate's share of the query's terms): how far from the best
    # cosine counts most where words alone say little (requests in a user's own words)
    "cosine_gap_when_words_miss",
    # The IDF of the query's terms the tool holds, each x how few of its server's other tools hold
    # it, / the IDF of all the query's terms: what sets this tool apart from its siblings
    "server_specific_idf",
    "synonyms_asked",  # share of the query's terms found only among the WordNet synonyms of the tool's action
    "word_pairs",  # BM25 of the query's adjacent word pairs among the tool's, scaled by the best candidate's
    "rarest_terms_held",  # share of the IDF of the query's two rarest words the tool holds (`search.wording`)
)


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


_RECIPROCALS = 1.0 / (2.0 + np.arange(256))  # 1 / (2 + rank), for the ranks of a ranking's top
# A query's work calls the arrays' own methods (argsort, searchsorted, nonzero) and the ufuncs'
# reductions: numpy's functions of those names, and ndarray.max, are Python wrappers around them.


def _rank_feature(row: np.ndarray, ranked: np.ndarray, candidates: np.ndarray) -> None:
    """Into `row` (zeros): 1 / (2 + rank) of each candidate in one ranking's positions (best first)."""
    size = len(ranked)
    if size:  # candidates ascend and hold every ranked position
        row[candidates.searchsorted(ranked)] = (
            _RECIPROCALS[:size] if size <= len(_RECIPROCALS) else 1.0 / (2.0 + np.arange(size))
        )


# Features that are a sum of the field table divided by one number of the query (`features`): their
# rows in the matrix, and their sums' rows among `FieldSums.cells` (whole tool's, name's, parameter
# names' and synonyms' terms held / distinct terms; name's and server-specific IDF / IDF; the two
# verbs asked / 1).
_SHARES = (
    ("query_terms_held", HELD_CELLS["whole"]),
    ("query_terms_in_name", HELD_CELLS["name"]),
    ("parameter_names_asked", HELD_CELLS["parameter_names"]),
    ("synonyms_asked", HELD_CELLS["synonyms"]),  # the four above / distinct terms
    ("name_idf_share", NAME_IDF_CELL),
    ("server_specific_idf", SERVER_IDF_CELL),  # these two / IDF
    ("verb_asked", HELD_CELLS["verb"]),
    ("action_verb_asked", HELD_CELLS["action_verb"]),  # these two as they are
)
_SHARE_ROWS = np.array([FEATURES.index(feature) for feature, _ in _SHARES])  # arrays: not converted per query
_SHARE_CELLS = np.array([cell for _, cell in _SHARES])


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


_NO_TOP = (_read_only(np.zeros(0, np.int64)), _read_only(np.zeros(0, np.float32)))  # no embedding: none


def _hits(top: tuple[np.ndarray, np.ndarray]) -> list[Hit]:
    return [Hit(p, s) for p, s in zip(top[0].tolist(), top[1].tolist(), strict=True)]


def features(
    fields: FieldIndex,
    whole_scores: np.ndarray,
    terms: Sequence[str],
    candidates: np.ndarray,
    lexical_top: tuple[np.ndarray, np.ndarray],
    cosines: np.ndarray | None,
    semantic_top: tuple[np.ndarray, np.ndarray],
    gathered: Gathered | None = None,
    words: Sequence[str] = (),
) -> np.ndarray:
    """(candidates x FEATURES) for one query's terms; `candidates` ascending; `words`: its English
    terms (`wording.query_words`); `gathered`: the fields' `gather(terms, words)`.

    Each ranking's top as (positions, scores) arrays, best first; all their positions are candidates.
    Filled feature by feature through its transpose (a row a feature), leaving the zeros alone.
    """
    (semantic_positions, semantic_scores), n = semantic_top, len(candidates)
    matrix = np.zeros((n, len(FEATURES)))
    if not n:
        return matrix
    rows = matrix.T
    count = max(len(set(terms)), 1)  # distinct terms
    sums = fields.sums(terms, candidates, found := gathered or fields.gather(terms, words))
    # BM25 of the whole tool, its name, description, parameters: each by its best candidate's (all 0
    # when that is not above 0), in one division; the word pairs' apart (a query has none mostly).
    # The whole tool's is the table's own when it came from the same gather, else `whole_scores`'
    # (the fields' whole tool need not be that index).
    bm25s = sums.bm25[:4]
    if gathered is None:
        bm25s[0] = whole_scores[candidates]
    best = np.maximum.reduce(bm25s, axis=1, keepdims=True)
    if float(np.minimum.reduce(best, axis=None)) > 0:  # mostly: without `where`, at half the cost
        np.divide(bm25s, best, out=rows[:4])
    else:
        np.divide(bm25s, best, out=rows[:4], where=best > 0)
    if (best_pairs := float(np.maximum.reduce(sums.bm25[4]))) > 0:
        np.divide(sums.bm25[4], best_pairs, out=rows[30])
    bm25 = rows[0]
    # The sums divided by a number of the query's (its distinct terms, its terms' IDF; 1: as they
    # are) in one gather, two divisions and one write, instead of a call each.
    shares = sums.cells.take(_SHARE_CELLS, axis=0)
    shares[:4] /= count
    shares[4:6] /= sums.idf_total or 1.0
    rows[_SHARE_ROWS] = shares
    np.divide(sums.held[1], sums.sizes[0], out=rows[6])
    _rank_feature(rows[8], lexical_top[0], candidates)
    cosine = None
    if cosines is not None and len(semantic_positions):
        rows[9] = cosine = cosines[candidates].astype(np.float64)
        top, floor = float(semantic_scores[0]), float(semantic_scores[-1])  # the best is a candidate
        np.subtract(cosine, top, out=rows[10])
        scaled = np.maximum(np.divide(cosine - floor, (top - floor) or 1.0, out=rows[11]), 0.0, out=rows[11])
        np.minimum(scaled, 1.0, out=rows[11])  # clipped to [0, 1]
        _rank_feature(rows[12], semantic_positions, candidates)
    rows[13] = sums.sizes[1]  # description_length
    confidence = float(np.maximum.reduce(rows[4]))
    if cosine is not None:
        np.multiply(rows[11], 1.0 - confidence, out=rows[14])
    np.multiply(bm25, confidence, out=rows[15])
    fields.fill_extra(rows[16:23], terms, candidates, sums, shares=False)
    fields.fill_servers(rows[22:27], candidates, bm25, None if cosine is None else rows[9], sums)
    if cosine is not None:
        np.multiply(rows[10], 1.0 - confidence, out=rows[27])
    if found.rarest_idf:  # rarest_terms_held: the IDF of the two rarest words held, / theirs
        np.divide(sums.cells[-1], found.rarest_idf, out=rows[31])  # its row, the last
    return matrix


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
TERMS_HELD = FEATURES.index("query_terms_held")  # its column in the feature matrix


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
