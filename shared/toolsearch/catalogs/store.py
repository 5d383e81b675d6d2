"""Each caller's catalog: listed from the upstream, indexed, cached, refreshed.

Each catalog is kept under its caller's key (`callers/identity.py`): a hash, never the token.

Tiers: warm memory (bounded LRU) in front of an optional shared store
(DynamoDB in Lambda). A fresh catalog is served as is; a stale one is served
while one background refresh per key lists the upstream again; one past
`catalog_max_age` is listed again before answering. A failed listing is never
cached, so a 401 or a 5xx is not remembered as an empty catalog; an anonymous
caller's 401 is answered again for `unauthorized_ttl` seconds without asking
the upstream, and a listing refused as rate-limited until its Retry-After
(at most 15 minutes). A listing the upstream refuses (401/403: a revoked or
expired token) drops that caller's catalog at once, here and in the shared tier, so a
stale copy does not go on answering after revocation: the exposure is at most
`catalog_ttl` and the requests answered while that one refresh runs.

The shared copy lives until `catalog_max_age`, and readers judge its freshness
by its `fetched_at`: an environment that does not get the key's lease serves a
stale copy while the lease holder lists, so N environments make one listing per
refresh; a cold one waits for the holder's copy instead of listing too.

One module on purpose, past 400 lines: the memory tier, single flight per key and the
shared tier's lease together decide which environment lists and which serves what,
and that decision reads as a whole.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from toolsearch.callers.identity import Caller
from toolsearch.callers.refusal import REFUSING_KINDS, refusal_status
from toolsearch.catalogs.bounds import StrangerGate
from toolsearch.catalogs.cache import SharedTier
from toolsearch.catalogs.catalog import Catalog
from toolsearch.ops import deadline
from toolsearch.ops.bounded import BoundedMap
from toolsearch.ops.tasks import retrieve
from toolsearch.ops.timing import Span
from toolsearch.search import SearchIndex
from toolsearch.settings import CatalogConfig
from toolsearch.upstream import Listing, UpstreamError, answer_by
from toolsearch.validation.arguments import Validators

logger = logging.getLogger(__name__)

MAX_RATE_LIMITED_HOLD = 900.0  # seconds at most a rate-limited listing is answered without the upstream
MAX_HELD_REFUSALS = 4096  # refusals held at once (random tokens must not grow memory)
MAX_MARKED_KEYS = 4096  # keys marked to list past the shared tier, or again before serving
MAX_KNOWN_KEYS = 16384  # keys this process has held a catalog for (about 150 bytes each)
_POLL_FIRST, _POLL_MOST = 0.1, 1.0  # seconds between looks at the shared tier while another lists


class KeptHit(NamedTuple):
    """A search hit as answers hold it: its data, its compact JSON, that escaped as a text block
    writes it, and whether it may hold a constant (`service.results.holds_constant`)."""

    data: dict[str, Any]
    text: str
    escaped: str
    constant: bool


@dataclass(frozen=True, slots=True)
class IndexedCatalog:
    """A catalog with what is derived from it once: its search index, its schemas' validators, and
    each search hit as written (by position and schema flag, `KeptHit`), filled as hits are first
    returned, so it lives and dies with the catalog and is never shared with another's."""

    catalog: Catalog
    index: SearchIndex
    validators: Validators = field(default_factory=Validators)
    hit_json: dict[tuple[int, bool], KeptHit] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )


class CatalogSource(Protocol):
    """Where catalogs come from: the upstream's tools/list for one caller (`Upstream.list_tools`)."""

    async def list_tools(self, authorization: str | None) -> Listing: ...


class Indexer(Protocol):
    """Builds a catalog's search index (`search.index.make_indexer`); CPU work, run in a thread."""

    def __call__(self, catalog: Catalog, /) -> SearchIndex: ...


EventSink = Callable[[str], None]


