"""The public benchmark through the proxy, as its users (and judges) measure it, beside in process.

    python -m tools.searchbench proxy --split dev [--source NAME]

`python -m tools.searchbench` ranks in process: `SearchIndex.search(queries, 10)` over each
source's catalog. This asks the proxy instead: each source's catalog is listed by a real upstream
MCP server, the proxy serves it over streamable HTTP (`proxy_world.py`), and the official SDK's
client calls `search_tools` for every request, both phrasings (the raw text as one `query`; a
model's queries as `query` when one, `queries` when several), `limit` 10, `schemas` false. Each
request's rank is read from the structured answer and computed as `measure.py` does (a needed
tool's best rank in any of the answer's lists), beside the in-process rank of the same request
(run.py's `indexes`, hybrid). Whatever lies on the HTTP path shows up as a differing request:
tools the proxy drops at listing, queries cut at `max_query_chars`, an exact tool name put first.
Each difference is given its cause, checked: the in-process search redone with the proxy's
treatment (the query cut, the exact name first, the dropped tools left out) must give the proxy's
rank, else the difference is "unexplained".

Printed: per source and phrasing, R@1 / R@3 / R@5 / MRR through the proxy and in process and the
requests whose ranks differ; then each differing request (source, key, phrasing, in-process rank
-> proxy rank, cause). Request texts and queries are never printed; the proxy's log is checked to
hold none of them.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from toolsearch.catalogs.catalog import Catalog
from toolsearch.search import Embedder
from toolsearch.search.embedding import VectorCache
from toolsearch.search.hybrid import DEFAULT_FUSION
from toolsearch.service.finding import cut_query, named_tool
from toolsearch.settings import Settings

from .benchset import Request, Source
from .measure import DEPTH, best_ranks, first_rank
from .proxy_world import AUTHORIZATION, Served, served
from .run import PHRASINGS, indexes

MAX_QUERY_CHARS = Settings().tools.max_query_chars  # what the proxy, on default settings, searches of a query


@dataclass(frozen=True)
class Answer:
    """One request asked one way through the proxy."""

    rank: int | None
    cut: bool  # the answer's note says a query was cut
    weak: bool  # some list of the answer was marked a weak match


@dataclass(frozen=True)
class Compared:
    source: str
    key: str
    phrasing: str
    in_process: int | None
    through_proxy: int | None
    cut: bool
    weak: bool
    cause: str = ""  # why the ranks differ ("" when they do not)

    @property
    def differs(self) -> bool:
        return self.in_process != self.through_proxy


@dataclass(frozen=True)
class SourceRun:
    source: str
    rows: list[Compared]
    listed: int  # tools the upstream listed
    kept: int  # tools in the proxy's catalog
    dropped: dict[str, str]  # tool -> the reason the proxy logged
    log_lines: int
    log_leaks: int  # proxy log lines holding a query or request text (must be 0)
    seconds: float  # asking through the proxy, the catalog's listing and indexing included


def search_arguments(queries: Sequence[str]) -> dict[str, object]:
    """search_tools' arguments as a client sends them: one `query`, or `queries` for several."""
    asked: dict[str, object] = {"query": queries[0]} if len(queries) == 1 else {"queries": list(queries)}
    return {**asked, "limit": DEPTH, "schemas": False}


async def ask_proxy(url: str, source: Source) -> dict[tuple[str, str], Answer]:
    """Every request of the source, both phrasings, asked with the official SDK's client."""
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    answers: dict[tuple[str, str], Answer] = {}
    transport = streamable_http_client(
        url, http_client=httpx2.AsyncClient(headers=AUTHORIZATION, timeout=120)
    )
    async with Client(transport) as client:
        for request in source.requests:
            for phrasing in PHRASINGS:
                queries = request.asked(phrasing)
                if not queries:
                    continue
                result = await client.call_tool("search_tools", search_arguments(queries))
                data = result.structured_content
                if result.is_error or not isinstance(data, dict):
                    raise RuntimeError(
                        f"{source.name} {request.id} {phrasing}: search_tools answered an error"
                    )
                lists = [data["tools"]] if "tools" in data else [r["tools"] for r in data["results"]]
                names = [[tool["name"] for tool in tools] for tools in lists]
                weak = data.get("match") == "weak" or any(
                    r.get("match") == "weak" for r in data.get("results", [])
                )
                cut = "characters: only the start was searched" in str(data.get("note", ""))
                answers[(request.id, phrasing)] = Answer(first_rank(request, best_ranks(names)), cut, weak)
    return answers


