"""Progress relayed from the upstream to the caller who asked for it.

A tools/call with `_meta.progressToken`, from a caller that accepts SSE, is answered with the
upstream's `notifications/progress` for that call (under the caller's token) and then the
response, as SSE events. The real parts: the official SDK as upstream (both eras) and as caller
(its progress callback); a hostile upstream of our own for floods, wrong tokens, malformed
progress, broken streams and cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from fixtures.logs import capture_logs
from fixtures.mcp_wire import call, legacy
from fixtures.servers import read_asgi_body, serve_in_thread
from toolsearch.app import build_proxy
from toolsearch.server.streaming import accepts_event_stream
from toolsearch.service.progress import MAX_MESSAGE_CHARS, MAX_RELAYED, caller_token
from toolsearch.settings import Settings
from toolsearch.upstream.sse import SSEParser

MODERN = "2026-07-28"
SSE_ACCEPT = "application/json, text/event-stream"


def connect(url: str, mode: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": "Bearer carol"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


@pytest.fixture(scope="module")
def proxy_urls(sdk_upstream, legacy_upstream):
    """A proxy in front of each upstream era, with report_progress also pinned beside the five."""
    urls = {}
    with contextlib.ExitStack() as stack:
        for era, upstream in (("modern", sdk_upstream), ("legacy", legacy_upstream)):
            settings = Settings(upstream=upstream.url, embedder="none", pinned_tools=["report_progress"])
            urls[era] = stack.enter_context(serve_in_thread(build_proxy(settings).app)) + "/mcp"
        yield urls


async def call_with_progress(
    url: str, mode: str, tool: str, arguments: dict[str, Any]
) -> tuple[Any, list[tuple[float, float | None, str | None]]]:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect(url, mode) as client:
        result = await client.call_tool(tool, arguments, progress_callback=on_progress)
    return result, seen


# -- the official SDK on both sides


@pytest.mark.parametrize("upstream_era", ["modern", "legacy"])
@pytest.mark.parametrize("mode", [MODERN, "legacy"])
@pytest.mark.parametrize("how", ["call_read_tool", "call_write_tool", "pinned"])
async def test_the_upstreams_progress_reaches_the_sdk_clients_callback(proxy_urls, upstream_era, mode, how):
    if how == "pinned":
        tool, arguments = "report_progress", {"steps": 4}
    else:
        tool, arguments = how, {"name": "report_progress", "arguments": {"steps": 4}}

    result, seen = await call_with_progress(proxy_urls[upstream_era], mode, tool, arguments)

    assert not result.is_error, result.content
    assert result.structured_content == {"steps": 4}
    assert seen == [(step, 4, f"step {step} of 4") for step in (1, 2, 3, 4)]


async def test_a_batch_reports_calls_finished_not_the_calls_own_progress(proxy_urls):
    calls = [
        {"name": "report_progress", "arguments": {"steps": 5}},
        {"name": "echo", "arguments": {"message": "hi"}},
        {"name": "report_progress", "arguments": {"steps": 2}},
    ]

    result, seen = await call_with_progress(proxy_urls["modern"], MODERN, "call_read_tools", {"calls": calls})

    assert not result.is_error, result.content
    assert seen == [(n, 3, f"{n} of 3 calls finished") for n in (1, 2, 3)]


async def test_search_and_describe_answer_one_json_response_even_when_progress_is_asked(proxy_urls):
    async with httpx.AsyncClient(headers={"Authorization": "Bearer carol"}, timeout=30) as http:
        for tool, arguments in (
            ("search_tools", {"query": "report"}),
            ("describe_tool", {"names": ["echo"]}),
        ):
            request = call(tool, arguments)
            request["json"]["params"]["_meta"]["progressToken"] = "p"
            reply = await http.post(proxy_urls["modern"], **request)
            assert reply.headers["content-type"] == "application/json"
            assert reply.json()["result"]["isError"] is False


@pytest.mark.parametrize("asked", ["no token", "json only", "no progress sent"])
async def test_without_progress_to_send_the_answer_is_one_json_response_as_before(proxy_urls, asked):
    request = call("call_read_tool", {"name": "report_progress", "arguments": {"steps": 2}})
    if asked != "no token":
        request["json"]["params"]["_meta"]["progressToken"] = "p"
    if asked == "json only":
        request["headers"]["Accept"] = "application/json"
    if asked == "no progress sent":  # echo reports nothing: nothing to stream
        request["json"]["params"]["arguments"] = {"name": "echo", "arguments": {"message": "hi"}}
    async with httpx.AsyncClient(headers={"Authorization": "Bearer carol"}, timeout=30) as http:
        reply = await http.post(proxy_urls["modern"], **request)

    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert body["id"] == request["json"]["id"] and body["result"]["isError"] is False


# -- a hostile upstream


@dataclass
class ScriptedProgress:
    """A modern upstream with one read tool, `work`, whose answer is a script of SSE events.

    `script(token, request_id)` yields what to send: an event's JSON-RPC message or its raw bytes,
    or the string "wait", which holds the stream until `release` is set or the proxy goes away. It
    records the progress token each call carried and how each call's stream ended.
    """

    script: Callable[[Any, Any], Iterator[Any]]
    description: str = "Works."
    instructions: str = ""
    release: threading.Event = field(default_factory=threading.Event)
    tokens: list[Any] = field(default_factory=list)
    endings: list[str] = field(default_factory=list)  # "answered" | "disconnected" | "released"

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        message = json.loads(await read_asgi_body(receive))
        method, request_id = message.get("method"), message.get("id")
        if method == "server/discover":
            result = {
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}},
                "instructions": self.instructions,
            }
            await _json(send, {"jsonrpc": "2.0", "id": request_id, "result": result})
            return
        if method == "tools/list":
            work = {
                "name": "work",
                "description": self.description,
                "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": True},
            }
            await _json(send, {"jsonrpc": "2.0", "id": request_id, "result": {"tools": [work]}})
            return
        token = message["params"].get("_meta", {}).get("progressToken")
        self.tokens.append(token)
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for item in self.script(token, request_id):
            if item == "wait":
                ending = await self._hold(receive)
                if ending == "disconnected":
                    self.endings.append(ending)
                    return
                self.endings.append(ending)
                continue
            raw = item if isinstance(item, bytes) else json.dumps(item).encode()
            data = b"event: message\ndata: " + raw + b"\n\n"
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        if not self.endings:
            self.endings.append("answered")

    async def _hold(self, receive: Any) -> str:
        disconnect = asyncio.ensure_future(receive())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.release.is_set():
                disconnect.cancel()
                return "released"
            done, _ = await asyncio.wait({disconnect}, timeout=0.01)
            if done:
                return "disconnected"
        return "timed out"


async def _json(send: Any, body: Any) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def progress(token: Any, value: Any, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": token, "progress": value, **params},
    }


def answer(request_id: Any, text: str = "done") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}}


@pytest.fixture
def hostile_proxy() -> Iterator[Callable[[Callable[[Any, Any], Iterator[Any]]], Any]]:
    """Start a scripted upstream and a proxy in front of it; yields (upstream, proxy, proxy URL)."""
    with contextlib.ExitStack() as stack:

        def start(script: Callable[[Any, Any], Iterator[Any]]) -> tuple[ScriptedProgress, Any, str]:
            upstream = ScriptedProgress(script)
            upstream_url = stack.enter_context(serve_in_thread(upstream)) + "/mcp"
            proxy = build_proxy(Settings(upstream=upstream_url, embedder="none"))
            return upstream, proxy, stack.enter_context(serve_in_thread(proxy.app)) + "/mcp"

        yield start


def events_of(body: bytes) -> list[dict[str, Any]]:
    parser = SSEParser(max_event_chars=10_000_000)
    return [json.loads(e.data) for e in parser.feed(body.decode())]


async def stream_events(url: str, request: dict[str, Any]) -> tuple[httpx.Response, list[dict[str, Any]]]:
    async with httpx.AsyncClient(headers={"Authorization": "Bearer carol"}, timeout=30) as http:
        reply = await http.post(url, **request)
    return reply, events_of(reply.content)


def asking(token: Any, *, era: str = MODERN, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    if era == MODERN:
        request = call("call_read_tool", {"name": "work", "arguments": arguments or {}})
        request["json"]["params"]["_meta"]["progressToken"] = token
    else:
        params = {"name": "call_read_tool", "arguments": {"name": "work"}, "_meta": {"progressToken": token}}
        request = legacy("tools/call", params)
    return request


async def test_only_well_formed_progress_under_the_proxys_token_reaches_the_caller_and_at_most_the_cap(
    hostile_proxy,
):
    secret = "progress-message-secret-5e1f"

    def script(token: Any, request_id: Any) -> Iterator[Any]:
        yield progress("caller-token", 0.5)  # the caller's own token: the upstream never got it
        yield progress("another-call", 0.6)
        yield {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
        yield {"jsonrpc": "2.0", "id": 99, "method": "sampling/createMessage", "params": {}}
        yield progress(token, "1")
        yield progress(token, True)
        yield json.dumps(progress(token, 0)).replace('"progress": 0', '"progress": 1e999').encode()
        yield progress(token, 1, total="all")
        yield progress(token, 1, message=7)
        yield {"jsonrpc": "2.0", "method": "notifications/progress", "params": ["not", "an", "object"]}
        yield progress(token, 1, total=10_000, message=secret + "x" * 10_000)
        yield progress(token, 1)  # not increasing
        yield progress(token, 0.5)  # decreasing
        for n in range(2, 5_002):  # a flood
            yield progress(token, n, total=10_000)
        yield answer(request_id)

    upstream, _proxy, url = hostile_proxy(script)
    with capture_logs() as logs:
        reply, events = await stream_events(url, asking("caller-token"))

    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    *notes, final = events
    assert final["result"]["content"] == [{"type": "text", "text": "done"}]
    assert len(notes) == MAX_RELAYED
    assert {note["method"] for note in notes} == {"notifications/progress"}
    assert {note["params"]["progressToken"] for note in notes} == {"caller-token"}
    assert [note["params"]["progress"] for note in notes] == list(range(1, MAX_RELAYED + 1))
    first = notes[0]["params"]
    assert first["message"].startswith(secret) and len(first["message"]) == MAX_MESSAGE_CHARS
    assert all(set(note["params"]) <= {"progressToken", "progress", "total", "message"} for note in notes)
    # The upstream got a token of the proxy's own, once: the call was sent once.
    assert len(upstream.tokens) == 1 and upstream.tokens[0] != "caller-token"
    assert isinstance(upstream.tokens[0], str) and upstream.tokens[0].startswith("toolsearch-")
    assert secret not in logs.text()
    relayed = [json.loads(line) for line in logs.lines if '"upstream tools/call"' in line]
    assert [line["progress_relayed"] for line in relayed] == [MAX_RELAYED]  # counts only, as fields


async def test_two_callers_with_the_same_token_each_get_only_their_own_progress(hostile_proxy):
    def script(token: Any, request_id: Any) -> Iterator[Any]:
        steps = 2 if len(upstream.tokens) == 1 else 3
        for n in range(1, steps + 1):
            yield progress(token, n)
        yield answer(request_id, f"{steps} steps")

    upstream, _proxy, url = hostile_proxy(script)
    first = await stream_events(url, asking(1))
    second = await stream_events(url, asking(1))

    assert len(set(upstream.tokens)) == 2 and 1 not in upstream.tokens
    for (_, events), steps in ((first, 2), (second, 3)):
        assert [e["params"]["progress"] for e in events[:-1]] == list(range(1, steps + 1))
        assert events[-1]["result"]["content"][0]["text"] == f"{steps} steps"


@pytest.mark.parametrize("ending", ["broken off", "rpc error"])
async def test_a_failure_after_progress_is_the_last_event_as_data(hostile_proxy, ending):
    def script(token: Any, request_id: Any) -> Iterator[Any]:
        yield progress(token, 1, total=2)
        if ending == "rpc error":
            yield {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": "it broke"}}

    _upstream, _proxy, url = hostile_proxy(script)
    reply, events = await stream_events(url, asking("t"))

    assert reply.status_code == 200
    note, final = events
    assert note["params"] == {"progressToken": "t", "progress": 1, "total": 2}
    result = final["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["kind"] == (
        "bad_response" if ending == "broken off" else "rpc_error"
    )


@pytest.mark.parametrize("era", [MODERN, "legacy"])
async def test_closing_the_stream_cancels_the_call_in_2026_07_28_only(hostile_proxy, era):
    def script(token: Any, request_id: Any) -> Iterator[Any]:
        yield progress(token, 1)
        yield "wait"
        yield answer(request_id)

    upstream, proxy, url = hostile_proxy(script)
    ended = threading.Event()
    proxy.telemetry.add_sink(lambda name, value, dims: ended.set() if name == "request_ms" else None)
    request = asking("t", era=era)
    http = httpx.AsyncClient(headers={"Authorization": "Bearer carol"}, timeout=30)
    async with http, http.stream("POST", url, **request) as reply:
        async for chunk in reply.aiter_bytes():
            if b"notifications/progress" in chunk:
                break  # the first event came: go away
    assert await asyncio.to_thread(ended.wait, 20), "the proxy never saw the caller go"
    if era == MODERN:
        await until(lambda: upstream.endings, what="the upstream to see its stream closed")
        assert upstream.endings == ["disconnected"]
    else:
        upstream.release.set()
        await until(
            lambda: proxy.telemetry.total("tool_call", tool="call_read_tool", outcome="ok"),
            what="the call to finish",
        )
        assert upstream.endings == ["released"]


async def until(condition: Callable[[], Any], *, what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"waited 20 s for {what}")


# -- upstream text that is not Unicode (found through progress messages)


async def test_upstream_text_that_is_not_unicode_is_mended_wherever_it_lands_not_a_500(hostile_proxy):
    # "\ud800" is valid JSON and reads as a lone surrogate, which no UTF-8 answer can carry.
    def script(token: Any, request_id: Any) -> Iterator[Any]:
        if len(upstream.tokens) == 3:  # the third call fails
            yield {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": "bad \ud800"}}
            return
        yield progress(token, 1, message="step \udc00")
        yield answer(request_id, "half a pair: \ud800, a whole one: \U0001f600")

    upstream, _proxy, url = hostile_proxy(script)
    upstream.description, upstream.instructions = "Works \ud800 hard.", "Be \udfff kind."
    async with httpx.AsyncClient(headers={"Authorization": "Bearer carol"}, timeout=30) as http:
        hello = await http.post(url, **legacy("initialize", {"protocolVersion": "2025-11-25"}))
        described = await http.post(url, **call("describe_tool", {"names": ["work"]}))
        reply = await http.post(url, **asking("t"))
        plain = await http.post(url, **call("call_read_tool", {"name": "work", "arguments": {}}))
        failed = await http.post(url, **call("call_read_tool", {"name": "work", "arguments": {}}))

    assert "Be \ufffd kind." in hello.json()["result"]["instructions"]
    assert described.json()["result"]["structuredContent"]["tools"][0]["description"] == "Works \ufffd hard."
    note, final = events_of(reply.content)
    assert note["params"]["message"] == "step \ufffd"
    for result in (final["result"], plain.json()["result"]):
        assert result["content"][0]["text"] == "half a pair: \ufffd, a whole one: \U0001f600"
    assert failed.json()["result"]["structuredContent"]["error"]["message"] == "bad \ufffd"


# -- what a request may ask


@pytest.mark.parametrize(
    ("accept", "takes"),
    [
        ("application/json, text/event-stream", True),
        ("text/event-stream", True),
        ("application/json,TEXT/EVENT-STREAM;q=0.5", True),
        ("application/json", False),
        ("application/json, text/event-stream;q=0", False),
        ("*/*", False),  # a client that wants events says so (the spec asks it to list both)
        ("", False),
    ],
)
def test_the_stream_is_only_for_callers_that_list_it(accept, takes):
    assert accepts_event_stream([accept]) is takes


@pytest.mark.parametrize(
    ("token", "kept"),
    [("abc", True), (7, True), (0, True), (True, False), (1.5, False), ({"a": 1}, False), ("x" * 257, False)],
)
def test_only_tokens_the_spec_allows_and_of_bounded_size_are_answered(token, kept):
    assert (caller_token({"_meta": {"progressToken": token}}) == token) is kept
