"""Logs and metrics carry tool names, outcomes and timings: never queries, arguments, results or tokens."""

from __future__ import annotations

import httpx
import pytest

from fixtures.logs import capture_logs
from mcp_wire import call, legacy, modern
from toolsearch.app import build_proxy
from toolsearch.settings import Settings

TOKEN = "Bearer s3cr3t-T0KEN-abcdef"
QUERY = "zanzibar-pelican-quarterly"
ARGUMENT = "argument-value-7d1f3"
SECRETS = [TOKEN, "s3cr3t-T0KEN-abcdef", QUERY, ARGUMENT, "[demo] gcal_get_event ran"]


@pytest.fixture
def captured():
    with capture_logs() as handler:
        yield handler


async def test_nothing_the_caller_sends_or_gets_appears_in_logs_or_metrics(captured):
    proxy = build_proxy(Settings())
    transport = httpx.ASGITransport(app=proxy.app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://t", headers={"Authorization": TOKEN}
    ) as c:
        await c.post("/mcp", **legacy("initialize", {"protocolVersion": "2025-11-25"}))
        await c.post("/mcp", **modern("server/discover"))
        await c.post("/mcp", **call("search_tools", {"query": QUERY}))
        await c.post("/mcp", **call("search_tools", {"queries": [QUERY, "calendar"]}))
        await c.post(
            "/mcp", **call("call_read_tool", {"name": "gcal_get_event", "arguments": {"event_id": ARGUMENT}})
        )
        await c.post(
            "/mcp", **call("call_read_tool", {"name": "gcal_get_event", "arguments": {"event_id": 1}})
        )
        await c.post("/mcp", **call("call_read_tool", {"name": ARGUMENT, "arguments": {}}))
        await c.post(
            "/mcp",
            **call("call_write_tool", {"name": "gcal_delete_event", "arguments": {"event_id": ARGUMENT}}),
        )
        await c.post("/mcp", **call("describe_tool", {"names": [QUERY]}))
        bad = modern("tools/call", {"name": "search_tools", "arguments": {"query": QUERY}}, name_header=QUERY)
        await c.post("/mcp", **bad)
    assert captured.lines, "the proxy logged nothing: the test would prove nothing"
    assert any("gcal_get_event" in line for line in captured.lines), "tool names should be logged"
    for line in captured.lines:
        for secret in SECRETS:
            assert secret not in line
    metric_text = repr(proxy.telemetry.counts)
    for secret in SECRETS:
        assert secret not in metric_text
    assert proxy.telemetry.total("tool_call", tool="call_read_tool") >= 3
