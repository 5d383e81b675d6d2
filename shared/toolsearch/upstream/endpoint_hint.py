"""What the deployer most likely meant when the upstream URL is not an MCP endpoint: a hint, never a move.

The proxy sends requests to the URL it was given and nowhere else: it follows no redirect and no
`Link` header (ContextForge 1.1.0 names `/v1/servers/<id>/mcp` as the successor of every
`/servers/<id>/mcp`, a path that answers 404). When discovery finds no MCP server at the URL, the
error names the URL of the usual shape instead, for the deployer to set; the URL is shown without
its user information or query, which may hold credentials.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

# The old HTTP+SSE transport's paths (GET .../sse, POST .../message), where the MCP endpoint is .../mcp.
_OLD_TRANSPORT = re.compile(r"(.*)/(?:sse|messages?)")
# ContextForge's advertised successor of a virtual server's endpoint, which 1.1.0 does not serve.
_VERSIONED_SERVER = re.compile(r"(.*)/v1(/servers/[^/]+/mcp)")
_LONGEST_SHOWN = 300  # characters of a URL named in a message


def likely_endpoint(url: str) -> str | None:
    """The MCP endpoint `url` most likely meant, or None when its shape is already the usual one."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    path = parts.path.rstrip("/")
    if versioned := _VERSIONED_SERVER.fullmatch(path):
        path = versioned.group(1) + versioned.group(2)
    elif old := _OLD_TRANSPORT.fullmatch(path):
        path = old.group(1) + "/mcp"
    elif not path.endswith("/mcp"):
        path += "/mcp"
    else:
        return None
    return _shown(parts.scheme, parts.netloc, path)


def not_an_endpoint(url: str) -> str:
    """The sentence for an upstream URL where neither server/discover nor initialize found MCP."""
    meant = likely_endpoint(url)
    if meant is None:
        return (
            "Check that the proxy's upstream URL (--upstream, TOOLSEARCH_UPSTREAM) is the server's "
            "streamable-HTTP MCP endpoint."
        )
    return (
        "The proxy's upstream URL (--upstream, TOOLSEARCH_UPSTREAM) is most likely not an MCP endpoint: "
        f"set it to {meant} (a gateway's MCP endpoint ends in /mcp; ContextForge's is "
        "…/servers/<id>/mcp). The proxy follows no redirect or Link header by itself."
    )


def redirect(url: str, headers: httpx.Headers) -> str:
    """The sentence for a redirect answered to the proxy: where it points, which is not followed."""
    location = headers.get("location", "")
    try:
        target = urlsplit(urljoin(url, location)) if location else None
    except ValueError:
        target = None
    if target is None or target.scheme not in ("http", "https") or not target.netloc:
        return "The proxy follows no redirects: set its upstream URL to the MCP endpoint itself."
    shown = _shown(target.scheme, target.netloc, target.path or "/")
    return f"The proxy follows no redirects: if {shown} is the MCP endpoint, set the upstream URL to it."


def _shown(scheme: str, netloc: str, path: str) -> str:
    host = netloc.rpartition("@")[2]  # never the user information
    shown = urlunsplit((scheme, host, path, "", ""))
    return shown if len(shown) <= _LONGEST_SHOWN else shown[:_LONGEST_SHOWN] + "…"
