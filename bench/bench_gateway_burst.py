"""Two users behind the proxy in front of ContextForge: one bursts, what does the other get?

Starts the gateway suite's set-up (tests/fixtures/contextforge.py: ContextForge 1.1.0 from
`.cache/contextforge`, docs/gateways.md's commands, two teams), then a second gateway process on
the same database with the rate limits to measure (by default ContextForge's own: 100 a minute per
address, user and team on /servers/…/mcp, lockout after 5 refusals for 15 minutes), and the proxy
(`build_proxy`, lexical search) in front of that one. alice sends 92 read calls as `call_read_tools`
batches of 10, all at once; bob makes one `call_read_tool` every 0.25 s from 1 s before the burst
until 3 s after it. Prints what each got: outcomes, the Retry-After they were told, bob's latency.

    .venv/bin/python bench/bench_gateway_burst.py
    .venv/bin/python bench/bench_gateway_burst.py \
        --gateway-env RATE_LIMIT_MEDIUM_RPM=1000 RATE_LIMIT_LOCKOUT_ENABLED=false
    .venv/bin/python bench/bench_gateway_burst.py --proxy caller_rate=0 caller_concurrency=0  # unbounded

Needs `scripts/install-contextforge.sh` (make test runs it) and tests/node (server-everything).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import httpx
from benchlib import add_tests_to_path, method_line, write_json

add_tests_to_path()

from fixtures.burst import two_users  # noqa: E402
from fixtures.contextforge import another_gateway, running_contextforge, unavailable_reason  # noqa: E402
from fixtures.servers import serve_in_thread  # noqa: E402
from toolsearch.app import build_proxy  # noqa: E402
from toolsearch.settings import Settings  # noqa: E402

ACCEPT = "application/json, text/event-stream"
DEFAULT_LIMITS = ["RATE_LIMIT_MEDIUM_RPM=100", "RATE_LIMIT_LOCKOUT_ENABLED=true"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=92, help="alice's read calls in the burst")
    parser.add_argument("--batch", type=int, default=10, help="calls per call_read_tools batch")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between bob's calls")
    parser.add_argument("--after", type=float, default=3.0, help="seconds bob goes on after the burst")
    parser.add_argument(
        "--gateway-env",
        nargs="*",
        default=DEFAULT_LIMITS,
        metavar="KEY=VALUE",
        help="the measured gateway's limits",
    )
    parser.add_argument(
        "--proxy",
        nargs="*",
        default=[],
        metavar="SETTING=VALUE",
        help="the proxy's settings beside its defaults, e.g. caller_rate=0",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    reason = unavailable_reason()
    if reason:
        print(f"cannot run: {reason}")
        return 1
    limits = dict(item.split("=", 1) for item in args.gateway_env)
    proxy_settings = {
        name: type(getattr(Settings(), name))(value)
        for name, value in (item.split("=", 1) for item in args.proxy)
    }
    method = method_line(
        calls=args.calls, batch=args.batch, interval=args.interval, gateway_env=limits, proxy=proxy_settings
    )

    started = time.monotonic()
    with running_contextforge() as forge:
        print(f"# gateway set up in {time.monotonic() - started:.1f} s")
        with another_gateway(forge, **limits) as measured:
            settings = Settings(
                upstream=f"{measured.url}/servers/{forge.server_id}/mcp", embedder="none", **proxy_settings
            )
            with serve_in_thread(build_proxy(settings).app) as base:
                run = asyncio.run(
                    two_users(
                        base,
                        forge.values["ALICE_TOKEN"],
                        forge.values["BOB_TOKEN"],
                        calls=args.calls,
                        batch=args.batch,
                        interval=args.interval,
                        after=args.after,
                    )
                )
            # What the gateway itself now tells bob, asked directly.
            direct = httpx.post(
                f"{measured.url}/servers/{forge.server_id}/mcp",
                headers={"Authorization": f"Bearer {forge.values['BOB_TOKEN']}", "Accept": ACCEPT},
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                timeout=30,
            )
    summary = run.summary()
    summary["gateway_to_bob_after"] = {
        "status": direct.status_code,
        "retry-after": direct.headers.get("retry-after"),
        "error": direct.json().get("error") if direct.status_code == 429 else None,
    }
    print(json.dumps(summary, indent=2))
    write_json(args.json, method, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
