"""Callers an AWS entry point signed in: an `AWS4-HMAC-SHA256` Authorization is AWS's, not the upstream's.

With `FunctionUrlAuthType=AWS_IAM` the function URL and every API route accept only requests
signed with SigV4, and check the signature before the function runs; the `Authorization` header
then holds that signature. It is a credential for AWS, bound to one request: forwarded, it would
hand the upstream an access key id and a signature not meant for it, and as a cache key it would
make every request a new caller. So the proxy never forwards it, and keys the caller by the IAM
principal that API Gateway or Lambda verified and wrote into the event (`requestContext`), which a
caller cannot forge: it is not a header. Without such a principal (a local server, a stack with
`AuthType: NONE`) nobody checked the signature, and the request is refused.

What is keyed is the principal, not the session: an assumed role's ARN names the session too
(`arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION`), and the session name is the signer's free
choice, so it is dropped and every session of one role is one caller. Any other ARN (an IAM user,
a federated user, a root account) is keyed whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SIGV4_SCHEME = "aws4-hmac-sha256"


def is_sigv4(authorization: str) -> bool:
    """Whether an Authorization value is an AWS Signature Version 4 (its scheme, any case)."""
    return authorization.strip().partition(" ")[0].lower() == SIGV4_SCHEME


def verified_principal(scope: Mapping[str, Any]) -> str | None:
    """The IAM principal the entry point verified for this request (`principal_of` its ARN), or None.

    Read from the Lambda event Mangum puts in the ASGI scope: a function URL or an HTTP API
    (payload 2.0) writes `requestContext.authorizer.iam.userArn`, a REST API
    `requestContext.identity.userArn`. Only an IAM-authorized entry point writes them.
    """
    event = scope.get("aws.event")
    context = event.get("requestContext") if isinstance(event, Mapping) else None
    if not isinstance(context, Mapping):
        return None
    authorizer = context.get("authorizer")
    iam = authorizer.get("iam") if isinstance(authorizer, Mapping) else None
    identity = context.get("identity")
    for holder in (iam, identity):
        arn = holder.get("userArn") if isinstance(holder, Mapping) else None
        if isinstance(arn, str) and arn.startswith("arn:"):
            return principal_of(arn)
    return None


def principal_of(arn: str) -> str:
    """The principal an ARN names, as callers are keyed: an assumed role without its session name."""
    parts = arn.split(":", 5)
    if len(parts) == 6 and parts[2] == "sts" and parts[5].startswith("assumed-role/"):
        kind, role, *_session = parts[5].split("/")
        if role:
            return ":".join([*parts[:5], f"{kind}/{role}"])
    return arn
