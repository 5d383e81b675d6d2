"""The shared tier of the catalog cache: a DynamoDB table with TTL (`dynamo.DynamoSharedTier`).

The warm in-memory tier in front of it is `catalog_store.CatalogStore`'s, not this package's.
"""
