"""Who a request comes from: its Authorization, as forwarded upstream, and the key of all it caches.

A caller is known only by a hash of their Authorization header (its scheme and
whitespace spelled one way, `callers/credentials.py`) and the upstream URL, never by the
token itself or a claim inside it (a claim can't be trusted without verifying
the token, which the proxy cannot do).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

from toolsearch.callers.credentials import read_authorization
from toolsearch.ops.bounded import BoundedMap

# Each request names its caller by its header: read (checked, normalised, hashed) once per header.
# A pure function of (upstream URL, value), so one map serves every proxy of the process; bounded in
# entries and in the length of a value kept (a longer one is read each time), as any per-key map.
_READ_HEADERS = 1_024
_READ_HEADER_CHARS = 4_096


def caller_key(upstream_url: str, authorization: str | None) -> str:
    """The cache key of one caller: a SHA-256 of the upstream URL and the whole header.

    The header is read as `credentials.read_authorization` reads it (scheme case and whitespace
    made one), so every spelling of one credential is one key. Raises MalformedAuthorization.
    """
    values = () if authorization is None else (authorization,)
    return _key(upstream_url, read_authorization(*values).identity)


def _key(upstream_url: str, identity: str) -> str:
    return hashlib.sha256(f"{upstream_url}\n{identity}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Caller:
    authorization: str | None  # as forwarded upstream: checked and normalised, never the raw header
    key: str
    subject: str | None = None  # exchange mode: a hash of the verified issuer and `sub`

    @property
    def party(self) -> str:
        """Who fair use counts as one caller: the verified subject when there is one, else the key.

        Every sign-in gives a person a new token (a new key); a subject the proxy verified is the
        same person whatever token they hold.
        """
        return self.subject or self.key

    def verified_as(self, upstream_url: str, issuer: str, subject: str) -> Caller:
        """This caller, known as `subject` of `issuer` (both verified with the token)."""
        return replace(self, subject=_key(upstream_url, f"\0subject\0{issuer}\0{subject}"))

    @classmethod
    def iam_principal(cls, upstream_url: str, arn: str) -> Caller:
        """A caller an AWS entry point verified by SigV4: nothing is forwarded; keyed by the ARN.

        The NUL bytes keep this key apart from every header's: a header value holds none.
        """
        return cls(None, _key(upstream_url, f"\0aws-iam\0{arn}"))

    @classmethod
    def from_header(cls, upstream_url: str, *values: str) -> Caller:
        """The caller a request's Authorization header (all its values) names.

        Raises MalformedAuthorization.
        """
        if len(values) != 1 or len(values[0]) > _READ_HEADER_CHARS:
            return cls._read(upstream_url, values)
        known = _read_callers.use((upstream_url, values[0]))
        if known is None:
            known = cls._read(upstream_url, values)  # a malformed header raises: nothing is kept
            _read_callers.set((upstream_url, values[0]), known)
        return known

    @classmethod
    def _read(cls, upstream_url: str, values: tuple[str, ...]) -> Caller:
        credentials = read_authorization(*values)
        return cls(credentials.header, _key(upstream_url, credentials.identity))


_read_callers: BoundedMap[tuple[str, str], Caller] = BoundedMap(_READ_HEADERS)
