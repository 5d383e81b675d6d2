"""Why a tool is (not) found: one tool's place in one query's ranking, with the reasons.

The ranking is recomputed from the same index, with the same calls `search` makes
(`RankedIndex.find`, `order`, `fuse`, `LexicalIndex.top`), so the rank given here is the rank
search gives at any limit up to `CANDIDATES` (tests/test_explain.py holds them equal). A tool
ranked below that, or among no ranking's candidates, has no rank: search cannot return it for
this query. Its place in BM25's and the embedding's own orders over the whole catalog is given
anyway, which says how far it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from toolsearch.catalogs.catalog import Catalog, Tool
from toolsearch.search import Hit, SearchIndex
from toolsearch.search.documents import name_words, schema_text
from toolsearch.search.hybrid import CANDIDATES, HybridIndex, fuse
from toolsearch.search.lexical import LexicalIndex
from toolsearch.search.rerank import FEATURES, TERMS_HELD, RankedIndex, features, order
from toolsearch.search.text import tokenize, tokenize_query, tokenize_query_words
from toolsearch.service.tooldefs import DEFAULT_LIMIT, MAX_LIMIT

__all__ = ["SHORT_DESCRIPTION_WORDS", "explain", "field_terms", "ranking"]

SHORT_DESCRIPTION_WORDS = 8  # fewer words say too little for BM25 or a vector to find the tool by
SHARED_NAME_WORDS = 3
ABOVE = 10  # tools listed above the explained one, best first


def field_terms(tool: Tool) -> dict[str, set[str]]:
    """The stemmed terms of each field the search indexes, as rerank.FieldIndex splits them."""
    return {
        "name": set(tokenize(name_words(tool.name) + " " + tool.title)),
        "description": set(tokenize(tool.description)),
        "parameters": set(tokenize("\n".join(schema_text(tool.input_schema)))),
    }


def _cosines(index: SearchIndex, query: str) -> np.ndarray | None:
    semantic = getattr(index, "semantic", None)
    embedder = getattr(index, "embedder", None)
    if semantic is None or embedder is None:
        return None
    scores: np.ndarray = semantic.scores(embedder.encode([query]))[0]
    return scores


def _full_rank(scores: np.ndarray, position: int, eligible: np.ndarray | None = None) -> int | None:
    """1 + how many tools score above `position` (ties by position, as every ranking breaks them)."""
    if eligible is not None and not eligible[position]:
        return None
    mine = scores[position]
    better = (scores > mine) | ((scores == mine) & (np.arange(len(scores)) < position))
    if eligible is not None:
        better &= eligible
    return int(better.sum()) + 1


def ranking(index: SearchIndex, query: str) -> dict[str, Any]:
    """The whole ranking search makes of `query` at depth CANDIDATES, and how it was made."""
    if isinstance(index, RankedIndex):
        found = index.find(query, CANDIDATES)
        held = float(found.matrix[:, TERMS_HELD].max(initial=0.0))
        fallback = bool(len(found.semantic_top[0])) and held < index.words_threshold
        size = len(found.positions)
        hits = (
            fuse(found.lexical_hits, found.semantic_hits, size, index.fusion)
            if fallback
            else order(found.matrix, found.positions, index.ranker, size)
        )
        return {"hits": hits, "method": "fused" if fallback else "learned", "found": found, "held": held}
    terms = tokenize_query(query)
    if isinstance(index, HybridIndex):
        lexical = index.lexical.search_terms(terms, CANDIDATES)
        cosines = _cosines(index, query)
        semantic = index.semantic.rank(cosines, CANDIDATES) if cosines is not None else []
        return {"hits": fuse(lexical, semantic, 2 * CANDIDATES, index.fusion), "method": "fused"}
    if isinstance(index, LexicalIndex):
        return {"hits": index.search_terms(terms, CANDIDATES), "method": "bm25"}
    return {"hits": index.search([query], CANDIDATES)[0], "method": "unknown"}


def _lexical_part(index: SearchIndex, terms: list[str], position: int) -> dict[str, Any] | None:
    lexical = index if isinstance(index, LexicalIndex) else getattr(index, "lexical", None)
    if not isinstance(lexical, LexicalIndex) or not lexical.size:
        return None
    scores, matched = lexical.scores(terms)
    return {"score": round(float(scores[position]), 4), "rank": _full_rank(scores, position, matched)}


def _shared_prefix(catalog: Catalog, tool: Tool) -> tuple[str, int]:
    words = name_words(tool.name).split()[:SHARED_NAME_WORDS]
    prefix = " ".join(words)
    if len(words) < SHARED_NAME_WORDS:
        return prefix, 0
    same = sum(1 for other in catalog.tools if name_words(other.name).split()[:SHARED_NAME_WORDS] == words)
    return prefix, same


def _hints(
    catalog: Catalog, tool: Tool, matched: dict[str, list[str]], rank: int | None, facts: dict[str, Any]
) -> list[str]:
    hints = []
    if not matched["name"] and not matched["description"]:
        where = " (only in its parameters)" if matched["parameters"] else ""
        hints.append(f"no word of the query appears in this tool's name or description after stemming{where}")
    elif not matched["name"]:
        hints.append("no word of the query is in its name or title, which weigh most")
    if rank is not None and rank > DEFAULT_LIMIT:
        hints.append(
            f"rank {rank}: search_tools returns {DEFAULT_LIMIT} tools unless asked for more (limit, "
            f"at most {MAX_LIMIT})"
        )
    words = len(tool.description.split())
    if words < SHORT_DESCRIPTION_WORDS:
        hints.append(f"its description is {words} word{'s' if words != 1 else ''}")
    prefix, same = _shared_prefix(catalog, tool)
    if same > 1:
        hints.append(f'{same} tools share its first three name words ("{prefix}")')
    if facts.get("fallback"):
        hints.append(
            f"few of the query's words reach any tool (best share {facts['held']:.2f}, under "
            f"{facts['threshold']:.2f}): ranked by the fused BM25 and cosine order, not the learned ranker"
        )
    if rank is None:
        hints.append(
            f"it is not among the {CANDIDATES} best of BM25 nor of the embedding, or ranks below "
            f"{CANDIDATES}: search_tools cannot return it for this query"
        )
    if not facts.get("semantic"):
        hints.append(
            "search is lexical only (no model): a query in words other than the tool's cannot find it"
        )
    return hints


def explain(
    catalog: Catalog, index: SearchIndex, query: str, name: str, above: int = ABOVE
) -> dict[str, Any]:
    """Everything about `name`'s place in `query`'s ranking, as data; an unknown name is an error."""
    tool = catalog.get(name)
    if tool is None:
        from toolsearch.validation.arguments import closest_names

        return {"error": "unknown_tool", "tool": name, "similar": closest_names(name, catalog.by_name)}
    position = catalog.tools.index(tool)
    terms = tokenize_query(query)
    distinct = list(dict.fromkeys(terms))
    made = ranking(index, query)
    hits: list[Hit] = made["hits"]
    order_of = [hit.position for hit in hits]
    rank = (
        order_of.index(position) + 1
        if position in order_of and order_of.index(position) < CANDIDATES
        else None
    )
    fields = field_terms(tool)
    matched = {field: [t for t in distinct if t in held] for field, held in fields.items()}
    answer: dict[str, Any] = {
        "tool": tool.name,
        "rank": rank,
        "total": len(catalog),
        "method": made["method"],
        "queryTerms": distinct,
        "matched": matched,
    }
    if rank is not None:
        answer["score"] = round(hits[rank - 1].score, 4)
    facts: dict[str, Any] = {}
    if lexical := _lexical_part(index, terms, position):
        answer["bm25"] = lexical
    cosines = _cosines(index, query)
    facts["semantic"] = cosines is not None
    if cosines is not None:
        answer["cosine"] = {
            "similarity": round(float(cosines[position]), 4),
            "rank": _full_rank(cosines, position),
        }
    if isinstance(index, RankedIndex):
        found = made["found"]
        answer["ranker"] = _ranker_with(index, found, query, position, cosines)
        facts |= {
            "fallback": made["method"] == "fused",
            "held": made["held"],
            "threshold": index.words_threshold,
        }
        answer["fallback"] = {
            "applied": facts["fallback"],
            "queryTermsHeld": round(made["held"], 4),
            "threshold": index.words_threshold,
        }
    # The best ones: what search_tools returns instead of this tool.
    stop = min((rank - 1) if rank is not None else len(hits), CANDIDATES, max(above, 0))
    answer["above"] = [
        {"rank": i + 1, "name": catalog.tools[hit.position].name, "score": round(hit.score, 4)}
        for i, hit in enumerate(hits[:stop])
    ]
    answer["hints"] = _hints(catalog, tool, matched, rank, facts)
    return answer


def _ranker_with(
    index: RankedIndex, found: Any, query: str, position: int, cosines: np.ndarray | None
) -> dict[str, Any]:
    where = np.flatnonzero(found.positions == position)
    if len(where):
        row = found.matrix[where[0]]
    else:  # not a candidate: its features as if it were one, beside the real candidates
        with_it = np.array(sorted({*found.positions.tolist(), position}), dtype=np.int64)
        terms, words = tokenize_query_words(query)
        scores, _ = index.lexical.scores(terms)
        matrix = features(
            index.fields, scores, terms, with_it, found.lexical_top, cosines, found.semantic_top, words=words
        )
        row = matrix[int(np.flatnonzero(with_it == position)[0])]
    ranker = index.ranker
    parts = (row - ranker.mean) / ranker.scale * ranker.weights
    contributions = {
        feature: {"value": round(float(value), 4), "adds": round(float(part), 4)}
        for feature, value, part in zip(FEATURES, row, parts, strict=True)
    }
    return {"score": round(float(parts.sum()), 4), "candidate": bool(len(where)), "features": contributions}
