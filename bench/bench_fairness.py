"""What the per-caller bounds (service/fairness.py) cost a call, and what a remembered caller costs in memory.

    .venv/bin/python bench/bench_fairness.py [--turns 200000] [--keys 4096] [--json PATH]

- one caller's turn (token taken, slot held, released), with the default bounds, and with none;
- a turn of a new caller each time, past the map's bound (each one forgets another);
- memory per remembered caller: `--keys` callers, each with a turn taken (its semaphore made),
  traced with tracemalloc, keys included.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import time
import tracemalloc

from benchlib import method_line, write_json

from toolsearch.service.fairness import MAX_KEYS, FairUse, FairUseConfig


async def per_turn(fair: FairUse, keys: list[str], turns: int) -> float:
    """Microseconds a turn takes, entered and left, cycling through `keys`."""
    deadline = asyncio.get_running_loop().time() + 3600
    started = time.perf_counter()
    for n in range(turns):
        async with fair.turn(keys[n % len(keys)], deadline):
            pass
    return (time.perf_counter() - started) / turns * 1e6


async def empty_turns(turns: int) -> float:
    """Microseconds of the loop alone: an async context manager that does nothing."""

    class Nothing:
        async def __aenter__(self) -> None:
            return None

        async def __aexit__(self, *exc: object) -> None:
            return None

    nothing = Nothing()
    started = time.perf_counter()
    for _ in range(turns):
        async with nothing:
            pass
    return (time.perf_counter() - started) / turns * 1e6


def keys_of(count: int, prefix: str = "") -> list[str]:
    return [hashlib.sha256(f"{prefix}{n}".encode()).hexdigest() for n in range(count)]


async def memory_per_caller(count: int) -> float:
    fair = FairUse(FairUseConfig(), max_keys=count)
    deadline = asyncio.get_running_loop().time() + 3600
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    for key in keys_of(count, "memory"):
        async with fair.turn(key, deadline):
            pass
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return (after - before) / len(fair)


async def main(args: argparse.Namespace) -> dict[str, float]:
    unbounded = FairUse(FairUseConfig(rate=0, concurrency=0))
    bounded = FairUse(FairUseConfig(rate=1e12, burst=10**9))  # the default concurrency; no refusals
    churning = FairUse(FairUseConfig(rate=1e12, burst=10**9), max_keys=1024)
    one = keys_of(1)
    many = keys_of(args.turns // 10, "churn")  # more keys than the map holds: each turn forgets one
    figures = {
        "empty_async_with_us": await empty_turns(args.turns),
        "turn_no_bounds_us": await per_turn(unbounded, one, args.turns),
        "turn_default_bounds_us": await per_turn(bounded, one, args.turns),
        "turn_new_caller_past_the_bound_us": await per_turn(churning, many, len(many)),
        "bytes_per_caller": await memory_per_caller(args.keys),
        "max_keys": float(MAX_KEYS),
    }
    figures["memory_at_max_keys_mib"] = figures["bytes_per_caller"] * MAX_KEYS / 2**20
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=MAX_KEYS)
    parser.add_argument("--json")
    arguments = parser.parse_args()
    method = method_line(turns=arguments.turns, keys=arguments.keys)
    results = asyncio.run(main(arguments))
    for name, value in results.items():
        print(f"{name:40s} {value:10.2f}")
    write_json(arguments.json, method, results)
