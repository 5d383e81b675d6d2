"""call_read_tool, call_read_tools and call_write_tool: one upstream call each, checked before it goes.

Before a call reaches the upstream, the tool must be in the caller's catalog (a
clear typo gets "did you mean"), must be read-only when asked through the read
tools, and its arguments must fit its input schema (checked in a worker thread
within `validation_timeout`; arguments that cannot be checked are refused, never
forwarded unchecked), and the caller must be within its fair share of the
upstream (`service/fairness.py`: a rate and a number of calls at once per caller). The
call is then sent once. What comes back, or how it failed, is a tool result
(`results.upstream_failure`); only the upstream's refusal of the caller (401/403) is raised, as
the `UpstreamError` it is, for the service's one catch site to raise as `CallerRefused`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from toolsearch.callers.identity import Caller
from toolsearch.callers.refusal import REFUSING_KINDS
from toolsearch.catalogs.catalog import Tool
from toolsearch.catalogs.store import CatalogStore, IndexedCatalog
from toolsearch.mcp import protocol as P
from toolsearch.ops import deadline as request_deadline
from toolsearch.ops.timing import Span
from toolsearch.service.fairness import CallerLimited, FairUse
from toolsearch.service.progress import Progress, ProgressSink
from toolsearch.service.results import (
    Fitted,
    ResultBudget,
    batch_bound,
    error_result,
    structured_result,
    upstream_failure,
)
from toolsearch.settings import FairUseConfig, ToolsConfig, UpstreamConfig
from toolsearch.upstream import UpstreamError, timed_out
from toolsearch.validation.arguments import (
    SchemaUnusable,
    Uncheckable,
    check_arguments,
    clear_typo_of,
    closest_names,
)
from toolsearch.validation.nesting import MAX_RELAYED_DEPTH, deeper_than

logger = logging.getLogger(__name__)

BATCH_LINE_BYTES = 500  # room for the "[n] name: ok" line before each call's result in a batch


class ToolCaller(Protocol):
    """What sends one tools/call upstream, once (`Upstream.call_tool`); progress, if asked, to `progress`."""

    def call_tool(
        self,
        authorization: str | None,
        tool: Mapping[str, Any],
        arguments: dict[str, Any],
        *,
        progress: ProgressSink | None = None,
    ) -> Awaitable[dict[str, Any]]: ...


class UpstreamCalls:
    """Calls of upstream tools for one process: checked, sent once, their results bounded."""

    def __init__(
        self,
        catalogs: CatalogStore,
        upstream: ToolCaller,
        tools: ToolsConfig,
        limits: UpstreamConfig,
        size: Callable[[Any], int],
        fair: FairUse | None = None,
    ) -> None:
        """`tools` bounds the checks (`validation_timeout`); `limits` one call (`timeout`) and its
        result (`max_result_bytes`)."""
        self._catalogs = catalogs
        self._upstream = upstream
        self._validation_timeout = tools.validation_timeout
        self._limits = limits
        self._fair = FairUse(FairUseConfig()) if fair is None else fair  # what one caller may send upstream
        # One answer's bytes (max_result_bytes), counted as the answer carries them (on Lambda: as the
        # runtime serialises it); a batch gives each call a share of it.
        self.budget = ResultBudget(limits.max_result_bytes, size)

    async def call(
        self,
        caller: Caller,
        name: str,
        arguments: Any,
        *,
        read_only: bool,
        budget: ResultBudget | None = None,
        progress: ProgressSink | None = None,
    ) -> dict[str, Any]:
        """One upstream tool called for `caller`; its result held to `budget` (the whole answer's)."""
        span = Span()
        budget = budget or self.budget
        result, outcome = await self._call(caller, name, arguments, read_only, budget, progress)
        # A name the catalog lacks is whatever the model wrote: it stays out of the log.
        logged_name = "(unknown)" if outcome == "unknown_tool" else name
        logger.info("tool call", extra={"tool": logged_name, "outcome": outcome, "ms": span.logged_ms})
        return result

    async def fit_declared(self, caller: Caller, name: str, result: dict[str, Any]) -> dict[str, Any]:
        """A pinned tool's error result with `structuredContent` only when it fits the tool's schema.

        A pinned tool is listed as the upstream declares it, `outputSchema` and all, and clients
        check even error results against it; the proxy's own errors (`{"error": ...}`) and an
        upstream's misfit would be shown as an invalid result instead of the message. The text stays.
        """
        if not result.get("isError") or "structuredContent" not in result:
            return result
        try:
            entry: IndexedCatalog | None = await self._catalogs.get(caller)
        except UpstreamError:
            entry = self._catalogs.cached(caller.key)  # what was last listed to this caller, if any
        if entry is None:
            return result  # never listed: no declared schema was shown to this caller
        tool = entry.catalog.get(name)
        if tool is None or "outputSchema" not in tool.definition:
            return result  # not listed to this caller, or no schema declared: nothing to fit
        schema = tool.definition["outputSchema"]
        try:
            fits = isinstance(schema, Mapping) and not await check_arguments(
                schema,
                result["structuredContent"],
                timeout=self._validation_timeout,
                validators=entry.validators,
            )
        except (SchemaUnusable, Uncheckable):
            fits = False
        return result if fits else _text_only(result)

    async def batch(
        self, caller: Caller, calls: Sequence[Mapping[str, Any]], *, progress: ProgressSink | None = None
    ) -> dict[str, Any]:
        """Read-only calls, concurrently, one labelled result each. With `progress`, the batch reports
        calls finished of all: the calls' own upstream counts, interleaved, would not increase, as the
        spec requires."""
        await self._catalogs.get(caller)  # one listing for the whole batch, before the calls fan out
        deadline = self._validation_timeout + self._limits.timeout + 1.0
        # The whole batch is one answer: each call gets its share, less room for the line that heads it.
        share = self.budget.share(len(calls), BATCH_LINE_BYTES)
        finished = 0

        async def one(call: Mapping[str, Any]) -> dict[str, Any]:
            nonlocal finished
            try:
                result = await asyncio.wait_for(
                    self.call(caller, call["name"], call.get("arguments"), read_only=True, budget=share),
                    deadline,
                )
            except TimeoutError:
                late = timed_out(f"{call['name']} did not answer within {deadline:.0f} s.")
                result = upstream_failure(late)
            finished += 1
            if progress is not None:
                await progress(Progress(finished, len(calls), f"{finished} of {len(calls)} calls finished"))
            return result

        results = await asyncio.gather(*(one(call) for call in calls))
        content: list[dict[str, Any]] = []
        labels: list[dict[str, Any]] = []
        parts: list[Any] = []  # what each call adds after its label: its result's blocks, or those made here
        for number, (call, result) in enumerate(zip(calls, results, strict=True), start=1):
            failed = bool(result.get("isError"))
            label = f"[{number}] {call['name']}: {'failed' if failed else 'ok'}"
            labels.append({"type": "text", "text": label})
            content.append(labels[-1])
            blocks = result.get("content") or []
            content.extend(blocks)
            if not result.get("content") and "structuredContent" in result:
                blocks = [structured_result(result["structuredContent"])["content"][0]]
                content.extend(blocks)
            parts.append(result if result.get("content") else blocks)
        combined = {"content": content, "isError": all(result.get("isError") for result in results)}
        # Its bytes are at most its parts' (each held to its share) and its labels': the answer's
        # budget then passes it without serialising it again (`Fitted`), nor does Lambda's room.
        known = batch_bound(self.budget, labels, parts)
        if known > self.budget.max_bytes:
            return combined  # measured, and cut if it must be, by the answer's budget
        return Fitted(combined, known, self.budget.size, cut=False)

    async def _call(
        self,
        caller: Caller,
        name: str,
        arguments: Any,
        read_only: bool,
        budget: ResultBudget,
        progress: ProgressSink | None,
    ) -> tuple[dict[str, Any], str]:
        entry = await self._catalogs.get(caller)
        tool = entry.catalog.get(name)
        if tool is None:
            return _unknown_tool(entry, name), "unknown_tool"
        if read_only and not tool.read_only:
            message = (
                f"{name} may change things (it is not marked read-only), so it was not called."
                " Call it with call_write_tool, with the user's approval."
            )
            return error_result("not_read_only", message, tool=name), "refused"
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return _invalid(tool, ["arguments: must be an object"]), "invalid_arguments"
        timeout = self._validation_timeout
        try:
            problems = await check_arguments(
                tool.input_schema, arguments, timeout=timeout, validators=entry.validators
            )
        except SchemaUnusable as exc:
            # The upstream's schema can't be checked here; the upstream still validates the call.
            logger.warning("input schema unusable", extra={"tool": name, "reason": type(exc).__name__})
            problems = []
        except Uncheckable as exc:
            # Arguments that could not be checked are never forwarded unchecked.
            return _unchecked(tool, exc, timeout)
        if problems:
            return _invalid(tool, problems), "invalid_arguments"
        # One deadline for the wait for a slot and the call: the caller waits no longer than before.
        deadline = request_deadline.within(self._limits.timeout)
        try:
            async with self._fair.turn(caller.party, deadline):  # a verified subject is one caller
                with request_deadline.answer_by(deadline):
                    result = await self._upstream.call_tool(
                        caller.authorization, tool.definition, arguments, progress=progress
                    )
        except CallerLimited as limited:
            return self._limited(tool, limited), "rate_limited"
        except UpstreamError as exc:
            if exc.kind in REFUSING_KINDS:
                raise
            return self._failed(caller, tool, exc)
        return self._passed_on(caller, tool, result, budget)

    def _limited(self, tool: Tool, limited: CallerLimited) -> dict[str, Any]:
        config = self._fair.config
        if limited.limit == "rate":
            message = (
                f"{tool.name} was not called: your calls are past this proxy's rate limit of"
                f" {config.rate:g} a minute ({config.burst} at once), which keeps the upstream fair to"
                " everyone who shares it. Make fewer calls."
            )
        else:
            message = (
                f"{tool.name} was not called: {config.concurrency} of your calls were already running at"
                " the upstream (this proxy's rate limit of calls at once) and none finished in time."
                " Try again when they have answered."
            )
        return error_result(
            "rate_limited",
            message,
            tool=tool.name,
            limit=limited.limit,
            retryAfterSeconds=limited.retry_after,
        )

    def _failed(self, caller: Caller, tool: Tool, exc: UpstreamError) -> tuple[dict[str, Any], str]:
        name = tool.name
        if exc.kind == "rpc_error" and says_unknown_tool(exc.message, name):
            # The catalog is out of date: the next request lists the upstream again.
            self._catalogs.invalidate(caller.key)
            message = (
                f"The upstream no longer has {name} ({exc.message}). The tool list is being"
                " refreshed: find the right tool again with search_tools."
            )
            return error_result("unknown_tool", message, tool=name), "upstream_unknown_tool"
        if exc.kind == "rpc_error" and exc.code == P.INVALID_PARAMS:
            # The upstream found the arguments invalid, or no longer knows the tool: list again soon.
            self._catalogs.invalidate(caller.key)
            message = f"The upstream refused the arguments of {name}: {exc.message}"
            result = error_result("invalid_arguments", message, inputSchema=tool.input_schema)
            return result, "upstream_invalid_params"
        return upstream_failure(exc, tool=name), exc.kind

    def _passed_on(
        self, caller: Caller, tool: Tool, result: Any, budget: ResultBudget
    ) -> tuple[dict[str, Any], str]:
        name = tool.name
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            # Multi round-trip requests (elicitation, sampling) can't be relayed through a tool call.
            message = (
                f"{name} asked for input from the user, which this proxy cannot relay; it did not finish."
            )
            return error_result("input_required", message, tool=name), "input_required"
        if not isinstance(result, dict):
            message = f"The upstream gave {name} a result that is not an object."
            return error_result("bad_response", message), "bad_response"
        if deeper_than(result, MAX_RELAYED_DEPTH):
            # Passed on, it could not be written back as JSON (Python's writer stops near 10,000).
            message = f"The upstream gave {name} a result nested more than {MAX_RELAYED_DEPTH} levels deep."
            return error_result("bad_response", message, tool=name), "bad_response"
        if result.get("isError") and says_unknown_tool(_first_text(result), name):
            # Some servers (FastMCP among them) report an unknown tool as a tool error, not -32602.
            self._catalogs.invalidate(caller.key)
            return budget.fit(result), "upstream_unknown_tool"
        result = budget.fit(result)
        return result, "error" if result.get("isError") else "ok"


def _text_only(result: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in result.items() if key != "structuredContent"}


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
