"""Which `Host` a server run by `toolsearch serve` answers: against DNS rebinding, for every route.

A page on `attacker.example` whose name the attacker then points at 127.0.0.1
reaches a local server with `Host: attacker.example` and, for a same-origin GET,
no `Origin` at all, so the Origin rule alone does not stop it reading `/catalog`.
The MCP transport spec advises local servers to check `Host` too: when `serve`
binds a loopback address, only its own names (127.0.0.1, localhost, [::1], with
the port it listens on) and the listed `allowed_hosts` are answered; any other
Host gets 421 before a route runs. Bound elsewhere (0.0.0.0, behind a proxy)
only a non-empty `allowed_hosts` is enforced. Lambda never runs this: there the
Host is the function URL's or the gateway's.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from toolsearch.mcp import protocol as P

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(address: str) -> bool:
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


class HostCheck:
    """`app`, answering only requests whose Host is one of the server's own (see the module)."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str], port: int) -> None:
        self.app = app
        self._allowed = {host.strip().lower() for host in allowed if host.strip()}
        self._port = port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._accepts(scope):
            await self.app(scope, receive, send)
            return
        await _refuse(scope, send)

    def _accepts(self, scope: Scope) -> bool:
        hosts = [value for name, value in scope.get("headers", ()) if name == b"host"]
        if len(hosts) != 1:
            return False  # none (HTTP/1.0) or two: not provably ours
        try:
            host = hosts[0].decode("ascii").strip().lower()
        except UnicodeDecodeError:
            return False
        server = scope.get("server")
        port = server[1] if server and server[1] else self._port  # the port really listened on
        own = {f"{name}:{port}" for name in _LOOPBACK_NAMES}
        if port == 80:
            own.update(_LOOPBACK_NAMES)
        if host in own or host in self._allowed:
            return True
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name in self._allowed  # a listed name without a port: on any port


async def _refuse(scope: Scope, send: Send) -> None:
    message = "Host not allowed: this server answers its own address only (DNS rebinding)"
    if scope.get("path") == "/mcp":
        body: object = P.error_response(None, P.RpcError(P.INVALID_REQUEST, message))
    else:
        body = {"error": {"kind": "host_not_allowed", "message": message}}
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"cache-control", b"no-store"),
    ]
    await send({"type": "http.response.start", "status": 421, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def with_host_check(app: ASGIApp, bind: str, port: int, allowed: Iterable[str]) -> ASGIApp:
    """`app` behind the Host check when serving on loopback or when hosts are listed, else `app`."""
    allowed = list(allowed)
    if "*" in allowed or (not allowed and not is_loopback(bind)):
        return app
    return HostCheck(app, allowed, port)
