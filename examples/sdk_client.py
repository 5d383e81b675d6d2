"""The proxy from a script, with the official MCP Python SDK (`pip install mcp`).

Connects (2026-07-28 first, the initialize handshake if the server is older),
lists the five tools, searches for a task, then calls the best read-only match
with arguments built from its input schema when the task gives them.

    .venv/bin/toolsearch serve &                      # the demo upstream on 127.0.0.1:8080
    .venv/bin/python examples/sdk_client.py "read a jira issue" '{"issue_key": "WEB-42"}'

The token, if the upstream needs one, comes from $TOOLSEARCH_TOKEN (never argv).
`--url` picks another proxy; `--legacy` forces the initialize handshake.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

import httpx2  # the HTTP client the mcp 2.x SDK's transport takes
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client


def connect(url: str, legacy: bool) -> Client:
    headers = {}
    if token := os.environ.get("TOOLSEARCH_TOKEN"):
        headers["Authorization"] = token if token.lower().startswith("bearer ") else f"Bearer {token}"
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))
    return Client(transport, mode="legacy" if legacy else "auto")


async def main(url: str, task: str, arguments: dict, legacy: bool) -> None:
    async with connect(url, legacy) as client:
        print("protocol:", client.protocol_version)
        listed = await client.list_tools()
        print("tools:", ", ".join(tool.name for tool in listed.tools))

        found = await client.call_tool("search_tools", {"query": task, "limit": 5, "schemas": False})
        hits = found.structured_content["tools"]
        print(f"search_tools({task!r}) among {found.structured_content['total']} tools:")
        for hit in hits:
            print(f"  {'read ' if hit['readOnly'] else 'WRITE'}  {hit['name']}: {hit['description']}")

        readable = [hit for hit in hits if hit["readOnly"]]
        if not readable:
            print("no read-only match; a write tool would need call_write_tool and the user's approval")
            return
        name = readable[0]["name"]
        result = await client.call_tool("call_read_tool", {"name": name, "arguments": arguments})
        print(f"call_read_tool({name}) isError={result.is_error}")
        print(json.dumps(result.structured_content, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("task", help="What to find, in words.")
    parser.add_argument("arguments", nargs="?", default="{}", help="JSON arguments for the best read match.")
    parser.add_argument("--url", default="http://127.0.0.1:8080/mcp")
    parser.add_argument("--legacy", action="store_true", help="Use the initialize handshake (2025-11-25).")
    args = parser.parse_args()
    asyncio.run(main(args.url, args.task, json.loads(args.arguments), args.legacy))
