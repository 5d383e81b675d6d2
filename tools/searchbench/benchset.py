"""The public development benchmark's data: one file per source, each a catalog and its requests.

A source file (`data/<source>.json`, written by `build.py` from a pinned public repository):

    {"source": "...", "origin": "owner/repo@commit", "licence": "MIT", "writer": "who wrote the requests",
     "tools": [MCP tool definitions: name, description, inputSchema],
     "families": {"tool name": "family"},          # optional: variant names of one tool
     "requests": [{"split": "dev" | "test", "id": "...", "text": "...", "tools": ["name", ...],
                   "model_queries": ["..."]}]}

`tools` of a request is every tool it needs (one for most; several for a multi-tool task); a need
that any of several tools meets is a list of them (`["a", ["b", "c"]]`: a, and b or c).
`model_queries` are the queries a model passed in its first `search_tools` call when it saw only
the proxy's five tool definitions and the request, never the catalog (`README.md` says how they
were made): one for most requests, up to five when it looked for several things at once.
Splits are by source or by server, never by request: a server's tools are labelled in one split
only (the other split's requests still search the whole catalog).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Request:
    id: str
    text: str
    needs: tuple[tuple[str, ...], ...]  # each need: the tools that meet it
    model_queries: tuple[str, ...] = ()

    @property
    def tools(self) -> set[str]:
        return {tool for need in self.needs for tool in need}

    def asked(self, phrasing: str) -> tuple[str, ...]:
        """The queries of one search: the request's own text, or a model's first call."""
        return (self.text,) if phrasing == "raw" else self.model_queries


@dataclass(frozen=True)
class Source:
    name: str
    split: str
    licence: str
    origin: str
    writer: str
    tools: list[dict[str, Any]]
    requests: list[Request]
    families: dict[str, str] = field(default_factory=dict)

    @property
    def multi_tool(self) -> bool:
        return any(len(r.needs) > 1 for r in self.requests)


def read_sources(path: Path) -> list[Source]:
    """One `Source` per split the file's requests fall in."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    names = {tool["name"] for tool in raw["tools"]}
    requests: dict[str, list[Request]] = {}
    for item in raw["requests"]:
        needs = tuple(
            dict.fromkeys(tuple(need) if isinstance(need, list) else (need,) for need in item["tools"])
        )
        missing = [t for need in needs for t in need if t not in names]
        if missing or not needs:
            raise ValueError(f"{path.name}: request {item['id']} names tools not in the catalog: {missing}")
        queries = tuple(q for q in item.get("model_queries") or () if isinstance(q, str) and q)
        request = Request(str(item["id"]), item["text"], needs, queries)
        requests.setdefault(item["split"], []).append(request)
    return [
        Source(
            name=raw["source"],
            split=split,
            licence=raw["licence"],
            origin=raw["origin"],
            writer=raw.get("writer", ""),
            tools=raw["tools"],
            requests=items,
            families=raw.get("families") or {},
        )
        for split, items in sorted(requests.items())
    ]


def load_sources(split: str = "all", data: Path = DATA) -> list[Source]:
    sources = [source for path in sorted(data.glob("*.json")) for source in read_sources(path)]
    return [s for s in sources if split in ("all", s.split)]


def read_queries(path: Path) -> dict[tuple[str, str], tuple[str, ...]]:
    """A model's first queries (JSON lines: source, key, queries) by (source, key); blank ones
    dropped, at most five a request, as search_tools takes."""
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        queries = tuple(q.strip() for q in item.get("queries") or () if isinstance(q, str) and q.strip())
        if queries:
            out[(str(item["source"]), str(item["key"]))] = queries[:5]
    return out
