"""A caller's JWT access token, checked against the issuer's published keys (PyJWT).

Only asymmetric algorithms, and only the one the issuer's key names; the issuer,
the expiry (with `LEEWAY`) and an audience naming the proxy are required.
"""

from __future__ import annotations

import jwt

from .http_json import AuthServerError
from .jwks import ASYMMETRIC, KeySet
from .tokens import (
    LEEWAY,
    MAX_TOKEN_CHARS,
    InvalidToken,
    ValidationUnavailable,
    ValidToken,
    audiences,
    seconds,
)


class JwtValidator:
    """A JWT access token, checked against the issuer's published keys."""

    def __init__(self, keys: KeySet, *, issuer: str, resource: str) -> None:
        self._keys = keys
        self._issuer = issuer
        self._audiences = audiences(resource)
        self._resource = resource

    async def validate(self, token: str) -> ValidToken:
        if len(token) > MAX_TOKEN_CHARS:
            raise InvalidToken(f"the token is longer than {MAX_TOKEN_CHARS} characters")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the token is not a JWT this server can validate") from None
        # Header fields are the caller's JSON: a list or an object is no algorithm (and unhashable).
        algorithm, kid = header.get("alg"), header.get("kid")
        if not isinstance(algorithm, str) or algorithm not in ASYMMETRIC:
            raise InvalidToken("the token is not signed with an algorithm this server accepts")
        if not (kid is None or isinstance(kid, str)):
            raise InvalidToken("the token's key id (kid) is not a string")
        try:
            key = await self._keys.key(kid)
        except AuthServerError as exc:
            raise ValidationUnavailable(f"the issuer's keys could not be read ({exc})") from None
        if key is None or key.algorithm_name != algorithm:
            raise InvalidToken("the token is not signed by a key of the issuer")
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self._audiences,
                issuer=self._issuer,
                leeway=LEEWAY,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken(self._wrong_audience()) from None
        except jwt.InvalidIssuerError:
            raise InvalidToken(f"the token was not issued by {self._issuer}") from None
        except jwt.MissingRequiredClaimError as exc:
            if exc.claim == "aud":
                raise InvalidToken(self._wrong_audience()) from None
            raise InvalidToken(f"the token has no {exc.claim} claim") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet") from None
        except jwt.PyJWTError:
            raise InvalidToken("the token's signature does not verify") from None
        subject = claims.get("sub")
        return ValidToken(subject if isinstance(subject, str) else None, seconds(claims["exp"]))

    def _wrong_audience(self) -> str:
        return f"the token was not issued for this server: its audience must be {self._resource}"
