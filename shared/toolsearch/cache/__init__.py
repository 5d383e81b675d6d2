"""Caller catalogs cached in two tiers: warm memory in front of a DynamoDB table with TTL."""

from toolsearch.cache.dynamo import DynamoCatalogStore, StoredCatalog

__all__ = ["DynamoCatalogStore", "StoredCatalog"]
