"""Who a request comes from, as /mcp and /catalog both learn it: the `CallerAuthenticator` seam.

Forwarding (the default) reads the Authorization header as `callers/credentials.py`
does and takes any credential: the upstream decides. Exchange mode admits only a
Bearer token it validated as issued for the proxy (`auth/tokens.py`); anything
else gets a 401 whose challenge names the proxy's metadata, before anything
reaches the upstream. Either way the caller's key is the hash of their own
header, so a catalog is kept per token the caller holds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from starlette.requests import Request

from toolsearch.auth.client_credentials import SecretUnavailable
from toolsearch.auth.tokens import InvalidToken, TokenValidator, ValidationUnavailable
from toolsearch.callers.aws_iam import is_sigv4, verified_principal
from toolsearch.callers.credentials import MalformedAuthorization
from toolsearch.callers.identity import Caller
from toolsearch.server.http_refusal import HttpRefusal
from toolsearch.server.oauth import ProtectedResource

RETRY_VALIDATION = 5  # seconds a client is told to wait when the issuer could not be asked


class CallerAuthenticator(Protocol):
    forwards: bool  # whether the caller's own header goes to the upstream

    async def caller(self, request: Request) -> Caller:
        """The request's caller; an `HttpRefusal` (400, 401, 503) when it is not admitted."""
        ...


class ForwardingAuthenticator:
    forwards = True

    def __init__(self, upstream_url: str, oauth: ProtectedResource) -> None:
        self._upstream_url = upstream_url
        self._oauth = oauth

    async def caller(self, request: Request) -> Caller:
        return read_caller(request, self._upstream_url, self._oauth)


class ValidatingAuthenticator:
    """Exchange mode: a Bearer token issued for the proxy, or a 401 naming the proxy's metadata."""

    forwards = False

    def __init__(
        self,
        upstream_url: str,
        oauth: ProtectedResource,
        validator: TokenValidator,
        issuer: str = "",
        *,
        ready: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self._upstream_url = upstream_url
        self._oauth = oauth
        self._validator = validator
        self._issuer = issuer
        # What an admitted caller's requests need (the proxy's client secret): without it nothing can
        # be exchanged, so the caller is told 503 here rather than a failure per tool.
        self._ready = ready

    async def caller(self, request: Request) -> Caller:
        caller = read_caller(request, self._upstream_url, self._oauth)
        if caller.authorization is None:
            raise self._unauthorized(request, "This server needs a token issued for it: sign in.", None)
        scheme, _, token = caller.authorization.partition(" ")
        if scheme != "Bearer" or not token:
            why = "this server takes Bearer tokens only"
            raise self._unauthorized(request, f"The token was refused: {why}.", why, "invalid_request")
        try:
            valid = await self._validator.validate(token)
        except InvalidToken as exc:
            raise self._unauthorized(request, f"The token was refused: {exc}.", str(exc)) from None
        except ValidationUnavailable as exc:
            why = f"The token could not be checked just now: {exc}. Try again shortly."
            raise _unavailable(why) from None
        if self._ready is not None:
            try:
                await self._ready()
            except SecretUnavailable as exc:
                raise _unavailable(
                    f"The proxy cannot act for you just now: {exc}. Try again shortly."
                ) from None
        if valid.subject:  # verified: one person, whatever token they signed in with (fair use)
            return caller.verified_as(self._upstream_url, self._issuer, valid.subject)
        return caller

    def _unauthorized(
        self, request: Request, message: str, description: str | None, error: str = "invalid_token"
    ) -> HttpRefusal:
        params = {"error": error, "error_description": description} if description else {}
        challenge = self._oauth.challenge_with(request, params)
        return HttpRefusal(401, "unauthorized", message, {"WWW-Authenticate": challenge}, code=-32000)


def _unavailable(message: str) -> HttpRefusal:
    # The reasons come from the auth package: they name no ARN, token or secret (the log has the ARN).
    return HttpRefusal(503, "auth_unavailable", message, {"Retry-After": str(RETRY_VALIDATION)}, code=-32000)


def _signed_by_aws(request: Request, upstream_url: str) -> Caller:
    """A SigV4-signed request: the principal the entry point verified, or a 401 when none did."""
    arn = verified_principal(request.scope)
    if arn is None:
        raise HttpRefusal(
            401,
            "unauthorized",
            "This request is signed for AWS (SigV4), but no AWS entry point checked the signature here:"
            " send it to a stack deployed with FunctionUrlAuthType=AWS_IAM, or send a token for the"
            " upstream instead.",
            code=-32000,
        )
    return Caller.iam_principal(upstream_url, arn)


def read_caller(request: Request, upstream_url: str, oauth: ProtectedResource) -> Caller:
    """The caller the request's Authorization names; a malformed one is an HttpRefusal (400).

    400, not 401 (RFC 6750 §3.1 invalid_request): signing in again would not mend the header.
    """
    values = request.headers.getlist("authorization")
    if len(values) == 1 and is_sigv4(values[0]):
        return _signed_by_aws(request, upstream_url)
    if not values:
        # Verified without a SigV4 header (a presigned URL's query string): still that principal,
        # not the anonymous caller every unsigned request shares.
        arn = verified_principal(request.scope)
        if arn is not None:
            return Caller.iam_principal(upstream_url, arn)
    try:
        return Caller.from_header(upstream_url, *values)
    except MalformedAuthorization as exc:
        challenge = oauth.invalid_request(request, str(exc))
        raise HttpRefusal(
            400,
            "invalid_request",
            str(exc),
            {"WWW-Authenticate": challenge},
            data={"header": "Authorization", "reason": exc.reason},
        ) from None
