"""Per-caller bounds on what the proxy sends the shared upstream (service/fairness.py), with our own clock.

Buckets refill by the injected clock, never by sleeping; slots are held and freed by the test
through events. Through the proxy: one caller's burst is refused as data, before it reaches the
upstream, while another caller's calls go through.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from fixtures.faulty_upstream import Fault, RunningFaulty, running_faulty
from fixtures.mcp_wire import call
from toolsearch.app import build_proxy
from toolsearch.ops.deadline import MIN_CALL_SECONDS
from toolsearch.service.fairness import CallerLimited, FairUse, FairUseConfig
from toolsearch.settings import Settings

WAIT = 10.0  # seconds: only keeps a broken test from hanging


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def later(seconds: float = 60.0) -> float:
    return asyncio.get_running_loop().time() + seconds


async def take(fair: FairUse, key: str) -> float | None:
    """None when a call of `key` may go now (its turn taken and ended), else the retry-after told."""
    try:
        async with fair.turn(key, later()):
            return None
    except CallerLimited as limited:
        assert limited.limit == "rate"
        return limited.retry_after


# -- the rate


async def test_a_caller_gets_its_burst_then_is_told_when_the_next_call_may_go():
    clock = Clock()
    fair = FairUse(FairUseConfig(rate=60, burst=5, concurrency=0), clock)
    assert [await take(fair, "alice") for _ in range(5)] == [None] * 5
    assert await take(fair, "alice") == 1.0  # 60 a minute: a token a second
    clock.now += 0.5
    assert await take(fair, "alice") == 0.5
    clock.now += 0.5
    assert await take(fair, "alice") is None
    assert await take(fair, "alice") == 1.0


async def test_one_callers_empty_bucket_leaves_another_callers_full():
    fair = FairUse(FairUseConfig(rate=60, burst=3, concurrency=0), Clock())
    for _ in range(3):
        await take(fair, "alice")
    assert await take(fair, "alice") is not None
    assert [await take(fair, "bob") for _ in range(3)] == [None] * 3


async def test_a_pause_refills_the_bucket_to_its_burst_and_no_further():
    clock = Clock()
    fair = FairUse(FairUseConfig(rate=6, burst=4, concurrency=0), clock)
    for _ in range(4):
        await take(fair, "alice")
    clock.now += 3600  # an hour idle is worth 360 tokens, but a burst holds 4
    assert [await take(fair, "alice") for _ in range(5)] == [None] * 4 + [10.0]


async def test_a_rate_of_zero_bounds_nothing():
    fair = FairUse(FairUseConfig(rate=0, burst=1, concurrency=0), Clock())
    assert [await take(fair, "alice") for _ in range(1000)] == [None] * 1000


# -- calls at once


@contextlib.asynccontextmanager
async def holding(fair: FairUse, key: str, count: int) -> AsyncIterator[list[asyncio.Event]]:
    """`count` calls of `key` in flight until the test sets their events."""
    entered = [asyncio.Event() for _ in range(count)]
    leave = [asyncio.Event() for _ in range(count)]

    async def one(n: int) -> None:
        async with fair.turn(key, later()):
            entered[n].set()
            await leave[n].wait()

    tasks = [asyncio.create_task(one(n)) for n in range(count)]
    async with asyncio.timeout(WAIT):
        for event in entered:
            await event.wait()
    try:
        yield leave
    finally:
        for event in leave:
            event.set()
        await asyncio.gather(*tasks)


async def test_a_call_past_the_callers_concurrency_waits_for_a_slot_and_others_do_not():
    fair = FairUse(FairUseConfig(rate=0, concurrency=2), Clock())
    async with holding(fair, "alice", 2) as leave:
        started = asyncio.Event()

        async def third() -> None:
            async with fair.turn("alice", later()):
                started.set()

        waiting = asyncio.create_task(third())
        await asyncio.sleep(0)  # let it reach the slot
        await asyncio.sleep(0)
        assert not started.is_set()
        # bob's calls do not wait for alice's slots.
        async with asyncio.timeout(WAIT), fair.turn("bob", later()), fair.turn("bob", later()):
            pass
        leave[0].set()
        async with asyncio.timeout(WAIT):
            await waiting
        assert started.is_set()


async def test_no_slot_by_the_deadline_refuses_the_call_unsent_and_gives_its_token_back():
    clock = Clock()
    fair = FairUse(FairUseConfig(rate=60, burst=2, concurrency=1), clock)
    async with holding(fair, "alice", 1):  # one token taken
        ran = False
        with pytest.raises(CallerLimited) as caught:
            async with fair.turn("alice", asyncio.get_running_loop().time()):  # no time to wait
                ran = True
        assert not ran
        assert (caught.value.limit, caught.value.retry_after) == ("concurrency", None)
    # The refused call's token came back: one more call goes now, then the bucket is empty.
    assert await take(fair, "alice") is None
    assert await take(fair, "alice") == 1.0


async def test_a_slot_freed_just_before_the_deadline_is_as_good_as_none_and_the_call_stays_unsent():
    # Two calls of one batch share a deadline: the first, timed out, frees its slot a moment before
    # the second's wait ends; sent then, the second would be abandoned mid-flight, outcome unknown.
    fair = FairUse(FairUseConfig(rate=60, burst=2, concurrency=1), Clock())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 0.3
    async with holding(fair, "alice", 1) as leave:
        loop.call_at(deadline - MIN_CALL_SECONDS / 5, leave[0].set)
        ran = False
        with pytest.raises(CallerLimited) as caught:
            async with asyncio.timeout(WAIT), fair.turn("alice", deadline):
                ran = True
        assert not ran and caught.value.limit == "concurrency"
    assert await take(fair, "alice") is None  # its token came back


async def test_a_free_slot_is_taken_whatever_the_deadline():
    # A call whose time is already up (a Lambda request's budget spent) is the upstream client's to
    # refuse unsent (`no_time`), not a concurrency refusal: only waiting for a slot is bounded here.
    fair = FairUse(FairUseConfig(rate=0, concurrency=1), Clock())
    ran = False
    async with fair.turn("alice", asyncio.get_running_loop().time() - 1):
        ran = True
    assert ran


async def test_a_slot_is_freed_when_the_call_fails():
    fair = FairUse(FairUseConfig(rate=0, concurrency=1), Clock())
    with pytest.raises(RuntimeError):
        async with fair.turn("alice", later()):
            raise RuntimeError("the upstream call failed")
    async with asyncio.timeout(WAIT), fair.turn("alice", asyncio.get_running_loop().time() + 1):
        pass


# -- memory


async def test_many_callers_keep_at_most_max_keys_and_a_busy_caller_is_never_forgotten():
    fair = FairUse(FairUseConfig(rate=60, burst=1, concurrency=1), Clock(), max_keys=3)
    async with holding(fair, "alice", 1):
        for n in range(100):
            await take(fair, f"random-{n}")
            assert len(fair) <= 3
        # alice's slot is still taken: her next call finds no free slot.
        with pytest.raises(CallerLimited):
            async with fair.turn("alice", asyncio.get_running_loop().time()):
                pass
    assert len(fair) <= 3


async def test_a_forgotten_caller_comes_back_with_a_full_bucket():
    fair = FairUse(FairUseConfig(rate=60, burst=1, concurrency=0), Clock(), max_keys=2)
    assert await take(fair, "alice") is None
    assert await take(fair, "alice") is not None
    for n in range(5):
        await take(fair, f"other-{n}")
    assert await take(fair, "alice") is None


# -- through the proxy: one caller's burst, another caller's calls

USERS = {"tok-alice": "alice", "tok-bob": "bob"}


@pytest.fixture
def faulty() -> Iterator[RunningFaulty]:
    with running_faulty(users=dict(USERS)) as server:
        yield server


@contextlib.asynccontextmanager
async def proxy_clients(settings: Settings) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    proxy = build_proxy(settings)
    transport = httpx.ASGITransport(app=proxy.app)
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            user: await stack.enter_async_context(
                httpx.AsyncClient(
                    transport=transport,
                    base_url="http://proxy",
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=60,
                )
            )
            for token, user in USERS.items()
        }
        yield clients
    await proxy.upstream.aclose()


async def result_of(client: httpx.AsyncClient, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    reply = await client.post("/mcp", **call(name, arguments))
    assert reply.status_code == 200, reply.text
    return reply.json()["result"]


def settings(url: str, **changes: Any) -> Settings:
    return Settings(upstream=url, embedder="none", upstream_timeout=1.0, **changes)


def calls_of(faulty: RunningFaulty, token: str) -> int:
    seen = faulty.upstream.seen("tools/call")
    return sum(1 for s in seen if s.headers.get("authorization") == f"Bearer {token}")


async def test_one_callers_burst_is_refused_before_the_upstream_while_another_caller_goes_through(faulty):
    # 1 a minute: nothing refills while the test runs, so exactly the burst reaches the upstream.
    config = settings(
        faulty.url, caller_rate=1, caller_burst=4, caller_concurrency=10, pinned_tools=["notes_search"]
    )
    async with proxy_clients(config) as clients, asyncio.timeout(WAIT * 3):
        burst = await result_of(
            clients["alice"],
            "call_read_tools",
            {"calls": [{"name": "notes_get", "arguments": {"id": 1}}] * 10},
        )
        bob = await result_of(clients["bob"], "call_read_tool", {"name": "notes_get", "arguments": {"id": 2}})
        alone = await result_of(
            clients["alice"], "call_read_tool", {"name": "notes_get", "arguments": {"id": 3}}
        )
        pinned = await result_of(clients["alice"], "notes_search", {"text": "x"})
        # Searching lists nothing new and calls nothing: it still works for the bursting caller.
        search = await result_of(clients["alice"], "search_tools", {"query": "notes"})

    lines = [block["text"] for block in burst["content"] if block["text"].startswith("[")]
    assert sum(line.endswith(": ok") for line in lines) == 4
    assert sum(line.endswith(": failed") for line in lines) == 6
    refusals = [block["text"] for block in burst["content"] if "rate limit" in block["text"]]
    assert len(refusals) == 6 and all("Try again in" in text for text in refusals)
    assert calls_of(faulty, "tok-alice") == 4  # the refused ones never reached the upstream

    assert not bob["isError"], bob
    assert calls_of(faulty, "tok-bob") == 1

    error = alone["structuredContent"]["error"]
    assert (error["kind"], error["tool"], error["limit"]) == ("rate_limited", "notes_get", "rate")
    assert 0 < error["retryAfterSeconds"] <= 60
    assert "Authorization" not in alone["content"][0]["text"] and "tok-alice" not in str(alone)
    assert pinned["structuredContent"]["error"]["kind"] == "rate_limited"  # a pinned tool counts too
    assert calls_of(faulty, "tok-alice") == 4
    assert not search["isError"]


async def test_a_call_past_the_callers_concurrency_is_refused_unsent_when_no_slot_frees_in_time(faulty):
    # One call of alice's at a time, and hers hangs past upstream_timeout (1 s): her second call
    # waits for the slot until its deadline and is refused unsent; bob's calls meanwhile go through.
    faulty.upstream.fault("slow_tool", Fault.delay(5))
    config = settings(faulty.url, caller_concurrency=1)
    async with proxy_clients(config) as clients, asyncio.timeout(WAIT * 3):
        slow = {"name": "slow_tool", "arguments": {}}
        batch = asyncio.create_task(result_of(clients["alice"], "call_read_tools", {"calls": [slow, slow]}))
        bobs = [
            await result_of(clients["bob"], "call_read_tool", {"name": "notes_get", "arguments": {"id": n}})
            for n in range(3)
        ]
        answer = await batch
    assert not any(result["isError"] for result in bobs)
    text = "\n".join(block["text"] for block in answer["content"])
    assert "did not answer" in text or "timeout" in text  # the one that was sent
    assert "calls were already running" in text  # the one that waited for its slot
    assert calls_of(faulty, "tok-alice") == 1
