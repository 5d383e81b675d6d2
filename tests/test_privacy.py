"""Logs and metrics carry tool names, outcomes and timings: never queries, arguments, results or tokens."""

from __future__ import annotations

import logging
import time

import httpx
import pytest

from fixtures.logs import capture_logs
from fixtures.mcp_wire import call, legacy, modern
from toolsearch.app import build_proxy
from toolsearch.aws.lambda_support import catalog_tier
from toolsearch.ops.logs import configure_logging
from toolsearch.ops.telemetry import Telemetry
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


# -- whatever the log level, no credential reaches a log

AWS_KEY_ID = "ASIAFAKEKEYID7Q2W3E4R"
AWS_SECRET = "fake/SecretAccessKey+9f8e7d6c5b4a3210zyxwvuts"
AWS_SESSION_TOKEN = "FakeSessionToken//////////wEaCXVzLWVhc3QtMSJIMEYCIQDfake0123456789abcdef"


@pytest.fixture
def debug_logging():
    """`configure_logging("DEBUG")`, as TOOLSEARCH_LOG_LEVEL=DEBUG does, capturing every record."""
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    saved_levels = {name: logging.getLogger(name).level for name in logging.root.manager.loggerDict}
    configure_logging("DEBUG")
    try:
        with capture_logs() as handler:
            yield handler
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)


@pytest.mark.npm
async def test_debug_logs_carry_no_aws_credentials(debug_logging, dynalite, dynamo_table, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", AWS_SESSION_TOKEN)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynalite.endpoint_url)
    assert logging.getLogger("toolsearch").isEnabledFor(logging.DEBUG)
    # The tier as the Lambda handler builds it: its own boto3 client, credentials from the environment.
    tier = catalog_tier(Settings(dynamodb_table=dynamo_table), Telemetry())
    key = "ab" * 32

    await tier.put(key, b'{"tools": []}', fetched_at=time.time())
    stored = await tier.get(key)

    assert stored is not None and stored.data == b'{"tools": []}'  # the calls really reached dynalite
    text = debug_logging.text()
    for secret in (AWS_KEY_ID, AWS_SECRET, AWS_SESSION_TOKEN):
        assert secret not in text


async def test_debug_logs_carry_no_token_from_http_upstream_calls(debug_logging, sdk_upstream_url):
    """httpx and httpcore carry the caller's Authorization to the upstream, over a real socket."""
    proxy = build_proxy(Settings(upstream=sdk_upstream_url))
    transport = httpx.ASGITransport(app=proxy.app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://t", headers={"Authorization": TOKEN}
    ) as c:
        found = await c.post("/mcp", **call("search_tools", {"query": "echo"}))
        await c.post("/mcp", **call("call_read_tool", {"name": "echo", "arguments": {"text": ARGUMENT}}))
    await proxy.upstream.http.aclose()

    assert found.status_code == 200 and found.json()["result"]["structuredContent"]["tools"]
    assert logging.getLogger("toolsearch").isEnabledFor(logging.DEBUG)
    for line in debug_logging.lines:
        for secret in SECRETS:
            assert secret not in line
