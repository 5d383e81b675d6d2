"""Which of the query's words matter, and their order: two of the ranker's features (`search.features`).

- `word_pairs`: the query's words side by side, as the tool has them. Each tool's adjacent term
  pairs (of its name, and of its description) are the terms of one more BM25 field of the fields'
  postings table (`pair_index`: `FieldIndex.pairs`), without length normalisation (b = 0: a pair is
  rare enough that a long description should not be discounted for holding it); a query's pairs are
  gathered with its terms and summed for its candidates only, scaled by the best candidate's.
- `rarest_terms_held`: the share of the IDF of the query's two rarest words (the two with the most
  IDF among those the catalog knows) that the tool's whole text holds: whether it holds what sets
  the query apart ("monthly" in "list my monthly transactions"), not only its common words. The
  two (`rarest_words`) are gathered with the query's terms: each tool's whole-text postings valued
  their IDF, summed in a row after the fields' (`FieldTable.gather`), then divided by their IDF.

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
    from toolsearch.search.field_table import FieldTable

__all__ = ["RAREST", "pair_index", "query_words", "rarest_words", "word_pairs"]

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


def rarest_postings(whole: LexicalIndex, idf: np.ndarray, offset: int) -> tuple[list[int], np.ndarray]:
    """The whole tool's postings, by term (the fields' table's first ids are the whole tool's):
    their starts, and a (2 x postings) table like the fields' (`FieldTable.gather`), each key
    `offset` + its position, each value its term's IDF (as int64 bits)."""
    values = np.repeat(idf[: len(whole._term_ids)], np.diff(whole._starts))
    keys = offset + whole._positions.astype(np.intp)
    return whole._starts.tolist(), np.stack([keys, values.view(np.intp)])


def rarest_words(fields: FieldTable, words: Sequence[str]) -> list[int]:
    """The ids (the fields' table's, `FieldTable.gather`) of the query's `RAREST` words of most
    IDF, of those above 0 (ties: the first asked), best first: picked in one pass, no sort."""
    get, idf_values = fields._term_ids.get, fields._idf_values
    first, second, first_idf, second_idf = -1, -1, 0.0, 0.0  # an IDF of 0 or less is never kept
    for word in words:
        if (t := get(word, -1)) >= 0 and (idf := idf_values[t]) > second_idf:
            if idf > first_idf:
                first, second, first_idf, second_idf = t, first, idf, first_idf
            elif t != first:
                second, second_idf = t, idf
    return [] if first < 0 else [first] if second < 0 else [first, second]
