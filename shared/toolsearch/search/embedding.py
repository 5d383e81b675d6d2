"""The embedding half of search: each tool's text as a unit vector, ranked by cosine.

Many callers share most of their tools, so a tool's vector is kept by the text
it was made from and reused by every catalog that holds the same text
(`VectorCache`, bounded). Each query of a search_tools call is embedded once,
by the hybrid index.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Mapping, Sequence

import numpy as np

from toolsearch.catalogs.catalog import Tool
from toolsearch.ops.bounded import BoundedMap
from toolsearch.search import Embedder, Hit
from toolsearch.search.documents import name_words

MAX_DESCRIPTION_CHARS = 1_000  # the first part says what a tool does; the rest dilutes its vector


def embedding_text(tool: Tool, extra: str = "") -> str:
    """What of a tool is embedded: its name as words, its title, the start of its description, its
    search hint and the operator's words for it (`extra`)."""
    parts = [
        name_words(tool.name),
        tool.title,
        tool.description[:MAX_DESCRIPTION_CHARS],
        tool.search_hint,
        extra,
    ]
    return ". ".join(part.strip() for part in parts if part and part.strip())


class VectorCache:
    """Tool vectors by the hash of their text, shared across catalogs; least recently used go first."""

    def __init__(self, max_entries: int = 50_000) -> None:
        self._vectors: BoundedMap[bytes, np.ndarray] = BoundedMap(max_entries)
        self._lock = threading.Lock()  # indexing runs in worker threads
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._vectors)

    @property
    def max_entries(self) -> int:
        return self._vectors.max_entries

    def vectors(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.blake2b(text.encode(), digest_size=16).digest() for text in texts]
        out = np.zeros((len(texts), embedder.dim), np.float32)
        missing: list[int] = []
        with self._lock:
            for row, key in enumerate(keys):
                vector = self._vectors.use(key)
                if vector is None:
                    missing.append(row)
                else:
                    out[row] = vector
            self.hits += len(texts) - len(missing)
            self.misses += len(missing)
        if missing:
            fresh = embedder.encode([texts[row] for row in missing])
            out[missing] = fresh
            with self._lock:
                for row, vector in zip(missing, fresh, strict=True):
                    self._vectors.set(keys[row], vector)
        return out


@functools.cache
def single_threaded_blas() -> None:
    """One BLAS thread for the whole process, set once.

    A query's product with the tool matrix is small work for one core; split across threads,
    it waits for a CPU that a Lambda function (or a busy host) does not have, and takes many
    times longer (docs/benchmarks.md, "Search latency").
    """
    import threadpoolctl  # here, not at import: a cold start that never searches skips it

    threadpoolctl.threadpool_limits(limits=1, user_api="blas")


class EmbeddingIndex:
    """Cosine similarity of unit vectors: one matrix product per batch of queries."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        self.size = self.matrix.shape[0]

    def scores(self, query_vectors: np.ndarray) -> np.ndarray:
        """(queries x tools) cosine similarities."""
        if self.size == 0:
            return np.zeros((len(query_vectors), 0), np.float32)
        return query_vectors @ self.matrix.T

    def rank(self, scores: np.ndarray, limit: int) -> list[Hit]:
        positions, best = self.rank_arrays(scores, limit)
        return [
            Hit(position, score) for position, score in zip(positions.tolist(), best.tolist(), strict=True)
        ]

    def rank_arrays(self, scores: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """`rank` as two arrays, positions and their cosines, best first: no `Hit` made per tool."""
        if self.size == 0 or limit <= 0 or not np.any(scores):
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        limit = min(limit, self.size)
        top = np.argpartition(-scores, limit - 1)[:limit]
        # Best first; equal scores by catalog position, so results never depend on the partition.
        top = top[np.lexsort((top, -scores[top]))]
        return top, scores[top]


def build_embedding_index(
    tools: Sequence[Tool], embedder: Embedder, cache: VectorCache, extra: Mapping[str, str] | None = None
) -> EmbeddingIndex:
    """`extra`: the operator's search words by tool name."""
    words = extra or {}
    texts = [embedding_text(tool, words.get(tool.name, "")) for tool in tools]
    return EmbeddingIndex(cache.vectors(embedder, texts))
