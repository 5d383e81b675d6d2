"""How deep JSON nests, measured without recursion: the bound on what recursive code is handed.

JSON Schema validation, the `x-mcp-header` walk and Python's own JSON and repr
all recurse once (or, in jsonschema, up to ten frames) per level, and Python
stops at 1,000 frames. A tool definition or arguments deeper than `MAX_DEPTH`
are refused before any of that code sees them: the tool is left out of the
catalog, the arguments come back as `invalid_arguments`. 64 levels leaves real
tools ample room (the demo catalog's deepest is in docs/benchmarks.md, "Argument
checks") and keeps jsonschema's costliest shape (2019-09 `items`, 10 frames a
level) inside Python's limit with room to spare.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 64
# What the proxy passes on without checking it against a schema (an upstream's results and error
# data, the five tools' own arguments around an upstream tool's) need only be written back as JSON,
# and Python's JSON writer stops near 10,000 levels, less the stack it is called from.
MAX_RELAYED_DEPTH = 1000
_CONTAINERS = (dict, list)  # a tuple: isinstance checks it faster than `dict | list`


def deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests objects and arrays more than `limit` levels deep (a scalar is 0 deep).

    Level by level, without recursion (its cost: docs/benchmarks.md, "Argument checks").
    """
    if not isinstance(value, _CONTAINERS):
        return False
    level, depth = [value], 1
    while depth <= limit:
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, _CONTAINERS)
        ]
        if not level:
            return False
        depth += 1
    return True


def too_deep(definition: Any) -> str | None:
    """Why a listed tool definition cannot be kept for its depth, or None when it can."""
    if deeper_than(definition, MAX_DEPTH):
        return f"nested more than {MAX_DEPTH} levels deep"
    return None
