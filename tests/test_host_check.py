"""DNS rebinding against `toolsearch serve` on loopback: a Host that is not the server's own is refused
on every route, before the route runs (the Origin rule alone lets a same-origin GET through)."""

from __future__ import annotations

import httpx
import pytest

from fixtures.mcp_wire import legacy, modern
from fixtures.servers import start_server
from toolsearch.app import build_proxy
from toolsearch.server.host_check import with_host_check
from toolsearch.server.local_server import served_app
from toolsearch.settings import Settings

ROUTES = [
    ("GET", "/catalog"),
    ("POST", "/catalog/refresh"),
    ("GET", "/healthz"),
    ("GET", "/.well-known/oauth-protected-resource"),
    ("GET", "/.well-known/oauth-protected-resource/mcp"),
    ("GET", "/mcp"),
    ("OPTIONS", "/mcp"),
]


@pytest.fixture(scope="module")
def served():
    """The demo proxy as `toolsearch serve` serves it on 127.0.0.1 (CORS on, to reach the preflight)."""
    settings = Settings(host="127.0.0.1", port=8080, allowed_origins=["https://inspector.example"])
    running = start_server(served_app(build_proxy(settings).app, settings), lifespan="off")
    try:
        yield running
    finally:
        running.stop()


def _send(served, method, path, host, **kwargs):
    with httpx.Client(base_url=served.base_url) as http:
        return http.request(method, path, headers={"Host": host, **kwargs.pop("headers", {})}, **kwargs)


def _foreign_hosts(port):
    return [
        "attacker.example",
        f"attacker.example:{port}",
        f"127.0.0.1:{port + 1}",  # another local port is another server
        "127.0.0.1",  # port 80 is not this server's
        f"127.0.0.1.attacker.example:{port}",
        f"localhost.:{port}",
    ]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_a_foreign_host_is_refused_on_every_route(served, method, path):
    for host in _foreign_hosts(served.port):
        reply = _send(served, method, path, host, headers={"Access-Control-Request-Method": "GET"})
        assert reply.status_code == 421, (host, reply.text)
        assert "tool" not in reply.text.lower()
        assert "host_not_allowed" in reply.text or reply.json()["error"]["code"] == -32600


@pytest.mark.parametrize("request_", [modern("tools/list"), legacy("tools/list")])
def test_a_foreign_host_gets_no_tool_list_and_a_json_rpc_error(served, request_):
    reply = _send(
        served, "POST", "/mcp", "attacker.example", json=request_["json"], headers=request_["headers"]
    )
    assert reply.status_code == 421
    assert reply.json()["error"]["code"] == -32600 and "result" not in reply.json()


def test_the_servers_own_names_with_its_port_are_answered(served):
    for host in (
        f"127.0.0.1:{served.port}",
        f"localhost:{served.port}",
        f"[::1]:{served.port}",
        f"LocalHost:{served.port}",
    ):
        assert _send(served, "GET", "/healthz", host).status_code == 200, host
        catalog = _send(served, "GET", "/catalog", host)
        assert catalog.status_code == 200 and catalog.json()["tools"], host


async def _status(app, host):
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8080"
    ) as h:
        return (await h.get("/healthz", headers={"Host": host})).status_code


@pytest.mark.parametrize(
    ("bind", "allowed", "host", "status"),
    [
        ("127.0.0.1", [], "attacker.example:8080", 421),
        ("localhost", [], "attacker.example:8080", 421),
        ("::1", [], "attacker.example:8080", 421),
        ("127.0.0.1", ["proxy.test"], "proxy.test:8080", 200),  # a listed name, on any port
        ("127.0.0.1", ["proxy.test:9000"], "proxy.test:8080", 421),
        ("127.0.0.1", ["*"], "attacker.example", 200),  # the operator chose no check
        ("0.0.0.0", [], "attacker.example", 200),  # not loopback: a front end's Host is not ours to know
        ("0.0.0.0", ["proxy.test"], "attacker.example", 421),
        ("0.0.0.0", ["proxy.test"], "127.0.0.1:8080", 200),
    ],
)
async def test_which_hosts_are_answered_follows_the_bind_address_and_allowed_hosts(
    bind, allowed, host, status
):
    proxy = build_proxy(Settings())
    assert await _status(with_host_check(proxy.app, bind, 8080, allowed), host) == status


def test_allowed_hosts_is_a_setting_with_a_variable():
    from toolsearch import settings as settings_module

    parser = __import__("argparse").ArgumentParser()
    settings_module.add_arguments(parser)
    args = parser.parse_args([])
    config = settings_module.from_args(args, {"TOOLSEARCH_ALLOWED_HOSTS": "a.test, b.test:81"})
    assert config.allowed_hosts == ["a.test", "b.test:81"]
