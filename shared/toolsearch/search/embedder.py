"""Which embedder to search with: a model2vec model, or none (BM25 alone)."""

from __future__ import annotations

import logging

from toolsearch.search import Embedder

from ..errors import ToolsearchError

logger = logging.getLogger(__name__)


class EmbedderUnavailable(ToolsearchError):
    """`embedder model2vec` was asked for, but no model could be loaded."""


def load_configured_embedder(choice: str, model_dir: str = "") -> Embedder | None:
    """The embedder to search with, or None for BM25 alone (said once in the log)."""
    if choice == "none":
        logger.info("search is lexical only: embedder none")
        return None
    from toolsearch.model.load import ModelLoadError, load_embedder, resolve_model_dir

    folder = resolve_model_dir(model_dir)
    if folder is None:
        if choice == "model2vec":
            raise EmbedderUnavailable("embedder model2vec: no model folder found (set model_dir)")
        logger.warning("search is lexical only: no embedding model found")
        return None
    try:
        embedder = load_embedder(folder)
    except ModelLoadError as exc:
        if choice == "model2vec":
            raise EmbedderUnavailable(str(exc)) from exc
        logger.warning("search is lexical only: the model could not be loaded", extra={"reason": str(exc)})
        return None
    logger.info("search is hybrid", extra={"model_dir": str(folder), "dim": embedder.dim})
    return embedder