class CatalogStore:
    def __init__(
        self,
        config: CatalogConfig,
        source: CatalogSource,
        indexer: Indexer,
        *,
        shared: SharedTier | None = None,
        clock: Callable[[], float] = time.time,
        on_event: EventSink | None = None,
        lease_seconds: float = 60.0,
    ) -> None:
        """`lease_seconds`: how long one environment may hold a key's listing lease in the shared tier
        (`build_proxy` gives twice `upstream_timeout`, a listing's deadline, with room to store it)."""
        self._config = config
        self._lease = lease_seconds
        self._write_tools = frozenset(config.write_tools)  # always writes, whatever their annotations say
        self._read_tools = frozenset(config.read_tools)  # read-only though the upstream does not say so
        self._source = source
        self._indexer = indexer
        self._shared = shared
        self._clock = clock
        self._on_event = on_event or (lambda name: None)
        # Warm memory: at most `memory_entries` catalogs, at most `memory_per_caller` of one party
        # (`Caller.party`: the verified subject in exchange mode, else the key). Past its share a
        # party's new catalog pushes out its own oldest, never another party's, so one person's many
        # tokens cannot empty everyone else's warm memory.
        self._memory: BoundedMap[str, IndexedCatalog] = BoundedMap(
            max(1, config.memory_entries), per_group=max(1, config.memory_per_caller)
        )
        self._loading: dict[str, asyncio.Task[IndexedCatalog]] = {}  # bounded by requests in flight
        # Keys whose next load skips the shared tier.
        self._forced: BoundedMap[str, bool] = BoundedMap(MAX_MARKED_KEYS)
        # Keys whose held catalog is outdated (the upstream said so): listed again before serving,
        # and served still while the upstream cannot list. True once such a listing has failed.
        self._due: BoundedMap[str, bool] = BoundedMap(MAX_MARKED_KEYS)
        # Keys this process held a catalog for: not strangers (their refusal may cost a write).
        self._known: BoundedMap[str, bool] = BoundedMap(MAX_KNOWN_KEYS)
        # When each key was refused (unix seconds): no listing begun before then is kept.
        self._forgotten_at: BoundedMap[str, float] = BoundedMap(MAX_HELD_REFUSALS)
        self._strangers = StrangerGate(max(0, config.stranger_refusals), config.stranger_window, clock)
        # Answers the upstream asked to stand for a while, by key, each until its time. An anonymous
        # caller's 401, and a listing refused as rate-limited with a Retry-After.
        self._refused: BoundedMap[str, UpstreamError] = BoundedMap(MAX_HELD_REFUSALS, clock=clock)

    def __len__(self) -> int:
        return len(self._memory)

    @property
    def ttl(self) -> float:
        """Seconds a catalog is fresh: how long a client may keep what was listed from it."""
        return self._config.ttl

    def _age(self, entry: IndexedCatalog) -> float:
        return self._clock() - entry.catalog.fetched_at

    async def get(self, caller: Caller) -> IndexedCatalog:
        entry = self._memory.get(caller.key)
        if entry is not None:
            self._memory.touch(caller.key)
            if caller.key in self._due:
                return await self._renewed(caller, entry)
            age = self._age(entry)
            if age < self._config.ttl:
                self._on_event("catalog_hit_memory")
                return entry
            if age < self._config.max_age:
                self._on_event("catalog_stale_memory")
                self._refresh_in_background(caller)
                return entry
        refused = self._refusal(caller.key)
        if refused is not None:
            self._on_event("catalog_refused_memory")
            raise refused
        try:
            entry = await self._wait_in_time(self._single_flight(caller, background=False))
        except UpstreamError as exc:
            if exc.kind == "unauthorized" and caller.authorization is None:
                self._remember_refusal(caller.key, exc, self._config.unauthorized_ttl)
            elif exc.kind == "rate_limited" and exc.retry_after:
                # The upstream asked not to be asked before then: asking sooner only adds a violation
                # towards a gateway's lockout, for every caller behind the proxy's one address.
                self._remember_refusal(caller.key, exc, min(exc.retry_after, MAX_RATE_LIMITED_HOLD))
            raise
        if self._age(entry) >= self._config.ttl:
            self._refresh_in_background(caller)  # a stale copy from the shared tier: served, and renewed
        return entry

    async def _renewed(self, caller: Caller, held: IndexedCatalog) -> IndexedCatalog:
        """A held catalog the upstream said is outdated: listed again first, once; while the upstream
        cannot list, the held one is served (and renewed in the background). Only a refusal drops it."""
        if self._due.get(caller.key):
            self._on_event("catalog_stale_memory")
            self._refresh_in_background(caller)
            return held
        try:
            return await self._wait_in_time(self._single_flight(caller, background=False))
        except UpstreamError as exc:
            gone = self._memory.get(caller.key) is None or self._age(held) >= self._config.max_age
            if exc.kind in REFUSING_KINDS or gone:
                raise
            self._due.set(caller.key, True)
            self._on_event("catalog_held_in_outage")
            return held

    def cached(self, key: str) -> IndexedCatalog | None:
        """The catalog held in memory for a key, if any, without loading or touching its age."""
        return self._memory.get(key)

    async def drop_refused(self, key: str, error: UpstreamError, *, listing: bool) -> None:
        """The one place the upstream's refusal of a caller drops their catalog (`forget`).

        A refused listing (401 or 403: revoked, expired, no longer allowed) drops it, so a stale copy
        does not go on answering searches. A refused call drops it only on a 401 while a catalog is
        held: the upstream no longer lets this caller in, nor may the catalog it was shown (a refused
        listing has dropped it already); a 403 may be that one tool's permission.
        """
        if error.kind not in REFUSING_KINDS:
            return
        if not listing and (refusal_status(error) != 401 or self.cached(key) is None):
            return
        await self.forget(key)

    async def forget(self, key: str) -> None:
        """Drop a caller's catalog everywhere at once (memory and the shared tier): the upstream has
        refused them, so nothing listed for their token may be served any more, nor kept when its
        listing began before now. The next request lists again, refused or admitted by the upstream."""
        # A copy may be in the shared tier only when this environment held one: a stranger's refused
        # token costs no write (and is marked nowhere, so made-up tokens grow nothing).
        held = self._memory.pop(key) is not None or key in self._known
        self._due.discard(key)
        self._on_event("catalog_forgotten")
        if not held:
            return
        now = self._clock()
        self._known.discard(key)
        self._forgotten_at.set(key, now)
        self._forced.set(key, True)  # should the shared tier not hear of it, this environment still lists
        if self._shared is not None:
            await self._shared.forget(key, now)

    def invalidate(self, key: str) -> None:
        """The caller's catalog is outdated: the next request lists the upstream again first.

        The held catalog stays, served while the upstream cannot list (an outage must not take a
        working catalog away). The shared tier is skipped on that next load: it may hold the same
        outdated list.
        """
        self._forced.set(key, True)
        if self._memory.get(key) is not None:
            self._due.set(key, False)

    async def refresh(self, caller: Caller) -> IndexedCatalog:
        """List the upstream again now, whatever the age of the cached catalog; store the result.

        Should the listing fail, the held catalog goes on being served (unless the upstream refused
        the caller) and is listed again on a later request."""
        self.invalidate(caller.key)
        running = self._loading.get(caller.key)
        if running is not None:
            # A load that started before this refresh may have read the old catalog: wait, then list.
            await asyncio.wait([running])  # not gather: cancelling this refresh must not cancel it
            self.invalidate(caller.key)
        try:
            return await self._wait_in_time(self._single_flight(caller, background=False))
        except UpstreamError:
            if caller.key in self._due:
                self._due.set(caller.key, True)  # held, served stale, renewed in the background
            raise

    async def _wait_in_time(self, load: Awaitable[IndexedCatalog]) -> IndexedCatalog:
        """Wait for a load until the request must be answered; the load itself goes on (shielded)."""
        due = deadline.current()
        if due is None:
            return await load
        late = (
            "the upstream did not list this caller's tools before the answer was due; the listing goes"
            " on: ask again in a moment"
        )
        async with answer_by(due, late):
            return await load

    # -- anonymous callers the upstream refused

    def _refusal(self, key: str) -> UpstreamError | None:
        held = self._refused.entry(key)
        if held is None:
            return None
        error, left = held
        return _copy_error(error, retry_after=left if error.retry_after is not None else None)

    def _remember_refusal(self, key: str, error: UpstreamError, seconds: float) -> None:
        """Answer `error` again for `seconds` without asking the upstream.

        An anonymous 401 (only a request without Authorization: clients send several before they
        learn to sign in, and they are all the same caller; a refused token is not remembered, since
        the upstream may admit that very token a moment later), and a rate-limited listing until
        its Retry-After. Bounded: the oldest go first past `MAX_HELD_REFUSALS`.
        """
        if seconds <= 0:
            return
        self._refused.set(key, error, expires_at=self._clock() + seconds)

    # -- loading: single flight per key

    def _refresh_in_background(self, caller: Caller) -> None:
        if caller.key in self._loading:
            return
        task = self._start(caller, background=True)
        task.add_done_callback(_log_failed_refresh)

    async def _single_flight(self, caller: Caller, background: bool) -> IndexedCatalog:
        task = self._loading.get(caller.key)
        if task is None:
            gated = self._strangers.refusal() if self._is_stranger(caller) else None
            if gated is not None:
                self._on_event("catalog_refused_stranger")
                raise _copy_error(gated, retry_after=None)
            task = self._start(caller, background)
        return await asyncio.shield(task)

    def _is_stranger(self, caller: Caller) -> bool:
        """A token this process never held a catalog for (an anonymous caller has its own reuse)."""
        known = caller.key in self._known or self._memory.get(caller.key) is not None
        return caller.authorization is not None and not known

    def _start(self, caller: Caller, background: bool) -> asyncio.Task[IndexedCatalog]:
        # Detached from the request's deadline: others may wait for this load, and it is worth
        # finishing (and keeping) even when the request that started it has been answered.
        task = asyncio.create_task(self._load(caller, background), context=deadline.detached())
        self._loading[caller.key] = task
        task.add_done_callback(functools.partial(self._forget_load, caller.key))
        # Its waiters may all have been cancelled (shield): read its failure so none goes unretrieved.
        task.add_done_callback(retrieve)
        return task

    def _forget_load(self, key: str, _task: asyncio.Task[IndexedCatalog]) -> None:
        self._loading.pop(key, None)

    async def _load(self, caller: Caller, background: bool) -> IndexedCatalog:
        span = Span()
        forced = caller.key in self._forced
        try:
            if forced or self._shared is None:
                entry = await self._from_upstream(caller)
            elif background:
                entry = await self._refresh_shared(caller)
            else:
                entry = await self._load_shared(caller)
        except UpstreamError as exc:
            if exc.kind == "unauthorized" and self._is_stranger(caller):
                self._strangers.refused(exc)
            await self.drop_refused(caller.key, exc, listing=True)
            raise
        if entry.catalog.fetched_at < (self._forgotten_at.get(caller.key) or float("-inf")):
            # Its listing began before the upstream refused this caller: never served, never kept.
            self._on_event("catalog_listed_before_refusal")
            raise _listed_before_refusal()
        self._forced.discard(caller.key)  # only once listed: a failed listing leaves it forced
        self._due.discard(caller.key)
        self._remember(caller.key, caller.party, entry)
        logger.info(
            "catalog loaded",
            extra={"tools": len(entry.catalog), "ms": span.logged_ms},
        )
        return entry

    # -- the shared tier: one listing per refresh across execution environments

    async def _load_shared(self, caller: Caller) -> IndexedCatalog:
        """A catalog this environment lacks: the shared copy (even stale), else one environment lists.

        When another environment holds the lease, it is listing this very catalog: wait for its
        copy rather than list again, until the lease would have run out.
        """
        assert self._shared is not None
        entry = await self._from_shared(caller.key)
        if entry is not None:
            return entry
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self._lease_seconds()
        pause = _POLL_FIRST
        while True:
            listed = await self._list_if_leased(caller)
            if listed is not None:
                return listed
            if loop.time() + pause >= give_up:
                break
            self._on_event("catalog_wait_shared")
            await asyncio.sleep(pause * random.uniform(0.5, 1.0))
            pause = min(pause * 2, _POLL_MOST)
            entry = await self._from_shared(caller.key)
            if entry is not None:
                return entry
        return await self._from_upstream(caller)  # the lease holder took too long: list after all

    async def _refresh_shared(self, caller: Caller) -> IndexedCatalog:
        """Renew a stale catalog: another environment's fresh copy, or list while holding the lease.

        Without the lease another environment is listing it: keep serving the newest copy at hand
        (within `catalog_max_age`) and pick up the fresh one on a later request.
        """
        assert self._shared is not None
        current = self._memory.get(caller.key)
        stored = await self._read_shared(caller.key)
        newer = stored is not None and (current is None or stored.fetched_at > current.catalog.fetched_at)
        if stored is not None and newer and self._clock() - stored.fetched_at < self._config.ttl:
            self._on_event("catalog_hit_shared")
            return await self._index(stored)
        listed = await self._list_if_leased(caller)
        if listed is not None:
            return listed
        self._on_event("catalog_refresh_elsewhere")
        if stored is not None and newer:
            return await self._index(stored)
        if current is not None and self._age(current) < self._config.max_age:
            return current
        return await self._from_upstream(caller)

    async def _list_if_leased(self, caller: Caller) -> IndexedCatalog | None:
        """List the upstream when this environment gets the key's lease (None when another holds it)."""
        assert self._shared is not None
        # A holder id per listing, drawn from os.urandom now: one made at init would be cloned into
        # every environment that SnapStart restores from the same snapshot.
        holder = uuid.uuid4().hex
        if not await self._shared.try_lease(caller.key, holder, self._lease_seconds()):
            return None
        try:
            # The previous holder may have saved a fresh copy between this environment's last read
            # and its lease: take that copy rather than list the upstream a second time.
            stored = await self._read_shared(caller.key, recheck=True)
            if stored is not None and self._clock() - stored.fetched_at < self._config.ttl:
                self._on_event("catalog_hit_shared")
                return await self._index(stored)
            return await self._from_upstream(caller)
        finally:
            await self._shared.release_lease(caller.key, holder)

    def _lease_seconds(self) -> float:
        return self._lease

    async def _read_shared(self, key: str, *, recheck: bool = False) -> Catalog | None:
        """The shared copy of a key's catalog when it is younger than `catalog_max_age`. A `recheck`
        (the read after taking the lease) counts no second miss for the same load."""
        assert self._shared is not None
        stored = await self._shared.get(key)
        refused_at = self._forgotten_at.get(key)
        if refused_at is not None and stored is not None and stored.fetched_at < refused_at:
            stored = None  # listed before this process saw the caller refused: as good as absent
        if stored is None or self._clock() - stored.fetched_at >= self._config.max_age:
            if not recheck:
                self._on_event("catalog_miss_shared")
            return None
        try:
            return Catalog.from_json(stored.data, self._write_tools, self._read_tools)
        except ValueError:
            self._on_event("catalog_corrupt_shared")
            logger.warning("shared catalog unreadable; listing the upstream instead")
            return None

    async def _from_shared(self, key: str) -> IndexedCatalog | None:
        catalog = await self._read_shared(key)
        if catalog is None:
            return None
        fresh = self._clock() - catalog.fetched_at < self._config.ttl
        self._on_event("catalog_hit_shared" if fresh else "catalog_stale_shared")
        return await self._index(catalog)

    async def _from_upstream(self, caller: Caller) -> IndexedCatalog:
        self._on_event("catalog_list_upstream")
        # Stamped when the listing began: a refusal recorded while it ran is newer than this copy,
        # so the copy can neither replace the tombstone nor be served after it.
        began = self._clock()
        listing = await self._source.list_tools(caller.authorization)
        catalog = Catalog.from_definitions(
            listing.tools,
            instructions=listing.instructions,
            fetched_at=began,
            write_tools=self._write_tools,
            read_tools=self._read_tools,
        )
        entry = await self._index(catalog)
        shared = self._shared
        if shared is not None and await shared.put(caller.key, catalog.to_json(), began) is False:
            # Another environment recorded a refusal of this caller after this listing began.
            self._on_event("catalog_listed_before_refusal")
            self._forgotten_at.set(caller.key, self._clock())
            raise _listed_before_refusal()
        return entry

    async def _index(self, catalog: Catalog) -> IndexedCatalog:
        # Indexing is CPU work (BM25 statistics, embeddings): keep the event loop free for others.
        index = await asyncio.to_thread(self._indexer, catalog)
        return IndexedCatalog(catalog=catalog, index=index)

    def _remember(self, key: str, party: str, entry: IndexedCatalog) -> None:
        self._known.set(key, True)
        for _ in range(self._memory.set(key, entry, group=party)):
            self._on_event("catalog_evicted_memory")


def _listed_before_refusal() -> UpstreamError:
    return UpstreamError(
        "unauthorized",
        "the upstream refused this caller's token while its tools were being listed: sign in again",
        status=401,
    )


def _copy_error(error: UpstreamError, *, retry_after: float | None) -> UpstreamError:
    """The same refusal as a new exception (one instance raised again and again grows its traceback)."""
    return UpstreamError(
        error.kind,
        error.message,
        status=error.status,
        retry_after=retry_after,
        www_authenticate=error.www_authenticate,
        code=error.code,
        data=error.data,
    )


def _log_failed_refresh(task: asyncio.Task[IndexedCatalog]) -> None:
    """A failed background refresh keeps the stale catalog, unless the upstream refused the caller
    (then it was dropped): logged (its kind only), never raised."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        kind = getattr(error, "kind", type(error).__name__)
        kept = (
            "dropped" if kind in REFUSING_KINDS else "stale"
        )  # the caller's catalog: dropped, or still served
        logger.warning("catalog refresh failed", extra={"outcome": kind, "catalog": kept})
