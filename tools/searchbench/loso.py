"""The ranker judged twice on the dev split: trained on all of it, and leave-one-source-out.

Every dev query's candidates and features are computed once (the same `RankedIndex` the proxy
runs, as `ranker.groups` does), then the ranker is fitted on all dev sources and scored on them,
and fitted on every four and scored on the fifth, the five left-out scores pooled: the guard
against a choice that fits only dev's own catalogs. R@1 and R@5 from the candidates' scores, as
`measure` counts them (a request's best rank over its queries; ties by catalog position).

    python -m tools.searchbench loso            # both, models' queries and raw text, per source
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolsearch.search import Embedder
from toolsearch.search.rerank import Linear

from .benchset import Source
from .ranker import MEASURED_ONLY, PHRASINGS, Group, Key, fit, keyed_groups


@dataclass
class Query:
    """One query of one request: its candidates' features and which are a needed tool."""

    key: Key
    group: Group


def collect(sources: Sequence[Source], embedder: Embedder | None) -> list[Query]:
    return [Query(key, group) for key, group in keyed_groups(sources, embedder, PHRASINGS)]


def ranks(queries: Sequence[Query], linear: Linear) -> dict[Key, int]:
    """Each request's best rank of a needed tool over its queries (0: not among the candidates)."""
    best: dict[Key, int] = {}
    for query in queries:
        positive, rank = query.group.positive, 0
        if positive.any():
            order = np.argsort(-linear.scores(query.group.matrix), kind="stable")
            rank = int(np.flatnonzero(positive[order])[0]) + 1
        old = best.get(query.key, 0)
        best[query.key] = rank if not old else (min(old, rank) if rank else old)
    return best


def recall(best: dict[Key, int], k: int, phrasing: str, source: str | None = None) -> float:
    found = [r for (s, _, p), r in best.items() if p == phrasing and source in (None, s)]
    return sum(0 < r <= k for r in found) / max(len(found), 1)


def judge(queries: Sequence[Query]) -> dict[str, dict[Key, int]]:
    """Best ranks: trained on all (`dev`), and each source by the ranker fitted on the others (`out`).
    `MEASURED_ONLY` sources are never trained on: both columns score them with the ranker fitted on
    the rest, as the default is."""
    trained = [q for q in queries if q.key[0] not in MEASURED_ONLY]
    everything = fit([q.group for q in trained])
    out = {"dev": ranks(queries, everything), "out": {}}
    for source in sorted({q.key[0] for q in queries}):
        left_out = [q for q in queries if q.key[0] == source]
        if source in MEASURED_ONLY:
            out["out"].update(ranks(left_out, everything))
            continue
        linear = fit([q.group for q in trained if q.key[0] != source])
        out["out"].update(ranks(left_out, linear))
    return out


def render(judged: dict[str, dict[Key, int]]) -> str:
    """Pooled, then per source: R@1 and R@5, models' queries / raw text."""
    lines = [f"{'source':<18} " + "  ".join(f"{key:>4} R@{k} model / raw" for key in judged for k in (1, 5))]
    sources = sorted({s for s, _, _ in judged["dev"]})
    for source in (None, *sources):
        cells = [
            " / ".join(f"{recall(judged[key], k, p, source):.3f}" for p in ("model", "raw"))
            for key in judged
            for k in (1, 5)
        ]
        lines.append(f"{source or 'all dev':<18} " + "  ".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)
