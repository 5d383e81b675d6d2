"""One credential is one caller, whatever its spelling; one verified subject is one fair-use caller.

A JWT's signature reads the same to PyJWT with or without `=` padding: every such spelling
must be one caller key (one catalog, one fair share). In exchange mode the proxy has verified
`sub`: fair use counts the subject, and
its warm catalogs are bounded (`catalog_memory_per_caller`), so one person's many tokens cannot
evict other callers' warm catalogs.
"""

from __future__ import annotations

import asyncio
import base64

import httpx
import jwt

from fixtures.clock import Clock
from fixtures.demo_upstream import DemoUpstream, caller
from toolsearch.app import catalog_store
from toolsearch.callers.identity import Caller, caller_key
from toolsearch.catalogs.store import CatalogStore
from toolsearch.search.index import make_indexer
from toolsearch.server.demo import DEMO_URL
from toolsearch.service.fairness import CallerLimited, FairUse, FairUseConfig
from toolsearch.settings import Settings
from toolsearch.upstream import Upstream

URL = "https://up.example/mcp"


def _a_jwt() -> str:
    return jwt.encode({"sub": "alice", "aud": "x"}, "k" * 32, algorithm="HS256")


def spellings(token: str) -> list[str]:
    """The token, and its signature with `=` padding: both the same token to PyJWT."""
    head, body, signature = token.split(".")
    raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    padded = base64.urlsafe_b64encode(raw).decode()
    return [token, f"{head}.{body}.{padded}"]


def test_every_spelling_pyjwt_reads_as_the_same_token_is_one_caller_key():
    token = _a_jwt()
    forms = spellings(token)
    for form in forms:  # PyJWT accepts each as the same token
        assert jwt.decode(form, "k" * 32, algorithms=["HS256"], audience="x")["sub"] == "alice"
    assert len({caller_key(URL, f"Bearer {form}") for form in forms}) == 1
    # The token itself is forwarded as the caller sent it.
    assert {Caller.from_header(URL, f"Bearer {form}").authorization for form in forms} == {
        f"Bearer {form}" for form in forms
    }
    # Another token is another caller; a changed header or body is another token.
    other = jwt.encode({"sub": "bob", "aud": "x"}, "k" * 32, algorithm="HS256")
    assert caller_key(URL, f"Bearer {other}") != caller_key(URL, f"Bearer {token}")
    assert caller_key(URL, f"Bearer {token}x") != caller_key(URL, f"Bearer {token}")


async def test_burst_three_allows_three_calls_across_spellings():
    fair = FairUse(FairUseConfig(rate=1, burst=3, concurrency=0), clock=lambda: 0.0)
    keys = [Caller.from_header(URL, f"Bearer {form}").party for form in spellings(_a_jwt())] * 2
    admitted = 0
    for key in keys:
        try:
            async with fair.turn(key, asyncio.get_running_loop().time() + 1):
                admitted += 1
        except CallerLimited:
            pass
    assert admitted == 3


async def test_concurrency_one_allows_one_call_in_flight_for_one_subject_whatever_its_tokens():
    fair = FairUse(FairUseConfig(rate=0, concurrency=1))
    tokens = [
        Caller.from_header(URL, f"Bearer t{n}").verified_as(URL, "https://issuer", "alice") for n in range(4)
    ]
    release, inside = asyncio.Event(), 0

    async def one(who: Caller) -> None:
        nonlocal inside
        async with fair.turn(who.party, asyncio.get_running_loop().time() + 0.05):
            inside += 1
            await release.wait()

    first = asyncio.create_task(one(tokens[0]))
    await asyncio.sleep(0)
    others = await asyncio.gather(*(one(who) for who in tokens[1:]), return_exceptions=True)
    assert all(isinstance(outcome, CallerLimited) for outcome in others)
    assert inside == 1
    release.set()
    await first


def warm_store() -> CatalogStore:
    config = Settings(catalog_ttl=600, catalog_max_age=3600, list_retries=0, catalog_memory_entries=16)
    upstream = Upstream(DEMO_URL, config.upstream, http=httpx.AsyncClient(transport=DemoUpstream()))
    return catalog_store(config, upstream, make_indexer(None), clock=Clock())


async def test_one_subjects_128_tokens_do_not_evict_another_callers_warm_catalog():
    store = warm_store()
    others = [caller(f"other{n}") for n in range(8)]
    for who in others:
        await store.get(who)
    for n in range(128):  # one person signing in again and again
        token = caller(f"alice-{n}")
        await store.get(token.verified_as(DEMO_URL, "https://issuer", "alice"))
    assert all(store.cached(who.key) is not None for who in others)
    assert len(store) == 8 + 8  # the others, and alice's newest `catalog_memory_per_caller`
