"""Figures of one search over one source: R@1, R@3, R@5, MRR and coverage of needed tools.

A request is found at k when one of its tools is in the top k; for a multi-tool task, coverage
is the share of its needs met in the top 5. A model's first call may hold several queries, each
with its own result list (as search_tools answers): a tool's rank is its best rank in any list.
Where a source names one tool under variant names (`families`), a hit
on a variant also counts in the `family` figures.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from rank_bm25 import BM25Okapi

from toolsearch.catalogs.catalog import Catalog
from toolsearch.search import Hit, SearchIndex

from .benchset import Request, Source

KS = (1, 3, 5)
DEPTH = 10
_WORD = re.compile(r"[A-Za-z0-9]+")


class PlainBM25:
    """The floor to beat: rank-bm25 over each tool's name and description, lowercased words."""

    def __init__(self, catalog: Catalog) -> None:
        docs = [self.tokens(f"{tool.name} {tool.description}") for tool in catalog.tools]
        self.bm25 = BM25Okapi([d or ["\x00"] for d in docs])

    @staticmethod
    def tokens(text: str) -> list[str]:
        return [w.lower() for w in _WORD.findall(text)]

    def search(self, queries: Sequence[str], limit: int) -> list[list[Hit]]:
        out = []
        for query in queries:
            scores = self.bm25.get_scores(self.tokens(query))
            order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:limit]
            out.append([Hit(i, float(scores[i])) for i in order if scores[i] > 0])
        return out


@dataclass(frozen=True)
class Figures:
    source: str
    split: str
    search: str
    phrasing: str  # "raw": the request's own text; "model": a model's first search_tools query
    requests: int
    r1: float
    r3: float
    r5: float
    mrr: float
    coverage5: float  # multi-tool tasks: share of needed tools in the top 5 (else equals r5)
    family_r1: float
    family_r5: float
    ms_per_query: float


def best_ranks(lists: Iterable[Sequence[str]]) -> dict[str, int]:
    """Each tool's best rank (from 1) in any of one search's result lists, given by tool name."""
    best: dict[str, int] = {}
    for names in lists:
        for rank, name in enumerate(names, start=1):
            best[name] = min(rank, best.get(name, rank))
    return best


def first_rank(request: Request, best: Mapping[str, int]) -> int | None:
    """The request's rank: the best rank of any tool it needs, None when none is in the lists."""
    return min((best[name] for name in request.tools if name in best), default=None)


def measure(
    source: Source, catalog: Catalog, index: SearchIndex, search: str, phrasing: str
) -> Figures | None:
    asked = [r for r in source.requests if r.asked(phrasing)]
    if not asked:
        return None
    family = source.families.get
    found = dict.fromkeys(KS, 0)
    family_found = {1: 0, 5: 0}
    reciprocal = coverage = 0.0
    started = time.perf_counter()
    for request in asked:
        found_lists = index.search(list(request.asked(phrasing)), DEPTH)
        best = best_ranks([[catalog.tools[hit.position].name for hit in hits] for hits in found_lists])
        needed = request.tools
        first = first_rank(request, best)
        for k in KS:
            found[k] += first is not None and first <= k
        reciprocal += 1.0 / first if first else 0.0
        top5 = {name for name, rank in best.items() if rank <= 5}
        coverage += sum(bool(top5.intersection(need)) for need in request.needs) / len(request.needs)
        families = {family(name, name) for name in needed}
        family_ranks = sorted(r for name, r in best.items() if family(name, name) in families)
        for k in family_found:
            family_found[k] += bool(family_ranks) and family_ranks[0] <= k
    elapsed = (time.perf_counter() - started) * 1000
    n = len(asked)
    return Figures(
        source.name,
        source.split,
        search,
        phrasing,
        n,
        found[1] / n,
        found[3] / n,
        found[5] / n,
        reciprocal / n,
        coverage / n,
        family_found[1] / n,
        family_found[5] / n,
        elapsed / n,
    )


def pooled(figures: Sequence[Figures], label: str) -> Figures:
    """Figures over several sources, each request counted once."""
    n = sum(f.requests for f in figures)

    def mean(get: Callable[[Figures], float]) -> float:
        return sum(get(f) * f.requests for f in figures) / n if n else 0.0

    first = figures[0]
    return Figures(
        label,
        first.split,
        first.search,
        first.phrasing,
        n,
        mean(lambda f: f.r1),
        mean(lambda f: f.r3),
        mean(lambda f: f.r5),
        mean(lambda f: f.mrr),
        mean(lambda f: f.coverage5),
        mean(lambda f: f.family_r1),
        mean(lambda f: f.family_r5),
        mean(lambda f: f.ms_per_query),
    )
