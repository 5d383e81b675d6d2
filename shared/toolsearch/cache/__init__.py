"""The shared tier of the catalog cache: a DynamoDB table with TTL (`dynamo.DynamoCatalogStore`).

The warm in-memory tier in front of it is `CatalogStore`'s, not this package's.
"""
