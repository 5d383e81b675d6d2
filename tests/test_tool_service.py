"""`ToolService` on its own: the five tools, pinned tools, the tool list and the instructions, no HTTP.

Small fakes stand behind the seams (`catalog_store.CatalogSource`, `calling.ToolCaller`): a source
that lists what the test chose or fails as told, and an upstream that records every call and
answers or fails as told; the lexical indexer builds the index. No socket is opened.

The rules checked on every path: the upstream refusing the caller (401/403, from the listing or
from the call) is raised as `CallerRefused`; any other upstream failure is a tool result; a name
the service does not have is `UnknownTool`; a call reaches the upstream at most once, and never
with arguments that do not fit; telemetry carries tool names and outcomes only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from toolsearch.app import catalog_store, tool_service
from toolsearch.callers.identity import Caller, caller_key
from toolsearch.callers.refusal import CallerRefused
from toolsearch.ops.telemetry import Telemetry
from toolsearch.search.index import make_indexer
from toolsearch.service import tooldefs as T
from toolsearch.service.progress import Progress
from toolsearch.service.tool_service import ToolService, UnknownTool
from toolsearch.settings import Settings
from toolsearch.upstream import Listing, UpstreamError
from toolsearch.validation.nesting import MAX_RELAYED_DEPTH

TOKEN = "Bearer unit-secret-token-5f2a"
CALLER = Caller(TOKEN, caller_key("https://upstream.example/mcp", TOKEN))
FIVE = [T.SEARCH_TOOLS, T.DESCRIBE_TOOL, T.CALL_READ_TOOL, T.CALL_READ_TOOLS, T.CALL_WRITE_TOOL]
INSTRUCTIONS = "Notes belong to one user each; ids are integers."

_ID = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
NOTES_GET = {
    "name": "notes_get",
    "description": "Get a note by its id.",
    "inputSchema": {**_ID, "additionalProperties": False},
    "annotations": {"readOnlyHint": True},
}
NOTES_SEARCH = {
    "name": "notes_search",
    "description": "Search the notes for words.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "annotations": {"readOnlyHint": True},
}
NOTES_DELETE = {
    "name": "notes_delete",
    "description": "Delete a note for good.",
    "inputSchema": _ID,
    "annotations": {"destructiveHint": True},
}
TOOLS = [NOTES_GET, NOTES_SEARCH, NOTES_DELETE]


# -- the fakes behind the seams


def failure(kind: str, message: str = "the upstream failed", **details: Any) -> Callable[[], UpstreamError]:
    """A failure to raise, made anew each time (one exception raised again and again grows its traceback)."""
    return lambda: UpstreamError(kind, message, **details)


def refusal(status: int) -> Callable[[], UpstreamError]:
    if status == 401:
        return failure("unauthorized", "the token was refused", status=401, www_authenticate="Bearer")
    return failure("forbidden", "the caller may not", status=403)


class FakeSource:
    """A `CatalogSource`: lists `tools` and `instructions`, or raises `fail()` when set."""

    def __init__(self, tools: list[dict[str, Any]], instructions: str) -> None:
        self.tools, self.instructions = tools, instructions
        self.fail: Callable[[], UpstreamError] | None = None
        self.authorizations: list[str | None] = []

    async def list_tools(self, authorization: str | None) -> Listing:
        self.authorizations.append(authorization)
        if self.fail is not None:
            raise self.fail()
        return Listing(tools=[dict(t) for t in self.tools], instructions=self.instructions, dropped=[])


@dataclass
class Sent:
    authorization: str | None
    name: str
    arguments: dict[str, Any]
    progress: Any


@dataclass
class FakeUpstream:
    """A `ToolCaller`: records every call; answers `answers[name]` (a result, or a failure to raise)."""

    answers: dict[str, dict[str, Any] | Callable[[], UpstreamError]] = field(default_factory=dict)
    calls: list[Sent] = field(default_factory=list)

    async def call_tool(
        self, authorization: str | None, tool: Mapping[str, Any], arguments: dict[str, Any], *, progress=None
    ) -> dict[str, Any]:
        self.calls.append(Sent(authorization, tool["name"], arguments, progress))
        answer = self.answers.get(
            tool["name"], {"content": [{"type": "text", "text": f"{tool['name']} ran"}]}
        )
        if callable(answer):
            raise answer()
        return answer

    def names(self) -> list[str]:
        return [sent.name for sent in self.calls]


@dataclass
class Rig:
    service: ToolService
    source: FakeSource
    upstream: FakeUpstream
    telemetry: Telemetry
    events: list[tuple[str, dict[str, str]]]


def rig(*, tools: list[dict[str, Any]] = TOOLS, instructions: str = INSTRUCTIONS, **settings: Any) -> Rig:
    """A service as app.py wires it, over the fakes; notes_get pinned unless `pinned_tools` says."""
    config = Settings(embedder="none", **{"pinned_tools": ["notes_get"], **settings})
    source, upstream, telemetry = FakeSource(tools, instructions), FakeUpstream(), Telemetry()
    events: list[tuple[str, dict[str, str]]] = []
    telemetry.add_sink(lambda name, value, dimensions: events.append((name, dict(dimensions))))
    catalogs = catalog_store(config, source, make_indexer(None))
    return Rig(tool_service(config, catalogs, upstream, telemetry), source, upstream, telemetry, events)


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is True, result
    return result["structuredContent"]["error"]


def data_of(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is False, result
    return result["structuredContent"]


# -- every path, as the transport takes it

Path = Callable[[ToolService], Awaitable[Any]]
BATCH = {
    "calls": [
        {"name": "notes_get", "arguments": {"id": 1}},
        {"name": "notes_search", "arguments": {"text": "x"}},
    ]
}

TOOL_PATHS: dict[str, Path] = {
    "search_tools": lambda s: s.call(CALLER, T.SEARCH_TOOLS, {"query": "get a note"}),
    "describe_tool": lambda s: s.call(CALLER, T.DESCRIBE_TOOL, {"names": ["notes_get"]}),
    "call_read_tool": lambda s: s.call(
        CALLER, T.CALL_READ_TOOL, {"name": "notes_get", "arguments": {"id": 1}}
    ),
    "call_read_tools": lambda s: s.call(CALLER, T.CALL_READ_TOOLS, BATCH),
    "call_write_tool": lambda s: s.call(
        CALLER, T.CALL_WRITE_TOOL, {"name": "notes_delete", "arguments": {"id": 1}}
    ),
    "pinned": lambda s: s.call(CALLER, "notes_get", {"id": 1}),
}
CALLING_PATHS = ["call_read_tool", "call_read_tools", "call_write_tool", "pinned"]
ALL_PATHS: dict[str, Path] = {
    **TOOL_PATHS,
    "tools/list": lambda s: s.list_tools(CALLER),
    "instructions": lambda s: s.instructions(CALLER),
    "pinned schema": lambda s: s.pinned_input_schema(CALLER, "notes_get"),
}
LISTING_FAILURES = {
    "unavailable": failure("unavailable", "the upstream answered 503", status=503),
    "timeout": failure("timeout", "the upstream did not answer in time"),
    "connect": failure("connect", "could not connect to the upstream"),
    "rate_limited": failure("rate_limited", "slow down", status=429, retry_after=3.0),
    "bad_response": failure("bad_response", "the upstream's answer was not JSON"),
    "too_large": failure("too_large", "the catalog is larger than max_catalog_bytes"),
}
CALL_FAILURES = {
    **LISTING_FAILURES,
    "session_expired": failure("session_expired", "the upstream forgot the session"),
    "no_time": failure("no_time", "too little of this request's time was left to call it; it was not sent"),
    "rpc_error": failure("rpc_error", "the tool broke", code=-32000, data={"where": "db"}),
}


# -- the refusal rule: on every path, from the listing or from the call


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("path", list(ALL_PATHS))
async def test_a_refused_listing_is_caller_refused_on_every_path(path, status):
    r = rig()
    r.source.fail = refusal(status)

    with pytest.raises(CallerRefused) as refused:
        await ALL_PATHS[path](r.service)

    assert refused.value.status == status
    assert r.source.authorizations == [TOKEN]  # listed once, with the caller's own Authorization
    assert r.upstream.calls == []


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("path", CALLING_PATHS)
async def test_a_refused_call_is_caller_refused_on_every_calling_path_and_sent_once(path, status):
    r = rig()
    for name in ("notes_get", "notes_delete"):
        r.upstream.answers[name] = refusal(status)

    with pytest.raises(CallerRefused) as refused:
        await TOOL_PATHS[path](r.service)

    assert refused.value.status == status
    sent = Counter(r.upstream.names())
    assert sent and set(sent.values()) == {1}  # each tool asked once: a refusal is not retried


# -- any other upstream failure is a tool result, never an exception


@pytest.mark.parametrize("kind", list(LISTING_FAILURES))
@pytest.mark.parametrize("path", list(TOOL_PATHS))
async def test_a_failed_listing_is_an_error_result_on_every_tool_path(path, kind):
    r = rig()
    r.source.fail = LISTING_FAILURES[kind]

    error = error_of(await TOOL_PATHS[path](r.service))

    assert error["kind"] == kind
    assert error["message"]
    if kind == "rate_limited":
        assert error["retryAfterSeconds"] == 3.0
    assert r.upstream.calls == []


@pytest.mark.parametrize("kind", list(LISTING_FAILURES))
async def test_a_failed_listing_leaves_the_five_tools_and_the_proxys_guidance(kind):
    r = rig()
    r.source.fail = LISTING_FAILURES[kind]

    assert [tool["name"] for tool in await r.service.list_tools(CALLER)] == FIVE  # no pinned tool
    assert await r.service.instructions(CALLER) == T.GUIDANCE


@pytest.mark.parametrize("kind", list(LISTING_FAILURES))
async def test_a_failed_listing_is_no_exception_when_reading_a_pinned_tools_schema(kind):
    r = rig()
    r.source.fail = LISTING_FAILURES[kind]

    assert await r.service.pinned_input_schema(CALLER, "notes_get") is None
    assert error_of(await r.service.call(CALLER, "notes_get", {"id": 1}))["kind"] == kind


@pytest.mark.parametrize("kind", list(CALL_FAILURES))
@pytest.mark.parametrize("path", ["call_read_tool", "call_write_tool", "pinned"])
async def test_a_failed_call_is_an_error_result_naming_the_tool_and_is_sent_once(path, kind):
    r = rig()
    for name in ("notes_get", "notes_delete"):
        r.upstream.answers[name] = CALL_FAILURES[kind]

    error = error_of(await TOOL_PATHS[path](r.service))

    assert error["kind"] == kind
    assert error["tool"] in ("notes_get", "notes_delete")
    assert len(r.upstream.calls) == 1  # a timeout too: the call may have run, so it is never sent again
    if kind == "rpc_error":
        assert (error["code"], error["data"]) == (-32000, {"where": "db"})


async def test_a_batch_with_one_failed_call_answers_the_others():
    r = rig()
    r.upstream.answers["notes_get"] = CALL_FAILURES["unavailable"]

    result = await r.service.call(CALLER, T.CALL_READ_TOOLS, BATCH)

    assert result["isError"] is False  # not every call failed
    lines = [block["text"] for block in result["content"] if block["text"].startswith("[")]
    assert lines == ["[1] notes_get: failed", "[2] notes_search: ok"]
    assert "notes_search ran" in [block["text"] for block in result["content"]]
    assert sorted(r.upstream.names()) == ["notes_get", "notes_search"]


async def test_a_batch_whose_every_call_failed_is_an_error():
    r = rig()
    r.upstream.answers = {"notes_get": CALL_FAILURES["timeout"], "notes_search": CALL_FAILURES["connect"]}

    result = await r.service.call(CALLER, T.CALL_READ_TOOLS, BATCH)

    assert result["isError"] is True
    assert len(r.upstream.calls) == 2


async def test_arguments_the_upstream_refuses_are_invalid_arguments_and_the_catalog_is_listed_again():
    r = rig()
    r.upstream.answers["notes_get"] = failure("rpc_error", "Invalid params: id", code=-32602)
    await r.service.call(CALLER, T.SEARCH_TOOLS, {"query": "note"})

    error = error_of(
        await r.service.call(CALLER, T.CALL_READ_TOOL, {"name": "notes_get", "arguments": {"id": 1}})
    )

    assert error["kind"] == "invalid_arguments" and error["inputSchema"] == NOTES_GET["inputSchema"]
    assert len(r.upstream.calls) == 1
    await r.service.call(CALLER, T.SEARCH_TOOLS, {"query": "note"})
    assert len(r.source.authorizations) == 2  # the catalog was forgotten: listed again


async def test_a_tool_the_upstream_no_longer_has_is_unknown_and_the_catalog_is_listed_again():
    r = rig()
    r.upstream.answers["notes_get"] = failure("rpc_error", "Unknown tool: notes_get", code=-32601)

    error = error_of(
        await r.service.call(CALLER, T.CALL_READ_TOOL, {"name": "notes_get", "arguments": {"id": 1}})
    )

    assert error["kind"] == "unknown_tool" and "search_tools" in error["message"]
    assert len(r.upstream.calls) == 1
    await r.service.call(CALLER, T.DESCRIBE_TOOL, {"names": ["notes_get"]})
    assert len(r.source.authorizations) == 2


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ([{"type": "text", "text": "a list"}], "bad_response"),
        ({"resultType": "input_required", "inputRequests": {}}, "input_required"),
    ],
)
async def test_an_answer_that_cannot_be_passed_on_is_an_error_result(answer, kind):
    r = rig()
    r.upstream.answers["notes_get"] = answer

    error = error_of(
        await r.service.call(CALLER, T.CALL_READ_TOOL, {"name": "notes_get", "arguments": {"id": 1}})
    )

    assert error["kind"] == kind
    assert len(r.upstream.calls) == 1


async def test_an_answer_nested_too_deep_is_a_bad_response_not_a_crash():
    deep: dict[str, Any] = {}
    for _ in range(MAX_RELAYED_DEPTH + 10):
        deep = {"a": deep}
    r = rig()
    r.upstream.answers["notes_get"] = {"content": [], "structuredContent": deep}

    error = error_of(await r.service.call(CALLER, "notes_get", {"id": 1}))

    assert error["kind"] == "bad_response"


# -- unknown names


@pytest.mark.parametrize(
    "name",
    ["notes_delete", "Search_Tools", "search_tools ", "", "call_read_tools/../notes_get", "x" * 10_000],
)
async def test_a_name_the_service_does_not_have_is_unknown_tool_before_any_listing(name):
    # With alwaysLoad marks honoured (the default), the caller's catalog is read to know whether the
    # name is marked; with them off, nothing is listed for a name the caller made up.
    r = rig(always_load_tools=0)

    with pytest.raises(UnknownTool) as unknown:
        await r.service.call(CALLER, name, {"id": 1})

    assert T.SEARCH_TOOLS in str(unknown.value)  # it names what this server has
    assert r.source.authorizations == [] and r.upstream.calls == []
    assert r.events == []  # nothing counted: the name is the caller's text, not a tool of ours


@pytest.mark.parametrize("name", ["notes_delete", "Search_Tools", "x" * 10_000])
async def test_a_name_neither_pinned_nor_marked_always_load_is_unknown_tool_and_never_called(name):
    r = rig()

    with pytest.raises(UnknownTool):
        await r.service.call(CALLER, name, {"id": 1})

    assert r.upstream.calls == []
    assert not [event for event in r.events if event[0] == "tool_call"]


async def test_without_batches_call_read_tools_is_unknown_and_not_listed():
    r = rig(max_batch_calls=0)

    with pytest.raises(UnknownTool):
        await r.service.call(CALLER, T.CALL_READ_TOOLS, BATCH)

    assert [tool["name"] for tool in await r.service.list_tools(CALLER)] == [
        T.SEARCH_TOOLS,
        T.DESCRIBE_TOOL,
        T.CALL_READ_TOOL,
        T.CALL_WRITE_TOOL,
        "notes_get",
    ]


@pytest.mark.parametrize("path", ["call_read_tool", "call_write_tool"])
async def test_an_upstream_tool_the_catalog_lacks_is_unknown_tool_with_the_name_it_meant(path):
    r = rig()
    tool = T.CALL_READ_TOOL if path == "call_read_tool" else T.CALL_WRITE_TOOL

    typo = error_of(await r.service.call(CALLER, tool, {"name": "notes_gett", "arguments": {"id": 1}}))
    unrelated = error_of(await r.service.call(CALLER, tool, {"name": "weather_now"}))

    assert typo["kind"] == "unknown_tool" and typo["didYouMean"] == "notes_get"
    assert unrelated["kind"] == "unknown_tool" and "didYouMean" not in unrelated
    assert r.upstream.calls == []


async def test_a_pinned_tool_the_callers_catalog_lacks_is_unknown_tool_not_an_exception():
    r = rig(pinned_tools=["notes_archive"])

    error = error_of(await r.service.call(CALLER, "notes_archive", {}))

    assert error["kind"] == "unknown_tool"
    assert r.upstream.calls == []


# -- read-only, arguments, at most once


async def test_a_tool_not_marked_read_only_is_refused_by_the_read_tools_and_never_called():
    r = rig()

    single = error_of(
        await r.service.call(CALLER, T.CALL_READ_TOOL, {"name": "notes_delete", "arguments": {"id": 1}})
    )
    batch = await r.service.call(
        CALLER, T.CALL_READ_TOOLS, {"calls": [{"name": "notes_delete", "arguments": {"id": 1}}]}
    )

    assert single["kind"] == "not_read_only" and "call_write_tool" in single["message"]
    assert batch["isError"] is True and "notes_delete: failed" in batch["content"][0]["text"]
    assert "not marked read-only" in batch["content"][1]["text"]
    assert r.upstream.calls == []


async def test_a_write_goes_through_call_write_tool_once_with_the_callers_authorization():
    r = rig()
    r.upstream.answers["notes_delete"] = {"content": [{"type": "text", "text": "deleted"}], "isError": False}

    result = await r.service.call(CALLER, T.CALL_WRITE_TOOL, {"name": "notes_delete", "arguments": {"id": 7}})

    assert result == {"content": [{"type": "text", "text": "deleted"}], "isError": False}
    assert [(s.authorization, s.name, s.arguments) for s in r.upstream.calls] == [
        (TOKEN, "notes_delete", {"id": 7})
    ]


@pytest.mark.parametrize("path", ["call_read_tool", "pinned"])
async def test_a_read_passes_the_upstreams_result_on_unchanged_after_one_call(path):
    r = rig()
    answer = {
        "content": [{"type": "text", "text": "note 1"}],
        "structuredContent": {"id": 1},
        "isError": False,
    }
    r.upstream.answers["notes_get"] = answer

    assert await TOOL_PATHS[path](r.service) == answer
    assert [(s.authorization, s.name, s.arguments) for s in r.upstream.calls] == [
        (TOKEN, "notes_get", {"id": 1})
    ]


async def test_a_result_larger_than_max_result_bytes_is_cut_with_a_note():
    r = rig(max_result_bytes=10_000)
    r.upstream.answers["notes_get"] = {"content": [{"type": "text", "text": "x" * 50_000}]}

    result = await r.service.call(CALLER, T.CALL_READ_TOOL, {"name": "notes_get", "arguments": {"id": 1}})

    assert sum(len(block["text"]) for block in result["content"]) < 10_000
    assert "it was cut" in result["content"][-1]["text"]
    assert len(r.upstream.calls) == 1


NESTED = {"a": 1}
for _ in range(100_000):
    NESTED = {"a": NESTED}

# Arguments that do not fit: the five tools' own schemas, then the upstream tool's.
INVALID = {
    "search_tools, neither query nor queries": (T.SEARCH_TOOLS, {}),
    "search_tools, both": (T.SEARCH_TOOLS, {"query": "a", "queries": ["b"]}),
    "search_tools, empty query": (T.SEARCH_TOOLS, {"query": ""}),
    "search_tools, limit 0": (T.SEARCH_TOOLS, {"query": "a", "limit": 0}),
    "search_tools, six queries": (T.SEARCH_TOOLS, {"queries": ["a"] * 6}),
    "describe_tool, no names": (T.DESCRIBE_TOOL, {"names": []}),
    "describe_tool, a name not a string": (T.DESCRIBE_TOOL, {"names": [1]}),
    "call_read_tool, no name": (T.CALL_READ_TOOL, {"arguments": {"id": 1}}),
    "call_read_tool, arguments not an object": (T.CALL_READ_TOOL, {"name": "notes_get", "arguments": "id=1"}),
    "call_read_tool, a wrong type": (T.CALL_READ_TOOL, {"name": "notes_get", "arguments": {"id": "one"}}),
    "call_read_tool, a missing argument": (T.CALL_READ_TOOL, {"name": "notes_get", "arguments": {}}),
    "call_read_tool, an argument too many": (
        T.CALL_READ_TOOL,
        {"name": "notes_get", "arguments": {"id": 1, "also": 2}},
    ),
    "call_read_tool, nested 100,000 deep": (T.CALL_READ_TOOL, {"name": "notes_get", "arguments": NESTED}),
    "call_read_tools, no calls": (T.CALL_READ_TOOLS, {"calls": []}),
    "call_read_tools, too many calls": (T.CALL_READ_TOOLS, {"calls": [{"name": "notes_get"}] * 100}),
    "call_read_tools, a call without a name": (T.CALL_READ_TOOLS, {"calls": [{"arguments": {"id": 1}}]}),
    "call_write_tool, a name not a string": (T.CALL_WRITE_TOOL, {"name": 5}),
    "call_write_tool, a missing argument": (T.CALL_WRITE_TOOL, {"name": "notes_delete", "arguments": {}}),
    "pinned, a wrong type": ("notes_get", {"id": "one"}),
    "pinned, an argument too many": ("notes_get", {"id": 1, "also": 2}),
    "pinned, nested 100,000 deep": ("notes_get", {"id": 1, "deep": NESTED}),
}


@pytest.mark.parametrize("case", list(INVALID))
async def test_arguments_that_do_not_fit_are_invalid_arguments_and_never_reach_the_upstream(case):
    r = rig()
    name, arguments = INVALID[case]

    error = error_of(await r.service.call(CALLER, name, arguments))

    assert error["kind"] == "invalid_arguments"
    assert error["message"]
    assert r.upstream.calls == []


async def test_one_call_of_a_batch_with_arguments_that_do_not_fit_is_refused_and_the_others_go():
    r = rig()
    calls = [
        {"name": "notes_get", "arguments": {"id": "one"}},
        {"name": "notes_search", "arguments": {"text": "x"}},
    ]

    result = await r.service.call(CALLER, T.CALL_READ_TOOLS, {"calls": calls})

    assert "[1] notes_get: failed" in [block["text"] for block in result["content"]]
    assert r.upstream.names() == ["notes_search"]


async def test_a_batch_lists_the_catalog_once_and_calls_each_entry_once():
    r = rig()
    calls = [{"name": "notes_get", "arguments": {"id": n}} for n in range(5)]

    result = await r.service.call(CALLER, T.CALL_READ_TOOLS, {"calls": calls})

    assert result["isError"] is False
    assert len(r.source.authorizations) == 1
    assert sorted(s.arguments["id"] for s in r.upstream.calls) == [0, 1, 2, 3, 4]


async def test_progress_reaches_the_upstream_call_and_a_batch_counts_calls_finished():
    r = rig()
    seen: list[Progress] = []

    async def sink(progress: Progress) -> None:
        seen.append(progress)

    await r.service.call(
        CALLER, T.CALL_READ_TOOL, {"name": "notes_get", "arguments": {"id": 1}}, progress=sink
    )
    await r.service.call(CALLER, "notes_get", {"id": 1}, progress=sink)
    assert [s.progress for s in r.upstream.calls] == [sink, sink]

    await r.service.call(CALLER, T.CALL_READ_TOOLS, BATCH, progress=sink)
    assert [(p.progress, p.total) for p in seen] == [(1, 2), (2, 2)]


# -- search_tools and describe_tool read the catalog only


async def test_search_finds_by_meaning_and_by_exact_name_without_calling_the_upstream():
    r = rig(search_schemas=1)

    found = data_of(await r.service.call(CALLER, T.SEARCH_TOOLS, {"query": "delete a note"}))
    exact = data_of(await r.service.call(CALLER, T.SEARCH_TOOLS, {"query": "select:notes_search"}))
    several = data_of(
        await r.service.call(CALLER, T.SEARCH_TOOLS, {"queries": ["get a note", "search notes"]})
    )

    assert found["total"] == 3
    assert found["tools"][0]["name"] == "notes_delete" and found["tools"][0]["readOnly"] is False
    assert "inputSchema" in found["tools"][0] and all("inputSchema" not in hit for hit in found["tools"][1:])
    assert exact["tools"][0]["name"] == "notes_search"
    assert [entry["query"] for entry in several["results"]] == ["get a note", "search notes"]
    assert r.upstream.calls == []


async def test_describe_gives_full_definitions_and_the_closest_names_for_unknown_ones():
    r = rig()

    data = data_of(
        await r.service.call(CALLER, T.DESCRIBE_TOOL, {"names": ["notes_get", "notes_gett", "notes_get"]})
    )

    assert data["tools"] == [
        {
            "name": "notes_get",
            "description": "Get a note by its id.",
            "readOnly": True,
            "inputSchema": NOTES_GET["inputSchema"],
        }
    ]
    assert data["unknown"] == ["notes_gett"] and "notes_get" in data["similar"]["notes_gett"]
    assert r.upstream.calls == []


# -- the tool list and the instructions


async def test_the_list_is_the_five_then_the_pinned_tools_as_the_upstream_defines_them():
    r = rig(pinned_tools=["notes_delete", "notes_archive", T.SEARCH_TOOLS, "notes_get"])

    listed = await r.service.list_tools(CALLER)

    assert [tool["name"] for tool in listed] == [
        *FIVE,
        "notes_delete",
        "notes_get",
    ]  # absent and ours left out
    assert listed[5:] == [NOTES_DELETE, NOTES_GET]
    assert r.service.is_pinned("notes_get") and not r.service.is_pinned(T.SEARCH_TOOLS)


async def test_a_listed_pinned_tool_is_a_copy_the_transport_may_change():
    r = rig()

    (await r.service.list_tools(CALLER))[-1]["name"] = "changed"

    assert [tool["name"] for tool in await r.service.list_tools(CALLER)][-1] == "notes_get"


async def test_the_instructions_are_the_guidance_then_the_upstreams_cut_at_max_instructions():
    assert (await rig().service.instructions(CALLER)).startswith(T.GUIDANCE)
    assert INSTRUCTIONS in await rig().service.instructions(CALLER)
    assert await rig(instructions="").service.instructions(CALLER) == T.GUIDANCE

    cut = await rig(instructions="y" * 5_000, max_instructions=1_000).service.instructions(CALLER)
    assert "y" * 1_000 in cut and "y" * 1_001 not in cut
    assert "cut here, at 1,000 of 5,000 characters" in cut


async def test_the_pinned_input_schema_is_the_one_listed_to_the_caller():
    r = rig()

    assert await r.service.pinned_input_schema(CALLER, "notes_get") == NOTES_GET["inputSchema"]
    assert await r.service.pinned_input_schema(CALLER, "notes_archive") is None


# -- telemetry: tool names and outcomes, nothing a caller sent


async def test_each_call_is_counted_by_tool_and_outcome_and_nothing_else():
    r = rig()
    r.upstream.answers["notes_search"] = refusal(401)
    r.upstream.answers["notes_delete"] = CALL_FAILURES["unavailable"]

    await r.service.call(CALLER, T.SEARCH_TOOLS, {"query": "zanzibar-pelican"})
    await r.service.call(CALLER, T.DESCRIBE_TOOL, {"names": ["notes_get"]})
    await r.service.call(CALLER, T.CALL_READ_TOOL, {"name": "notes_get", "arguments": {"id": 424242}})
    await r.service.call(CALLER, T.CALL_READ_TOOL, {"name": "notes_delete", "arguments": {"id": 1}})
    await r.service.call(CALLER, T.CALL_WRITE_TOOL, {"name": "notes_delete", "arguments": {"id": 1}})
    await r.service.call(CALLER, T.CALL_READ_TOOLS, BATCH | {"calls": BATCH["calls"][:1]})
    await r.service.call(CALLER, "notes_get", {"id": 1})
    with pytest.raises(CallerRefused):
        await r.service.call(CALLER, T.CALL_READ_TOOL, {"name": "notes_search", "arguments": {"text": "x"}})

    counted = {dims for (name, dims), _n in r.telemetry.counts.items() if name == "tool_call"}
    assert counted == {
        (("outcome", "ok"), ("tool", T.SEARCH_TOOLS)),
        (("outcome", "ok"), ("tool", T.DESCRIBE_TOOL)),
        (("outcome", "ok"), ("tool", T.CALL_READ_TOOL)),
        (("outcome", "error"), ("tool", T.CALL_READ_TOOL)),  # not read-only
        (("outcome", "error"), ("tool", T.CALL_WRITE_TOOL)),  # unavailable
        (("outcome", "ok"), ("tool", T.CALL_READ_TOOLS)),
        (("outcome", "ok"), ("tool", "pinned")),
        (("outcome", "unauthorized"), ("tool", T.CALL_READ_TOOL)),
    }
    assert r.telemetry.total("tool_call", tool=T.CALL_READ_TOOL) == 3
    assert {name for name, _dims in r.events} == {"tool_call", "tool_call_ms"}
    for _name, dims in r.events:
        assert set(dims) <= {"tool", "outcome"} and dims["tool"] in {*FIVE, "pinned"}
    sent_text = repr(r.events)
    for secret in (TOKEN, "unit-secret", "zanzibar", "424242", "notes_get", "notes_delete"):
        assert secret not in sent_text


# -- a pinned tool is listed as the upstream declares it: its error results must fit its schema too

NOTES_COUNT = {
    "name": "notes_count",
    "description": "Count the notes.",
    "inputSchema": {"type": "object", "properties": {"folder": {"type": "string"}}, "required": ["folder"]},
    "outputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]},
    "annotations": {"readOnlyHint": True},
}


@pytest.mark.parametrize(
    "case", ["invalid arguments", "upstream failure", "upstream error that fits", "listing failed"]
)
async def test_a_pinned_tools_error_carries_structured_content_only_when_it_fits_the_declared_schema(case):
    # Every request lists again (no fresh catalog), so a listing can fail after one was shown.
    r = rig(tools=[*TOOLS, NOTES_COUNT], pinned_tools=["notes_count"], catalog_ttl=0, catalog_max_age=0)
    arguments: dict[str, Any] = {"folder": "inbox"}
    if case == "invalid arguments":
        arguments = {"folder": 5}  # refused by the proxy: its own {"error": ...} fits no count
    elif case == "upstream failure":
        r.upstream.answers["notes_count"] = failure("unavailable", "the upstream failed with HTTP 503")
    elif case == "upstream error that fits":
        r.upstream.answers["notes_count"] = {
            "content": [{"type": "text", "text": "counted what it could"}],
            "structuredContent": {"count": 0},
            "isError": True,
        }
    else:
        await r.service.list_tools(CALLER)  # the client saw the tool and its schema
        r.source.fail = failure("connect", "could not connect to the upstream")

    result = await r.service.call(CALLER, "notes_count", arguments)

    assert result["isError"] is True
    assert result["content"][0]["text"]  # the sentence stays for the model and the person
    if case == "upstream error that fits":
        assert result["structuredContent"] == {"count": 0}
    else:
        assert "structuredContent" not in result


async def test_a_pinned_tool_without_an_output_schema_keeps_the_proxys_structured_error():
    r = rig()  # notes_get declares no outputSchema
    assert error_of(await r.service.call(CALLER, "notes_get", {"id": "one"}))["kind"] == "invalid_arguments"


# -- tools the upstream marks _meta["anthropic/alwaysLoad"]


def marked(definition: dict[str, Any], value: Any = True) -> dict[str, Any]:
    return {**definition, "_meta": {"anthropic/alwaysLoad": value}}


async def test_a_tool_marked_always_load_is_listed_as_a_pinned_one_and_called_directly():
    r = rig(tools=[NOTES_GET, marked(NOTES_SEARCH), NOTES_DELETE])

    listed = await r.service.list_tools(CALLER)
    result = await r.service.call(CALLER, "notes_search", {"text": "milk"})

    assert [tool["name"] for tool in listed] == [*FIVE, "notes_get", "notes_search"]
    assert listed[-1] == marked(NOTES_SEARCH)  # as the upstream defines it
    assert not result.get("isError") and r.upstream.names() == ["notes_search"]
    assert await r.service.is_pinned_for(CALLER, "notes_search")
    assert not await r.service.is_pinned_for(CALLER, "notes_delete")


@pytest.mark.parametrize("value", ["true", 1, {"on": True}, None, False])
async def test_a_mark_that_is_not_true_lists_nothing_and_calls_nothing(value):
    r = rig(tools=[NOTES_GET, marked(NOTES_SEARCH, value)])

    listed = [tool["name"] for tool in await r.service.list_tools(CALLER)]

    assert listed == [*FIVE, "notes_get"]
    with pytest.raises(UnknownTool):
        await r.service.call(CALLER, "notes_search", {"text": "milk"})
    assert r.upstream.calls == []


async def test_marked_tools_are_bounded_first_by_name_and_none_clashes_with_the_five():
    many = [marked({**NOTES_SEARCH, "name": f"notes_find_{i}"}) for i in range(5)]
    clash = marked({**NOTES_SEARCH, "name": T.SEARCH_TOOLS})
    r = rig(tools=[*many, clash, marked(NOTES_GET)], always_load_tools=3)

    listed = [tool["name"] for tool in await r.service.list_tools(CALLER)]

    # notes_get is pinned by the operator already: listed once, and not counted among the three.
    assert listed == [*FIVE, "notes_get", "notes_find_0", "notes_find_1", "notes_find_2"]
    with pytest.raises(UnknownTool):
        await r.service.call(CALLER, "notes_find_3", {"text": "x"})
    assert [
        tool["name"] for tool in await rig(tools=many, always_load_tools=0).service.list_tools(CALLER)
    ] == [*FIVE]
