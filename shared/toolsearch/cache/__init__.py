"""Caller catalogs cached in two tiers: warm memory in front of a DynamoDB table with TTL."""

from toolsearch.cache.dynamo import DynamoSharedTier, StoredCatalog

__all__ = ["DynamoSharedTier", "StoredCatalog"]
