"""BoundedMap: the one bounded map (LRU, expiry by an injected clock, per-group shares, pins),
and `tasks.retrieve`."""

from __future__ import annotations

import asyncio
import gc
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.clock import Clock
from toolsearch.ops.bounded import BoundedMap
from toolsearch.ops.tasks import retrieve


def test_the_least_recently_set_goes_first():
    held: BoundedMap[str, int] = BoundedMap(3)
    for number, key in enumerate("abcd"):
        held.set(key, number)
    assert list(held) == ["b", "c", "d"] and len(held) == 3
    assert held.get("a") is None and held.get("b") == 1


def test_setting_again_makes_an_entry_the_newest():
    held: BoundedMap[str, int] = BoundedMap(2)
    held.set("a", 1)
    held.set("b", 2)
    held.set("a", 3)
    assert held.set("c", 4) == 1  # one other entry pushed out: b, the least recently set
    assert list(held) == ["a", "c"] and held.get("a") == 3


def test_get_leaves_the_order_use_and_touch_renew_it():
    held: BoundedMap[str, int] = BoundedMap(2)
    held.set("a", 1)
    held.set("b", 2)
    assert held.get("a") == 1
    assert list(held) == ["a", "b"]
    assert held.use("a") == 1
    assert list(held) == ["b", "a"]
    held.touch("b")
    assert list(held) == ["a", "b"]
    held.set("c", 3)
    assert list(held) == ["b", "c"]
    assert held.use("gone") is None
    with pytest.raises(KeyError):
        held.touch("gone")


def test_pop_discard_contains_and_clear():
    held: BoundedMap[str, bool] = BoundedMap(4)
    held.set("a", False)  # a falsy value is still held
    held.set("b", True)
    assert "a" in held and held.get("a") is False
    assert held.pop("a") is False and "a" not in held
    assert held.pop("a") is None
    held.discard("b")
    held.discard("b")
    assert len(held) == 0
    held.set("c", True)
    held.clear()
    assert len(held) == 0 and list(held) == []


def test_a_bound_below_one_holds_one():
    held: BoundedMap[str, int] = BoundedMap(0)
    held.set("a", 1)
    held.set("b", 2)
    assert list(held) == ["b"]


def test_an_entry_expires_at_its_time_on_the_maps_clock():
    clock = Clock(100.0)
    held: BoundedMap[str, str] = BoundedMap(4, clock=clock)
    held.set("a", "x", expires_at=110.0)
    held.set("b", "y")  # never expires
    assert held.entry("a") == ("x", 10.0)
    assert held.entry("b") == ("y", math.inf)
    clock.now = 109.5
    assert held.get("a") == "x" and "a" in held and held.entry("a") == ("x", 0.5)
    clock.now = 110.0
    assert len(held) == 2  # an expired entry is counted until read
    assert held.get("a") is None and "a" not in held and held.entry("a") is None
    assert len(held) == 1  # ... and dropped when read
    assert held.get("b") == "y"


def test_expiry_is_per_entry_and_set_again_replaces_it():
    clock = Clock(0.0)
    held: BoundedMap[str, int] = BoundedMap(4, clock=clock)
    held.set("a", 1, expires_at=5.0)
    held.set("a", 2)  # set again without an expiry: no longer expires
    clock.now = 10.0
    assert held.get("a") == 2
    held.set("a", 3, expires_at=12.0)
    clock.now = 12.0
    assert held.entry("a") is None and len(held) == 0
    held.set("b", 4, expires_at=20.0)
    assert held.use("b") == 4
    clock.now = 20.0
    assert held.use("b") is None


def test_an_expiring_entry_needs_a_clock():
    with pytest.raises(ValueError):
        BoundedMap[str, int](2).set("a", 1, expires_at=1.0)


