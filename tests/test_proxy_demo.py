"""The whole proxy over a real socket, driven by the official MCP SDK client, in both eras.

Upstream: the built-in demo (an in-process MCP server); a counting transport
shows which requests reach it.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest
from mcp.client.client import Client

from fixtures.mcp_wire import call
from fixtures.servers import serve_in_thread
from toolsearch.app import build_proxy
from toolsearch.server.demo import demo_app
from toolsearch.settings import Settings

MODES = ["2026-07-28", "legacy"]


class CountingTransport(httpx.AsyncBaseTransport):
    """Passes requests to the demo upstream and remembers which tools/call reached it."""

    def __init__(self) -> None:
        self.inner = httpx.ASGITransport(app=demo_app())
        self.calls: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        if body.get("method") == "tools/call":
            self.calls.append(body["params"]["name"])
        return await self.inner.handle_async_request(request)


@pytest.fixture(scope="module")
def demo_proxy():
    transport = CountingTransport()
    proxy = build_proxy(Settings(), http=httpx.AsyncClient(transport=transport))
    with serve_in_thread(proxy.app) as base:
        yield base + "/mcp", transport


@pytest.fixture(params=MODES)
def mode(request):
    return request.param


# Each test opens its own client: the SDK's client must close in the task that opened it.


async def test_lists_exactly_the_five_tools(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == [
            "search_tools",
            "describe_tool",
            "call_read_tool",
            "call_read_tools",
            "call_write_tool",
        ]


async def test_search_finds_a_tool_by_what_the_user_says(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        result = await client.call_tool("search_tools", {"query": "calendar event meeting", "limit": 5})
        assert not result.is_error
        data = result.structured_content
        assert data["total"] > 300
        names = [tool["name"] for tool in data["tools"]]
        assert len(names) == 5
        assert any(name in ("gcal_create_event", "outlook_create_event") for name in names)
        assert ["inputSchema" in tool for tool in data["tools"]] == [True, True, True, False, False]


async def test_several_queries_get_a_result_list_each(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        result = await client.call_tool(
            "search_tools",
            {"queries": ["delete a calendar event", "list my calendars"], "limit": 3, "schemas": False},
        )
        results = result.structured_content["results"]
        assert [entry["query"] for entry in results] == ["delete a calendar event", "list my calendars"]
        assert all(len(entry["tools"]) == 3 for entry in results)
        assert all("inputSchema" not in tool for entry in results for tool in entry["tools"])
        assert "gcal_delete_event" in [tool["name"] for tool in results[0]["tools"]]


async def test_exact_name_query_puts_that_tool_first(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        for query in ("gcal_share_calendar", "select:gcal_share_calendar"):
            result = await client.call_tool("search_tools", {"query": query})
            assert result.structured_content["tools"][0]["name"] == "gcal_share_calendar"


async def test_search_arguments_are_checked(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        both = await client.call_tool("search_tools", {"query": "a", "queries": ["b"]})
        assert both.is_error
        too_many = await client.call_tool("search_tools", {"query": "a", "limit": 99})
        assert too_many.is_error and "limit" in too_many.content[0].text


async def test_describe_known_and_unknown_names(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        result = await client.call_tool(
            "describe_tool", {"names": ["gcal_get_event", "gcal_get_evnt", "zzz"]}
        )
        data = result.structured_content
        assert [tool["name"] for tool in data["tools"]] == ["gcal_get_event"]
        assert data["tools"][0]["readOnly"] is True
        assert data["tools"][0]["inputSchema"]["required"] == ["event_id"]
        assert data["unknown"] == ["gcal_get_evnt", "zzz"]
        assert data["similar"]["gcal_get_evnt"][0] == "gcal_get_event"


async def test_read_call_reaches_the_upstream_and_returns_its_result(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        _, transport = demo_proxy
        before = len(transport.calls)
        result = await client.call_tool(
            "call_read_tool", {"name": "gcal_get_event", "arguments": {"event_id": "e1"}}
        )
        assert not result.is_error
        assert result.structured_content == {
            "tool": "gcal_get_event",
            "arguments": {"event_id": "e1"},
            "demo": True,
        }
        assert transport.calls[before:] == ["gcal_get_event"]


async def test_write_tool_is_refused_by_the_read_tools(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        _, transport = demo_proxy
        before = len(transport.calls)
        arguments = {"name": "gcal_delete_event", "arguments": {"event_id": "e1"}}
        result = await client.call_tool("call_read_tool", arguments)
        assert result.is_error
        assert "call_write_tool" in result.content[0].text
        unmarked = await client.call_tool(
            "call_read_tool", {"name": "gcal_quick_add", "arguments": {"text": "x"}}
        )
        assert unmarked.is_error  # no annotations: a write
        assert transport.calls[before:] == []


async def test_arguments_that_do_not_fit_never_reach_the_upstream(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        _, transport = demo_proxy
        before = len(transport.calls)
        missing = await client.call_tool("call_read_tool", {"name": "gcal_get_event", "arguments": {}})
        assert missing.is_error
        error = missing.structured_content["error"]
        assert error["kind"] == "invalid_arguments"
        assert "event_id" in error["problems"][0]
        assert error["inputSchema"]["required"] == ["event_id"]
        wrong_type = await client.call_tool(
            "call_read_tool", {"name": "gcal_get_event", "arguments": {"event_id": 5}}
        )
        assert wrong_type.is_error and "is not of type 'string'" in wrong_type.content[0].text
        assert transport.calls[before:] == []


async def test_a_clear_typo_is_answered_with_the_right_tool(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        result = await client.call_tool(
            "call_read_tool", {"name": "gcal_get_evnt", "arguments": {"event_id": "e"}}
        )
        assert result.is_error
        error = result.structured_content["error"]
        assert error["didYouMean"] == "gcal_get_event"
        assert error["inputSchema"]["required"] == ["event_id"]


async def test_batch_of_reads_labels_each_result_and_isolates_failures(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        result = await client.call_tool(
            "call_read_tools",
            {
                "calls": [
                    {"name": "gcal_get_event", "arguments": {"event_id": "a"}},
                    {"name": "gcal_delete_event", "arguments": {"event_id": "b"}},
                    {"name": "gcal_list_calendars"},
                ]
            },
        )
        assert not result.is_error
        labels = [block.text for block in result.content if re.match(r"\[\d+\] ", block.text)]
        assert labels[:3] == [
            "[1] gcal_get_event: ok",
            "[2] gcal_delete_event: failed",
            "[3] gcal_list_calendars: ok",
        ]


async def test_write_call_goes_through_call_write_tool(mode, demo_proxy):
    async with Client(demo_proxy[0], mode=mode) as client:
        _, transport = demo_proxy
        arguments = {"calendar_id": "primary", "summary": "Standup", "start": "2026-12-01T09:00:00Z"}
        result = await client.call_tool(
            "call_write_tool", {"name": "gcal_create_event", "arguments": arguments}
        )
        assert not result.is_error
        assert result.structured_content["arguments"] == arguments
        assert transport.calls[-1] == "gcal_create_event"


async def test_operator_overrides_read_only_both_ways():
    proxy = build_proxy(Settings(write_tools=["gcal_get_event"], read_tools=["gcal_quick_add"]))
    transport = httpx.ASGITransport(app=proxy.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        refused = await http.post(
            "/mcp", **call("call_read_tool", {"name": "gcal_get_event", "arguments": {"event_id": "e"}})
        )
        assert refused.json()["result"]["structuredContent"]["error"]["kind"] == "not_read_only"
        allowed = await http.post(
            "/mcp", **call("call_read_tool", {"name": "gcal_quick_add", "arguments": {"text": "x"}})
        )
        assert allowed.json()["result"]["isError"] is False
        found = await http.post(
            "/mcp", **call("describe_tool", {"names": ["gcal_get_event", "gcal_quick_add"]})
        )
        flags = {t["name"]: t["readOnly"] for t in found.json()["result"]["structuredContent"]["tools"]}
        assert flags == {"gcal_get_event": False, "gcal_quick_add": True}
