"""`toolsearch catalog`: a running proxy's catalog for your token, as a table (GET /catalog).

The token comes from an environment variable, never from the command line, so it
stays out of shell history and process lists. `--refresh` first asks the proxy
to list the upstream again (POST /catalog/refresh).

Everything printed comes from a server and the upstream behind it, so none of
it reaches the terminal raw: control characters (C0, DEL, C1: escape sequences
that could move the cursor or rewrite `WRITE` as `read`), format characters
(bidi overrides among them), line separators and lone surrogates are printed as
`\\uXXXX` escapes, which also keeps `--json` lines valid JSON. Paging is bounded
as the proxy bounds its upstream's: at most MAX_PAGES pages, and a cursor seen
before, or a page of no tools, ends the listing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import Any

from toolsearch.catalogs.printable import printable
from toolsearch.errors import ToolsearchError

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TOKEN_ENV = "TOOLSEARCH_TOKEN"
PAGE = 500
MAX_PAGES = 200  # 100,000 tools: ten times the proxy's default max_catalog_tools


class CatalogCliError(ToolsearchError):
    pass


def add_catalog_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default=DEFAULT_URL,
        help=f"The proxy, as given to MCP clients (…/mcp) or its base URL. Default {DEFAULT_URL}.",
    )
    parser.add_argument(
        "--token-env",
        default=None,
        metavar="VAR",
        help=f"Environment variable holding your upstream token (default {DEFAULT_TOKEN_ENV}; "
        "sent as 'Bearer <token>' unless it already names a scheme). Unset: no Authorization.",
    )
    parser.add_argument(
        "--refresh", action="store_true", help="List the upstream again first, instead of the cached catalog."
    )
    parser.add_argument("--json", action="store_true", help="One JSON object per tool instead of a table.")


def base_url(url: str) -> str:
    url = url.rstrip("/")
    return url[: -len("/mcp")] if url.endswith("/mcp") else url


def authorization(token_env: str | None, environ: Any = os.environ) -> str | None:
    name = token_env or DEFAULT_TOKEN_ENV
    value = (environ.get(name) or "").strip()
    if not value:
        if token_env:  # named on purpose but empty: almost certainly a mistake
            raise CatalogCliError(f"${name} is empty or unset; export your token in it first")
        return None
    scheme = value.split(" ", 1)[0].lower()
    return value if scheme in ("bearer", "basic", "dpop") and " " in value else f"Bearer {value}"


def answer_body(reply: Any, token_env: str | None) -> dict[str, Any]:
    """The JSON body of a proxy's 200 answer; any other answer as a `CatalogCliError` saying why
    (the proxy's own message, where to put a token, a server without /catalog)."""
    try:
        body = reply.json()
    except ValueError:
        body = {}
    if reply.status_code == 200 and isinstance(body, dict):
        return body
    error = body.get("error") if isinstance(body, dict) else None
    given = error.get("message") if isinstance(error, dict) else None
    message = printable(given) if isinstance(given, str) else f"HTTP {reply.status_code}"
    if reply.status_code == 401:
        message += f"; put a token in ${token_env or DEFAULT_TOKEN_ENV}"
    if reply.status_code == 404:
        message = "this server has no /catalog endpoint (is it mcp-toolsearch-proxy?)"
    raise CatalogCliError(f"{message} (HTTP {reply.status_code})")


class Listing:
    """What GET /catalog gave: the rows, the last page's body, and why paging stopped early (or None)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.last: dict[str, Any] = {}
        self.stopped: str | None = None


def fetch_catalog(http: Any, base: str, token_env: str | None, max_pages: int = MAX_PAGES) -> Listing:
    """The pages of GET /catalog, at most `max_pages`; a repeated cursor or an empty page ends them."""
    listing = Listing()
    params: dict[str, str] = {"limit": str(PAGE)}
    seen: set[str] = set()
    for _ in range(max_pages):
        body = answer_body(http.get(base + "/catalog", params=params), token_env)
        listing.last = body
        tools = body.get("tools")
        page = [row for row in tools if isinstance(row, dict)] if isinstance(tools, list) else []
        listing.rows += page
        cursor = body.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            return listing
        if cursor in seen or not page:
            listing.stopped = "the server repeated a page cursor" if page else "a page held no tools"
            return listing
        seen.add(cursor)
        params = {"limit": str(PAGE), "cursor": cursor}
    listing.stopped = f"the server still offered more after {max_pages} pages"
    return listing


def render_table(rows: list[dict[str, Any]], width: int) -> str:
    rows = [
        {key: printable(row.get(key) or "") for key in ("name", "title", "description")}
        | {"readOnly": row.get("readOnly") is True}
        for row in rows
    ]
    name_w = min(max((len(r["name"]) for r in rows), default=4), 48)
    title_w = min(max((len(r.get("title") or "") for r in rows), default=5), 28)
    lines = [f"{'NAME':<{name_w}}  MODE   {'TITLE':<{title_w}}  DESCRIPTION"]
    rest = max(20, width - name_w - title_w - 11)
    for row in rows:
        mode = "read" if row.get("readOnly") else "WRITE"
        description = row.get("description") or ""
        if len(description) > rest:
            description = description[: rest - 1] + "…"
        lines.append(
            f"{_cut(row['name'], name_w):<{name_w}}  {mode:<5}  "
            f"{_cut(row.get('title') or '', title_w):<{title_w}}  {description}"
        )
    return "\n".join(lines)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def refresh(http: Any, base: str, token_env: str | None) -> str:
    """POST /catalog/refresh; what changed, in words. Rate-limited is not an error: the list follows."""
    reply = http.post(base + "/catalog/refresh")
    if reply.status_code == 429:
        wait = printable(reply.headers.get("retry-after", "a few"))
        return f"refreshed moments ago; listing the current catalog (retry in {wait} s)"
    body = answer_body(reply, token_env)
    if "added" not in body:
        return "refreshed from the upstream"
    changes = f"{len(body['added'])} added, {len(body['removed'])} removed"
    changes += "".join(f"\n  + {printable(name)}" for name in body["added"])
    changes += "".join(f"\n  - {printable(name)}" for name in body["removed"])
    return f"refreshed from the upstream: {changes}"


def run_catalog(args: argparse.Namespace) -> int:
    import httpx

    base = base_url(args.url)
    try:
        header = authorization(args.token_env)
        headers = {"Authorization": header} if header else {}
        with httpx.Client(headers=headers, timeout=60) as http:
            if args.refresh:
                print(refresh(http, base, args.token_env), file=sys.stderr)
            listing = fetch_catalog(http, base, args.token_env)
    except CatalogCliError as exc:
        print(f"toolsearch catalog: {exc}", file=sys.stderr)
        return 1
    except httpx.HTTPError as exc:
        print(f"toolsearch catalog: cannot reach {base}: {type(exc).__name__}", file=sys.stderr)
        return 1
    rows = listing.rows
    if args.json:
        for row in rows:
            print(printable(json.dumps(row, ensure_ascii=False)))
    else:
        print(render_table(rows, shutil.get_terminal_size((120, 24)).columns))
    reads = sum(1 for row in rows if row.get("readOnly"))
    print(
        f"{len(rows)} tools ({reads} read-only, {len(rows) - reads} write), listed by the upstream at "
        f"{printable(listing.last.get('fetchedAt', '?'))}",
        file=sys.stderr,
    )
    if listing.stopped is not None:
        print(
            f"toolsearch catalog: stopped listing: {listing.stopped}; the list may be incomplete",
            file=sys.stderr,
        )
        return 1
    return 0
