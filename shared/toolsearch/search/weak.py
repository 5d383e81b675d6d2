"""Whether a query's results match it only weakly, so the model can rephrase instead of guessing.

A match is weak when the query has at most `WEAK_MAX_TERMS` distinct search terms, the result
that holds most of them (after stemming) holds under `WEAK_WORDS` of them, and the query's best
cosine with any tool of the catalog is below `WEAK_COSINE`: next to no word of the query reaches a
result, nor does its meaning. A longer text (a user's whole message passed on as the query) is
never called weak by share: a tool that does one thing of a long message holds a small share of
its words, so the share says nothing there. With BM25 alone there is no cosine to confirm it, so
only results that share no term at all (an empty answer) are weak. The thresholds were chosen on
the public benchmark's dev split, with requests whose needed tools were removed from the catalog
(where it should fire) and intact requests whose tool is in the top five (where it should not):
`python -m tools.searchbench weak` prints both rates; tools/searchbench/README.md has them.

Works on any index that exposes its BM25 index as `lexical` (and, for the cosine, `semantic` and
`embedder`), or is a `LexicalIndex` itself; any other index is never called weak. The cosine is
only computed when the words are under their threshold; an index that remembers what searching the
query found (`RankedIndex.recall`) hands over its terms, best cosine and its candidates' share of
the terms, so the query is neither tokenized nor embedded again, nor its terms counted again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolsearch.search import SearchIndex
from toolsearch.search.embedding import EmbeddingIndex
from toolsearch.search.lexical import LexicalIndex
from toolsearch.search.text import tokenize_query

__all__ = ["WEAK_COSINE", "WEAK_MAX_TERMS", "WEAK_WORDS", "Strength", "is_weak", "strength"]

# Chosen on the dev split to fire wrongly on at most about 2% of queries whose tool is in the top
# five, for both phrasings (tools/searchbench/README.md, "The weak-match signal").
WEAK_WORDS = 0.2
WEAK_COSINE = 0.40
WEAK_MAX_TERMS = 12  # models write 5 at the median, 7 at the 90th percentile; a user's message 22


@dataclass(frozen=True, slots=True)
class Strength:
    words_held: float  # the best result's share of the query's distinct search terms (0: none shares one)
    best_cosine: float | None  # the query's highest cosine with any tool; None: BM25 alone, or not needed
    terms: int = 0  # the query's distinct search terms; 0: not counted (its share was enough)

    @property
    def shares_word(self) -> bool:
        return self.words_held > 0


def strength(index: SearchIndex, query: str, positions: Sequence[int], *, cosine: bool = False) -> Strength:
    """How well these results (catalog positions) match `query`.

    The cosine is computed when the words held are under WEAK_WORDS, or always with `cosine=True`.
    """
    lexical = index if isinstance(index, LexicalIndex) else getattr(index, "lexical", None)
    if not isinstance(lexical, LexicalIndex):
        return Strength(1.0, None)
    recall = getattr(index, "recall", None)
    facts = recall(query) if callable(recall) else None  # what searching it found: the same values
    held = facts.words_held(positions) if facts is not None and facts.terms else None
    terms = None
    if held is None:  # the terms made distinct only here: the recalled share needs none
        terms = list(dict.fromkeys(facts.terms if facts is not None else tokenize_query(query)))
        held = lexical.term_matches(terms)[list(positions)].max() / len(terms) if terms and positions else 0.0
    if not (cosine or held < WEAK_WORDS):
        return Strength(float(held), None)  # words enough: not weak, whatever the meaning
    if terms is None:
        terms = list(dict.fromkeys(facts.terms if facts is not None else ()))
    best = None
    semantic, embedder = getattr(index, "semantic", None), getattr(index, "embedder", None)
    if isinstance(semantic, EmbeddingIndex) and embedder is not None:
        if facts is not None and facts.best_cosine is not None:
            best = facts.best_cosine
        else:
            row = semantic.scores(embedder.encode([query]))[0]
            best = float(row.max()) if len(row) else 0.0
    return Strength(float(held), best, len(terms))


def is_weak(
    found: Strength, words: float = WEAK_WORDS, cosine: float = WEAK_COSINE, max_terms: int = WEAK_MAX_TERMS
) -> bool:
    if found.best_cosine is None:  # BM25 alone: nothing to confirm a low share with
        return not found.shares_word
    return found.terms <= max_terms and found.words_held < words and found.best_cosine < cosine
