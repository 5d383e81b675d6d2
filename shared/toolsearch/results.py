"""Tool results the proxy composes itself: errors as data, and size limits.

An error goes back as a tool result with `isError: true`, a sentence the model
can act on, and the details (what is wrong, the schema, the right tool) both as
text and as `structuredContent.error`, since clients differ in which they show.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .protocol import text_content


def error_result(kind: str, message: str, **details: Any) -> dict[str, Any]:
    error = {"kind": kind, "message": message, **{k: v for k, v in details.items() if v is not None}}
    text = message
    extra = {k: v for k, v in error.items() if k not in ("kind", "message")}
    if extra:
        text += "\n" + json.dumps(extra, ensure_ascii=False, separators=(",", ":"))
    return {"content": [text_content(text)], "structuredContent": {"error": error}, "isError": True}


def structured_result(data: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return {"content": [text_content(text)], "structuredContent": data, "isError": False}


def json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def limit_result(
    result: dict[str, Any], max_bytes: int, size: Callable[[Any], int] = json_size
) -> dict[str, Any]:
    """The upstream's result unchanged when it fits; otherwise cut, with a note saying so.

    `size` counts bytes as the answer carries them: the JSON body locally, the runtime's
    serialisation on Lambda (response_size.py), whose response holds at most 6 MB.
    """
    total = size(result)
    if total <= max_bytes:
        return result
    budget = max(1_000, max_bytes - 2_000)
    kept: list[dict[str, Any]] = []
    used = 0
    for block in result.get("content") or []:
        block_size = size(block)
        if used + block_size <= budget:
            kept.append(block)
            used += block_size
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            room = max(0, budget - used - 200)
            kept.append({**block, "text": _cut(block, room, size)})
        break
    note = (
        f"[The result was {total:,} bytes, more than the {max_bytes:,} the proxy passes on; it was cut."
        " Ask for less, e.g. with a filter or a smaller page.]"
    )
    kept.append(text_content(note))
    limited = {"content": kept, "isError": bool(result.get("isError", False))}
    for key in ("resultType", "_meta"):
        if key in result:
            limited[key] = result[key]
    return limited


def _cut(block: dict[str, Any], room: int, size: Callable[[Any], int]) -> str:
    """The longest start of a text block whose block fits in `room` bytes, as `size` counts them.

    Characters cost 1 to 12 bytes each depending on the count, so the cut is found by shrinking in
    proportion to the overshoot; each step is shorter than the last.
    """
    text: str = block["text"]
    length = len(text)
    while length > 0:
        cost = size({**block, "text": text[:length]})
        if cost <= room:
            return text[:length]
        length = min(length - 1, length * room // cost)
    return ""
