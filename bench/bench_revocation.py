"""How long a revoked token keeps access to its catalog (search_tools), in each OAuth setup.

Real parts on loopback (tests/fixtures/oauth_world.py): the MCP SDK's authorization server, an SDK
resource server as upstream (lenient for forwarding, strict for exchange), the proxy. A caller lists
its catalog, its token is revoked at the authorization server, and then it searches every
`--interval` seconds; the script prints how many searches were still answered, for how long, and how
many of those came after `catalog_ttl`.

    .venv/bin/python bench/bench_revocation.py --ttl 2 --interval 0.1
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import httpx
from benchlib import add_tests_to_path, method_line, write_json

add_tests_to_path()

from fixtures.mcp_wire import call  # noqa: E402
from fixtures.oauth_world import (  # noqa: E402
    PROXY_CLIENT_ID,
    PROXY_CLIENT_SECRET,
    authorization_server,
    resource_server,
    served_late,
)
from toolsearch.app import build_proxy  # noqa: E402
from toolsearch.settings import Settings  # noqa: E402

SETUPS = ("forward", "exchange-introspection", "exchange-jwt")


async def measure(setup: str, ttl: float, interval: float, cache: float, limit: float) -> dict[str, Any]:
    exchange = setup.startswith("exchange")
    with authorization_server() as issuer, resource_server(issuer, strict=exchange) as upstream:
        issuer.allowed_targets.add(upstream.url)
        with served_late() as (holder, base):
            options: dict[str, Any] = {"catalog_ttl": ttl, "catalog_max_age": 3600.0}
            if exchange:
                options |= {
                    "auth_mode": "exchange",
                    "public_url": base,
                    "oauth_issuer": issuer.issuer,
                    "oauth_token_url": issuer.base + "/token",
                    "oauth_client_id": PROXY_CLIENT_ID,
                    "oauth_client_secret": PROXY_CLIENT_SECRET,
                }
                if setup == "exchange-introspection":
                    options |= {
                        "oauth_introspection_url": issuer.base + "/introspect",
                        "introspection_cache_ttl": cache,
                    }
                else:
                    options["oauth_jwks_url"] = issuer.base + "/jwks"
            proxy = build_proxy(Settings(upstream=upstream.url, embedder="none", **options))
            holder.app = proxy.app
            token = issuer.issue("alice", "c", base + "/mcp", ["read"], expires_at=int(time.time() + limit))
            async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
                listed = await http.post("/mcp", **call("search_tools", {"query": "tickets"}))
                assert listed.status_code == 200, listed.text
                issuer.revoke("alice")
                revoked = time.monotonic()
                answered = after_ttl = 0
                last_answered = 0.0
                status = 200
                while time.monotonic() - revoked < limit + 2 * ttl:
                    reply = await http.post("/mcp", **call("search_tools", {"query": "tickets"}))
                    status = reply.status_code
                    if status != 200:
                        break
                    answered += 1
                    last_answered = time.monotonic() - revoked
                    after_ttl += last_answered >= ttl
                    await asyncio.sleep(interval)
    return {
        "setup": setup,
        "answered_after_revocation": answered,
        "answered_after_catalog_ttl": after_ttl,
        "last_answered_s": round(last_answered, 3),
        "refused_with": status,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ttl", type=float, default=2.0, help="catalog_ttl, seconds")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between searches")
    parser.add_argument("--introspection-cache", type=float, default=1.0, help="introspection_cache_ttl")
    parser.add_argument("--token-lifetime", type=float, default=6.0, help="seconds the revoked JWT has left")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    method = method_line(
        catalog_ttl=args.ttl,
        interval=args.interval,
        introspection_cache_ttl=args.introspection_cache,
        token_lifetime=args.token_lifetime,
    )
    results = []
    for setup in SETUPS:
        result = asyncio.run(
            measure(setup, args.ttl, args.interval, args.introspection_cache, args.token_lifetime)
        )
        results.append(result)
        print(
            f"{setup:24} answered {result['answered_after_revocation']:3} searches after revocation"
            f" ({result['answered_after_catalog_ttl']} after catalog_ttl), the last at"
            f" {result['last_answered_s']:.2f} s; then HTTP {result['refused_with']}"
        )
    write_json(args.json, method, results)


if __name__ == "__main__":
    main()
