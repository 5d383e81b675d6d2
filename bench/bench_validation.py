"""What bounding the argument check costs and saves: hostile schemas and arguments, before and after.

    .venv/bin/python bench/bench_validation.py [--rounds 2000] [--json PATH]

"Before" is the check as the proxy made it up to now: jsonschema 4.26's own validator class
(Python's `re` for patterns, pairwise `uniqueItems`), every error gathered. "After" is
`toolsearch.validation.arguments`: RE2 for patterns (`regex` with a deadline for what RE2 cannot compile),
linear-time keywords, a deadline checked at every keyword, in a worker thread.
- a backtracking pattern, `^(a+)+$` against n `a`s and a `!`: before for growing n (each `a`
  doubles it), after for n up to a megabyte;
- a pattern only a backtracking engine can match (`^(a|a)+(?=b)`): after, cut at the deadline;
- pairwise keywords (`uniqueItems` of distinct objects, `unevaluatedItems` after `items`);
- ordinary checks: the 567 demo tools with arguments made from their required parameters, the
  SDK fixture's `echo`, and a valid 1.2 MB argument; a check on the event loop against one in the
  worker thread, as a call through the proxy makes it;
- the depth bound's walk, and what the two new packages take on disk.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from importlib import metadata
from typing import Any

import jsonschema
import referencing
from benchlib import demo_definitions, method_line, write_json

from toolsearch.validation import patterns
from toolsearch.validation.arguments import Uncheckable, Validators, argument_errors, check_arguments
from toolsearch.validation.nesting import MAX_DEPTH, deeper_than

VALIDATORS = Validators()  # one catalog's: each schema's validator built once, as in the proxy

BACKTRACKING = "^(a+)+$"
LOOKAHEAD = "^(a|a)+(?=b)"


_BEFORE: dict[int, Any] = {}


def before(schema: dict[str, Any], arguments: Any) -> list[str]:
    """The check as it was: jsonschema's own class, built once per schema, every error gathered."""
    validator = _BEFORE.get(id(schema))
    if validator is None:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        validator = _BEFORE[id(schema)] = cls(schema, registry=referencing.Registry())
    errors = sorted(validator.iter_errors(arguments), key=lambda e: (len(e.absolute_path), e.message))
    return [e.message for e in errors[:8]]


def seconds(function: Any, *args: Any, **kwargs: Any) -> float:
    started = time.perf_counter()
    function(*args, **kwargs)
    return time.perf_counter() - started


