"""Every field's postings of a catalog in one table, so a query sums them for its candidates only.

`FieldTable` holds the postings of every field `search.fields` indexes side by side, term after
term: a query's terms are looked up once for every field together (`gather`), their slices added
in one bincount, and its candidates' sums taken from it (`sums`). The sums are the ones each
field's own `LexicalIndex` gives (the same values added in the same order), so the features do
not depend on how they are gathered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from toolsearch.search.lexical import LexicalIndex
from toolsearch.search.wording import rarest_postings, rarest_words, word_pairs

__all__ = [
    "HELD_CELLS",
    "NAME_IDF_CELL",
    "RAREST_CELL",
    "SERVER_IDF_CELL",
    "FieldSums",
    "FieldTable",
    "Gathered",
    "Weighed",
]

# The fields of the postings table, in its order: five summed as BM25 (every query term, repeats
# included, as `LexicalIndex.term_scores`; the whole tool's first: its scores pick the candidates,
# from the same gather as their sums, `FieldTable.gather`; the tool's word pairs last, gathered for
# the query's pairs, `search.wording`), then, each distinct term once, eight counted (each posting
# 1), the name's terms weighed by their IDF, and the whole tool's terms weighed by their IDF times
# how few of the tool's server's other tools hold them (`server_specific`).
_BM25_FIELDS = ("whole", "name", "description", "parameters", "pairs")
_COUNTED = ("whole", "name", "action", "server", "parameter_names", "verb", "action_verb", "synonyms")
_WEIGHED = ("name", "server_specific")
_TABLE = _BM25_FIELDS + _COUNTED + _WEIGHED
_HELD = slice(len(_BM25_FIELDS), len(_BM25_FIELDS) + len(_COUNTED))
# `FieldSums.cells`' rows: each counted field's terms held, the two weighed fields', the rarest words'.
HELD_CELLS = {field: len(_BM25_FIELDS) + i for i, field in enumerate(_COUNTED)}
NAME_IDF_CELL, SERVER_IDF_CELL, RAREST_CELL = len(_TABLE) - 2, len(_TABLE) - 1, len(_TABLE)


@dataclass(frozen=True, slots=True)
class Weighed:
    """A field with the whole tool's postings, each with its own value (a `LexicalIndex`'s layout)."""

    _term_ids: dict[str, int]
    _starts: np.ndarray
    _positions: np.ndarray
    _contributions: np.ndarray


class Gathered(NamedTuple):
    """A query's IDF (its distinct terms'), and every field's sums of every tool (None: no term found)."""

    idf_total: float
    summed: np.ndarray | None
    rarest_idf: float = 0.0  # the IDF of the rarest words gathered (`search.wording`), summed


class FieldSums(NamedTuple):
    """One query's sums for its candidates, in their order (a named tuple: cheaper than a dataclass)."""

    cells: np.ndarray  # (table fields x candidates): every field's sum, in the table's order (above)
    bm25: np.ndarray  # (5 x candidates): BM25 of the whole tool, name, description, parameters, word pairs
    held: np.ndarray  # (8 x candidates): distinct query terms held by the whole tool, name, action,
    #                   server prefix, parameter names, first name term, action's first term, and
    #                   the action's synonyms only (`synonyms`)
    name_idf: np.ndarray  # the IDF of the distinct query terms the name holds, summed
    server_idf: np.ndarray  # the same of the whole tool's, each x its server-specificity (`server_specific`)
    idf_total: float  # the IDF of every distinct query term, summed
    sizes: np.ndarray  # (4 x candidates): the name's terms, description length, action's and server's terms
    ids: np.ndarray  # (4 x candidates): the verb class + 1 (0: none), the server's id, the action's,
    #                  the server's after every action's (`FieldIndex.tool_ids`, `search.fields`)


