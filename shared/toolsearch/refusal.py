"""The one rule for an upstream that refuses the caller: the caller's HTTP status, not a tool result.

A 401 or 403 from the upstream means the caller's credentials do not let them
in. An OAuth client learns to sign in only from an HTTP 401 with a challenge,
so such a refusal is never turned into a tool result: wherever the proxy works
for a caller (listing their catalog, reading its instructions, calling a tool,
reviewing or refreshing the catalog), `raise_if_refused` (or `refusals_raised`)
turns it into `CallerRefused`, and the HTTP layers answer it with its status and the proxy's
own challenge (`oauth.ProtectedResource.challenge`). Every other upstream
failure stays an `UpstreamError`, which the tools answer as data.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .errors import ToolsearchError
from .oauth import parse_challenge
from .upstream import UpstreamError

REFUSING_KINDS = frozenset({"unauthorized", "forbidden"})
_MAX_REASON = 500  # characters of the upstream's error_description passed on


class CallerRefused(ToolsearchError):
    """The upstream refused this caller (401/403): answered with that HTTP status and a challenge."""

    def __init__(self, error: UpstreamError) -> None:
        super().__init__(error.message)
        self.error = error

    @property
    def status(self) -> int:
        if self.error.status in (401, 403):
            return self.error.status
        return 401 if self.error.kind == "unauthorized" else 403

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


def raise_if_refused(exc: UpstreamError) -> None:
    """Raise `CallerRefused` when `exc` is the upstream refusing the caller; else return."""
    if exc.kind in REFUSING_KINDS:
        raise CallerRefused(exc) from exc


@contextlib.contextmanager
def refusals_raised() -> Iterator[None]:
    """Inside the block, an upstream's refusal of the caller is raised as `CallerRefused`."""
    try:
        yield
    except UpstreamError as exc:
        raise_if_refused(exc)
        raise
