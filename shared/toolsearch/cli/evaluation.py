"""The evaluation set and its figures: recall@1/5/10 and MRR, per language, lexical and hybrid.

The catalog is the demo upstream's (`data/catalog/*.json`, made-up tools
described in English); the questions (`data/questions/*.json`) are asked as
users speak, in English and in Lithuanian, each naming every tool that answers
it. A question counts as found at k when any of its tools is in the top k.

Each question is searched for twice. "user" asks the user's own words, as a
proxy would see them if the model passed the message through unchanged: the
hard case. "model" asks the `search_tools` query that a model (Claude, given
only the proxy's five tool definitions and the user's message, never the
catalog) wrote for that message: what the proxy sees in use. See
`data/questions/README.md` for how those queries were made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

from toolsearch.catalogs.catalog import Catalog
from toolsearch.ops.timing import Span
from toolsearch.search import Hit, SearchIndex
from toolsearch.search.embedding import EmbeddingIndex, VectorCache, embedding_text
from toolsearch.search.hybrid import Fusion
from toolsearch.search.index import make_indexer
from toolsearch.server.demo import demo_tools

LANGUAGES = ("en", "lt")
PHRASINGS = ("user", "model")  # the user's words; the query a model wrote for them
KS = (1, 5, 10)


@dataclass(frozen=True)
class Question:
    id: str
    text: dict[str, str]  # language -> question
    tools: tuple[str, ...]
    model_query: dict[str, str] = field(default_factory=dict)  # language -> a model's search_tools query

    def asked(self, phrasing: str, language: str) -> str:
        return (self.text if phrasing == "user" else self.model_query).get(language, "")


@dataclass(frozen=True)
class Figures:
    search: str
    phrasing: str
    language: str
    questions: int
    recall_at_1: float
    recall_at_5: float
    recall_at_10: float
    mrr: float
    ms_per_query: float


def load_questions() -> list[Question]:
    folder = resources.files("toolsearch") / "data" / "questions"
    questions = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        for item in json.loads(entry.read_text(encoding="utf-8")):
            text = {lang: item[lang] for lang in LANGUAGES if item.get(lang)}
            model_query = {lang: q for lang, q in (item.get("model_query") or {}).items() if q}
            questions.append(Question(item["id"], text, tuple(item["tools"]), model_query))
    return questions


def evaluation_catalog() -> Catalog:
    return Catalog.from_definitions(demo_tools())


class CosineSearch:
    """Implements `SearchIndex` by cosine alone: a model measured without BM25 (tools/devmodel/base).

    `tool_vectors` are the catalog's tools as unit rows; `encode_queries` turns queries into unit
    rows the same way (a transformer may embed queries and tools differently, e5 with prefixes).
    """

    def __init__(self, tool_vectors: Any, encode_queries: Callable[[list[str]], Any]) -> None:
        self.index = EmbeddingIndex(tool_vectors)
        self.encode_queries = encode_queries

    def search(self, queries: Sequence[str], limit: int) -> list[list[Hit]]:
        scores = self.index.scores(self.encode_queries(list(queries)))
        return [self.index.rank(row, limit) for row in scores]


def domain_of(question: Question) -> str:
    """The domain a question belongs to: its id is `domain-NN`, one file per domain."""
    return question.id.rsplit("-", 1)[0]


def measure(
    name: str,
    index: SearchIndex,
    catalog: Catalog,
    questions: Sequence[Question],
    language: str,
    phrasing: str = "user",
) -> Figures:
    asked = [q for q in questions if q.asked(phrasing, language)]
    found_at = {k: 0 for k in KS}
    reciprocal = 0.0
    span = Span()
    for question in asked:
        hits = index.search([question.asked(phrasing, language)], max(KS))[0]
        names = [catalog.tools[hit.position].name for hit in hits]
        ranks = [rank for rank, tool in enumerate(names, start=1) if tool in question.tools]
        first = ranks[0] if ranks else None
        for k in KS:
            found_at[k] += first is not None and first <= k
        reciprocal += 1.0 / first if first else 0.0
    elapsed = span.ms
    n = len(asked) or 1
    return Figures(
        name,
        phrasing,
        language,
        len(asked),
        found_at[1] / n,
        found_at[5] / n,
        found_at[10] / n,
        reciprocal / n,
        elapsed / n,
    )


def evaluate(
    embedder: Any = None, fusions: dict[str, Fusion] | None = None, ranker: str = "learned"
) -> list[Figures]:
    """Lexical figures, and hybrid ones when an embedder is given (each fusion, then the ranker)."""
    catalog = evaluation_catalog()
    questions = load_questions()
    indexes = build_indexes(catalog, embedder, fusions, ranker)
    figures = [
        measure(label, index, catalog, questions, language, phrasing)
        for phrasing in PHRASINGS
        for language in LANGUAGES
        for label, index in indexes.items()
    ]
    return [f for f in figures if f.questions]


def build_indexes(
    catalog: Catalog, embedder: Any, fusions: dict[str, Fusion] | None, ranker: str = "learned"
) -> dict[str, SearchIndex]:
    """BM25 alone; with an embedder, the embedding alone (cosine), hybrid for each fusion (scores
    fused, no learned ranker) and, with `ranker="learned"`, hybrid as the learned ranker orders it."""
    indexes: dict[str, SearchIndex] = {"lexical": make_indexer(None, ranker=ranker)(catalog)}
    if embedder is not None:
        tool_vectors = embedder.encode([embedding_text(tool) for tool in catalog.tools])
        indexes["embedding"] = CosineSearch(tool_vectors, embedder.encode)
        cache = VectorCache()
        for label, fusion in (fusions or {"fused": Fusion()}).items():
            indexes[label] = make_indexer(embedder, cache=cache, fusion=fusion, ranker="fusion")(catalog)
        if ranker == "learned":
            indexes["hybrid"] = make_indexer(embedder, cache=cache, ranker="learned")(catalog)
    return indexes


def recall_by_domain(
    embedder: Any, search: str = "hybrid", phrasing: str = "user", k: int = 5
) -> dict[str, dict[str, float]]:
    """Recall@k per domain and language for one search: where a change gains or loses."""
    catalog = evaluation_catalog()
    questions = load_questions()
    index = build_indexes(catalog, embedder, None)[search]  # the learned ranker's hybrid
    out: dict[str, dict[str, float]] = {}
    for domain in sorted({domain_of(q) for q in questions}):
        mine = [q for q in questions if domain_of(q) == domain]
        out[domain] = {
            lang: getattr(measure(search, index, catalog, mine, lang, phrasing), f"recall_at_{k}")
            for lang in LANGUAGES
        }
    return out


def render_comparison(rows: Mapping[str, Sequence[Figures]]) -> str:
    """Figures of several models side by side: one line per search, phrasing and language."""
    labels = list(rows)
    keyed = {
        label: {(f.search, f.phrasing, f.language): f for f in figures} for label, figures in rows.items()
    }
    keys = list(dict.fromkeys(key for label in labels for key in keyed[label]))
    lines = [
        "R@5 and MRR per model: " + "; ".join(f"[{i + 1}] {label}" for i, label in enumerate(labels)),
        f"{'search':<16} {'asked':<6} {'lang':<4} "
        + " ".join(f"{f'R@5 [{i + 1}]':>9} {f'MRR [{i + 1}]':>9}" for i in range(len(labels))),
    ]
    for key in keys:
        cells = []
        for label in labels:
            f = keyed[label].get(key)
            cells.append(f"{f.recall_at_5:>9.1%} {f.mrr:>9.3f}" if f else f"{'-':>9} {'-':>9}")
        lines.append(f"{key[0]:<16} {key[1]:<6} {key[2]:<4} " + " ".join(cells))
    return "\n".join(lines)


def render_domains(rows: dict[str, dict[str, dict[str, float]]], k: int = 5) -> str:
    """Recall@k per domain (hybrid, users' words) for each model, English and Lithuanian."""
    labels = list(rows)
    domains = list(dict.fromkeys(d for label in labels for d in rows[label]))
    header = f"{'domain':<16} " + " ".join(
        f"{f'en [{i + 1}]':>8} {f'lt [{i + 1}]':>8}" for i in range(len(labels))
    )
    lines = [f"hybrid recall@{k} per domain, users' own words", header]
    for domain in domains:
        cells = [f"{rows[label][domain]['en']:>8.1%} {rows[label][domain]['lt']:>8.1%}" for label in labels]
        lines.append(f"{domain:<16} " + " ".join(cells))
    return "\n".join(lines)


def render(figures: Sequence[Figures], catalog_size: int) -> str:
    lines = [
        f"catalog: {catalog_size} tools; questions per language: {figures[0].questions if figures else 0}",
        "asked: user = the user's own words; model = the search_tools query a model wrote for them",
        f"{'search':<16} {'asked':<6} {'lang':<4} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6} {'ms/q':>6}",
    ]
    for f in figures:
        lines.append(
            f"{f.search:<16} {f.phrasing:<6} {f.language:<4} {f.recall_at_1:>6.1%} {f.recall_at_5:>6.1%}"
            f" {f.recall_at_10:>6.1%} {f.mrr:>6.3f} {f.ms_per_query:>6.2f}"
        )
    return "\n".join(lines)


def to_json(figures: Sequence[Figures]) -> str:
    return json.dumps([asdict(f) for f in figures], indent=2)