class InProcess:
    """The in-process ranks of one source: run.py's hybrid index, ranked as measure.py ranks."""

    def __init__(
        self, tools: Sequence[dict[str, object]], embedder: Embedder | None, cache: VectorCache
    ) -> None:
        self.catalog = Catalog.from_definitions(tools)
        built = indexes(self.catalog, embedder, DEFAULT_FUSION, "learned", cache)
        self.index = built.get("hybrid", built["lexical"])  # lexical when no model is loaded

    def rank(self, request: Request, queries: Sequence[str], exact_first: bool = False) -> int | None:
        lists = []
        for query, hits in zip(queries, self.index.search(list(queries), DEPTH), strict=True):
            names = [self.catalog.tools[hit.position].name for hit in hits]
            exact = self.exact_name(query) if exact_first else None
            if exact is not None:
                names = [exact, *(name for name in names if name != exact)][:DEPTH]
            lists.append(names)
        return first_rank(request, best_ranks(lists))

    def exact_name(self, query: str) -> str | None:
        """The tool a query names exactly (or as `select:name`), which search_tools puts first
        (`finding._exact_name_first`)."""
        wanted = named_tool(query)
        return wanted if self.catalog.get(wanted) is not None else None


def cause(
    request: Request,
    phrasing: str,
    proxy_rank: int | None,
    whole: InProcess,
    kept: InProcess | None,
    missing: Mapping[str, str],
) -> str:
    """Why the proxy's rank differs from the in-process one, each cause checked by redoing it."""
    queries = request.asked(phrasing)
    reasons = []
    lost = sorted(name for name in request.tools if name in missing)
    if lost:
        reasons.append(
            "needed tool not in the proxy's catalog: " + "; ".join(f"{n} ({missing[n]})" for n in lost)
        )
    elif kept is not None:
        reasons.append("the catalog differs (tools dropped at listing)")
    cut = [cut_query(query, MAX_QUERY_CHARS) for query in queries]
    if cut != list(queries):
        longest = max(len(query) for query in queries)
        reasons.append(f"query cut at {MAX_QUERY_CHARS} characters (was {longest})")
    index = kept or whole
    if any(index.exact_name(query) for query in cut):
        reasons.append("a query is a tool's exact name: put first")
    redone = index.rank(request, cut, exact_first=True)
    if not reasons:
        return "unexplained: the in-process search gives its own rank again"
    if redone != proxy_rank:
        return "unexplained: " + ", ".join(reasons) + f", yet redone in process it ranks {redone}"
    return ", ".join(reasons)


def compare_source(
    source: Source,
    embedder: Embedder | None,
    folder: Path,
    cache: VectorCache | None = None,
    served_tools: Sequence[dict[str, object]] | None = None,
) -> SourceRun:
    """Ask the source through the proxy and in process; `served_tools` (default: the source's own)
    is what the upstream lists, so a test can show a listing's difference being caught."""
    cache = cache if cache is not None else VectorCache()
    listed = list(served_tools if served_tools is not None else source.tools)
    whole = InProcess(source.tools, embedder, cache)
    with served(listed, folder) as proxy:
        started = time.perf_counter()
        answers = asyncio.run(ask_proxy(proxy.url, source))
        seconds = time.perf_counter() - started
        kept_names = proxy.catalog_names()
        dropped = proxy.dropped()
        lines, leaks = _log_leaks(proxy, source)
    missing = {
        tool["name"]: dropped.get(str(tool["name"]), "not listed, or renamed")
        for tool in source.tools
        if tool["name"] not in kept_names
    }
    kept = (
        InProcess([t for t in source.tools if t["name"] in kept_names], embedder, cache) if missing else None
    )
    rows = []
    for request in source.requests:
        for phrasing in PHRASINGS:
            if (request.id, phrasing) not in answers:
                continue
            answer = answers[(request.id, phrasing)]
            mine = whole.rank(request, request.asked(phrasing))
            row = Compared(source.name, request.id, phrasing, mine, answer.rank, answer.cut, answer.weak)
            if row.differs:
                row = replace(row, cause=cause(request, phrasing, answer.rank, whole, kept, missing))
            rows.append(row)
    return SourceRun(source.name, rows, len(listed), len(kept_names), dropped, lines, leaks, seconds)


def _log_leaks(proxy: Served, source: Source) -> tuple[int, int]:
    """The proxy log's lines, and how many hold a request's text or query (8+ characters)."""
    texts = {q for r in source.requests for p in PHRASINGS for q in r.asked(p) if len(q) >= 8}
    lines = proxy.log.read_text(encoding="utf-8", errors="replace").splitlines()
    return len(lines), sum(any(text in line for text in texts) for line in lines)


def run(sources: Sequence[Source], embedder: Embedder | None) -> list[SourceRun]:
    cache = VectorCache()
    with tempfile.TemporaryDirectory(prefix="searchbench-proxy-") as folder:
        return [compare_source(source, embedder, Path(folder), cache) for source in sources]
