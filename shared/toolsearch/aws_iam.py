"""Callers an AWS entry point signed in: an `AWS4-HMAC-SHA256` Authorization is AWS's, not the upstream's.

With `FunctionUrlAuthType=AWS_IAM` the function URL and every API route accept only requests
signed with SigV4, and check the signature before the function runs; the `Authorization` header
then holds that signature. It is a credential for AWS, bound to one request: forwarded, it would
hand the upstream an access key id and a signature not meant for it, and as a cache key it would
make every request a new caller. So the proxy never forwards it, and keys the caller by the IAM
principal that API Gateway or Lambda verified and wrote into the event (`requestContext`), which a
caller cannot forge: it is not a header. Without such a principal (a local server, a stack with
`AuthType: NONE`) nobody checked the signature, and the request is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SIGV4_SCHEME = "aws4-hmac-sha256"


def is_sigv4(authorization: str) -> bool:
    """Whether an Authorization value is an AWS Signature Version 4 (its scheme, any case)."""
    return authorization.strip().partition(" ")[0].lower() == SIGV4_SCHEME


def verified_principal(scope: Mapping[str, Any]) -> str | None:
    """The ARN of the IAM principal the entry point verified for this request, or None.

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
            return arn
    return None