class FieldTable:
    """The postings table of the fields a subclass indexes (`search.fields.FieldIndex`): each field
    named in the table above an attribute of that name (a `LexicalIndex` or `Weighed`), and the
    per-tool facts `sums` takes for the candidates. `_table()` builds it, once those are set."""

    size: int
    whole: LexicalIndex
    tool_sizes: np.ndarray  # (4 x tools): name's terms, description length, action's and server's terms
    tool_ids: np.ndarray  # (4 x tools): verb class + 1, server id, action id, server id after the actions'

    def _table(self) -> None:
        """Every field's postings in one table by term, a query term's slice holding all its fields':
        the BM25 fields' first (each posting's value its contribution), then the counted fields' (its
        value 1: summed, the terms held) and the weighed name's (its value the term's IDF)."""
        ids: dict[str, int] = {}
        for field in _COUNTED + _BM25_FIELDS:  # the whole tool's terms first: most others are there
            for term in getattr(self, field)._term_ids:
                ids.setdefault(term, len(ids))
        self._term_ids = ids
        documents = max(self.size, 1)
        whole_counts = np.zeros(len(ids), dtype=np.int64)
        counts = np.diff(self.whole._starts)
        for term_name, i in self.whole._term_ids.items():
            whole_counts[ids[term_name]] = counts[i]
        with np.errstate(divide="ignore"):
            idf = np.log1p(documents / whole_counts)
        self._idf = np.where(whole_counts > 0, idf, 0.0)  # log(1 + N / df) of the whole tool's terms
        self._idf_values: list[float] = self._idf.tolist()
        self._rarest = rarest_postings(self.whole, self._idf, RAREST_CELL * self.size)  # (`gather`)
        starts, keys, values, terms = self._postings(_TABLE)
        counted = keys >= len(_BM25_FIELDS) * self.size
        weighed = keys >= (len(_BM25_FIELDS) + len(_COUNTED)) * self.size
        specific = keys >= (len(_BM25_FIELDS) + len(_COUNTED) + 1) * self.size  # its own values kept
        values[weighed] = self._idf[terms[weighed]] * np.where(specific[weighed], values[weighed], 1.0)
        values[counted & ~weighed] = 1.0
        bm25_ends = starts[:-1] + np.bincount(terms[~counted], minlength=len(ids))
        # As ints, for a term's slice cheaply: all its postings, or (a repeat) its BM25 fields' only.
        self._starts, self._bm25_ends = starts.tolist(), bm25_ends.tolist()
        # One int64 table, the values' float64 bits as the second row: a query's slices are gathered
        # in one concatenation and their keys are ready for bincount (no cast), their values a view.
        self._postings_table = np.stack([keys.astype(np.intp), values.view(np.intp)])

    def _postings(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """These fields' postings by term (stable: by field, then position, within a term): the
        starts of each term's, each posting's key (field x catalog size + position), its value, its
        term."""
        terms, keys, values = [], [], []
        for field, name in enumerate(names):
            index = getattr(self, name)
            union = np.fromiter((self._term_ids[t] for t in index._term_ids), np.int64, len(index._term_ids))
            terms.append(np.repeat(union, np.diff(index._starts)))
            keys.append(field * self.size + index._positions.astype(np.int64))
            values.append(index._contributions)
        term = np.concatenate(terms)
        order = np.argsort(term, kind="stable")
        starts = np.concatenate(([0], np.cumsum(np.bincount(term, minlength=len(self._term_ids)))))
        return starts, np.concatenate(keys)[order], np.concatenate(values)[order], term[order]

    def gather(self, terms: Sequence[str], words: Sequence[str] = ()) -> Gathered:
        """Every field's sums of every tool for these query terms: one gather and one bincount; with
        `words` (its English terms, `search.wording`), their pairs' too, and the IDF of its two
        rarest words held, in a row after the table's (their postings valued their IDF).

        The BM25 fields' postings of every term (repeats too, in the query's order) beside the
        other fields' of each distinct term (once), keys apart. (Adding into the candidates' slots
        alone was no faster at 2,000 or 6,000 tools: the mapping costs what the smaller table saves.)"""
        get, starts, (rarest_starts, rarest_table) = self._term_ids.get, self._starts, self._rarest
        bm25_ends, table = self._bm25_ends, self._postings_table
        spans: list[np.ndarray] = []
        distinct: dict[int, None] = {}  # the terms found, each once, in order
        for term in [*terms, *word_pairs(words)]:  # a term looked up, then its slice (a repeat's: BM25's)
            if (t := get(term, -1)) >= 0:
                spans.append(table[:, starts[t] : (bm25_ends[t] if t in distinct else starts[t + 1])])
                distinct[t] = None
        idf_total, rarest = sum([self._idf_values[t] for t in distinct]), rarest_words(self, words)
        spans += [rarest_table[:, rarest_starts[t] : rarest_starts[t + 1]] for t in rarest]
        if not spans:
            return Gathered(idf_total, None)
        postings = spans[0] if len(spans) == 1 else np.concatenate(spans, axis=1)
        summed = np.bincount(postings[0], postings[1].view(np.float64), (len(_TABLE) + 1) * self.size)
        return Gathered(idf_total, summed, sum([self._idf_values[t] for t in rarest]))

    def scores(self, gathered: Gathered) -> tuple[np.ndarray, np.ndarray]:
        """The whole tool's BM25 of every tool and which tools hold any term: `whole.scores`'
        values (its postings added in the same order), read off the gather the sums come from."""
        summed, size = gathered.summed, self.size
        if summed is None:
            return np.zeros(size), np.zeros(size, dtype=bool)
        held = len(_BM25_FIELDS) * size  # the whole tool's terms held: its first counted field
        return summed[:size], summed[held : held + size] > 0

    def sums(
        self, terms: Sequence[str], candidates: np.ndarray, gathered: Gathered | None = None
    ) -> FieldSums:
        """BM25 and terms held per field, for these candidates (distinct positions, any order),
        picked by key from `gather(terms)` (given, or made here)."""
        n = len(candidates)
        idf_total, summed, _ = self.gather(terms) if gathered is None else gathered
        # The candidates' facts and sums, each a column taken from a row a field (the arrays' own
        # `take`: no keys to compute per query), gathered once for every feature that reads them.
        sizes, ids = self.tool_sizes.take(candidates, axis=1), self.tool_ids.take(candidates, axis=1)
        if summed is None or not n:
            cells = np.zeros((len(_TABLE) + 1, n))
        else:  # (fields and the rarest words' row x candidates)
            cells = summed.reshape(len(_TABLE) + 1, self.size).take(candidates, axis=1)
        bm25, name_idf, server_idf = cells[: len(_BM25_FIELDS)], cells[NAME_IDF_CELL], cells[SERVER_IDF_CELL]
        return FieldSums(cells, bm25, cells[_HELD], name_idf, server_idf, idf_total, sizes, ids)
