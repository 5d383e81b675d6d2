"""make_indexer: a caller's vector cache is the one used, even while it is empty."""

from __future__ import annotations

from fixtures.model_helpers import make_model
from toolsearch.catalogs.catalog import Catalog
from toolsearch.model.load import load_embedder
from toolsearch.search.embedding import VectorCache
from toolsearch.search.index import make_indexer


def test_an_empty_cache_given_to_make_indexer_is_filled_and_shared(tmp_path):
    embedder = load_embedder(make_model(tmp_path / "model"))
    catalog = Catalog.from_definitions(
        [
            {"name": "calendar_create_event", "description": "Create a calendar event."},
            {"name": "calendar_delete_event", "description": "Delete a calendar event."},
        ]
    )
    cache = VectorCache()
    index = make_indexer(embedder, cache=cache)
    index(catalog)
    assert len(cache) == 2 and cache.misses == 2
    index(catalog)  # a second caller with the same tools reuses the vectors
    assert cache.hits == 2
