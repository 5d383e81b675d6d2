"""`WWW-Authenticate` Bearer challenges as text: read (`parse_challenge`) and written (`quoted`).

Header syntax only, no HTTP: the upstream's refusal (`callers.refusal`), the exchange
(`auth.exchanging`) and the proxy's own challenges (`server.oauth`) share it.
"""

from __future__ import annotations

import re

__all__ = ["parse_challenge", "quoted"]

_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')
_QUOTED_PAIR = re.compile(r"\\(.)")


def parse_challenge(header: str | None) -> dict[str, str]:
    """The parameters of a Bearer challenge (`resource_metadata`, `scope`, `error`...), unquoted."""
    if not header:
        return {}
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return {}
    return {
        m.group(1).lower(): _QUOTED_PAIR.sub(r"\1", m.group(2)) if m.group(2) is not None else m.group(3)
        for m in _PARAM.finditer(rest)
    }


def quoted(value: str) -> str:
    """`value` as an RFC 9110 quoted-string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
