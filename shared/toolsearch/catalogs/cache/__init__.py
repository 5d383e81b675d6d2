"""The shared tier of the catalog cache: what `CatalogStore` asks of one (`SharedTier`), and a
DynamoDB table with TTL that is one (`dynamo.DynamoSharedTier`, imported only when configured).

The warm in-memory tier in front of it is `catalogs.store.CatalogStore`'s, not this package's.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["SharedCopy", "SharedTier"]


class SharedCopy(Protocol):
    """One catalog as the shared tier holds it (`dynamo.StoredCatalog` is one)."""

    @property
    def data(self) -> bytes: ...  # Catalog.to_json()

    @property
    def fetched_at(self) -> float: ...  # unix seconds


class SharedTier(Protocol):
    """Catalog bytes shared between processes (`dynamo.DynamoSharedTier`), and their leases."""

    async def get(self, key: str) -> SharedCopy | None: ...
    # False when a refusal recorded after `fetched_at` (the listing's start) forbids the copy.
    async def put(self, key: str, data: bytes, fetched_at: float) -> bool | None: ...
    async def try_lease(self, key: str, holder: str, seconds: float) -> bool: ...
    async def release_lease(self, key: str, holder: str) -> None: ...
    async def forget(self, key: str, at: float) -> None: ...  # no copy listed before `at` is served
