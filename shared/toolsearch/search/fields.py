"""What the ranker's features need of each tool, indexed once per catalog (`search.features`).

Each tool's fields apart: its name, description and parameters (each with its own BM25), its
server prefix and the action after it, its parameter names, its action's synonyms; its verb
class, and how specific each of its terms is among its server's tools. Their postings are summed
for a query's candidates in one table (`search.field_table`), into the features (`search.features`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from toolsearch.catalogs.catalog import Tool
from toolsearch.search.documents import name_words, schema_text
from toolsearch.search.field_table import FieldTable, Weighed
from toolsearch.search.lexical import LexicalIndex
from toolsearch.search.synonyms import expansion
from toolsearch.search.text import tokenize
from toolsearch.search.wording import pair_index

__all__ = ["VERB_AGREES", "FieldIndex", "server_and_action", "verb_class"]


def _parameter_names(schema: object) -> list[str]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return [name for name in properties if isinstance(name, str)] if isinstance(properties, Mapping) else []


def _distinct_terms(text: str) -> list[str]:
    return list(dict.fromkeys(tokenize(text)))


_VERB_CLASSES = {
    "read": "get fetch retriev read show view obtain return detail info",
    "list": "list all enumer brows",
    "create": "creat add new make insert post generat regist build",
    "delete": "delet remov destroy drop cancel unsubscrib",
    "update": "updat edit modifi chang set put patch renam",
    "search": "search find queri lookup look seek filter",
    "send": "send post share notifi email messag publish",
}
_VERB_CLASS = {stem: i for i, words in enumerate(_VERB_CLASSES.values()) for stem in words.split()}
# By the query's verb class, then the tool's plus one (0: none): +1 the same, -1 another, 0 none.
_CLASSES = range(len(_VERB_CLASSES))
VERB_AGREES = np.array([[0.0] + [1.0 if tool == query else -1.0 for tool in _CLASSES] for query in _CLASSES])
_PREFIX = re.compile(r"^(.+?)(?:__|-|\.|/)(.+)$")


def server_and_action(names: Sequence[str]) -> list[tuple[str, str]]:
    """Each name's server prefix and the rest: split at the first "-", "__", "." or "/",
    when two tools or more share that prefix (`get-weread-rank` alone keeps its whole name)."""
    split = [(m.group(1), m.group(2)) if (m := _PREFIX.match(name)) else ("", name) for name in names]
    counts: dict[str, int] = {}
    for server, _ in split:
        counts[server] = counts.get(server, 0) + 1
    return [
        (server, action) if server and counts[server] > 1 else ("", name)
        for (server, action), name in zip(split, names, strict=True)
    ]


def verb_class(terms: Sequence[str]) -> int:
    for t in terms:  # a loop, not next() over a generator: called once a query
        if t in _VERB_CLASS:
            return _VERB_CLASS[t]
    return -1


class FieldIndex(FieldTable):
    """BM25 per field of each tool, and what the features need of each tool's name."""

    def __init__(self, tools: Sequence[Tool], whole: LexicalIndex) -> None:
        names = [_distinct_terms(name_words(tool.name) + " " + tool.title) for tool in tools]
        self.name = LexicalIndex(names)
        descriptions = [tokenize(tool.description) for tool in tools]
        self.description = LexicalIndex(descriptions)
        self.pairs = pair_index(tools)  # the name's and the description's adjacent term pairs
        self.parameters = LexicalIndex(
            [tokenize("\n".join(schema_text(tool.input_schema))) for tool in tools]
        )
        self.whole = whole  # the tool's whole text: one posting per term and tool, so it counts terms held
        self.name_sizes = np.array([max(len(n), 1) for n in names], dtype=np.float64)
        # The tool's first name term (its verb, mostly) as a field of one term: counted for the
        # query's terms, it says whether the query asks it; the same for the action's below.
        self.verb = LexicalIndex([n[:1] for n in names])
        self.description_length = np.log1p([len(terms) for terms in descriptions]) / 5.0
        self.size = len(tools)
        parts = server_and_action([tool.name for tool in tools])
        actions = [tokenize(name_words(action)) for _, action in parts]
        self.action_verb = LexicalIndex([a[:1] for a in actions])
        self.action = LexicalIndex([list(dict.fromkeys(a)) for a in actions])
        self.action_sizes = np.array([len(set(a)) if len(a) > 1 else len(a) + 1 for a in actions])
        self.action_phrases = [" " + " ".join(a) + " " for a in actions]
        action_ids: dict[tuple[str, ...], int] = {}
        self.action_ids = np.array(
            [action_ids.setdefault(tuple(a), len(action_ids)) for a in actions], dtype=np.int64
        )
        first_words = [tokenize(tool.description)[:3] for tool in tools]
        self.verb_classes = np.array(
            [
                verb_class(a[:1]) if verb_class(a[:1]) >= 0 else verb_class(w[:1])
                for a, w in zip(actions, first_words, strict=True)
            ]
        )
        servers = [_distinct_terms(name_words(server)) for server, _ in parts]
        server_ids: dict[str, int] = {}  # a tool without a server prefix is its own server
        self.server_ids = np.array(
            [server_ids.setdefault(s or f"\0{i}", len(server_ids)) for i, (s, _) in enumerate(parts)],
            dtype=np.int64,
        )
        self.server_count = len(server_ids)
        self.server = LexicalIndex(servers)
        self.server_sizes = np.array([max(len(t), 1) for t in servers], dtype=np.float64)
        # What the features gather of each candidate, a row a fact: `sums` takes every candidate's
        # column of them in one gather each (`FieldSums`).
        classes = self.verb_classes + 1  # -1 (none) is column 0 of VERB_AGREES
        # The verb class, the server, then the action's id and the server's after every action's:
        # those two counted among the candidates in one bincount (`features.server_features`).
        groups = [self.action_ids, self.server_ids + (int(self.action_ids.max(initial=-1)) + 1)]
        self.tool_ids = np.stack([classes, self.server_ids, *groups]).astype(np.int64)
        self.tool_sizes = np.stack(
            [self.name_sizes, self.description_length, self.action_sizes, self.server_sizes]
        ).astype(np.float64)
        parameter_words = [" ".join(map(name_words, _parameter_names(tool.input_schema))) for tool in tools]
        self.parameter_names = LexicalIndex([_distinct_terms(words) for words in parameter_words])
        self.synonyms = self._synonyms([name_words(action).split() for _, action in parts])
        self.server_specific = self._server_specific()
        self._table()

    def _synonyms(self, action_words: Sequence[Sequence[str]]) -> LexicalIndex:
        """Each tool's action words' WordNet synonyms (`search.synonyms`) its own text lacks."""
        documents = [expansion(words) for words in action_words]
        whole = self.whole
        # The tool's own terms out: (term, tool) pairs looked up among the whole tool's postings as
        # keys (term x catalog size + position), which ascend as the postings do.
        own = np.repeat(np.arange(len(whole._starts) - 1, dtype=np.int64), np.diff(whole._starts))
        own = own * self.size + whole._positions
        get = whole._term_ids.get
        terms = [t for document in documents for t in document]
        keys = np.fromiter((get(t, -1) for t in terms), np.int64, len(terms)) * self.size
        keys += np.repeat(np.arange(self.size, dtype=np.int64), [len(d) for d in documents])
        slots = own.searchsorted(keys).clip(max=max(len(own) - 1, 0))
        new = ((own[slots] != keys) if len(own) else np.ones(len(keys), bool)).tolist()
        kept, start = [], 0
        for document in documents:
            end = start + len(document)
            kept.append([t for t, n in zip(document, new[start:end], strict=True) if n])
            start = end
        return LexicalIndex(kept)

    def _server_specific(self) -> Weighed:
        """The whole tool's postings, each valued 1 - (the share of its server's other tools that
        hold the term too), 0 for a tool alone on its server: a term only this tool of its server
        holds is worth 1, one they all hold 0 (weighed by the term's IDF in `_table`)."""
        whole = self.whole
        terms = np.repeat(np.arange(len(whole._starts) - 1, dtype=np.int64), np.diff(whole._starts))
        servers = self.server_ids[whole._positions]
        _, inverse, counts = np.unique(
            terms * self.server_count + servers, return_inverse=True, return_counts=True
        )
        sizes = np.bincount(self.server_ids, minlength=self.server_count)[servers]
        others = np.maximum(sizes - 1, 1)
        values = np.where(sizes > 1, 1.0 - (counts[inverse.ravel()] - 1) / others, 0.0)
        return Weighed(whole._term_ids, whole._starts, whole._positions, values)
