"""Which of the query's words matter, and their order: two of the ranker's features (`search.rerank`).

- `word_pairs`: the query's words side by side, as the tool has them. Each tool's adjacent term
  pairs (of its name, and of its description) are the terms of one more BM25 field of the fields'
  postings table (`pair_index`, in `search.fields`), without length normalisation (b = 0: a pair is
  rare enough that a long description should not be discounted for holding it); a query's pairs are
  gathered with its terms and summed for its candidates only, scaled by the best candidate's.
- `rarest_terms_held`: the share of the IDF of the query's two rarest words (the two with the most
  IDF among those the catalog knows) that the tool's whole text holds: whether it holds what sets
  the query apart ("monthly" in "list my monthly transactions"), not only its common words.

Both read the query's words stemmed the English way only (`query_words`): `tokenize_query` adds a
Lithuanian stem after most words, whose pairs would not be the query's own pairs, and whose rare
stems ("dat" for "date") would pass for its rarest words. Chosen on the public benchmark's dev
split, left out source by source (tools/searchbench/README.md, "Seventh round").
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from toolsearch.catalogs.catalog import Tool
from toolsearch.search.documents import name_words
from toolsearch.search.lexical import LexicalIndex
from toolsearch.search.text import tokenize

if TYPE_CHECKING:
    from toolsearch.search.fields import FieldIndex

__all__ = ["RAREST", "pair_index", "query_words", "rarest_terms_held", "word_pairs"]

RAREST = 2  # the query's words of most IDF that `rarest_terms_held` looks at


def query_words(query: str) -> list[str]:
    """The query's terms, in order, each word stemmed the English way only."""
    return tokenize(query, lithuanian=False)


def word_pairs(terms: Sequence[str]) -> list[str]:
    """Adjacent terms as one term each ("list transact"): a term never holds a space."""
    return [f"{a} {b}" for a, b in itertools.pairwise(terms)]


def pair_index(tools: Sequence[Tool]) -> LexicalIndex:
    """Each tool's name's adjacent term pairs and its description's, as BM25 without length norm."""
    return LexicalIndex(
        [
            word_pairs(tokenize(name_words(tool.name))) + word_pairs(tokenize(tool.description))
            for tool in tools
        ],
        b=0.0,
    )


def rarest_terms_held(
    fields: FieldIndex, words: Sequence[str], candidates: np.ndarray, out: np.ndarray
) -> None:
    """Into `out` (zeros, one per candidate): the share of the IDF of the query's `RAREST` words of
    most IDF (ties: the first asked) that each candidate's whole text holds.

    The two words picked in one pass over the query's (no dict, no sort: `RAREST` is 2), and each
    one's postings looked up for the candidates only (`candidates` ascend, as the postings do). The
    same values as adding each word's IDF into every tool's zeros and dividing by their sum: one
    word's share is 1.0 or 0.0 (its IDF / itself), two words' (0.0 or the first's IDF) + (0.0 or
    the second's), the same sum as 0.0 + the first's + the second's."""
    get, idf_values = fields._term_ids.get, fields._idf_values
    first, second, first_idf, second_idf = "", "", 0.0, 0.0  # an IDF of 0 or less is never kept
    for word in words:
        if (t := get(word, -1)) >= 0 and (idf := idf_values[t]) > second_idf:
            if idf > first_idf:
                first, second, first_idf, second_idf = word, first, idf, first_idf
            elif word != first:
                second, second_idf = word, idf
    if not first:
        return
    held = _held(fields.whole, first, candidates)
    if not second:
        out[:] = held
        return
    np.divide(
        held * first_idf + _held(fields.whole, second, candidates) * second_idf,
        first_idf + second_idf,
        out=out,
    )


def _held(whole: LexicalIndex, word: str, candidates: np.ndarray) -> np.ndarray:
    """Whether each candidate (ascending) holds `word`, a term of `whole`: a search of its postings."""
    t = whole._term_ids[word]
    postings = whole._positions[whole._starts[t] : whole._starts[t + 1]]  # ascending
    return postings.take(postings.searchsorted(candidates), mode="clip") == candidates
