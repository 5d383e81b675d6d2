"""One translation per boundary: a failure raised at any upstream step gets the same answer.

The proxy in process (`build_proxy`) over the demo upstream, behind an httpx transport told to fail
one step (`tools/list`, the catalog's listing, or `tools/call`) with an HTTP status or one of httpx's
own failures. A failure the upstream answers becomes one tool result whichever step it came from
(`results.upstream_failure`), and its refusal of the caller one HTTP answer, on /mcp and /catalog
alike (`HttpEdge.answer_for`).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fixtures.mcp_wire import call, modern
from toolsearch.app import build_proxy
from toolsearch.server.demo import demo_app
from toolsearch.settings import Settings

TOKEN = "Bearer boundary-token-7c1e"
TOOL = "ha_get_states"  # a read-only tool of the demo catalog
CHALLENGE = 'Bearer error="invalid_token", error_description="the token was revoked"'


class FailingStep(httpx.AsyncBaseTransport):
    """The demo upstream, failing every request of one method as told (a status, or an httpx error)."""

    def __init__(self, method: str, fail: int | type[httpx.TransportError]) -> None:
        self.inner = httpx.ASGITransport(app=demo_app())
        self.method, self.fail = method, fail

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if json.loads(request.content or b"{}").get("method") != self.method:
            return await self.inner.handle_async_request(request)
        if not isinstance(self.fail, int):
            raise self.fail("told to fail", request=request)
        headers = {"WWW-Authenticate": CHALLENGE} if self.fail == 401 else {}
        return httpx.Response(self.fail, json={"error": "told to fail"}, headers=headers)


async def answer(
    method: str, fail: int | type[httpx.TransportError], path: str, **post: Any
) -> httpx.Response:
    proxy = build_proxy(Settings(), http=httpx.AsyncClient(transport=FailingStep(method, fail)))
    transport = httpx.ASGITransport(app=proxy.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client:
        headers = {**post.pop("headers", {}), "Authorization": TOKEN}
        if path == "/catalog":
            return await client.get(path, headers=headers)
        return await client.post(path, headers=headers, **post)


def tool_error(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["isError"] is True, result
    return result["structuredContent"]["error"]


FAILURES: list[int | type[httpx.TransportError]] = [503, 429, 413, 404, httpx.ConnectError, httpx.ReadTimeout]


@pytest.mark.parametrize("fail", FAILURES, ids=str)
async def test_an_upstream_failure_is_one_tool_result_from_the_listing_or_from_the_call(fail):
    listed = tool_error(await answer("tools/list", fail, "/mcp", **call("search_tools", {"query": "states"})))
    called = tool_error(
        await answer("tools/call", fail, "/mcp", **call("call_read_tool", {"name": TOOL, "arguments": {}}))
    )
    assert called.pop("tool") == TOOL  # a call's result names its tool; the rest is the same translation
    assert listed == called


async def test_the_tool_result_of_an_unavailable_upstream_is_as_it_was():
    error = tool_error(
        await answer("tools/call", 503, "/mcp", **call("call_read_tool", {"name": TOOL, "arguments": {}}))
    )
    assert error == {
        "kind": "unavailable",
        "message": "the upstream failed with HTTP 503",
        "tool": TOOL,
        "status": 503,
    }


async def test_a_timeout_is_one_sentence_wherever_httpx_raised_it():
    error = tool_error(
        await answer(
            "tools/call", httpx.ReadTimeout, "/mcp", **call("call_read_tool", {"name": TOOL, "arguments": {}})
        )
    )
    assert (error["kind"], error["message"]) == ("timeout", "the upstream did not answer in time")


def refusal_of(response: httpx.Response) -> tuple[int, str, dict[str, Any]]:
    body = response.json()
    return response.status_code, response.headers["www-authenticate"], body.get("error")


async def test_a_refusal_is_one_http_answer_from_the_listing_or_the_call_on_mcp_and_catalog():
    listing = await answer("tools/list", 401, "/mcp", **call("search_tools", {"query": "states"}))
    calling = await answer(
        "tools/call", 401, "/mcp", **call("call_read_tool", {"name": TOOL, "arguments": {}})
    )
    tools_list = await answer("tools/list", 401, "/mcp", **modern("tools/list"))
    catalog = await answer("tools/list", 401, "/catalog")

    status, challenge, error = refusal_of(listing)
    assert (status, error["code"]) == (401, -32000)
    assert 'error="invalid_token"' in challenge and "resource_metadata=" in challenge
    assert "the token was revoked" in error["message"]
    for other in (calling, tools_list):
        assert refusal_of(other) == (status, challenge, error)
    catalog_status, catalog_challenge, catalog_error = refusal_of(catalog)
    assert (catalog_status, catalog_challenge) == (status, challenge)
    assert catalog_error == {"kind": "unauthorized", "message": error["message"]}


async def test_another_upstream_failure_on_the_catalog_route_is_a_502_naming_its_kind():
    response = await answer("tools/list", 503, "/catalog")
    assert response.status_code == 502
    assert response.json()["error"] == {
        "kind": "unavailable",
        "message": "The upstream could not list tools: the upstream failed with HTTP 503",
    }
