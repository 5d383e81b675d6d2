"""A caller's catalog: the tools the upstream lists for one token, classified.

A catalog is immutable once built; refreshing one builds a new one. Its JSON
form (`to_json`/`from_json`) is what the cache tiers store.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SHORT_DESCRIPTION = 200
# Hints a tool's `_meta` may carry, read by clients with tool search of their own (Anthropic's).
SEARCH_HINT = "anthropic/searchHint"  # extra words to index the tool under
ALWAYS_LOAD = "anthropic/alwaysLoad"  # list the tool beside the five, as a pinned one
MAX_SEARCH_HINT = 200  # characters of a hint indexed; a longer one is cut, as any upstream text is bounded
# A sentence ends at . ! or ? before a capital letter or the end; "e.g." and "i.e." do not end one.
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)(?<!\betc)[.!?](?=\s+[A-Z0-9`(\"']|\s*$)")


@functools.lru_cache(maxsize=8192)  # search_tools asks it of the same few thousand descriptions again
def short_description(text: str, limit: int = SHORT_DESCRIPTION) -> str:
    """The first sentence, or as much of it as fits in `limit` characters."""
    text = " ".join(text.split())
    end = _SENTENCE_END.search(text)
    first = text[: end.end()] if end and end.end() <= limit else text
    if len(first) <= limit:
        return first
    return first[: limit - 1].rsplit(" ", 1)[0] + "…"


@dataclass(frozen=True, slots=True)
class Tool:
    """One upstream tool, as listed, with the proxy's read/write verdict."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool
    definition: Mapping[str, Any]  # the upstream's whole tool object, passed on unchanged

    @property
    def title(self) -> str:
        title = self.definition.get("title") or _annotations(self.definition).get("title")
        return title if isinstance(title, str) else ""

    @property
    def search_hint(self) -> str:
        """`_meta["anthropic/searchHint"]`, cut to MAX_SEARCH_HINT characters; "" when not a string."""
        hint = _meta(self.definition).get(SEARCH_HINT)
        return hint[:MAX_SEARCH_HINT] if isinstance(hint, str) else ""

    @property
    def always_load(self) -> bool:
        """`_meta["anthropic/alwaysLoad"]` is true (the boolean, nothing else)."""
        return _meta(self.definition).get(ALWAYS_LOAD) is True


def _meta(definition: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = definition.get("_meta")
    return meta if isinstance(meta, Mapping) else {}


def _annotations(definition: Mapping[str, Any]) -> Mapping[str, Any]:
    """The upstream's annotations, or none when it sent something that is not an object."""
    annotations = definition.get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def is_read_only(
    definition: Mapping[str, Any], write_tools: Iterable[str] = (), read_tools: Iterable[str] = ()
) -> bool:
    """Read-only only when the upstream says so (readOnlyHint: true), unless the operator overrides."""
    name = definition.get("name")
    if name in set(write_tools):
        return False
    if name in set(read_tools):
        return True
    return _annotations(definition).get("readOnlyHint") is True


def make_tool(
    definition: Mapping[str, Any], write_tools: Iterable[str] = (), read_tools: Iterable[str] = ()
) -> Tool:
    schema = definition.get("inputSchema")
    return Tool(
        name=str(definition["name"]),
        description=definition["description"] if isinstance(definition.get("description"), str) else "",
        input_schema=schema if isinstance(schema, Mapping) else {"type": "object"},
        read_only=is_read_only(definition, write_tools, read_tools),
        definition=definition,
    )


@dataclass(frozen=True)
class Catalog:
    tools: Sequence[Tool]
    instructions: str = ""
    fetched_at: float = 0.0  # unix seconds when the upstream listed it
    by_name: Mapping[str, Tool] = field(init=False, repr=False, compare=False)
    # The tools marked alwaysLoad, in the catalog's order: read per tools/list, found once here.
    marked: Sequence[Tool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {tool.name: tool for tool in self.tools})
        object.__setattr__(self, "marked", tuple(tool for tool in self.tools if tool.always_load))

    def __len__(self) -> int:
        return len(self.tools)

    def get(self, name: str) -> Tool | None:
        return self.by_name.get(name)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "v": 1,
                "fetched_at": self.fetched_at,
                "instructions": self.instructions,
                "tools": [dict(tool.definition) for tool in self.tools],
            },
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()

    @classmethod
    def from_definitions(
        cls,
        definitions: Iterable[Mapping[str, Any]],
        instructions: str = "",
        fetched_at: float = 0.0,
        write_tools: Iterable[str] = (),
        read_tools: Iterable[str] = (),
    ) -> Catalog:
        write_tools, read_tools = set(write_tools), set(read_tools)
        tools = sorted((make_tool(d, write_tools, read_tools) for d in definitions), key=lambda t: t.name)
        return cls(tools=tuple(tools), instructions=instructions, fetched_at=fetched_at)

    @classmethod
    def from_json(
        cls, data: bytes, write_tools: Iterable[str] = (), read_tools: Iterable[str] = ()
    ) -> Catalog:
        """Raises ValueError on anything that is not a catalog this version wrote."""
        try:
            obj = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ValueError("catalog is not JSON") from exc
        if not isinstance(obj, dict) or obj.get("v") != 1 or not isinstance(obj.get("tools"), list):
            raise ValueError("catalog has an unknown shape")
        if not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in obj["tools"]):
            raise ValueError("catalog holds a tool without a name")
        return cls.from_definitions(
            obj["tools"],
            instructions=str(obj.get("instructions") or ""),
            fetched_at=float(obj.get("fetched_at") or 0.0),
            write_tools=write_tools,
            read_tools=read_tools,
        )
