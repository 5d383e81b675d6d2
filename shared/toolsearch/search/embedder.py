"""Which embedder the settings ask for: a model2vec model, or none (BM25 alone)."""

from __future__ import annotations

import logging
from typing import Any

from ..settings import Settings

logger = logging.getLogger(__name__)


def load_configured_embedder(settings: Settings) -> Any:
    if settings.embedder == "none":
        logger.info("search is lexical only (embedder none)")
        return None
    return None
