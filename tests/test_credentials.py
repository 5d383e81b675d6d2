"""The caller's Authorization header: one credential is one caller, a broken one a clear 400.

Requests go over real HTTP (uvicorn) through a raw socket, so the header bytes
are exactly what a test writes (httpx would refuse to send most of them), to a
proxy in front of the fault-injecting upstream, which records what reached it.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from fixtures.faulty_upstream import RunningFaulty, running_faulty
from fixtures.mcp_wire import call
from fixtures.servers import serve_in_thread
from toolsearch.app import Proxy, build_proxy
from toolsearch.callers.credentials import MalformedAuthorization, read_authorization
from toolsearch.callers.identity import caller_key
from toolsearch.settings import Settings

TOKEN = "alice-token.with_b64-chars~+/=="
SPELLINGS = [
    f"Bearer {TOKEN}",
    f"bearer {TOKEN}",
    f"BEARER {TOKEN}",
    f"Bearer  {TOKEN}",
    f"Bearer\t{TOKEN}",
    f"  Bearer {TOKEN} \t",
]


@pytest.mark.parametrize(
    ("raw", "forwarded"),
    [
        *[(spelling, f"Bearer {TOKEN}") for spelling in SPELLINGS],
        ("basic dXNlcjpwYXNz", "Basic dXNlcjpwYXNz"),
        ("Bearer", "Bearer"),
        ('Digest  username="a b", realm="x"', 'Digest username="a b", realm="x"'),  # inside: as sent
        ("Custom-Scheme TOKEN", "Custom-Scheme TOKEN"),  # an unregistered scheme is sent as it came
        ("Bearer AbC", "Bearer AbC"),  # the token's case is the token's
    ],
)
def test_scheme_case_and_whitespace_are_normalised_never_the_token(raw, forwarded):
    assert read_authorization(raw).header == forwarded


def test_an_unregistered_scheme_is_one_caller_whatever_its_case():
    assert read_authorization("custom-scheme X").identity == read_authorization("CUSTOM-scheme X").identity
    assert read_authorization("custom-scheme X").identity != read_authorization("custom-scheme x").identity


@pytest.mark.parametrize("raw", ["", "  ", "\t"])
def test_an_empty_header_is_no_credential(raw):
    assert read_authorization(raw).header is None
    assert caller_key("https://up/mcp", raw) == caller_key("https://up/mcp", None)


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        (["Bearer café"], "outside ASCII"),
        (["Bearer cafÃ©"], "outside ASCII"),  # UTF-8 bytes read as latin-1, as Starlette reads them
        (["Bearer a\x01b"], "control character"),
        (["Bearer a\x7fb"], "control character"),
        (["Bearer a\r\nX-Injected: 1"], "control character"),
        (["Bearer a\x00"], "control character"),
        (["(Bearer) x"], "authentication scheme"),
        (["=abc"], "authentication scheme"),
        (["Bearer a", "Bearer b"], "more than one"),
    ],
)
def test_a_value_that_cannot_be_forwarded_is_refused_with_its_reason(values, reason):
    with pytest.raises(MalformedAuthorization, match=reason):
        read_authorization(*values)


# -- over HTTP


@contextlib.contextmanager
def proxy_in_front_of_faulty(**settings) -> Iterator[tuple[Proxy, str, RunningFaulty]]:
    with running_faulty(users={TOKEN: "alice"}) as upstream:
        proxy = build_proxy(Settings(upstream=upstream.url, embedder="none", catalog_ttl=3600.0, **settings))
        with serve_in_thread(proxy.app) as base:
            yield proxy, base, upstream


def raw_request(base: str, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes = b""):
    """Send one HTTP/1.1 request byte for byte; the status, headers and JSON body of the answer."""
    address = urlsplit(base)
    lines = [f"{method} {path} HTTP/1.1".encode(), f"Host: {address.netloc}".encode()]
    lines += [name + b": " + value for name, value in headers]
    lines += [
        b"Content-Type: application/json",
        f"Content-Length: {len(body)}".encode(),
        b"Connection: close",
    ]
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        answer = bytearray()
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, payload = bytes(answer).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    answer_headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        answer_headers[name.strip().lower()] = value.strip()
    try:
        parsed = json.loads(payload)
    except ValueError:
        parsed = payload.decode("latin-1")
    return int(status_line.split()[1]), answer_headers, parsed


def post_mcp(base: str, authorization: bytes | None, request: dict):
    headers = [(name.encode(), value.encode()) for name, value in request["headers"].items()]
    if authorization is not None:
        headers.append((b"Authorization", authorization))
    return raw_request(base, "POST", "/mcp", headers, json.dumps(request["json"]).encode())


def test_every_spelling_of_one_token_is_one_caller_one_key_one_listing():
    with proxy_in_front_of_faulty() as (proxy, base, upstream):
        found = []
        for spelling in SPELLINGS:
            status, _, reply = post_mcp(base, spelling.encode(), call("search_tools", {"query": "report"}))
            assert status == 200, reply
            assert reply["result"]["isError"] is False, reply
            found.append(reply["result"]["structuredContent"]["tools"])

        assert all(tools == found[0] for tools in found)
        assert len(upstream.upstream.seen("tools/list")) == 1
        assert len(proxy.catalogs) == 1
        assert {seen.headers["authorization"] for seen in upstream.upstream.requests} == {f"Bearer {TOKEN}"}


def test_the_catalog_review_reads_the_caller_the_same_way():
    with proxy_in_front_of_faulty() as (proxy, base, upstream):
        totals = set()
        for spelling in SPELLINGS:
            status, _, reply = raw_request(base, "GET", "/catalog", [(b"Authorization", spelling.encode())])
            assert status == 200, reply
            totals.add(reply["total"])
        status, _, _ = post_mcp(base, f"bearer  {TOKEN}".encode(), call("search_tools", {"query": "x"}))

        assert status == 200 and len(totals) == 1
        assert len(upstream.upstream.seen("tools/list")) == 1  # /catalog and /mcp share the one catalog
        assert len(proxy.catalogs) == 1


BROKEN = [
    b"Bearer caf\xc3\xa9",  # UTF-8
    b"Bearer caf\xe9",  # latin-1
    b"Bearer \xff\xfe",
]


@pytest.mark.parametrize("value", BROKEN)
def test_a_header_the_proxy_cannot_forward_is_a_400_naming_it_and_never_reaches_the_upstream(value):
    with proxy_in_front_of_faulty() as (_, base, upstream):
        status, headers, reply = post_mcp(base, value, call("search_tools", {"query": "report"}))

        assert status == 400, reply
        assert reply["error"]["code"] == -32600
        assert "Authorization header is malformed" in reply["error"]["message"]
        assert reply["error"]["data"]["header"] == "Authorization"
        assert 'error="invalid_request"' in headers["www-authenticate"]
        assert 'resource_metadata="' in headers["www-authenticate"]

        status, _, review = raw_request(base, "GET", "/catalog", [(b"Authorization", value)])
        assert status == 400 and review["error"]["kind"] == "invalid_request"
        assert upstream.upstream.requests == []


def test_two_authorization_headers_are_refused_not_one_picked():
    with proxy_in_front_of_faulty() as (_, base, upstream):
        request = call("search_tools", {"query": "report"})
        headers = [(name.encode(), value.encode()) for name, value in request["headers"].items()]
        headers += [(b"Authorization", f"Bearer {TOKEN}".encode()), (b"Authorization", b"Bearer other")]
        status, _, reply = raw_request(base, "POST", "/mcp", headers, json.dumps(request["json"]).encode())

        assert status == 400 and "more than one" in reply["error"]["message"]
        assert upstream.upstream.requests == []


JWT_LIKE = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"  # every character a token character


@pytest.mark.parametrize(("value", "told"), [(JWT_LIKE, "no scheme"), ("Bearer", "no token")])
def test_a_one_word_header_the_upstream_refuses_is_told_the_form_to_send(value, told):
    # Forwarded as it came (a static-token gateway may want it so); the upstream's refusal then
    # says what to mend, on /mcp and /catalog alike, without echoing the header.
    with proxy_in_front_of_faulty() as (_, base, upstream):
        status, _, reply = post_mcp(base, value.encode(), call("search_tools", {"query": "report"}))
        assert status == 401, reply
        message = reply["error"]["message"]
        assert "send `Authorization: Bearer <token>`" in message and told in message
        assert JWT_LIKE not in json.dumps(reply)

        status, _, review = raw_request(base, "GET", "/catalog", [(b"Authorization", value.encode())])
        assert status == 401 and "send `Authorization: Bearer <token>`" in review["error"]["message"]
        assert JWT_LIKE not in json.dumps(review)
        # Every MCP request carried the header as it came (the OAuth metadata read carries none).
        mcp = [seen for seen in upstream.upstream.requests if seen.method]
        assert mcp and {seen.headers.get("authorization") for seen in mcp} == {value}


@pytest.mark.parametrize("value", ["Bearer not-a-user", "Basic dXNlcjpwYXNz", None])
def test_a_well_formed_header_the_upstream_refuses_gets_no_form_hint(value):
    with proxy_in_front_of_faulty() as (_, base, _upstream):
        header = None if value is None else value.encode()
        status, _, reply = post_mcp(base, header, call("search_tools", {"query": "report"}))
    assert status == 401, reply
    assert "Authorization: Bearer" not in reply["error"]["message"]


def test_no_header_names_the_catalog_of_an_iam_principal():
    # The IAM principal's key lives where no Authorization value can reach (header values hold no NUL).
    from toolsearch.callers.identity import Caller

    arn = "arn:aws:iam::123456789012:user/alice"
    principal = Caller.iam_principal("https://up/mcp", arn)
    assert principal.authorization is None
    for header in (f"aws-iam {arn}", f"AWS-IAM {arn}", f"Bearer {arn}"):
        assert Caller.from_header("https://up/mcp", header).key != principal.key
    with pytest.raises(MalformedAuthorization):  # the NUL that would reach it is refused
        Caller.from_header("https://up/mcp", f"\0aws-iam\0{arn}")