def test_a_group_past_its_share_pushes_out_its_own_oldest():
    held: BoundedMap[str, int] = BoundedMap(5, per_group=2)
    held.set("a1", 1, group="a")
    held.set("b1", 1, group="b")
    held.set("a2", 2, group="a")
    assert held.set("a3", 3, group="a") == 1
    assert list(held) == ["b1", "a2", "a3"]
    held.set("a2", 4, group="a")  # set again: still two of a's
    assert list(held) == ["b1", "a3", "a2"]
    for n in range(2, 5):
        held.set(f"b{n}", n, group="b")
    assert list(held) == ["a3", "a2", "b3", "b4"]  # b's own oldest went, never an a
    held.set("c1", 1, group="c")
    assert held.set("c2", 2, group="c") == 1  # the map's own bound: the least recently used
    assert list(held) == ["a2", "b3", "b4", "c1", "c2"]
    held.pop("b3")
    held.set("b5", 5, group="b")
    assert list(held) == ["a2", "b4", "c1", "c2", "b5"]


def test_a_group_share_counts_an_entry_moved_to_another_group():
    held: BoundedMap[str, int] = BoundedMap(9, per_group=1)
    held.set("k", 1, group="a")
    held.set("k", 2, group="b")
    held.set("j", 3, group="a")  # a holds only j now: nothing pushed out
    assert list(held) == ["k", "j"]


def test_pinned_entries_are_never_pushed_out():
    busy = {"a"}
    held: BoundedMap[str, str] = BoundedMap(2, pinned=lambda value: value in busy)
    held.set("a", "a")
    held.set("b", "b")
    assert held.set("c", "c") == 1
    assert list(held) == ["a", "c"]  # a is pinned: b, the oldest unpinned, went
    busy.update("c")
    assert held.set("d", "d") == 0  # nothing may go: the map holds more than its bound
    assert list(held) == ["a", "c", "d"]
    busy.clear()
    assert held.set("e", "e") == 2  # back within the bound at the next set
    assert list(held) == ["d", "e"]


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["set", "use", "pop", "get", "tick"]),
        st.integers(0, 12),  # key
        st.integers(0, 2),  # group
        st.one_of(st.none(), st.floats(0, 5)),  # seconds to live
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(operations=OPERATIONS, bound=st.integers(1, 6), share=st.one_of(st.none(), st.integers(1, 4)))
def test_never_more_than_the_bound_nor_a_group_past_its_share(operations, bound, share):
    clock = Clock(0.0)
    held: BoundedMap[int, int] = BoundedMap(bound, clock=clock, per_group=share)
    model: dict[int, tuple[int, float]] = {}  # key: (group, expires_at) for what may be held
    for operation, key, group, ttl in operations:
        if operation == "set":
            held.set(key, key, expires_at=None if ttl is None else clock.now + ttl, group=group)
            model[key] = (group, math.inf if ttl is None else clock.now + ttl)
        elif operation == "use":
            assert held.use(key) in (None, key)
        elif operation == "pop":
            held.pop(key)
            model.pop(key, None)
        elif operation == "get":
            value = held.get(key)
            live = key in model and clock.now < model[key][1]
            assert value is None or (value == key and live)
        else:
            clock.now += 1
        keys = list(held)
        assert len(held) == len(keys) <= bound
        assert len(set(keys)) == len(keys) and set(keys) <= set(model)
        if share is not None:
            for one in range(3):
                assert sum(model[k][0] == one for k in keys) <= share
        if operation == "set":
            assert keys[-1] == key and held.get(key) in (None, key)


async def test_retrieve_reads_a_failure_nobody_awaited(caplog):
    async def fails() -> None:
        raise RuntimeError("nobody waits")

    task = asyncio.create_task(fails())
    task.add_done_callback(retrieve)
    await asyncio.wait([task])
    await asyncio.sleep(0)  # the done callback runs
    del task
    gc.collect()
    assert "never retrieved" not in caplog.text

    cancelled = asyncio.create_task(asyncio.sleep(10))
    cancelled.add_done_callback(retrieve)
    cancelled.cancel()
    await asyncio.wait([cancelled])
    await asyncio.sleep(0)  # a cancelled task has no exception to read: no error either
    assert cancelled.cancelled()
