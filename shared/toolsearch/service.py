"""`ToolService`: everything tool-shaped the proxy does for one caller, independent of HTTP.

The five tools (`finding.py` searches and describes, `calling.py` calls), the
pinned upstream tools listed beside them (the operator's `pinned_tools`, then those the upstream
marks `_meta["anthropic/alwaysLoad"]: true` in the caller's catalog, at most
`always_load_tools`), the tool list, and the instructions a handshake returns. Every failure is
data (a tool result, or instructions without the upstream's part) except the upstream's refusal of
the caller, which is raised as `CallerRefused` (`refusal.raise_if_refused`, on every path) for the
transport to answer with its HTTP status.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import tooldefs as T
from .callers import Caller
from .calling import UpstreamCalls, upstream_details
from .catalog import Catalog, Tool
from .catalog_store import CatalogStore
from .finding import describe_tools, search_tools
from .nesting import MAX_RELAYED_DEPTH
from .progress import ProgressSink
from .refusal import CallerRefused, raise_if_refused
from .results import error_result
from .telemetry import Telemetry
from .upstream import UpstreamError
from .validation import Uncheckable, Validators, argument_errors

logger = logging.getLogger(__name__)

# What to ask instead when the answer of a tool with an output schema would be cut.
TOO_LARGE_ADVICE = {
    T.SEARCH_TOOLS: "Ask for fewer matches (limit), or without input schemas (schemas: false).",
    T.DESCRIBE_TOOL: "Ask for fewer tools at a time (a tool whose definition alone is this large can still"
    " be called, not described).",
}


class UnknownTool(Exception):
    """A tools/call of a tool this server does not list (a protocol error, not a tool result)."""


@dataclass(frozen=True)
class ToolsConfig:
    max_batch_calls: int  # 0 removes call_read_tools
    max_query_chars: int
    search_schemas: int  # how many of search_tools' best matches carry their schema
    max_instructions: int  # characters of the upstream's instructions passed on
    pinned_tools: tuple[str, ...] = ()
    always_load_tools: int = 10  # most tools marked alwaysLoad listed as pinned, per caller
    list_ttl: float = 600.0  # seconds a client may keep the tool list (the catalog's freshness)


class ToolService:
    def __init__(
        self, config: ToolsConfig, catalogs: CatalogStore, calls: UpstreamCalls, telemetry: Telemetry
    ) -> None:
        self.config = config
        self.catalogs = catalogs
        self._calls = calls
        self._telemetry = telemetry
        self._definitions = T.proxy_tools(config.max_batch_calls, config.max_query_chars)
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
        try:
            catalog = (await self.catalogs.get(caller)).catalog
        except UpstreamError as exc:
            raise_if_refused(exc)
            logger.warning("upstream catalog unavailable for tools/list", extra={"outcome": exc.kind})
            return list(self._definitions)
        pinned = [dict(catalog.by_name[name].definition) for name in self._pinned if name in catalog.by_name]
        pinned += [dict(tool.definition) for tool in self._always_loaded(catalog)]
        return self._definitions + pinned

    async def instructions(self, caller: Caller) -> str:
        """The proxy's guidance and the upstream's instructions for `caller`.

        Reading them lists the caller's catalog, so an unauthorized caller gets `CallerRefused`.
        """
        try:
            upstream = (await self.catalogs.get(caller)).catalog.instructions
        except UpstreamError as exc:
            raise_if_refused(exc)
            logger.warning("upstream instructions unavailable", extra={"outcome": exc.kind})
            upstream = ""
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
        try:
            catalog = (await self.catalogs.get(caller)).catalog
        except UpstreamError as exc:
            raise_if_refused(exc)
            return True
        return any(tool.name == name for tool in self._always_loaded(catalog))

    def _always_loaded(self, catalog: Catalog) -> list[Tool]:
        """The catalog's tools marked alwaysLoad and not pinned already: the first few by name."""
        if self.config.always_load_tools <= 0:
            return []
        marked = (t for t in catalog.marked if t.name not in self._pinned)
        return [t for t in marked if t.name not in self._schemas][: self.config.always_load_tools]

    async def pinned_input_schema(self, caller: Caller, name: str) -> Any:
        """A pinned tool's input schema as listed to `caller` (its `x-mcp-header` marks bind headers)."""
        try:
            tool = (await self.catalogs.get(caller)).catalog.get(name)
        except UpstreamError as exc:
            raise_if_refused(exc)
            return None  # the call that follows lists again and answers the failure as a tool result
        return tool.input_schema if tool is not None else None

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
        started = time.perf_counter()
        metric = name if name in self._schemas else "pinned"
        outcome = "error"
        try:
            result = await self._run(caller, name, arguments, progress, pinned)
            outcome = "error" if result.get("isError") else "ok"
            return result
        except CallerRefused as refused:
            outcome = refused.error.kind
            if refused.status == 401 and self.catalogs.cached(caller.key) is not None:
                # A call refused: the upstream no longer lets this caller in (revoked, expired), nor
                # may the catalog it was shown. (A refused listing has dropped it already.)
                await self.catalogs.forget(caller.key)
            raise
        finally:
            self._telemetry.count("tool_call", tool=metric, outcome=outcome)
            self._telemetry.timing("tool_call", (time.perf_counter() - started) * 1000, tool=metric)

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
            try:
                result = await self._calls.call(caller, name, arguments, read_only=False, progress=progress)
            except UpstreamError as exc:  # the caller's catalog could not be listed
                raise_if_refused(exc)
                result = error_result(exc.kind, exc.message, tool=name, **upstream_details(exc))
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
        try:
            result = await self._proxy_tool(caller, name, arguments, progress)
        except UpstreamError as exc:
            raise_if_refused(exc)
            return error_result(exc.kind, exc.message, **upstream_details(exc))
        # Every one of the five answers within max_result_bytes (a description of huge tools too).
        limited = self._calls.limit(result)
        if limited is not result and name in TOO_LARGE_ADVICE:
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


def compose_instructions(upstream: str, limit: int) -> str:
    """The proxy's guidance, then the upstream's instructions unchanged, cut at `limit` characters."""
    if not upstream:
        return T.GUIDANCE
    if len(upstream) > limit:
        upstream = upstream[:limit] + (
            f"\n[The upstream's instructions were cut here, at {limit:,} of {len(upstream):,} characters.]"
        )
    return f"{T.GUIDANCE}\n\nThe upstream server's own instructions follow.\n\n{upstream}"
