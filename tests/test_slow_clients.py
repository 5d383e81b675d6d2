"""Slow clients against the server `toolsearch serve` runs: no trickle holds a connection open.

The proxy is served as `toolsearch serve` serves it (`serving.uvicorn_options`), with
`request_read_timeout` set small; raw sockets trickle a byte at a time until the server
answers. Waits are bounded generously, only so that a broken server fails the test
instead of hanging it.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator

import pytest

from fixtures.mcp_wire import legacy
from fixtures.servers import ServerThread, start_server
from toolsearch.app import build_proxy
from toolsearch.server.local_server import uvicorn_options
from toolsearch.settings import Settings

DEADLINE = 0.5
GIVE_UP = 30.0
LIST = legacy("tools/list")
BODY = json.dumps(LIST["json"]).encode()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    proxy = build_proxy(Settings(request_read_timeout=DEADLINE, embedder="none"))
    running = start_server(proxy.app, lifespan="off", **uvicorn_options(proxy.settings))
    yield running
    running.stop()


def _request(method: str, path: str, body: bytes, length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    headers = "".join(f"{name}: {value}\r\n" for name, value in LIST["headers"].items())
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{headers}"
        f"Content-Length: {size}\r\n\r\n"
    ).encode() + body


def trickle(port: int, head: bytes, rest: bytes, interval: float = DEADLINE / 10) -> bytes:
    """Send `head`, then `rest` a byte at a time, reading as it goes, until the server closes.

    Returns all the server sent. A server that keeps the connection open fails the test.
    """
    give_up = time.monotonic() + GIVE_UP
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=GIVE_UP) as sock:
        sock.sendall(head)
        position = 0
        while time.monotonic() < give_up:
            if select.select([sock], [], [], interval)[0]:
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    return received
                if not chunk:
                    return received
                received += chunk
            elif position < len(rest):
                try:
                    sock.sendall(rest[position : position + 1])
                except (BrokenPipeError, ConnectionResetError):
                    return received
                position += 1
    raise AssertionError(f"the server kept a trickling connection open {GIVE_UP:g} s")


def test_a_trickled_body_gets_408_with_a_json_rpc_error_and_the_connection_closes(server):
    answer = trickle(server.port, _request("POST", "/mcp", b"", length=10_000), b" " * 10_000)

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    assert b"connection: close" in head.lower()
    error = json.loads(body)["error"]
    assert error["code"] == -32600 and "not received within" in error["message"]


def test_trickled_headers_get_408_and_the_connection_closes(server):
    answer = trickle(server.port, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X-Slow: " + b"a" * 10_000)

    assert answer.startswith(b"HTTP/1.1 408")


def test_a_new_connection_that_stays_silent_is_closed(server):
    assert trickle(server.port, b"", b"").startswith(b"HTTP/1.1 408")


def test_a_body_the_route_never_reads_cannot_hold_the_connection_either(server):
    answer = trickle(server.port, _request("GET", "/healthz", b"", length=10_000), b" " * 10_000)

    # Answered at once; then the rest of the body is bytes before a next request, on its deadline.
    assert answer.startswith(b"HTTP/1.1 200")
    assert answer.endswith(b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")


def _read_response(sock: socket.socket) -> tuple[bytes, dict]:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head, json.loads(body)


def test_prompt_requests_on_a_connection_idle_between_them_are_untouched(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=GIVE_UP) as sock:
        for _ in range(2):
            sock.sendall(_request("POST", "/mcp", BODY))
            head, reply = _read_response(sock)
            assert head.startswith(b"HTTP/1.1 200") and reply["result"]["tools"]
            time.sleep(3 * DEADLINE)  # idle between requests is the keep-alive timeout's business
        sock.sendall(_request("POST", "/mcp", BODY[:10], length=len(BODY)))
        time.sleep(DEADLINE / 2)  # a body in two parts, both within the deadline
        sock.sendall(BODY[10:])
        head, reply = _read_response(sock)
        assert head.startswith(b"HTTP/1.1 200") and reply["result"]["tools"]


def test_headers_past_h11s_bound_get_its_400_at_once_on_the_c_parser_too(server):
    from toolsearch.server.local_server import HttpToolsHeaderDeadlineProtocol

    assert issubclass(uvicorn_options(Settings())["http"], HttpToolsHeaderDeadlineProtocol)
    with socket.create_connection(("127.0.0.1", server.port), timeout=GIVE_UP) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 20_000)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk

    assert answer.startswith(b"HTTP/1.1 400")  # well before the deadline: the connection closed


def test_a_large_request_in_one_read_is_answered(server):
    body = json.dumps({**LIST["json"], "params": {"_meta": {"pad": "x" * 60_000}}}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=GIVE_UP) as sock:
        sock.sendall(_request("POST", "/mcp", body))
        head, reply = _read_response(sock)

    assert head.startswith(b"HTTP/1.1 200") and reply["result"]["tools"]


def test_without_httptools_the_deadline_stays_on_h11():
    # httptools is a dependency, but a platform without its wheel must still serve (on h11).
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['httptools'] = None\n"
        "from toolsearch.server.local_server import HeaderDeadlineProtocol, uvicorn_options\n"
        "from toolsearch.settings import Settings\n"
        "print(issubclass(uvicorn_options(Settings())['http'], HeaderDeadlineProtocol))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def _asgi_post(app, messages: list[dict]) -> tuple[int, bytes]:
    """POST /mcp to the app as an ASGI server would, the body as these messages; status and body."""
    import asyncio

    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]
    headers += [(name.lower().encode(), value.encode()) for name, value in LIST["headers"].items()]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
        "headers": headers, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8080),
    }  # fmt: skip
    pending, sent = list(messages), []

    async def receive() -> dict:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_a_body_in_several_messages_is_read_whole_and_a_client_gone_before_its_end_is_answered_so():
    proxy = build_proxy(Settings(embedder="none"))
    whole = _asgi_post(proxy.app, [{"type": "http.request", "body": BODY, "more_body": False}])
    pieces = [BODY[:5], b"", BODY[5:20], BODY[20:]]
    chunked = [{"type": "http.request", "body": piece, "more_body": True} for piece in pieces]
    chunked[-1]["more_body"] = False
    in_pieces = _asgi_post(proxy.app, chunked)

    assert whole[0] == in_pieces[0] == 200
    assert json.loads(whole[1])["result"]["tools"] == json.loads(in_pieces[1])["result"]["tools"]
    status, body = _asgi_post(proxy.app, chunked[:2])  # then the client goes away
    assert status == 400 and "Client went away" in body.decode()
