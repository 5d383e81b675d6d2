"""Each caller's catalog: listed from the upstream, indexed, cached, refreshed.

A caller is known only by a hash of their Authorization header and the upstream
URL, never by the token itself or a claim inside it (a claim can't be trusted
without verifying the token, which the proxy cannot do).

Tiers: warm memory (bounded LRU) in front of an optional shared store
(DynamoDB in Lambda). A fresh catalog is served as is; a stale one is served
while one background refresh per key lists the upstream again; one past
`catalog_max_age` is listed again before answering. A failed listing is never
cached, so a 401 or a 5xx is not remembered as an empty catalog.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .catalog import Catalog
from .search import SearchIndex
from .settings import Settings

logger = logging.getLogger(__name__)


def caller_key(upstream_url: str, authorization: str | None) -> str:
    """The cache key of one caller: a SHA-256 of the upstream URL and the whole header."""
    material = f"{upstream_url}\n{authorization or ''}".encode()
    return hashlib.sha256(material).hexdigest()


@dataclass(frozen=True, slots=True)
class Caller:
    authorization: str | None
    key: str


@dataclass(frozen=True, slots=True)
class IndexedCatalog:
    catalog: Catalog
    index: SearchIndex


class Listing(Protocol):
    tools: list[dict[str, Any]]
    instructions: str


class SharedTier(Protocol):
    async def get(self, key: str) -> Any: ...  # StoredCatalog | None, with .data and .fetched_at
    async def put(self, key: str, data: bytes, fetched_at: float) -> None: ...
    async def try_lease(self, key: str, holder: str, seconds: float) -> bool: ...
    async def release_lease(self, key: str, holder: str) -> None: ...


Lister = Callable[[str | None], Awaitable[Listing]]
Indexer = Callable[[Catalog], SearchIndex]
EventSink = Callable[[str], None]


class CatalogStore:
    def __init__(
        self,
        settings: Settings,
        lister: Lister,
        indexer: Indexer,
        *,
        shared: SharedTier | None = None,
        clock: Callable[[], float] = time.time,
        on_event: EventSink | None = None,
    ) -> None:
        self._settings = settings
        self._lister = lister
        self._indexer = indexer
        self._shared = shared
        self._clock = clock
        self._on_event = on_event or (lambda name: None)
        self._memory: OrderedDict[str, IndexedCatalog] = OrderedDict()
        self._loading: dict[str, asyncio.Task[IndexedCatalog]] = {}
        self._forced: set[str] = set()  # keys whose next load skips the shared tier

    def __len__(self) -> int:
        return len(self._memory)

    def _age(self, entry: IndexedCatalog) -> float:
        return self._clock() - entry.catalog.fetched_at

    async def get(self, caller: Caller) -> IndexedCatalog:
        entry = self._memory.get(caller.key)
        if entry is not None:
            self._memory.move_to_end(caller.key)
            age = self._age(entry)
            if age < self._settings.catalog_ttl:
                self._on_event("catalog_hit_memory")
                return entry
            if age < self._settings.catalog_max_age:
                self._on_event("catalog_stale_memory")
                self._refresh_in_background(caller)
                return entry
        return await self._single_flight(caller, background=False)

    def cached(self, key: str) -> IndexedCatalog | None:
        """The catalog held in memory for a key, if any, without loading or touching its age."""
        return self._memory.get(key)

    def invalidate(self, key: str) -> None:
        """Forget a caller's catalog, so the next request lists the upstream again.

        The shared tier is skipped on that next load too: it may hold the same outdated list.
        """
        self._memory.pop(key, None)
        self._forced.add(key)

    async def refresh(self, caller: Caller) -> IndexedCatalog:
        """List the upstream again now, whatever the age of the cached catalog; store the result."""
        self.invalidate(caller.key)
        running = self._loading.get(caller.key)
        if running is not None:
            # A load that started before this refresh may have read the old catalog: wait, then list.
            await asyncio.wait([running])  # not gather: cancelling this refresh must not cancel it
            self._forced.add(caller.key)
        return await self._single_flight(caller, background=False)

    def _refresh_in_background(self, caller: Caller) -> None:
        if caller.key in self._loading:
            return
        task = self._start(caller, background=True)
        task.add_done_callback(_log_failed_refresh)

    async def _single_flight(self, caller: Caller, background: bool) -> IndexedCatalog:
        task = self._loading.get(caller.key) or self._start(caller, background)
        return await asyncio.shield(task)

    def _start(self, caller: Caller, background: bool) -> asyncio.Task[IndexedCatalog]:
        task = asyncio.create_task(self._load(caller, background))
        self._loading[caller.key] = task
        task.add_done_callback(lambda _t, key=caller.key: self._loading.pop(key, None))
        # Its waiters may all have been cancelled (shield): read its failure so none goes unretrieved.
        task.add_done_callback(_retrieve)
        return task

    async def _load(self, caller: Caller, background: bool) -> IndexedCatalog:
        started = time.perf_counter()
        forced = caller.key in self._forced
        entry = None if background or forced else await self._from_shared(caller.key)
        if entry is None:
            entry = await self._from_upstream(caller, background)
        self._forced.discard(caller.key)  # only once listed: a failed listing leaves it forced
        self._remember(caller.key, entry)
        logger.info(
            "catalog loaded",
            extra={"tools": len(entry.catalog), "ms": round((time.perf_counter() - started) * 1000, 1)},
        )
        return entry

    async def _from_shared(self, key: str) -> IndexedCatalog | None:
        if self._shared is None:
            return None
        stored = await self._shared.get(key)
        if stored is None or self._clock() - stored.fetched_at >= self._settings.catalog_ttl:
            self._on_event("catalog_miss_shared")
            return None
        try:
            catalog = Catalog.from_json(stored.data, self._settings.write_tools, self._settings.read_tools)
        except ValueError:
            self._on_event("catalog_corrupt_shared")
            logger.warning("shared catalog unreadable; listing the upstream instead")
            return None
        self._on_event("catalog_hit_shared")
        return await self._index(catalog)

    async def _from_upstream(self, caller: Caller, background: bool) -> IndexedCatalog:
        leased = False
        # A holder id per refresh, drawn from os.urandom now: one made at init would be cloned into
        # every environment that SnapStart restores from the same snapshot.
        holder = uuid.uuid4().hex
        if background and self._shared is not None:
            # Across execution environments, one refresher per key; the others keep serving.
            leased = await self._shared.try_lease(caller.key, holder, self._settings.upstream_timeout * 2)
            if not leased:
                shared = await self._from_shared(caller.key)
                if shared is not None:
                    return shared
        try:
            self._on_event("catalog_list_upstream")
            listing = await self._lister(caller.authorization)
            catalog = Catalog.from_definitions(
                listing.tools,
                instructions=listing.instructions,
                fetched_at=self._clock(),
                write_tools=self._settings.write_tools,
                read_tools=self._settings.read_tools,
            )
            entry = await self._index(catalog)
            if self._shared is not None:
                await self._shared.put(caller.key, catalog.to_json(), catalog.fetched_at)
            return entry
        finally:
            if leased and self._shared is not None:
                await self._shared.release_lease(caller.key, holder)

    async def _index(self, catalog: Catalog) -> IndexedCatalog:
        # Indexing is CPU work (BM25 statistics, embeddings): keep the event loop free for others.
        index = await asyncio.to_thread(self._indexer, catalog)
        return IndexedCatalog(catalog=catalog, index=index)

    def _remember(self, key: str, entry: IndexedCatalog) -> None:
        self._memory[key] = entry
        self._memory.move_to_end(key)
        while len(self._memory) > max(1, self._settings.catalog_memory_entries):
            self._memory.popitem(last=False)
            self._on_event("catalog_evicted_memory")


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _log_failed_refresh(task: asyncio.Task[IndexedCatalog]) -> None:
    """A failed background refresh keeps the stale catalog: logged (its kind only), never raised."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        logger.warning(
            "catalog refresh failed; serving the stale one",
            extra={"outcome": getattr(error, "kind", type(error).__name__)},
        )
