"""WordNet synonyms of a tool's action words, as search terms the tool's own text lacks.

A request may ask for a tool in other words than its name's ("remove" for `delete_file`, "mail"
for `send_email`). At index time each word of the tool's name after its server prefix is looked up
(as it is, or less a plural or -ing/-ed ending) in a table built from WordNet 3.0
(`data/synonyms.tsv.gz`, `python -m tools.searchbench.synonyms`): the other one-word lemmas of its
two most frequent senses, stemmed as search terms. The ranker's `synonyms_asked` counts the query's
terms found only there; they never enter BM25, so a synonym can lift a candidate but never make one.
WordNet 3.0 Copyright 2006 by Princeton University (licence in data/synonyms-LICENSE).
"""

from __future__ import annotations

import functools
import gzip
from collections.abc import Iterable
from importlib import resources

__all__ = ["expansion", "synonym_table"]

_ENDINGS = (("ies", "y"), ("es", ""), ("s", ""), ("ing", ""), ("ing", "e"), ("ed", ""), ("ed", "e"))


@functools.cache
def synonym_table() -> dict[str, str]:
    """Lemma -> its synonyms' search terms, space-separated (split when a name asks); {} without the file."""
    path = resources.files("toolsearch") / "data" / "synonyms.tsv.gz"
    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
    except OSError:
        return {}
    return dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)


def _lemma(word: str, table: dict[str, str]) -> str | None:
    if word in table:
        return word
    for ending, replacement in _ENDINGS:
        if word.endswith(ending) and (base := word[: -len(ending)] + replacement) in table:
            return base
    return None


def expansion(words: Iterable[str]) -> list[str]:
    """The distinct synonym terms of these (lowercase) words, in order; their own stems included."""
    table = synonym_table()
    terms: list[str] = []
    for word in words:
        if (lemma := _lemma(word, table)) is not None:
            terms.extend(table[lemma].split())
    return list(dict.fromkeys(terms))