def backtracking(results: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": BACKTRACKING}}}
    rows = []
    print(f"\n{BACKTRACKING} against n a's and a '!'       before      after")
    for n in (16, 18, 20, 22, 24):
        old = seconds(before, schema, {"s": "a" * n + "!"})
        new = seconds(argument_errors, schema, {"s": "a" * n + "!"})
        rows.append({"n": n, "before_s": old, "after_s": new})
        print(f"  n = {n:>9,}                          {old:>8.3f} s  {new * 1e3:>7.3f} ms")
    growth = statistics.mean(b["before_s"] / a["before_s"] for a, b in itertools.pairwise(rows)) ** 0.5
    projected = rows[-1]["before_s"] * growth ** (28 - rows[-1]["n"])
    for n in (28, 40, 1_000_000):
        new = seconds(argument_errors, schema, {"s": "a" * n + "!"})
        rows.append({"n": n, "after_s": new})
        print(f"  n = {n:>9,}                                 -  {new * 1e3:>7.3f} ms")
    print(f"  before grows x{growth:.2f} a character: n = 28 would take about {projected:.0f} s")
    results["backtracking"] = {"rows": rows, "growth_per_char": growth, "projected_before_28_s": projected}


def lookahead(results: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": LOOKAHEAD}}}
    print(f"\n{LOOKAHEAD} ({patterns.engine(LOOKAHEAD)} engine), 40 a's and a '!', deadline 0.5 s")
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        argument_errors(schema, {"s": "a" * 40 + "!"}, timeout=0.5)
        outcome = "answered"
    except Uncheckable as exc:
        outcome = exc.reason
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"  after: {outcome} after {wall:.3f} s ({cpu:.3f} s of CPU; `regex` counts CPU time)")
    results["lookahead"] = {"outcome": outcome, "wall_s": wall, "cpu_s": cpu}


def pairwise(results: dict[str, Any]) -> None:
    cases = {
        "uniqueItems, distinct objects": ({"uniqueItems": True}, lambda n: [{"id": i} for i in range(n)]),
        "unevaluatedItems after items": (
            {"items": {"type": "integer"}, "unevaluatedItems": False},
            lambda n: [0] * n,
        ),
    }
    print("\npairwise keywords                         n      before       after")
    rows = []
    for name, (schema, make) in cases.items():
        for n in (1_000, 4_000, 200_000):
            old = seconds(before, schema, make(n)) if n <= 4_000 else None
            new = seconds(argument_errors, schema, make(n))
            rows.append({"case": name, "n": n, "before_s": old, "after_s": new})
            shown = f"{old:>9.3f} s" if old is not None else "          -"
            print(f"  {name:<34} {n:>7,} {shown} {new:>9.3f} s")
    results["pairwise"] = rows


def _value(prop: Any) -> Any:
    if not isinstance(prop, dict):
        return "x"
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return prop["enum"][0]
    kind = prop.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return {"integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}, "null": None}.get(
        kind, "x"
    )


def ordinary_calls() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    calls = []
    for tool in demo_definitions():
        schema = tool.get("inputSchema") or {"type": "object"}
        props = schema.get("properties", {})
        calls.append((schema, {name: _value(props.get(name)) for name in schema.get("required", [])}))
    return calls


async def _on_loop_and_in_thread(schema: dict[str, Any], arguments: Any, rounds: int) -> dict[str, float]:
    inline, threaded = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        argument_errors(schema, arguments, timeout=2.0, validators=VALIDATORS)
        inline.append(time.perf_counter() - started)
        started = time.perf_counter()
        await check_arguments(schema, arguments, timeout=2.0, validators=VALIDATORS)
        threaded.append(time.perf_counter() - started)
    inline.sort()
    threaded.sort()
    return {
        "on_loop_p50_us": inline[len(inline) // 2] * 1e6,
        "in_thread_p50_us": threaded[len(threaded) // 2] * 1e6,
        "in_thread_p99_us": threaded[int(len(threaded) * 0.99)] * 1e6,
    }


def ordinary(results: dict[str, Any], rounds: int) -> None:
    calls = ordinary_calls()
    print(f"\nordinary checks: the {len(calls)} demo tools, arguments from their required parameters")
    for check in (before, argument_errors):
        check({"type": "object"}, {})  # the meta-schema's first use is not the cost of a check
    first_before = seconds(lambda: [before(s, a) for s, a in calls])  # builds each validator once
    first_after = seconds(lambda: [argument_errors(s, a, validators=VALIDATORS) for s, a in calls])
    kept_before = min(seconds(lambda: [before(s, a) for s, a in calls]) for _ in range(3))
    kept_after = min(
        seconds(lambda: [argument_errors(s, a, validators=VALIDATORS) for s, a in calls]) for _ in range(3)
    )
    per = 1e6 / len(calls)
    print("                                          before      after")
    print(
        f"  first check of a schema (it is built)  {first_before * per:7.0f} us {first_after * per:7.0f} us"
    )
    print(f"  every later check                      {kept_before * per:7.1f} us {kept_after * per:7.1f} us")
    echo = (
        {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
        {"message": "hi"},
    )
    threaded = asyncio.run(_on_loop_and_in_thread(*echo, rounds))
    print(
        f"  echo, {rounds} checks: on the event loop p50 {threaded['on_loop_p50_us']:.1f} us;"
        f" in the worker thread p50 {threaded['in_thread_p50_us']:.1f} us,"
        f" p99 {threaded['in_thread_p99_us']:.1f} us"
    )
    big_schema = {
        "type": "object",
        "properties": {
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"},
                        "name": {"type": "string", "maxLength": 100},
                        "email": {"type": "string", "pattern": "^[^@]+@[^@]+$"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "active": {"type": "boolean"},
                    },
                    "required": ["id", "name"],
                    "additionalProperties": False,
                },
            }
        },
    }
    rows = [
        {"id": i, "name": f"user {i}", "email": f"u{i}@example.com", "tags": ["a", "b"], "active": True}
        for i in range(12_000)
    ]
    big_before = seconds(before, big_schema, {"rows": rows})
    big_after = seconds(argument_errors, big_schema, {"rows": rows})
    walk = seconds(deeper_than, {"rows": rows}, MAX_DEPTH)
    print(
        f"  a valid 1.2 MB argument (12,000 rows): before {big_before:.3f} s, after {big_after:.3f} s"
        f" (of which the depth walk {walk * 1e3:.1f} ms)"
    )
    results["ordinary"] = {
        "tools": len(calls),
        "first_before_us": first_before * per,
        "first_after_us": first_after * per,
        "kept_before_us": kept_before * per,
        "kept_after_us": kept_after * per,
        "echo": threaded,
        "big_before_s": big_before,
        "big_after_s": big_after,
        "depth_walk_ms": walk * 1e3,
    }


def packages(results: dict[str, Any]) -> None:
    sizes = {}
    for name in ("google-re2", "regex"):
        dist = metadata.distribution(name)
        sizes[name] = {
            "version": dist.version,
            "installed_bytes": sum(f.size or 0 for f in dist.files or ()),
        }
    print(
        "\npackages: "
        + ", ".join(
            f"{n} {s['version']} {s['installed_bytes'] / 2**20:.1f} MiB installed" for n, s in sizes.items()
        )
    )
    results["packages"] = sizes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2000, help="checks of echo on and off the loop")
    parser.add_argument("--json")
    args = parser.parse_args()
    method = method_line(
        (),
        jsonschema=metadata.version("jsonschema"),
        google_re2=metadata.version("google-re2"),
        regex=metadata.version("regex"),
    )
    results: dict[str, Any] = {}
    backtracking(results)
    lookahead(results)
    pairwise(results)
    ordinary(results, args.rounds)
    packages(results)
    write_json(args.json, method, results)


if __name__ == "__main__":
    main()
