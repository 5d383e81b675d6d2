"""The ranker judged twice on the dev split: trained on all of it, and leave-one-source-out.

Every dev query's candidates and features are computed once (the same `RankedIndex` the proxy
runs, as `ranker.groups` does), then the ranker is fitted on all dev sources and scored on them,
and fitted on every four and scored on the fifth, the five left-out scores pooled: the guard
against a choice that fits only dev's own catalogs. R@1 and R@5 from the candidates' scores, as
`measure` counts them (a request's best rank over its queries; ties by catalog position).

    python -m tools.searchbench loso                        # both, models' queries and raw text, per source
    python -m tools.searchbench loso --ranks before.jsonl   # also every request's best ranks
    python -m tools.searchbench loso --against before.jsonl # which requests moved since then

The judge is the row "trained-on, left out": the sources the ranker is trained on, each scored by
the ranker fitted on the others, pooled ("all dev" adds the sources measured only). A pooled gain
of a few requests is within what one choice moves back and forth; `--against` names them.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

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


def recall(
    best: dict[Key, int],
    k: int,
    phrasing: str,
    source: str | None = None,
    among: Collection[str] | None = None,
) -> float:
    """Share of requests found within the top k: of one source, of the sources `among`, or of all."""
    found = [
        r
        for (s, _, p), r in best.items()
        if p == phrasing and source in (None, s) and (among is None or s in among)
    ]
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
    """Pooled (the trained-on sources, then all), then per source: R@1 and R@5, models' / raw."""
    lines = [f"{'source':<18} " + "  ".join(f"{key:>4} R@{k} model / raw" for key in judged for k in (1, 5))]
    sources = sorted({s for s, _, _ in judged["dev"]})
    trained = [s for s in sources if s not in MEASURED_ONLY]
    rows: list[tuple[str, str | None, Collection[str] | None]] = [
        ("trained-on", None, trained),
        ("all dev", None, None),
        *((s, s, None) for s in sources),
    ]
    for label, source, among in rows:
        cells = [
            " / ".join(f"{recall(judged[key], k, p, source, among):.3f}" for p in ("model", "raw"))
            for key in judged
            for k in (1, 5)
        ]
        lines.append(f"{label:<18} " + "  ".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def write_ranks(judged: dict[str, dict[Key, int]], path: Path) -> None:
    """Every request's best rank, in sample and left out (0: no needed tool among the candidates)."""
    with path.open("w", encoding="utf-8") as out:
        for key in sorted(judged["dev"]):
            source, number, phrasing = key
            row = {"source": source, "request": number, "phrasing": phrasing}
            out.write(json.dumps(row | {name: judged[name][key] for name in judged}) + "\n")


def read_ranks(path: Path) -> dict[str, dict[Key, int]]:
    judged: dict[str, dict[Key, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        key = (row["source"], row["request"], row["phrasing"])
        for name, rank in row.items():
            if name not in ("source", "request", "phrasing"):
                judged.setdefault(name, {})[key] = rank
    return judged


def moved(before: dict[Key, int], after: dict[Key, int], k: int) -> tuple[list[Key], list[Key]]:
    """Requests found within the top k after and not before (up), and the reverse (down)."""
    keys = sorted(before.keys() & after.keys())
    up = [key for key in keys if 0 < after[key] <= k and not 0 < before[key] <= k]
    down = [key for key in keys if 0 < before[key] <= k and not 0 < after[key] <= k]
    return up, down


def render_moves(before: dict[str, dict[Key, int]], after: dict[str, dict[Key, int]]) -> str:
    """Per source and phrasing, how many requests moved in or out of the top 1 and top 5, left out."""
    lines = ["left out: requests up / down since the earlier run (source, phrasing: R@1, R@5)"]
    for source in sorted({s for s, _, _ in after["out"]}):
        for phrasing in ("model", "raw"):
            old, new = (
                {key: r for key, r in run["out"].items() if key[0] == source and key[2] == phrasing}
                for run in (before, after)
            )
            cells = []
            for k in (1, 5):
                up, down = moved(old, new, k)
                cells.append(f"+{len(up)} / -{len(down)}")
            lines.append(f"{source:<18} {phrasing:<6} " + "   ".join(cells))
    return "\n".join(lines)
