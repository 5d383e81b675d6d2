"""`ToolService`: everything tool-shaped the proxy does for one caller, independent of HTTP.

The five tools (`service/finding.py` searches and describes, `service/upstream_calls.py` calls), the
pinned upstream tools listed beside them (the operator's `pinned_tools`, then those the upstream
marks `_meta["anthropic/alwaysLoad"]: true` in the caller's catalog, at most
`always_load_tools`), the tool list, and the instructions a handshake returns. Every failure is
data (a tool result, or instructions without the upstream's part) except the upstream's refusal of
the caller, which is raised as `CallerRefused` for the transport to answer with its HTTP status.
Every path meets the upstream through one catch site (`_or_failure`): a failure becomes what that
path answers (a tool result by `results.upstream_failure`), a refusal `CallerRefused`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from toolsearch.callers.identity import Caller
from toolsearch.callers.refusal import CallerRefused, refused
from toolsearch.catalogs.catalog import Catalog, Tool
from toolsearch.catalogs.store import CatalogStore, IndexedCatalog
from toolsearch.errors import ToolsearchError
from toolsearch.ops.telemetry import Telemetry
from toolsearch.ops.timing import Span
from toolsearch.service import tooldefs as T
from toolsearch.service.finding import describe_tools, search_tools
from toolsearch.service.progress import ProgressSink
from toolsearch.service.results import KeptList, error_result, kept_list, upstream_failure, was_cut
from toolsearch.service.upstream_calls import UpstreamCalls
from toolsearch.settings import ToolsConfig
from toolsearch.upstream import UpstreamError
from toolsearch.validation.arguments import Uncheckable, Validators, argument_errors
from toolsearch.validation.nesting import MAX_RELAYED_DEPTH

logger = logging.getLogger(__name__)

# What to ask instead when the answer of a tool with an output schema would be cut.
TOO_LARGE_ADVICE = {
    T.SEARCH_TOOLS: "Ask for fewer matches (limit), or without input schemas (schemas: false).",
    T.DESCRIBE_TOOL: "Ask for fewer tools at a time (a tool whose definition alone is this large can still"
    " be called, not described).",
}


class UnknownTool(ToolsearchError):
    """A tools/call of a tool this server does not list (a protocol error, not a tool result)."""


class ToolService:
    def __init__(
        self, config: ToolsConfig, catalogs: CatalogStore, calls: UpstreamCalls, telemetry: Telemetry
    ) -> None:
        self.config = config
        self.catalogs = catalogs
        self._calls = calls
        self._telemetry = telemetry
        self._definitions = T.proxy_tools(config.max_batch_calls, config.max_query_chars)
        self._listed_alone = kept_list(self._definitions)  # tools/list without pinned tools: its JSON kept
        self._schemas = {tool["name"]: tool["inputSchema"] for tool in self._definitions}
        self._pinned = tuple(name for name in config.pinned_tools if name not in self._schemas)
        self._validators = Validators()  # for the five tools' own schemas

    # -- what a client is told

    def proxy_tools(self) -> list[dict[str, Any]]:
        """The five tools' definitions (four when batches are off)."""
        return self._definitions

    async def list_tools(self, caller: Caller) -> list[dict[str, Any]]:
        """The five tools, then the pinned upstream tools as the upstream defines them for `caller`.

        This lists the caller's catalog, pinned tools or not, so a caller the upstream refuses gets
        `CallerRefused` here too, which is how OAuth clients learn to sign in.
        """
        entry = await self._listed(caller, _no_catalog_for_tools_list)
        if entry is None:
            return KeptList(self._definitions, self._listed_alone.text, self._listed_alone.constant)
        catalog = entry.catalog
        pinned = [dict(catalog.by_name[name].definition) for name in self._pinned if name in catalog.by_name]
        pinned += [dict(tool.definition) for tool in self._always_loaded(catalog)]
        if not pinned:
            return KeptList(
                self._definitions, self._listed_alone.text, self._listed_alone.constant
            )  # a new list: callers may add to it
        return self._definitions + pinned

    async def instructions(self, caller: Caller) -> str:
        """The proxy's guidance and the upstream's instructions for `caller`.

        Reading them lists the caller's catalog, so an unauthorized caller gets `CallerRefused`.
        """
        entry = await self._listed(caller, _no_instructions)
        upstream = entry.catalog.instructions if entry is not None else ""
        return compose_instructions(upstream, self.config.max_instructions)

    def is_pinned(self, name: str) -> bool:
        """Pinned by the operator (`pinned_tools`); `is_pinned_for` also knows the caller's alwaysLoad."""
        return name in self._pinned

    async def is_pinned_for(self, caller: Caller, name: str) -> bool:
        """Listed beside the five for `caller`: pinned, or marked alwaysLoad in its catalog.

        When the catalog cannot be listed, a name that may be marked counts as pinned: the call then
        lists again and answers the failure as a tool result, as for a pinned tool.
        """
        if name in self._pinned:
            return True
        if name in self._schemas or self.config.always_load_tools <= 0:
            return False
        entry = await self._listed(caller)
        if entry is None:
            return True
        return any(tool.name == name for tool in self._always_loaded(entry.catalog))

    def _always_loaded(self, catalog: Catalog) -> list[Tool]:
        """The catalog's tools marked alwaysLoad and not pinned already: the first few by name."""
        if self.config.always_load_tools <= 0:
            return []
        marked = (t for t in catalog.marked if t.name not in self._pinned)
        return [t for t in marked if t.name not in self._schemas][: self.config.always_load_tools]

    async def pinned_input_schema(self, caller: Caller, name: str) -> Any:
        """A pinned tool's input schema as listed to `caller` (its `x-mcp-header` marks bind headers)."""
        entry = await self._listed(caller)
        if entry is None:
            return None  # the call that follows lists again and answers the failure as a tool result
        tool = entry.catalog.get(name)
        return tool.input_schema if tool is not None else None

    # -- the upstream's failures: one catch site

    async def _or_failure[R](
        self, caller: Caller, work: Awaitable[R], failed: Callable[[UpstreamError], R]
    ) -> R:
        """What `work` returns, or what `failed` makes of the upstream's failure.

        The upstream's refusal of the caller is never data: raised as `CallerRefused`, for the HTTP
        edge to answer, once `CatalogStore.drop_refused` has dropped what it must of their catalog.
        """
        try:
            return await work
        except UpstreamError as exc:
            refusal = refused(exc)
            if refusal is None:
                return failed(exc)
            await self.catalogs.drop_refused(caller.key, exc, listing=False)
            raise refusal from exc

    async def _listed(
        self, caller: Caller, unlisted: Callable[[UpstreamError], None] | None = None
    ) -> IndexedCatalog | None:
        """The caller's catalog; None when the upstream could not list it (`unlisted` told why)."""
        return await self._or_failure(caller, self.catalogs.get(caller), unlisted or _unlisted)

    # -- tools/call

    async def call(
        self, caller: Caller, name: str, arguments: dict[str, Any], *, progress: ProgressSink | None = None
    ) -> dict[str, Any]:
        """Run one of the five tools or a pinned tool; raises UnknownTool for any other name.

        `progress` receives the progress of a call through call_read_tool, call_write_tool or a
        pinned tool (the upstream's), or of a call_read_tools batch (calls finished of all).
        """
        pinned = name not in self._schemas and await self.is_pinned_for(caller, name)
        if name not in self._schemas and not pinned:
            raise UnknownTool(f"Unknown tool: {name}. This server has: " + ", ".join(self._schemas))
        span = Span()
        metric = name if name in self._schemas else "pinned"
        outcome = "error"
        try:
            result = await self._run(caller, name, arguments, progress, pinned)
            outcome = "error" if result.get("isError") else "ok"
            return result
        except CallerRefused as refusal:  # its catalog dropped already (_or_failure)
            outcome = refusal.error.kind
            raise
        finally:
            self._telemetry.count("tool_call", tool=metric, outcome=outcome)
            self._telemetry.timing("tool_call", span.ms, tool=metric)

    async def _run(
        self,
        caller: Caller,
        name: str,
        arguments: dict[str, Any],
        progress: ProgressSink | None,
        pinned: bool,
    ) -> dict[str, Any]:
        if pinned:
            # A pinned tool is called as itself: the client saw its own annotations and asks accordingly.
            called = self._calls.call(caller, name, arguments, read_only=False, progress=progress)
            # Failed here, the caller's catalog could not be listed (the call's own failures are results).
            result = await self._or_failure(caller, called, functools.partial(upstream_failure, tool=name))
            return await self._calls.fit_declared(caller, name, result)
        schema = self._schemas[name]
        try:
            # Our own schemas are small and have no patterns: checked here, on the event loop. The
            # upstream tool's arguments inside are checked, to MAX_DEPTH, before they are passed on.
            problems = argument_errors(
                schema, arguments, max_depth=MAX_RELAYED_DEPTH, validators=self._validators
            )
        except Uncheckable as exc:
            message = f"The arguments of {name} could not be checked against its input schema ({exc})."
            return error_result("invalid_arguments", message, problems=[str(exc)])
        if problems:
            message = f"The arguments of {name} do not fit its input schema: " + "; ".join(problems)
            # No schema beside the problems: the client has the five tools' schemas from tools/list.
            return error_result("invalid_arguments", message, problems=problems)
        return await self._or_failure(
            caller, self._bounded(caller, name, arguments, progress), upstream_failure
        )

    async def _bounded(
        self, caller: Caller, name: str, arguments: dict[str, Any], progress: ProgressSink | None
    ) -> dict[str, Any]:
        """One of the five run, its answer within max_result_bytes (a description of huge tools too)."""
        result = await self._proxy_tool(caller, name, arguments, progress)
        limited = self._calls.budget.fit(result)  # a call's result, fitted already, is not measured again
        if was_cut(limited) and name in TOO_LARGE_ADVICE:
            # Cut, it would lose its structured part: an error its output schema admits, and what to ask.
            message = f"The answer of {name} is larger than the proxy passes on. {TOO_LARGE_ADVICE[name]}"
            return error_result("too_large", message)
        return limited

    async def _proxy_tool(
        self, caller: Caller, name: str, arguments: Mapping[str, Any], progress: ProgressSink | None
    ) -> dict[str, Any]:
        if name == T.SEARCH_TOOLS:
            entry = await self.catalogs.get(caller)
            return await search_tools(
                entry,
                arguments,
                schemas=self.config.search_schemas,
                max_query_chars=self.config.max_query_chars,
            )
        if name == T.DESCRIBE_TOOL:
            return describe_tools(await self.catalogs.get(caller), arguments["names"])
        if name == T.CALL_READ_TOOLS:
            return await self._calls.batch(caller, arguments["calls"], progress=progress)
        read_only = name == T.CALL_READ_TOOL
        target, target_arguments = arguments["name"], arguments.get("arguments")
        return await self._calls.call(
            caller, target, target_arguments, read_only=read_only, progress=progress
        )


def _unlisted(_exc: UpstreamError) -> None:
    return None


def _no_catalog_for_tools_list(exc: UpstreamError) -> None:
    logger.warning("upstream catalog unavailable for tools/list", extra={"outcome": exc.kind})


def _no_instructions(exc: UpstreamError) -> None:
    logger.warning("upstream instructions unavailable", extra={"outcome": exc.kind})


def compose_instructions(upstream: str, limit: int) -> str:
    """The proxy's guidance, then the upstream's instructions unchanged, cut at `limit` characters."""
    if not upstream:
        return T.GUIDANCE
    if len(upstream) > limit:
        upstream = upstream[:limit] + (
            f"\n[The upstream's instructions were cut here, at {limit:,} of {len(upstream):,} characters.]"
        )
    return f"{T.GUIDANCE}\n\nThe upstream server's own instructions follow.\n\n{upstream}"
