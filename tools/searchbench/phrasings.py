"""Sets of a model's first queries for the same requests, searched side by side.

What a model writes into `search_tools` depends on how the five tools describe it. To judge a
wording, models write the first call for the same requests under each wording (JSON lines:
source, key, queries), and each set is searched with the default search: R@1 / R@5 per source,
the BM25 floor beside, and, against the first set, how many requests moved into and out of the
top 1 and top 5 (a request counts where both sets hold it).

    python -m tools.searchbench phrasings --queries A.jsonl --queries B.jsonl --split dev
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from toolsearch.catalogs.catalog import Catalog
from toolsearch.search import Embedder, SearchIndex
from toolsearch.search.embedding import VectorCache
from toolsearch.search.hybrid import Fusion

from .benchset import Source
from .measure import DEPTH, best_ranks, first_rank
from .run import indexes

# (source, request key) -> that request's best rank of a needed tool; 0: not in the top DEPTH.
Ranks = dict[tuple[str, str], int]
# "ours": the default search (hybrid; lexical when no model is loaded).
SEARCHES = ("ours", "bm25-floor")


def request_ranks(
    source: Source, catalog: Catalog, index: SearchIndex, asked: Mapping[str, Sequence[str]]
) -> Ranks:
    """Each asked request's best rank of a needed tool over its queries' result lists, as measure ranks."""
    ranks: Ranks = {}
    for request in source.requests:
        if (queries := asked.get(request.id)) is not None:
            lists = [
                [catalog.tools[hit.position].name for hit in hits]
                for hits in index.search(list(queries), DEPTH)
            ]
            ranks[(source.name, request.id)] = first_rank(request, best_ranks(lists)) or 0
    return ranks


@dataclass
class Searched:
    """One query set's ranks, per search."""

    name: str
    ranks: dict[str, Ranks]


def search_sets(
    sources: Sequence[Source],
    sets: Mapping[str, Mapping[tuple[str, str], tuple[str, ...]]],
    embedder: Embedder | None,
) -> list[Searched]:
    """Every set searched on every source it names, each catalog indexed once."""
    out = [Searched(name, {search: {} for search in SEARCHES}) for name in sets]
    cache = VectorCache()
    for source in sources:
        wanted = [{key: q for (s, key), q in one.items() if s == source.name} for one in sets.values()]
        if not any(wanted):
            continue
        catalog = Catalog.from_definitions(source.tools)
        built = indexes(catalog, embedder, Fusion(), "learned", cache)
        chosen = {"ours": built.get("hybrid", built["lexical"]), "bm25-floor": built["bm25-floor"]}
        for searched, asked in zip(out, wanted, strict=True):
            for search, index in chosen.items():
                searched.ranks[search].update(request_ranks(source, catalog, index, asked))
    return out


def recall(ranks: Ranks, k: int, source: str | None = None) -> tuple[float, int]:
    found = [r for (s, _), r in ranks.items() if source in (None, s)]
    return sum(0 < r <= k for r in found) / max(len(found), 1), len(found)


def moves(before: Ranks, after: Ranks, k: int, source: str | None = None) -> tuple[int, int]:
    """Requests both sets hold that moved into (up) and out of (down) the top k."""
    both = [key for key in before.keys() & after.keys() if source in (None, key[0])]
    up = sum(not 0 < before[key] <= k and 0 < after[key] <= k for key in both)
    down = sum(0 < before[key] <= k and not 0 < after[key] <= k for key in both)
    return up, down


def render(searched: Sequence[Searched]) -> str:
    first = searched[0]
    sources = sorted({s for one in searched for (s, _) in one.ranks["ours"]})
    lines = [
        f"{'source':<18}{'set':<28}{'n':>5}{'R@1':>8}{'R@5':>8}{'floor R@1':>11}"
        + ("   vs first: top 1 up/down, top 5 up/down" if len(searched) > 1 else "")
    ]
    for source in [*sources, None]:
        for one in searched:
            ours, floor = one.ranks["ours"], one.ranks["bm25-floor"]
            r1, n = recall(ours, 1, source)
            line = (
                f"{source or 'all':<18}{one.name[:27]:<28}{n:>5}{r1:>8.3f}{recall(ours, 5, source)[0]:>8.3f}"
                f"{recall(floor, 1, source)[0]:>11.3f}"
            )
            if one is not first:
                up1, down1 = moves(first.ranks["ours"], ours, 1, source)
                up5, down5 = moves(first.ranks["ours"], ours, 5, source)
                line += f"   +{up1} / -{down1}, +{up5} / -{down5}"
            lines.append(line)
    return "\n".join(lines)
