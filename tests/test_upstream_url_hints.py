"""An upstream URL of the wrong shape: the error says which URL was most likely meant, and the proxy
goes nowhere it was not configured to (no redirect, no `Link` successor followed).

The upstream here is a small ASGI app that is not an MCP server at the configured path: it answers
every request with one status (404, 405, or a redirect), a `Link` naming a successor, and records
each path it was asked for.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fixtures.mcp_wire import call
from fixtures.servers import read_asgi_body, serve_in_thread
from toolsearch.app import build_proxy
from toolsearch.settings import Settings
from toolsearch.upstream.endpoint_hint import likely_endpoint

G = "https://gateway.example.com"


@pytest.mark.parametrize(
    ("url", "meant"),
    [
        (f"{G}/servers/abc", f"{G}/servers/abc/mcp"),
        (f"{G}/servers/abc/", f"{G}/servers/abc/mcp"),
        (f"{G}/servers/abc/sse", f"{G}/servers/abc/mcp"),
        (f"{G}/servers/abc/message", f"{G}/servers/abc/mcp"),
        (f"{G}/v1/servers/abc/mcp", f"{G}/servers/abc/mcp"),
        (f"{G}/sse", f"{G}/mcp"),
        (G, f"{G}/mcp"),
        (f"{G}/prefix/v1/servers/abc/mcp", f"{G}/prefix/servers/abc/mcp"),
        (
            "http://user:s3cret@127.0.0.1:4444/servers/abc/sse?key=s3cret",
            "http://127.0.0.1:4444/servers/abc/mcp",
        ),
        ("http://[::1]:4444/servers/abc", "http://[::1]:4444/servers/abc/mcp"),
        (f"{G}/servers/abc/mcp", None),  # the usual shape: nothing to suggest
        (f"{G}/mcp", None),
        (f"{G}/v1/mcp", None),
    ],
)
def test_the_endpoint_a_url_most_likely_meant(url, meant):
    assert likely_endpoint(url) == meant


class NotMcp:
    """Answers every request with `status` (and `location`), a successor `Link`, and records paths."""

    def __init__(self, status: int, location: str | None = None) -> None:
        self.status = status
        self.location = location
        self.paths: list[str] = []

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await read_asgi_body(receive)
        self.paths.append(scope["path"])
        headers = [
            (b"content-type", b"application/json"),
            (b"link", b'</v1/servers/abc/mcp>; rel="successor-version"'),
        ]
        if self.location is not None:
            headers.append((b"location", self.location.encode()))
        body = json.dumps({"detail": "Method Not Allowed" if self.status == 405 else "Not Found"}).encode()
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def serving(app: NotMcp) -> Iterator[str]:
    with serve_in_thread(app) as base:
        yield base


async def search_error(upstream_url: str) -> dict[str, Any]:
    proxy = build_proxy(
        Settings(upstream=upstream_url, embedder="none", upstream_timeout=5.0, list_retries=0)
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app),
        base_url="http://proxy",
        headers={"Authorization": "Bearer tok"},
        timeout=30,
    ) as client:
        reply = await client.post("/mcp", **call("search_tools", {"query": "invoice"}))
    await proxy.upstream.aclose()
    assert reply.status_code == 200, reply.text
    result = reply.json()["result"]
    assert result["isError"] is True, result
    return result["structuredContent"]["error"]


@pytest.mark.parametrize(
    ("path", "status", "meant"),
    [
        ("/servers/abc", 405, "/servers/abc/mcp"),
        ("/servers/abc/sse", 405, "/servers/abc/mcp"),
        ("/v1/servers/abc/mcp", 404, "/servers/abc/mcp"),
    ],
)
async def test_an_upstream_url_of_the_wrong_shape_is_told_the_endpoint_and_nothing_else_is_asked(
    path, status, meant
):
    app = NotMcp(status)
    with serving(app) as base:
        # Credentials in the URL's user information or query stay out of what the caller is told.
        secret_url = base.replace("http://", "http://deployer:s3cret@") + path + "?key=s3cret"
        error = await search_error(secret_url)
    assert error["kind"] == "bad_response"
    assert f"set it to {base}{meant} " in error["message"]
    assert "s3cret" not in json.dumps(error)
    assert set(app.paths) == {path}  # the successor Link was not followed


async def test_an_upstream_url_of_the_usual_shape_is_told_to_check_it_without_a_guess():
    app = NotMcp(404)
    with serving(app) as base:
        error = await search_error(base + "/gateway/mcp")
    assert "streamable-HTTP MCP endpoint" in error["message"]
    assert "set it to" not in error["message"]


async def test_a_redirect_is_named_and_not_followed():
    app = NotMcp(307, location="/mcp/")
    with serving(app) as base:
        error = await search_error(base + "/mcp")
    assert error["kind"] == "bad_response"
    assert "redirect (HTTP 307)" in error["message"]
    assert f"if {base}/mcp/ is the MCP endpoint" in error["message"]
    assert set(app.paths) == {"/mcp"}
