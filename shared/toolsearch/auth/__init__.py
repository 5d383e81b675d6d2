"""The caller's token in exchange mode: validated as issued for the proxy, exchanged for the upstream.

`server/authenticators.py` is the seam both routes use (`CallerAuthenticator`): forwarding
reads the header as it is; exchange mode validates the token first (`tokens.py`:
a JWT against the issuer's keys, `jwks.py`, or RFC 7662 introspection).
`exchange.py` trades a caller's token for one issued for the upstream (RFC 8693),
kept in memory only; `exchanging.py` puts that in front of the upstream client.
"""
