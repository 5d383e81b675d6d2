"""What the five tools do, for one caller, independent of any transport."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol

from . import tooldefs as T
from .catalog import Tool
from .catalogs import Caller, CatalogStore, IndexedCatalog
from .nesting import MAX_RELAYED_DEPTH, deeper_than
from .progress import Progress, ProgressSink
from .response_size import ResponseSize
from .results import error_result, limit_result, structured_result
from .settings import Settings
from .upstream import UpstreamError
from .validation import (
    SchemaUnusable,
    Uncheckable,
    argument_errors,
    check_arguments,
    clear_typo_of,
    closest_names,
)

logger = logging.getLogger(__name__)

SHORT_DESCRIPTION = 200
_BATCH_LINE_BYTES = 500  # room for the "[n] name: ok" line before each call's result in a batch
EXACT_NAME_PREFIX = "select:"
# Ranking costs a fixed part (1-2 ms for a query at 10,000 tools, hybrid) plus stemming, some
# 10-30 µs a character of words the stemmer has not seen (bench/bench_search_thread.py). Longer
# searches rank in a worker thread, so the event loop goes on serving other callers; short ones,
# nearly all, stay on the loop, where the hop (0.1-0.7 ms on a busy host) costs more than it saves.
THREAD_ABOVE_CHARS = 200


class UpstreamCall(Protocol):
    """`Upstream.call_tool`: one call, sent once; its progress, if asked for, goes to `progress`."""

    def __call__(
        self,
        authorization: str | None,
        tool: Mapping[str, Any],
        arguments: dict[str, Any],
        *,
        progress: ProgressSink | None = None,
    ) -> Awaitable[dict[str, Any]]: ...


class AuthFailure(Exception):
    """The upstream refused the caller (401/403): the endpoint answers with that HTTP status."""

    def __init__(self, error: UpstreamError) -> None:
        super().__init__(error.message)
        self.error = error


# A sentence ends at . ! or ? before a capital letter or the end; "e.g." and "i.e." do not end one.
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)(?<!\betc)[.!?](?=\s+[A-Z0-9`(\"']|\s*$)")


def short_description(text: str, limit: int = SHORT_DESCRIPTION) -> str:
    """The first sentence, or as much of it as fits in `limit` characters."""
    text = " ".join(text.split())
    end = _SENTENCE_END.search(text)
    first = text[: end.end()] if end and end.end() <= limit else text
    if len(first) <= limit:
        return first
    return first[: limit - 1].rsplit(" ", 1)[0] + "…"


def _hit(tool: Tool, with_schema: bool) -> dict[str, Any]:
    hit: dict[str, Any] = {
        "name": tool.name,
        "description": short_description(tool.description or tool.title),
        "readOnly": tool.read_only,
    }
    if with_schema:
        hit["inputSchema"] = tool.input_schema
    return hit


class ToolService:
    def __init__(
        self,
        settings: Settings,
        catalogs: CatalogStore,
        upstream_call: UpstreamCall,
        size: ResponseSize | None = None,
    ) -> None:
        self.settings = settings
        self.catalogs = catalogs
        self._upstream_call = upstream_call
        # Result sizes are counted as the answer carries them (on Lambda: as the runtime serialises it).
        self._size = size or ResponseSize.local()
        self._schemas = {
            tool["name"]: tool["inputSchema"]
            for tool in T.proxy_tools(max(1, settings.max_batch_calls), settings.max_query_chars)
        }

    def definitions(self) -> list[dict[str, Any]]:
        return T.proxy_tools(self.settings.max_batch_calls, self.settings.max_query_chars)

    def has_tool(self, name: str) -> bool:
        return any(tool["name"] == name for tool in self.definitions())

    async def call(
        self,
        caller: Caller,
        name: str,
        arguments: dict[str, Any],
        *,
        progress: ProgressSink | None = None,
    ) -> dict[str, Any]:
        """Run one of the five tools; every failure but the caller's auth comes back as data.

        `progress` receives the progress of a call through call_read_tool or call_write_tool (the
        upstream's), or of a call_read_tools batch (calls finished of all); the others report none.
        """
        try:
            # Our own schemas are small and have no patterns: checked here, on the event loop. The
            # upstream tool's arguments inside are checked, to MAX_DEPTH, before they are passed on.
            problems = argument_errors(self._schemas[name], arguments, max_depth=MAX_RELAYED_DEPTH)
        except Uncheckable as exc:
            return error_result(
                "invalid_arguments",
                f"The arguments of {name} could not be checked against its input schema ({exc}).",
                problems=[str(exc)],
            )
        if problems:
            return error_result(
                "invalid_arguments",
                f"The arguments of {name} do not fit its input schema: " + "; ".join(problems),
                problems=problems,
                inputSchema=self._schemas[name],
            )
        try:
            result = await self._run(caller, name, arguments, progress)
        except UpstreamError as exc:
            if exc.kind in ("unauthorized", "forbidden"):
                raise AuthFailure(exc) from exc
            return error_result(exc.kind, exc.message, **_upstream_details(exc))
        # Every one of the five answers within max_result_bytes (a description of huge tools too).
        return self.limit(result, self.settings.max_result_bytes)

    def limit(self, result: dict[str, Any], max_bytes: int) -> dict[str, Any]:
        """`result`, cut with a note when it takes more than `max_bytes` in the answer."""
        return limit_result(result, max_bytes, self._size.of)

    async def _run(
        self, caller: Caller, name: str, arguments: dict[str, Any], progress: ProgressSink | None
    ) -> dict[str, Any]:
        if name == T.SEARCH_TOOLS:
            return await self.search_tools(caller, arguments)
        if name == T.DESCRIBE_TOOL:
            return await self.describe_tool(caller, arguments["names"])
        if name == T.CALL_READ_TOOL:
            return await self.call_tool(
                caller, arguments["name"], arguments.get("arguments"), read_only=True, progress=progress
            )
        if name == T.CALL_READ_TOOLS:
            return await self.call_read_tools(caller, arguments["calls"], progress=progress)
        if name == T.CALL_WRITE_TOOL:
            return await self.call_tool(
                caller, arguments["name"], arguments.get("arguments"), read_only=False, progress=progress
            )
        raise KeyError(name)

    async def _catalog(self, caller: Caller) -> IndexedCatalog:
        return await self.catalogs.get(caller)

    # -- search_tools

    async def search_tools(self, caller: Caller, arguments: Mapping[str, Any]) -> dict[str, Any]:
        query, queries = arguments.get("query"), arguments.get("queries")
        if (query is None) == (queries is None):
            return error_result(
                "invalid_arguments",
                "Give either query (one thing to find) or queries (several at once), not both, not neither.",
            )
        limit = int(arguments.get("limit", T.DEFAULT_LIMIT))
        with_schemas = bool(arguments.get("schemas", True))
        entry = await self._catalog(caller)
        asked = [query] if queries is None else list(queries)
        if sum(len(text) for text in asked) > THREAD_ABOVE_CHARS:
            ranked = await asyncio.to_thread(entry.index.search, asked, limit)
        else:
            ranked = entry.index.search(asked, limit)
        lists = []
        for text, hits in zip(asked, ranked, strict=True):
            positions = _exact_name_first(entry, text, [hit.position for hit in hits])[:limit]
            tools = entry.catalog.tools
            lists.append(
                [
                    _hit(tools[p], with_schemas and rank < self.settings.search_schemas)
                    for rank, p in enumerate(positions)
                ]
            )
        data: dict[str, Any] = {"total": len(entry.catalog)}
        if queries is None:
            data["tools"] = lists[0]
        else:
            data["results"] = [{"query": q, "tools": found} for q, found in zip(asked, lists, strict=True)]
        return structured_result(data)

    # -- describe_tool

    async def describe_tool(self, caller: Caller, names: Sequence[str]) -> dict[str, Any]:
        entry = await self._catalog(caller)
        found, unknown, similar = [], [], {}
        for name in dict.fromkeys(names):  # each name once, in the order asked
            tool = entry.catalog.get(name)
            if tool is None:
                unknown.append(name)
                similar[name] = closest_names(name, entry.catalog.by_name)
                continue
            described: dict[str, Any] = {
                "name": tool.name,
                "description": tool.description,
                "readOnly": tool.read_only,
                "inputSchema": tool.input_schema,
            }
            if tool.title:
                described["title"] = tool.title
            if isinstance(tool.definition.get("outputSchema"), dict):
                described["outputSchema"] = tool.definition["outputSchema"]
            found.append(described)
        data: dict[str, Any] = {"tools": found}
        if unknown:
            data["unknown"] = unknown
            data["similar"] = similar
        return structured_result(data)

    # -- calls

    async def call_tool(
        self,
        caller: Caller,
        name: str,
        arguments: Any,
        *,
        read_only: bool,
        max_bytes: int | None = None,
        progress: ProgressSink | None = None,
    ) -> dict[str, Any]:
        """One upstream call; its result is cut to `max_bytes` (default max_result_bytes), with a note."""
        started = time.perf_counter()
        limit = max_bytes or self.settings.max_result_bytes
        result, outcome = await self._call_tool(caller, name, arguments, read_only, limit, progress)
        # A name the catalog lacks is whatever the model wrote: it stays out of the log.
        logged_name = "(unknown)" if outcome == "unknown_tool" else name
        logger.info(
            "tool call",
            extra={
                "tool": logged_name,
                "outcome": outcome,
                "ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )
        return result

    async def _call_tool(
        self,
        caller: Caller,
        name: str,
        arguments: Any,
        read_only: bool,
        max_bytes: int,
        progress: ProgressSink | None,
    ) -> tuple[dict[str, Any], str]:
        entry = await self._catalog(caller)
        tool = entry.catalog.get(name)
        if tool is None:
            return _unknown_tool(entry, name), "unknown_tool"
        if read_only and not tool.read_only:
            return (
                error_result(
                    "not_read_only",
                    f"{name} may change things (it is not marked read-only), so it was not called."
                    " Call it with call_write_tool, with the user's approval.",
                    tool=name,
                ),
                "refused",
            )
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return _invalid(tool, ["arguments: must be an object"]), "invalid_arguments"
        try:
            problems = await check_arguments(
                tool.input_schema, arguments, timeout=self.settings.validation_timeout
            )
        except SchemaUnusable as exc:
            # The upstream's schema can't be checked here; the upstream still validates the call.
            logger.warning("input schema unusable", extra={"tool": name, "reason": type(exc).__name__})
            problems = []
        except Uncheckable as exc:
            # Arguments that could not be checked are never forwarded unchecked.
            return _unchecked(tool, exc, self.settings.validation_timeout)
        if problems:
            return _invalid(tool, problems), "invalid_arguments"
        try:
            result = await self._upstream_call(
                caller.authorization, tool.definition, arguments, progress=progress
            )
        except UpstreamError as exc:
            if exc.kind in ("unauthorized", "forbidden"):
                raise AuthFailure(exc) from exc
            if exc.kind == "rpc_error" and says_unknown_tool(exc.message, name):
                # The catalog is out of date: the next request lists the upstream again.
                self.catalogs.invalidate(caller.key)
                return (
                    error_result(
                        "unknown_tool",
                        f"The upstream no longer has {name} ({exc.message}). The tool list is being"
                        " refreshed: find the right tool again with search_tools.",
                        tool=name,
                    ),
                    "upstream_unknown_tool",
                )
            if exc.kind == "rpc_error" and exc.code == -32602:
                # The upstream found the arguments invalid, or no longer knows the tool: list again soon.
                self.catalogs.invalidate(caller.key)
                return (
                    error_result(
                        "invalid_arguments",
                        f"The upstream refused the arguments of {name}: {exc.message}",
                        inputSchema=tool.input_schema,
                    ),
                    "upstream_invalid_params",
                )
            return error_result(exc.kind, exc.message, tool=name, **_upstream_details(exc)), exc.kind
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            # Multi round-trip requests (elicitation, sampling) can't be relayed through a tool call.
            message = (
                f"{name} asked for input from the user, which this proxy cannot relay; it did not finish."
            )
            return error_result("input_required", message, tool=name), "input_required"
        if not isinstance(result, dict):
            return error_result(
                "bad_response", f"The upstream gave {name} a result that is not an object."
            ), "bad_response"
        if deeper_than(result, MAX_RELAYED_DEPTH):
            # Passed on, it could not be written back as JSON (Python's writer stops near 10,000).
            message = f"The upstream gave {name} a result nested more than {MAX_RELAYED_DEPTH} levels deep."
            return error_result("bad_response", message, tool=name), "bad_response"
        if result.get("isError") and says_unknown_tool(_first_text(result), name):
            # Some servers (FastMCP among them) report an unknown tool as a tool error, not -32602.
            self.catalogs.invalidate(caller.key)
            return self.limit(result, max_bytes), "upstream_unknown_tool"
        result = self.limit(result, max_bytes)
        return result, "error" if result.get("isError") else "ok"

    async def call_read_tools(
        self, caller: Caller, calls: Sequence[Mapping[str, Any]], *, progress: ProgressSink | None = None
    ) -> dict[str, Any]:
        """The calls, concurrently. With `progress`, the batch reports its own: calls finished of all.
        The calls' own upstream progress is not asked for: several interleaved counts would not
        make one that increases, which the spec requires."""
        await self._catalog(caller)  # one listing for the whole batch, before the calls fan out
        deadline = self.settings.validation_timeout + self.settings.upstream_timeout + 1.0
        # The whole batch is one response (a Lambda response holds 6 MB): each call gets its share,
        # less room for the line that heads it.
        count = max(1, len(calls))
        share = max(1, (self.settings.max_result_bytes - _BATCH_LINE_BYTES * count) // count)
        finished = 0

        async def one(call: Mapping[str, Any]) -> dict[str, Any]:
            nonlocal finished
            try:
                result = await asyncio.wait_for(
                    self.call_tool(
                        caller, call["name"], call.get("arguments"), read_only=True, max_bytes=share
                    ),
                    deadline,
                )
            except TimeoutError:
                result = error_result("timeout", f"{call['name']} did not answer within {deadline:.0f} s.")
            finished += 1
            if progress is not None:
                await progress(Progress(finished, len(calls), f"{finished} of {len(calls)} calls finished"))
            return result

        results = await asyncio.gather(*(one(call) for call in calls))
        content: list[dict[str, Any]] = []
        for number, (call, result) in enumerate(zip(calls, results, strict=True), start=1):
            failed = bool(result.get("isError"))
            content.append(
                {"type": "text", "text": f"[{number}] {call['name']}: {'failed' if failed else 'ok'}"}
            )
            content.extend(result.get("content") or [])
            if not result.get("content") and "structuredContent" in result:
                content.append(structured_result(result["structuredContent"])["content"][0])
        return {"content": content, "isError": all(result.get("isError") for result in results)}


def says_unknown_tool(text: str, name: str) -> bool:
    """Whether an upstream's error text says it has no tool of that name (wordings of common SDKs)."""
    lowered = text[:500].lower()
    if "unknown tool" in lowered or "no such tool" in lowered:
        return True
    pattern = rf"tool\W+{re.escape(name.lower())}\W+(?:was\s+|is\s+)?not\s+found"
    return re.search(pattern, lowered) is not None


def _first_text(result: Mapping[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        text = content[0].get("text")
        return text if isinstance(text, str) else ""
    return ""


def _upstream_details(exc: UpstreamError) -> dict[str, Any]:
    details = {k: v for k, v in exc.to_data().items() if k not in ("kind", "message")}
    if deeper_than(details.get("data"), MAX_RELAYED_DEPTH):
        # An upstream's error data is passed on as it is, unless it could not be written back as JSON.
        details["data"] = f"(left out: nested more than {MAX_RELAYED_DEPTH} levels deep)"
    return details


def _invalid(tool: Tool, problems: list[str]) -> dict[str, Any]:
    return error_result(
        "invalid_arguments",
        f"The arguments do not fit the input schema of {tool.name}, so it was not called: "
        + "; ".join(problems),
        problems=problems,
        inputSchema=tool.input_schema,
    )


def _unchecked(tool: Tool, exc: Uncheckable, timeout: float) -> tuple[dict[str, Any], str]:
    if exc.reason == "timeout":
        message = (
            f"The arguments of {tool.name} could not be checked against its input schema within"
            f" {timeout:g} s, so it was not called. Shorter or simpler arguments may check in time."
        )
        return error_result("validation_timeout", message, tool=tool.name), "validation_timeout"
    message = (
        f"The arguments of {tool.name} could not be checked against its input schema ({exc}),"
        " so it was not called."
    )
    result = error_result("invalid_arguments", message, problems=[str(exc)], inputSchema=tool.input_schema)
    return result, "invalid_arguments"


def _unknown_tool(entry: IndexedCatalog, name: str) -> dict[str, Any]:
    meant = clear_typo_of(name, entry.catalog.by_name)
    if meant is not None:
        tool = entry.catalog.by_name[meant]
        return error_result(
            "unknown_tool",
            f"No tool is named {name!r}; you probably meant {meant!r}. Call it by that name.",
            didYouMean=meant,
            readOnly=tool.read_only,
            inputSchema=tool.input_schema,
        )
    return error_result(
        "unknown_tool",
        f"No tool is named {name!r}. Find the right one with search_tools.",
        similar=closest_names(name, entry.catalog.by_name) or None,
    )


def _exact_name_first(entry: IndexedCatalog, query: str, positions: list[int]) -> list[int]:
    """A query that is a tool's exact name (or `select:name`) returns that tool first."""
    wanted = query.strip()
    if wanted.startswith(EXACT_NAME_PREFIX):
        wanted = wanted[len(EXACT_NAME_PREFIX) :].strip()
    tool = entry.catalog.get(wanted)
    if tool is None:
        return positions
    position = entry.catalog.tools.index(tool)
    return [position] + [p for p in positions if p != position]
