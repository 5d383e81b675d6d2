"""The one rule for an upstream that refuses the caller: the caller's HTTP status, not a tool result.

A 401 or 403 from the upstream means the caller's credentials do not let them
in. An OAuth client learns to sign in only from an HTTP 401 with a challenge,
so such a refusal is never turned into a tool result: wherever the proxy works
for a caller (listing their catalog, reading its instructions, calling a tool),
the service's one catch site raises it as `CallerRefused` (`refused`), and the
HTTP edge answers it, as it answers one from the catalog routes, with its
status and the proxy's own challenge (`HttpEdge.answer_for`,
`oauth.ProtectedResource.challenge`). Every other upstream failure stays an
`UpstreamError`, which the tools answer as data (`results.upstream_failure`).
"""

from __future__ import annotations

from toolsearch.callers.challenge import parse_challenge
from toolsearch.errors import ToolsearchError
from toolsearch.upstream import UpstreamError

REFUSING_KINDS = frozenset({"unauthorized", "forbidden"})
_MAX_REASON = 500  # characters of the upstream's error_description passed on


class CallerRefused(ToolsearchError):
    """The upstream refused this caller (401/403): answered with that HTTP status and a challenge."""

    def __init__(self, error: UpstreamError) -> None:
        super().__init__(error.message)
        self.error = error

    @property
    def status(self) -> int:
        return refusal_status(self.error)

    @property
    def message(self) -> str:
        """What the refusal says, with the reason the upstream's challenge gives (RFC 6750 error and
        error_description), so a person sees why, not only that."""
        base = (
            "The upstream requires authorization"
            if self.status == 401
            else "The upstream refused this caller"
        )
        params = parse_challenge(self.error.www_authenticate)
        error, description = params.get("error", ""), params.get("error_description", "")
        if description:
            return f"{base}: {description[:_MAX_REASON]}" + (f" ({error[:64]})" if error else "")
        return f"{base}: {error[:64]}" if error else base


def refused(exc: UpstreamError) -> CallerRefused | None:
    """`exc` as `CallerRefused` when it is the upstream refusing the caller; else None."""
    return CallerRefused(exc) if exc.kind in REFUSING_KINDS else None


def refusal_status(error: UpstreamError) -> int:
    """The HTTP status a refusal is answered with: the upstream's own 401 or 403, else by its kind."""
    if error.status in (401, 403):
        return error.status
    return 401 if error.kind == "unauthorized" else 403
