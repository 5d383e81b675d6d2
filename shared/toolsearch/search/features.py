"""One query's features: a row of cheap facts per candidate, for the ranker (`search.rerank`).

BM25 over the whole tool, and over its name, its description and its parameters apart; how many
of the query's terms the tool holds, and how much of the tool's name the query holds; the cosine
and how far it is from the best; each ranking's own rank; whether the tool's first name word (its
verb, mostly) is asked; the tool's server among the candidates (how many of them it has, their
best BM25 and cosine); the cosine's gap to the best again, weighed by how little of the query the
best candidate holds; the query's IDF the tool holds that its server's other tools lack (what
sets it apart from its siblings); the query's terms found only among the WordNet synonyms of its
action words (`search.synonyms`); the query's words side by side in the tool, and how much of the
IDF of its two rarest words the tool holds (`search.wording`). Per query, a few numpy passes over
the candidates only: what they need of each tool is indexed once per catalog (`search.fields`),
its postings summed for the candidates in one table (`search.field_table`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolsearch.search.field_table import (
    HELD_CELLS,
    NAME_IDF_CELL,
    RAREST_CELL,
    SERVER_IDF_CELL,
    FieldSums,
    Gathered,
)
from toolsearch.search.fields import VERB_AGREES, FieldIndex, verb_class

__all__ = ["FEATURES", "TERMS_HELD", "features", "server_features"]

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


def _rows(first: str, last: str) -> slice:
    """The matrix rows of the features from `first` to `last` (both in): written in one call."""
    return slice(FEATURES.index(first), FEATURES.index(last) + 1)


# The rows `features` writes, each named once from FEATURES (the shares' below, `_SHARES`).
TERMS_HELD = FEATURES.index("query_terms_held")  # also the weak-match check's share (`rerank.QueryFacts`)
_BM25S = _rows("bm25", "bm25_parameters")  # the whole tool's, name's, description's, parameters'
_DUPLICATES_AND_SERVERS = _rows("near_duplicates", "server_candidates")  # counted in one bincount
_BM25 = FEATURES.index("bm25")
_NAME_TERMS = FEATURES.index("name_terms_asked")
_LEXICAL_RANK = FEATURES.index("lexical_rank")
_COSINE = FEATURES.index("cosine")
_COSINE_GAP = FEATURES.index("cosine_gap")
_COSINE_SCALED = FEATURES.index("cosine_scaled")
_SEMANTIC_RANK = FEATURES.index("semantic_rank")
_DESCRIPTION_LENGTH = FEATURES.index("description_length")
_COSINE_MISS = FEATURES.index("cosine_when_words_miss")
_BM25_HIT = FEATURES.index("bm25_when_words_hit")
_VERB_CLASS = FEATURES.index("verb_class_agrees")
_SERVER_TERMS = FEATURES.index("server_terms_asked")
_NAME_PHRASE = FEATURES.index("name_phrase")
_SERVER_BEST_BM25 = FEATURES.index("server_best_bm25")
_SERVER_SHARE = FEATURES.index("server_bm25_share")
_SERVER_COSINE = FEATURES.index("server_best_cosine_gap")
_GAP_MISS = FEATURES.index("cosine_gap_when_words_miss")
_WORD_PAIRS = FEATURES.index("word_pairs")
_RAREST = FEATURES.index("rarest_terms_held")


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
    bm25s, pairs = sums.bm25[:-1], sums.bm25[-1]  # the word pairs' field is the table's last BM25 one
    if gathered is None:
        bm25s[0] = whole_scores[candidates]
    best = np.maximum.reduce(bm25s, axis=1, keepdims=True)
    if float(np.minimum.reduce(best, axis=None)) > 0:  # mostly: without `where`, at half the cost
        np.divide(bm25s, best, out=rows[_BM25S])
    else:
        np.divide(bm25s, best, out=rows[_BM25S], where=best > 0)
    if (best_pairs := float(np.maximum.reduce(pairs))) > 0:
        np.divide(pairs, best_pairs, out=rows[_WORD_PAIRS])
    bm25 = rows[_BM25]
    # The sums divided by a number of the query's (its distinct terms, its terms' IDF; 1: as they
    # are) in one gather, two divisions and one write, instead of a call each.
    shares = sums.cells.take(_SHARE_CELLS, axis=0)
    shares[:4] /= count
    shares[4:6] /= sums.idf_total or 1.0
    rows[_SHARE_ROWS] = shares
    np.divide(sums.held[1], sums.sizes[0], out=rows[_NAME_TERMS])
    _rank_feature(rows[_LEXICAL_RANK], lexical_top[0], candidates)
    cosine = None
    if cosines is not None and len(semantic_positions):
        rows[_COSINE] = cosine = cosines[candidates].astype(np.float64)
        top, floor = float(semantic_scores[0]), float(semantic_scores[-1])  # the best is a candidate
        np.subtract(cosine, top, out=rows[_COSINE_GAP])
        scaled = rows[_COSINE_SCALED]
        np.maximum(np.divide(cosine - floor, (top - floor) or 1.0, out=scaled), 0.0, out=scaled)
        np.minimum(scaled, 1.0, out=scaled)  # clipped to [0, 1]
        _rank_feature(rows[_SEMANTIC_RANK], semantic_positions, candidates)
    rows[_DESCRIPTION_LENGTH] = sums.sizes[1]
    confidence = float(np.maximum.reduce(rows[TERMS_HELD]))
    if cosine is not None:
        np.multiply(rows[_COSINE_SCALED], 1.0 - confidence, out=rows[_COSINE_MISS])
    np.multiply(bm25, confidence, out=rows[_BM25_HIT])
    _name_features(rows, fields, terms, candidates, sums)
    server_features(rows, fields, bm25, cosine, sums)
    if cosine is not None:
        np.multiply(rows[_COSINE_GAP], 1.0 - confidence, out=rows[_GAP_MISS])
    if found.rarest_idf:  # rarest_terms_held: the IDF of the two rarest words held, / theirs
        np.divide(sums.cells[RAREST_CELL], found.rarest_idf, out=rows[_RAREST])
    return matrix


def _name_features(
    rows: np.ndarray, fields: FieldIndex, terms: Sequence[str], candidates: np.ndarray, sums: FieldSums
) -> None:
    """verb_class_agrees, server_terms_asked and name_phrase into `rows` (the matrix's transpose)."""
    ids, sizes = sums.ids, sums.sizes  # indexed, not unpacked: unpacking an array iterates it
    held = sums.held  # the whole tool, name, action, server prefix, parameter names, the two verbs
    query_class = verb_class(terms)  # the first term of a class: the same among the distinct
    if query_class >= 0:  # +1 the tool's class, -1 another, 0 when either has none
        rows[_VERB_CLASS] = VERB_AGREES[query_class][ids[0]]
    np.divide(held[3], sizes[3], out=rows[_SERVER_TERMS])
    # A phrase needs every action term held: only those few candidates are compared as text.
    text = " " + " ".join(terms) + " "
    phrases, phrase = fields.action_phrases, rows[_NAME_PHRASE]
    for i in (held[2] >= sizes[2]).nonzero()[0].tolist():  # the action's terms
        phrase[i] = phrases[candidates[i]] in text


def server_features(
    rows: np.ndarray, fields: FieldIndex, bm25: np.ndarray, cosine: np.ndarray | None, sums: FieldSums
) -> None:
    """Into `rows` (the matrix's transpose, zeros): near_duplicates and the features of each
    candidate's server among the candidates (`server_candidates` on; no cosine: its row stays 0).
    The actions and the servers are counted in one bincount (`FieldIndex.tool_ids`)."""
    count = fields.server_count
    server, groups = sums.ids[1], sums.ids[2:]  # groups: the actions', the servers'
    np.log(np.bincount(groups.ravel())[groups], out=rows[_DUPLICATES_AND_SERVERS])
    best = np.zeros(count)
    np.maximum.at(best, server, bm25)
    rows[_SERVER_BEST_BM25] = best[server]
    total = max(float(np.add.reduce(bm25)), 1e-9)  # bm25.sum(), without its Python wrapper
    np.divide(np.bincount(server, bm25, count)[server], total, out=rows[_SERVER_SHARE])
    if cosine is not None:
        best_cosine = np.full(count, -np.inf)
        np.maximum.at(best_cosine, server, cosine)
        rows[_SERVER_COSINE] = best_cosine[server] - cosine.max()
