"""The caller's Authorization header: checked, and spelled one way, before anything uses it.

RFC 9110 §11.4: `credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ]`, and
the scheme is case-insensitive (§11.1); a field value's leading and trailing
whitespace is not part of it (§5.5). So "Bearer X", "bearer X", "Bearer  X",
"Bearer\\tX" and "Bearer X " are one credential and must be one caller (one cache
key, one listing). The proxy spells the scheme one way and puts one space after
it; the credentials themselves (the token) are never changed, since only the
upstream knows what they mean.

A value that is not a well-formed header value (a control character, a byte
outside ASCII) can be neither forwarded nor keyed reliably, so it is refused
with a clear error naming the header, before anything reaches the upstream.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from toolsearch.errors import ToolsearchError

# Visible ASCII, with SP and HTAB between: what the proxy can forward byte for byte. RFC 9110
# also allows obs-text (bytes 0x80-0xFF), but no auth scheme needs it and front ends disagree on
# how to decode it (Starlette reads latin-1, Mangum hands over UTF-8), so it is refused.
_FIELD_VALUE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?")
_SCHEME_AND_REST = re.compile(r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+)(?:[ \t]+(.*))?", re.DOTALL)
_OWS = " \t"

# Registered schemes (IANA HTTP Authentication Scheme Registry) in their usual spelling; others
# are forwarded as sent and keyed in lower case.
_CANONICAL = {
    name.lower(): name
    for name in (
        "Basic",
        "Bearer",
        "Concealed",
        "Digest",
        "DPoP",
        "GNAP",
        "HOBA",
        "Mutual",
        "Negotiate",
        "OAuth",
        "PrivateToken",
        "SCRAM-SHA-1",
        "SCRAM-SHA-256",
        "vapid",
    )
}


class MalformedAuthorization(ToolsearchError, ValueError):
    """The Authorization header is not a credential the proxy can forward; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"The Authorization header is malformed: {reason}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Credentials:
    header: str | None  # the value forwarded upstream; None: send no Authorization
    identity: str  # the value hashed into the caller key ("" when there is none)


NONE = Credentials(None, "")


def read_authorization(*values: str) -> Credentials:
    """The forwarded value and the identity of the Authorization header's values (none if absent).

    Raises MalformedAuthorization for a value that is not a well-formed credential, and for more
    than one value (RFC 6750 §3.1: a request carries one credential).
    """
    if not values:
        return NONE
    if len(values) > 1:
        raise MalformedAuthorization("the request carries more than one")
    value = values[0].strip(_OWS)
    if not value:
        return NONE  # an empty header authenticates nobody: the same as none, as before
    if not _FIELD_VALUE.fullmatch(value):
        raise MalformedAuthorization(_why_not_a_field_value(value))
    parts = _SCHEME_AND_REST.fullmatch(value)
    if parts is None:
        raise MalformedAuthorization("it must start with an authentication scheme such as Bearer")
    scheme, rest = parts.group(1), parts.group(2)
    canonical = _CANONICAL.get(scheme.lower())
    forwarded = canonical or scheme
    identity = canonical or scheme.lower()
    if rest is None:
        return Credentials(forwarded, identity)
    token = _jwt_identity(rest) if canonical == "Bearer" else rest
    return Credentials(f"{forwarded} {rest}", f"{identity} {token}")


def _jwt_identity(token: str) -> str:
    """A JWT's signature spelled one way, for the key only (the token is forwarded as sent).

    PyJWT reads a signature with or without `=` padding, ignoring characters outside the alphabet
    and unused trailing bits, and verifies it over the other two parts as sent; so only the
    signature has other spellings of the same token. Anything else is keyed as it is.
    """
    parts = token.split(".")
    if len(parts) != 3:
        return token
    signature = parts[2]
    try:
        raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))  # as PyJWT decodes
    except (binascii.Error, ValueError):
        return token
    return f"{parts[0]}.{parts[1]}.{base64.urlsafe_b64encode(raw).rstrip(b'=').decode()}"


def form_hint(*values: str) -> str | None:
    """What to send instead, when the upstream refused a header of one word; never the word itself.

    One word is read as a scheme without credentials: a token pasted without `Bearer `, or
    `Bearer` without its token. The proxy forwards it as it came (a static-token gateway may want
    exactly that), so only the upstream's refusal says it was wrong, and this says how to mend it.
    """
    try:
        credentials = read_authorization(*values)
    except MalformedAuthorization:
        return None
    if credentials.header is None or " " in credentials.header:
        return None
    if credentials.header in _CANONICAL.values():
        what = f"names the scheme {credentials.header} but no token"
    else:
        what = "holds one word and no scheme (a token without `Bearer `?)"
    return f"The Authorization header {what}: send `Authorization: Bearer <token>`."


def _why_not_a_field_value(value: str) -> str:
    for ch in value:
        if (ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F:
            return "it holds a control character"
        if ord(ch) > 0x7F:
            return "it holds a character outside ASCII"
    return "it is not a valid header value"
