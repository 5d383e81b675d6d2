"""`python -m tools.searchbench weak`: how often search_tools' weak-match signal fires, and wrongly.

Two cases per request and phrasing, each query judged on its own (as search_tools answers them):
- removed: every tool the request needs is taken out of its source's catalog, the catalog indexed
  again, and the query searched there; the signal should fire (the tool does not exist here);
- intact: the whole catalog, counting only queries with a needed tool in their own top five; the
  signal should not fire (firing there would send a model away from the right tool).
The rule is `toolsearch.search.weak`; its threshold was chosen on dev (`--split dev`), and test is
reported once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolsearch.catalogs.catalog import Catalog
from toolsearch.search import Embedder
from toolsearch.search.embedding import VectorCache
from toolsearch.search.index import make_indexer
from toolsearch.search.weak import WEAK_MAX_TERMS, Strength, is_weak, strength
from toolsearch.service.tooldefs import DEFAULT_LIMIT

from .benchset import Source
from .run import PHRASINGS


@dataclass(frozen=True)
class Observation:
    split: str
    source: str
    phrasing: str
    case: str  # "removed" or "intact"
    found: Strength


def observe(
    sources: Sequence[Source], embedder: Embedder | None, ranker: str = "learned"
) -> list[Observation]:
    cache = VectorCache()
    indexer = make_indexer(embedder, cache=cache, ranker=ranker)
    out: list[Observation] = []
    for source in sources:
        catalog = Catalog.from_definitions(source.tools)
        whole = indexer(catalog)
        by_removed: dict[frozenset[str], list[int]] = {}
        for i, request in enumerate(source.requests):
            by_removed.setdefault(frozenset(request.tools), []).append(i)
        for removed, members in by_removed.items():
            less = Catalog.from_definitions([t for t in source.tools if t["name"] not in removed])
            index = indexer(less)
            for i in members:
                request = source.requests[i]
                for phrasing in PHRASINGS:
                    queries = list(request.asked(phrasing))
                    if not queries:
                        continue
                    for query, hits in zip(queries, index.search(queries, DEFAULT_LIMIT), strict=True):
                        found = strength(index, query, [h.position for h in hits], cosine=True)
                        out.append(Observation(source.split, source.name, phrasing, "removed", found))
                    for query, hits in zip(queries, whole.search(queries, DEFAULT_LIMIT), strict=True):
                        top5 = {catalog.tools[h.position].name for h in hits[:5]}
                        if top5 & request.tools:
                            found = strength(whole, query, [h.position for h in hits], cosine=True)
                            out.append(Observation(source.split, source.name, phrasing, "intact", found))
    return out


def rates(
    observations: Sequence[Observation], words: float, cosine: float
) -> dict[tuple[str, str, str], tuple[int, float]]:
    """(split, phrasing, case) -> (queries, share where the signal fires)."""
    groups: dict[tuple[str, str, str], list[bool]] = {}
    for o in observations:
        groups.setdefault((o.split, o.phrasing, o.case), []).append(is_weak(o.found, words, cosine))
    return {key: (len(fired), sum(fired) / len(fired)) for key, fired in sorted(groups.items())}


def render(observations: Sequence[Observation], words: float, cosine: float) -> str:
    lines = [
        f"weak-match signal: a query of at most {WEAK_MAX_TERMS} terms, its best result holds under"
        f" {words:.0%} of them, its best cosine is under {cosine:.2f}",
        f"{'split':<5} {'asked':<5} {'fires, tools removed':>22} {'fires wrongly, tool in top 5':>30}",
    ]
    table = rates(observations, words, cosine)
    for split, phrasing in dict.fromkeys((s, p) for s, p, _ in table):
        n_removed, removed = table.get((split, phrasing, "removed"), (0, 0.0))
        n_intact, intact = table.get((split, phrasing, "intact"), (0, 0.0))
        lines.append(
            f"{split:<5} {phrasing:<5} {removed:>25.1%} of {n_removed:>5} {intact:>22.1%} of {n_intact:>5}"
        )
    return "\n".join(lines)
